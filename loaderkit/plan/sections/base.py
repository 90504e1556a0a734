"""What a plan section declares, so that the generic walkers need no code per section.

A section is one attribute of :class:`~loaderkit.plan.plan.LoaderPlan` and one table of a plan
file. Its module declares a :class:`Section`: the table's key, how the spec becomes the table
(``to_dict``), when the table is written, what the stream fingerprint hashes of it, the
rows the fingerprint table of ``docs/plan-format.md`` shows for it, the builder's ``with_*``
calls that set it (``repr(builder)``) and its rows of ``explain()``. The walkers
(:func:`~loaderkit.plan.serde.plan_to_dict`, :func:`~loaderkit.plan.fingerprint.stream_fields`,
:func:`fingerprint_table`, the builder's repr and
:func:`~loaderkit.plan.display.explain_plan`) read these declarations; a section writes code
only for what does not fit them (a *hook*).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import attrs

if TYPE_CHECKING:
    from loaderkit.errors import Problem
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.specs import CallableSpec, LengthSource

__all__ = [
    "ExplainRows",
    "FingerprintKind",
    "FingerprintRow",
    "ReprContext",
    "Section",
    "explain_row",
    "fields_table",
    "is_set",
    "stream_table",
    "thaw_mappings",
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


ExplainRows = tuple[tuple[str, str], ...]
"""Rows of ``explain()``: ``(label, text)``, the label padded to the report's column."""


@attrs.frozen
class ReprContext:
    """What a :attr:`Section.builder_calls` hook reads of the builder besides the section.

    The builder's bound objects: a bound function shows as ``<function name>``, an array of
    per-sample values as ``<N lengths>``, so that the repr names them without printing them.
    """

    bound: Mapping[str, object]

    def callable_arg(self, spec: CallableSpec, with_options: bool = False) -> str:
        """A function argument: a registry name (and its options), a ref, or the bound object."""
        if spec.source == "registry":
            args = [repr(spec.name)]
            if with_options:  # as plain data (a mapping option is a dict the user could write)
                args.extend(f"{k}={thaw_mappings(v)!r}" for k, v in spec.options.items())
            return ", ".join(args)
        obj = self.bound.get(spec.name)
        if obj is None:
            return repr(spec.name)
        return f"<{type(obj).__name__} {getattr(obj, '__qualname__', spec.name)}>"

    def source_arg(self, source: LengthSource, what: str) -> str:
        """A per-sample value argument: a column name, ``<N what>`` or the function."""
        if source.kind == "column":
            return repr(source.name)
        if source.kind == "array":
            return f"<{len(self.bound.get(source.name, ()))} {what}>"  # type: ignore[arg-type]
        assert source.fn is not None
        return self.callable_arg(source.fn)

    @staticmethod
    def changed_args(spec: object, defaults: Mapping[str, object]) -> list[str]:
        """``key=value`` for each field of ``spec`` that differs from its ``defaults`` entry."""
        return [
            f"{key}={getattr(spec, key)!r}"
            for key, default in defaults.items()
            if getattr(spec, key) != default
        ]

    @staticmethod
    def set_args(spec: object, keys: tuple[str, ...]) -> list[str]:
        """``key=value`` for each of ``keys`` whose field of ``spec`` is set (not None)."""
        return [f"{key}={getattr(spec, key)!r}" for key in keys if getattr(spec, key) is not None]


