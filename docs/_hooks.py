"""mkdocs hooks: tables made from data; the docstrings' Sphinx roles.

``docs/plan-format.md``'s fingerprint table is rendered anew from
``loaderkit.plan.sections`` (the declarations the fingerprint hashes by) at every build, and
``docs/loader.md``'s habits and differences tables from ``loaderkit.testing.conformance`` (the
data the lockstep conformance suite checks); ``tests/test_docs.py`` keeps the committed tables
equal to them, so the Markdown reads the same on a code host.

The docstrings are written for ``help()`` and IDEs, with Sphinx roles (``:class:`~x.Y```) and
``::`` before literal blocks. mkdocstrings renders them as Markdown, where a role is plain
text before an inline code span. This hook turns each role into an optional cross-reference
(a link when the API pages document the target, plain code otherwise) and drops the second
colon of ``::``.
"""

from __future__ import annotations

import html
import re
from typing import Any

_ROLE = re.compile(
    r":(?:class|meth|func|attr|mod|exc|data|obj|const):<code>(?P<target>[^<]+)</code>"
)
_LITERAL = re.compile(r"::(?=</p>)")


def _reference(match: re.Match[str]) -> str:
    target = html.unescape(match["target"]).strip()
    shown = target
    if target.startswith("~"):
        target = target[1:]
        shown = target.rsplit(".", 1)[-1]
    target = target.removesuffix("()")
    return (
        f'<autoref identifier="{html.escape(target)}" optional>'
        f"<code>{html.escape(shown)}</code></autoref>"
    )


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Make the tables of data anew: plan-format.md's fingerprint table, loader.md's two."""
    if page.file.src_uri == "plan-format.md":
        from loaderkit.plan.sections import with_fingerprint_table

        return with_fingerprint_table(markdown)
    if page.file.src_uri == "loader.md":
        from loaderkit.testing.conformance import with_conformance_tables

        return with_conformance_tables(markdown)
    return markdown


def on_page_content(html_text: str, **_: Any) -> str:
    """Rewrite the roles of a rendered page (mkdocs-autorefs resolves them afterwards)."""
    return _LITERAL.sub(":", _ROLE.sub(_reference, html_text))
