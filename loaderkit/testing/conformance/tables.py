"""The conformance data as the Markdown tables ``docs/loader.md`` shows.

The docs build renders them, ``tests/test_docs.py`` checks the committed page equals them).
"""

from __future__ import annotations

from loaderkit.testing.conformance.differences import DIFFERENCES
from loaderkit.testing.conformance.habits import HABITS

__all__ = ["differences_table", "habits_table", "with_conformance_tables"]


def _cell(text: str) -> str:
    """``text`` for a Markdown table cell (a ``|`` would end the cell)."""
    if "|" in text:
        raise ValueError(f"a table cell cannot hold '|': {text!r}")
    return text


def _anchor(key: str) -> str:
    """The row's place in the table of differences: its key, in italics."""
    return f"*{key}*"


def habits_table() -> str:
    """The habits as a Markdown table, as ``docs/loader.md`` shows them."""
    lines = [_HABITS_HEADER.rstrip("\n"), "| --- | --- | --- | --- |"]
    for habit in HABITS:
        same = (
            "no: " + ", ".join(_anchor(key) for key in habit.differences)
            if habit.differences
            else "yes"
        )
        lines.append(
            f"| {_cell(habit.habit)} | {_cell(habit.reference)} | {_cell(habit.loaderkit)} "
            f"| {same} |"
        )
    return "\n".join(lines) + "\n"


def differences_table() -> str:
    """The differences as a Markdown table, as ``docs/loader.md`` shows them."""
    lines = [_DIFFERENCES_HEADER.rstrip("\n"), "| --- | --- | --- | --- | --- |"]
    for row in DIFFERENCES:
        why = f"(a bug of torchdata) {row.why}" if row.reference_bug else row.why
        marked = " (other batches)" if row.other_batches else ""
        lines.append(
            f"| {_anchor(row.key)}{marked}: {_cell(row.habit)} "
            f"| {_cell(row.torch or '(no state)')} "
            f"| {_cell(row.torchdata)} | {_cell(row.loaderkit)} | {_cell(why)} |"
        )
    return "\n".join(lines) + "\n"


_HABITS_HEADER = (
    "| habit | torch `DataLoader` (and torchdata `StatefulDataLoader`) | loaderkit | the same? |\n"
)
_DIFFERENCES_HEADER = (
    "| difference | torch `DataLoader` | torchdata `StatefulDataLoader` | loaderkit | why |\n"
)


def _replace_table(page: str, heading: str, header: str, table: str) -> str:
    start = page.index(header, page.index(heading))
    end = page.index("\n\n", start) + 1
    return page[:start] + table + page[end:]


def with_conformance_tables(page: str) -> str:
    """``page`` (``docs/loader.md``'s Markdown) with its two tables made anew from the data.

    The habits table is the first one after the ``## Iteration: passes and epochs`` heading,
    the table of differences the first one after ``## Differences from torch and torchdata``.
    The docs build (``docs/_hooks.py``) renders the page through this, and
    ``tests/test_docs.py`` checks that the committed page already equals it.
    """
    page = _replace_table(page, "## Iteration: passes and epochs", _HABITS_HEADER, habits_table())
    return _replace_table(
        page, "## Differences from torch and torchdata", _DIFFERENCES_HEADER, differences_table()
    )