def thaw_mappings(value: object) -> object:
    """``value`` with its frozen mappings as dicts (tuples stay tuples), for a repr."""
    if isinstance(value, Mapping):
        return {k: thaw_mappings(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(thaw_mappings(v) for v in value)
    return value


def explain_row(
    label: str, line: Callable[[LoaderPlan], str], *, of: str | None = None
) -> Callable[[LoaderPlan], ExplainRows]:
    """An :attr:`Section.explain` of one row, ``(label, line(plan))``.

    No row while the plan's section ``of`` is unset (``None``: always shown).
    """

    def explain(plan: LoaderPlan) -> ExplainRows:
        if of is not None and getattr(plan, of) is None:
            return ()
        return ((label, line(plan)),)

    return explain


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
class RuleContext:
    """What a section's rules read: the whole plan, its live objects, how workers start."""

    sections: Mapping[str, Any]
    """Every section of the plan by name (see :data:`~loaderkit.plan.sections.SECTIONS`)."""
    bindings: Mapping[str, object] | None
    """The live objects by name; ``None`` skips the binding checks."""
    needs_pickle: str | None
    """The start method of worker processes that must pickle what they receive (``None``:
    nothing is pickled: no workers, or ``fork``)."""


@attrs.frozen
class Section(Generic[S]):
    """The declaration of one plan section, read by the generic walkers.

    ``S`` is the section's value in a :class:`~loaderkit.plan.plan.LoaderPlan` (its spec, or
    ``None`` when unset).
    """

    name: str
    """The attribute of ``LoaderPlan`` (and the builder's ``without`` setting) it is stored in."""
    read: Callable[[Reader, Mapping[str, Any]], S | None]
    """Reads the section from plan data (the whole file's): reports problems to the reader
    with their paths, and returns the spec, or ``None`` when the table is absent (the
    plan's default applies) or unreadable (a problem says why)."""
    to_dict: Callable[[S], Any]
    """The section's table in a plan file (plain data): what the reader takes back."""
    fingerprint: FingerprintKind
    """Its part in the stream fingerprint, as a whole (rows may say more per field)."""
    why: str = ""
    """The ``why`` of its one row in the fingerprint table (field ```name```, kind
    :attr:`fingerprint`), when :attr:`rows` is not given."""
    rows: tuple[FingerprintRow, ...] = attrs.field(
        default=attrs.Factory(lambda self: self.one_row(), takes_self=True)
    )
    """Its rows in the fingerprint table of ``docs/plan-format.md`` (default: the one row
    :attr:`why` describes)."""
    key: str = attrs.field(default=attrs.Factory(lambda self: self.name, takes_self=True))
    """The key of its table in a plan file (default: :attr:`name`)."""
    bindings: Callable[[S], tuple[str, ...]] | None = None
    """The names of the live objects a (set) value refers to: the builder unbinds an object
    once no section refers to it. ``None``: the section binds nothing."""
    written: Callable[[S | None], bool] = is_set
    """Whether a plan file holds the table (default: when the section is set)."""
    stream: Callable[[LoaderPlan], Mapping[str, Any]] | None = None
    """What :func:`~loaderkit.plan.fingerprint.stream_fields` hashes of the section, as
    entries of its data. ``None``: the section's table when written (:func:`stream_table`) for
    a ``"stream"`` section, nothing for ``"exec"`` and ``"info"`` ones. A hook is for what
    differs from the table: parts left out (paths, display-only fields), parts hashed only
    when set so that older plans keep their fingerprints."""
    rules: Mapping[str, Callable[[RuleContext], list[Problem]]] = attrs.field(factory=dict)
    """The section's own problems, by rule group, run by
    :func:`~loaderkit.plan.rules.plan_problems` when the section is set, in the order of
    :data:`~loaderkit.plan.rules.RULE_ORDER` (which names each group: the section's name, or
    ``"<name>.<group>"`` for a section whose rules run at several points). Each receives the
    plan's :class:`RuleContext` (the rules that belong to no one section are written in
    :mod:`loaderkit.plan.rules`)."""
    execution_only: tuple[str, ...] = ()
    """Fields of the table that are never hashed (of a section that is otherwise hashed)."""
    builder_calls: Callable[[S, ReprContext], tuple[str, ...]] | None = None
    """The builder's ``.with_*(...)`` calls that set the section to a (set) value, as
    ``repr(builder)`` shows them: none at the section's default. ``None``: the builder never
    shows it (:data:`~loaderkit.plan.sections.BUILDER_CALL_ORDER` orders the calls)."""
    calls_set: str | None = None
    """The section a preset's notes say the calls set (``None``: this one)."""
    explain: Callable[[LoaderPlan], ExplainRows] | None = None
    """The section's rows of ``explain()`` (none when it shows nothing, e.g. unset); the
    report's order is :data:`~loaderkit.plan.sections.EXPLAIN_ORDER`."""

    def one_row(self) -> tuple[FingerprintRow, ...]:
        """The row :attr:`why` describes (none without it)."""
        if not self.why:
            return ()
        return (FingerprintRow(f"`{self.name}`", self.fingerprint, self.why),)

    def stream_entries(self, plan: LoaderPlan) -> Mapping[str, Any]:
        """The entries this section adds to the stream fields of ``plan``."""
        if self.stream is not None:
            return self.stream(plan)
        if self.fingerprint in ("exec", "info"):
            return {}
        return stream_table(self, plan)
