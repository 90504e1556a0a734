"""What a plan section declares, so that the generic walkers need no code per section.

A section is one attribute of :class:`~loaderkit.plan.plan.LoaderPlan` and one table of a plan
file. Its module declares a :class:`Section`: the table's key, how the spec becomes the table
(``to_dict``), when the table is written, what the stream fingerprint hashes of it, and the
rows the fingerprint table of ``docs/plan-format.md`` shows for it. The walkers
(:func:`~loaderkit.plan.serde.plan_to_dict`, :func:`~loaderkit.plan.fingerprint.stream_fields`
and :func:`fingerprint_table`) read these declarations; a section writes code only for what
does not fit them (a *hook*).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs

if TYPE_CHECKING:
    from loaderkit.errors import Problem
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = [
    "FingerprintKind",
    "FingerprintRow",
    "Section",
    "fields_table",
    "is_set",
    "stream_table",
]

S = TypeVar("S")

FingerprintKind = Literal["stream", "exec", "both", "info"]
"""How a field takes part in the stream fingerprint: ``"stream"`` (hashed: it can change a
batch), ``"exec"`` (not hashed: how fast or where batches arrive), ``"both"`` (hashed in some
plans only, the row says which) or ``"info"`` (display only, neither compared nor hashed)."""


@attrs.frozen
class FingerprintRow:
    """One row of the fingerprint table of ``docs/plan-format.md`` (Markdown text)."""

    field: str
    """What the row is about: a field path in backquotes or a few words."""
    kind: FingerprintKind
    why: str
    """Why the field is (or is not) part of the fingerprint, and what of it is hashed."""


def fields_table(
    always: tuple[str, ...], when_set: tuple[str, ...] = ()
) -> Callable[[object], dict[str, Any]]:
    """A ``to_dict`` for a spec of plain fields: ``always`` written, ``when_set`` unless None.

    The table's keys are the spec's field names, in the order given (``always`` first).
    """

    def to_dict(spec: object) -> dict[str, Any]:
        out = {key: getattr(spec, key) for key in always}
        out.update({key: getattr(spec, key) for key in when_set if getattr(spec, key) is not None})
        return out

    return to_dict


def is_set(value: object) -> bool:
    """The default :attr:`Section.written`: a section is written unless it is unset (None)."""
    return value is not None


def stream_table(section: Section[Any], plan: LoaderPlan) -> dict[str, Any]:
    """The default :attr:`Section.stream`: the section's table, when it is written."""
    value = getattr(plan, section.name)
    if not section.written(value):
        return {}
    return {section.name: section.to_dict(value)}


@attrs.frozen
class Section(Generic[S]):
    """The declaration of one plan section, read by the generic walkers.

    ``S`` is the section's value in a :class:`~loaderkit.plan.plan.LoaderPlan` (its spec, or
    ``None`` when unset).
    """

    name: str
    """The attribute of ``LoaderPlan`` (and the builder's ``without`` setting) it is stored in."""
    key: str
    """The key of its table in a plan file."""
    read: Callable[[Reader, Mapping[str, Any]], S | None]
    """Reads the section from plan data (the whole file's): reports problems to the reader
    with their paths, and returns the spec, or ``None`` when the table is absent (the
    plan's default applies) or unreadable (a problem says why)."""
    to_dict: Callable[[S], Any]
    """The section's table in a plan file (plain data): what the reader takes back."""
    fingerprint: FingerprintKind
    """Its part in the stream fingerprint, as a whole (rows may say more per field)."""
    rows: tuple[FingerprintRow, ...]
    """Its rows in the fingerprint table of ``docs/plan-format.md``."""
    written: Callable[[S | None], bool] = is_set
    """Whether a plan file holds the table (default: when the section is set)."""
    stream: Callable[[LoaderPlan], Mapping[str, Any]] | None = None
    """What :func:`~loaderkit.plan.fingerprint.stream_fields` hashes of the section, as
    entries of its data. ``None``: the section's table when written (:func:`stream_table`) for
    a ``"stream"`` section, nothing for ``"exec"`` and ``"info"`` ones. A hook is for what
    differs from the table: parts left out (paths, display-only fields), parts hashed only
    when set so that older plans keep their fingerprints."""
    rules: Callable[[Mapping[str, Any]], list[Problem]] | None = None
    """The section's own problems, run by :func:`~loaderkit.plan.rules.plan_problems` when the
    section is set; it receives every section of the plan by name (the rules that belong to
    no one section are written in :mod:`loaderkit.plan.rules`)."""
    execution_only: tuple[str, ...] = ()
    """Fields of the table that are never hashed (of a section that is otherwise hashed)."""

    def stream_entries(self, plan: LoaderPlan) -> Mapping[str, Any]:
        """The entries this section adds to the stream fields of ``plan``."""
        if self.stream is not None:
            return self.stream(plan)
        if self.fingerprint in ("exec", "info"):
            return {}
        return stream_table(self, plan)
