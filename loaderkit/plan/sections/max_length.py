"""The ``[max_length]`` section: a sequence-length curriculum for the collator."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._limits import LIMITS
from loaderkit._validate import check_choice, check_int
from loaderkit.collators import collators
from loaderkit.errors import Problem
from loaderkit.plan.fields import int_schedule
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import RuleContext, Section, explain_row
from loaderkit.plan.sections.common import callable_problems, function_table
from loaderkit.plan.specs import CURRICULUM_UNITS, CallableSpec
from loaderkit.registry import PluginNotImportedError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "SECTION",
    "MaxLengthSpec",
    "max_length_calls",
    "max_length_line",
    "max_length_problems",
    "max_length_spec",
    "max_length_to_dict",
    "max_length_value",
    "read_max_length",
]


@attrs.frozen
class MaxLengthSpec:
    """A sequence-length schedule applied by the collator (see ``with_max_length``).

    ``value`` is a fixed length, ``schedule`` a table ``((until, length), ...)``, ``fn`` a
    function of the epoch or step (``by``).
    """

    value: int | None = None
    schedule: tuple[tuple[float, int], ...] = ()
    fn: CallableSpec | None = None
    by: str = "epoch"

    def bound_names(self) -> tuple[str, ...]:
        """The binding of its function (none for a fixed length or a table)."""
        return self.fn.bound_names() if self.fn is not None else ()


def max_length_to_dict(spec: MaxLengthSpec) -> dict[str, Any]:
    """The ``[max_length]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"by": spec.by}
    if spec.value is not None:
        out["value"] = spec.value
    if spec.schedule:
        out["schedule"] = [[until, length] for until, length in spec.schedule]
    if spec.fn is not None:
        out["fn"] = function_table(spec.fn)
    return out


def read_max_length(reader: Reader, data: Mapping[str, Any]) -> MaxLengthSpec | None:
    """Read the ``[max_length]`` table: one of value, schedule or fn."""
    if "max_length" not in data:
        return None
    sec = reader.section(data, "max_length", ("value", "schedule", "fn", "by"))
    given = [k for k in ("value", "schedule", "fn") if k in sec]
    if len(given) != 1:
        reader.problems.append(
            Problem(
                "max_length",
                f"needs exactly one of value, schedule or fn (got {', '.join(given) or 'none'})",
            )
        )
        return None
    by = sec.get("by", "epoch")
    if "fn" in sec:
        fn = reader.read_callable({"max_length": sec["fn"]}, "max_length", value_fn)
        base = reader.attempt(lambda: max_length_spec(1, by))
        if fn is None or base is None:
            return None
        timed: MaxLengthSpec = attrs.evolve(base[0], value=None, fn=fn)
        return timed
    result = reader.attempt(lambda: max_length_spec(sec[given[0]], by))
    if result is None:
        return None
    chosen: MaxLengthSpec = result[0]
    return chosen


def max_length_value(value: object, path: str = "max_length") -> int:
    """One sequence length: an int >= 1."""
    return check_int(
        path, value, minimum=1, maximum=LIMITS.batch_size, fix="pass a positive number of tokens"
    )


def max_length_spec(
    max_length: object, by: object = "epoch"
) -> tuple[MaxLengthSpec, object | None]:
    """The sequence-length schedule of ``with_max_length`` and a function to bind."""
    fixed, table, fn, live = int_schedule(
        "max_length", max_length, "max_length_fn", max_length_value
    )
    unit = check_choice("max_length.by", by, CURRICULUM_UNITS)
    return MaxLengthSpec(fixed, table, fn, unit), live


def max_length_line(plan: LoaderPlan) -> str:
    """The ``max length`` line of ``explain()``: the length or its schedule."""
    spec = plan.max_length
    assert spec is not None
    if spec.fn is not None:
        text = f"from {spec.fn.describe()} per {spec.by}"
    elif spec.schedule:
        table = spec.schedule
        parts = [f"{length} until {until:g}" for until, length in table[:-1]]
        parts.append(f"then {table[-1][1]}" if parts else str(table[-1][1]))
        text = f"by {spec.by}: {', '.join(parts)}"
    else:
        text = f"{spec.value}"
    return f"{text} tokens, applied by the collator ({plan.collator.describe()})"


def max_length_problems(
    spec: MaxLengthSpec, collator: CallableSpec, bindings: Mapping[str, object] | None
) -> list[Problem]:
    """What keeps the collator from applying a sequence-length schedule."""
    problems: list[Problem] = []
    if spec.fn is not None:  # runs in the main process: no pickling needed
        problems.extend(callable_problems("max_length", spec.fn, bindings, None))
    if collator.source == "registry":
        entry = None
        if collator.name in collators:
            with contextlib.suppress(PluginNotImportedError):  # inspecting: checked to build
                entry = collators.get(collator.name)
        if entry is not None:
            factory = entry.factory
            if not getattr(factory, "supports_max_length", False):
                able = [  # the collators imported: listing them imports no plugin
                    found.name
                    for found in map(collators.loaded, collators.names())
                    if found is not None and getattr(found.factory, "supports_max_length", False)
                ]
                problems.append(
                    Problem(
                        "max_length",
                        f"collator {collator.name!r} has no max_length to apply a "
                        f"sequence-length schedule to; use one that does ({', '.join(able)})",
                        related=("collator",),
                    )
                )
    elif (
        collator.source in ("binding", "ref")  # a ref resolved at compile() is bound too
        and bindings is not None
        and collator.name in bindings
        and not callable(getattr(bindings[collator.name], "with_max_length", None))
    ):
        problems.append(
            Problem(
                "max_length",
                f"the collator {collator.name!r} has no with_max_length(n) method "
                f"to apply a sequence-length schedule; give it one (see "
                f"loaderkit.collators.Collator.with_max_length) or use the 'text' collator",
            )
        )
    return problems


def max_length_calls(m: MaxLengthSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_max_length`` call."""
    shown = str(m.value)
    if m.fn is not None:
        shown = ctx.callable_arg(m.fn)
    elif m.schedule:
        shown = repr(list(m.schedule))
    unit = f", by={m.by!r}" if m.by != "epoch" else ""
    return (f".with_max_length({shown}{unit})",)


def _rules(ctx: RuleContext) -> list[Problem]:
    """The length cap's problems: its source, and the collator it cuts for."""
    s = ctx.sections
    return max_length_problems(s["max_length"], s["collator"], ctx.bindings)


SECTION: Section[MaxLengthSpec] = Section(
    rules={"max_length": _rules},
    name="max_length",
    explain=explain_row("max length", max_length_line, of="max_length"),
    builder_calls=max_length_calls,
    read=read_max_length,
    to_dict=max_length_to_dict,
    bindings=MaxLengthSpec.bound_names,
    fingerprint="stream",
    why="the sequence length (fixed, table or function) and `by`",
)
