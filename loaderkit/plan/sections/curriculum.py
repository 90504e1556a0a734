"""The ``[curriculum]`` section: easy samples first, by a competence schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._validate import check_choice, check_number
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import function_spec, is_function, until_table
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import RuleContext, Section, explain_row
from loaderkit.plan.sections.common import (
    callable_problems,
    float_array,
    function_table,
    source_problems,
    source_to_dict,
    values_source,
)
from loaderkit.plan.specs import CURRICULUM_UNITS, CallableSpec, LengthSource

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "SCHEDULES",
    "SECTION",
    "CurriculumSchedule",
    "CurriculumSpec",
    "curriculum_calls",
    "curriculum_line",
    "curriculum_spec",
    "curriculum_to_dict",
    "read_curriculum",
]

CurriculumSchedule = Literal["linear", "root", "discrete"]
"""A named competence schedule of ``with_curriculum``."""
SCHEDULES: tuple[CurriculumSchedule, ...] = get_args(CurriculumSchedule)


@attrs.frozen
class CurriculumSpec:
    """Easiest-first sampling (see ``DataLoaderBuilder.with_curriculum``).

    ``schedule`` is ``"linear"``, ``"root"``, ``"discrete"`` or ``"callable"`` (then ``fn``
    maps the epoch or step to a competence in (0, 1]).
    """

    difficulty: LengthSource
    schedule: str = "linear"
    fn: CallableSpec | None = None
    by: str = "epoch"
    horizon: float | None = None
    start: float = 0.1
    degree: float = 2.0
    steps: tuple[tuple[float, float], ...] = ()

    def bound_names(self) -> tuple[str, ...]:
        """The bindings of the difficulties and of the schedule's function."""
        fn = self.fn.bound_names() if self.fn is not None else ()
        return self.difficulty.bound_names() + fn


def curriculum_spec(
    difficulty: object,
    schedule: object = "linear",
    *,
    by: object = "epoch",
    horizon: object = None,
    start: object = 0.1,
    degree: object = 2.0,
    steps: object = (),
) -> tuple[CurriculumSpec, list[tuple[str, object]]]:
    """The curriculum spec and the live objects to bind ``(name, object)``."""
    source, live = values_source(
        "curriculum.difficulty", difficulty, "difficulty", "difficulty_fn", _difficulty_array
    )
    bound: list[tuple[str, object]] = []
    if live is not None and source.kind != "column":
        key = source.name if source.kind == "array" else (source.fn.name if source.fn else "")
        bound.append((key, live))
    fn: CallableSpec | None = None
    if is_function(schedule):
        fn, target = function_spec("curriculum.schedule", schedule, "schedule")
        bound.append((fn.name, target))
        kind = "callable"
    else:
        kind = check_choice("curriculum.schedule", schedule, SCHEDULES)
    unit = check_choice("curriculum.by", by, CURRICULUM_UNITS)
    span = None if horizon is None else check_number("curriculum.horizon", horizon, minimum=0.0)
    if span is not None and span <= 0:
        raise PlanError.single("curriculum.horizon", f"must be > 0 (got {horizon})")
    if kind in ("linear", "root") and span is None:
        raise PlanError.single(
            "curriculum.horizon",
            f"the {kind!r} schedule needs horizon= (the {unit}s until every sample is eligible)",
        )
    first = check_number("curriculum.start", start, minimum=0.0)
    if not 0 < first <= 1:
        raise PlanError.single("curriculum.start", f"must be in (0, 1] (got {start})")
    power = check_number("curriculum.degree", degree, minimum=1.0)
    table = _steps("curriculum.steps", steps)
    if kind == "discrete" and not table:
        raise PlanError.single(
            "curriculum.steps",
            "the 'discrete' schedule needs steps=[(until, competence), ...]",
        )
    spec = CurriculumSpec(source, kind, fn, unit, span, first, power, table)
    return spec, bound


def _steps(path: str, steps: object) -> tuple[tuple[float, float], ...]:
    if not isinstance(steps, list | tuple):
        raise PlanTypeError.single(
            path, f"must be a list of (until, competence) pairs (got {steps!r})"
        )
    return until_table(path, steps, "competence", _competence)


def _competence(path: str, value: object) -> float:
    level = check_number(path, value, minimum=0.0)
    if not 0 < level <= 1:
        raise PlanError.single(path, f"competence must be in (0, 1] (got {value})")
    return level


def _difficulty_array(path: str, values: object) -> Any:
    array = float_array(path, values, "difficulties")
    if array.size and (array != array).any():  # NaN
        raise PlanError.single(path, "difficulties must not be NaN")
    return array


def curriculum_to_dict(spec: CurriculumSpec) -> dict[str, Any]:
    """The ``[curriculum]`` table of a plan file (also what the fingerprint hashes)."""
    schedule: Any = spec.schedule if spec.fn is None else function_table(spec.fn)
    out: dict[str, Any] = {
        "difficulty": source_to_dict(spec.difficulty),
        "schedule": schedule,
        "by": spec.by,
        "start": spec.start,
        "degree": spec.degree,
    }
    if spec.horizon is not None:
        out["horizon"] = spec.horizon
    if spec.steps:
        out["steps"] = [list(pair) for pair in spec.steps]
    return out


def read_curriculum(reader: Reader, data: Mapping[str, Any]) -> CurriculumSpec | None:
    """Read the ``[curriculum]`` table: the difficulty source, a schedule name or function."""
    if "curriculum" not in data:
        return None
    names = ("difficulty", "schedule", "by", "horizon", "start", "degree", "steps")
    sec = reader.section(data, "curriculum", names)
    options = {k: sec[k] for k in ("by", "horizon", "start", "degree", "steps") if k in sec}
    schedule = sec.get("schedule", "linear")
    fn: CallableSpec | None = None
    if isinstance(schedule, Mapping):
        fn = reader.read_callable(
            {"curriculum.schedule": schedule}, "curriculum.schedule", value_fn
        )
        if fn is None:
            return None
        schedule = _full_competence  # stands in while the other options are checked
    base = reader.attempt(lambda: curriculum_spec("placeholder", schedule, **options))
    source = reader.values_source(
        sec.get("difficulty"),
        "curriculum.difficulty",
        lambda v: curriculum_spec(v, "discrete", steps=[(1, 1.0)])[0].difficulty,
    )
    if base is None or source is None:
        return None
    chosen: CurriculumSpec = attrs.evolve(base[0], difficulty=source)
    if fn is not None:
        chosen = attrs.evolve(chosen, fn=fn, schedule="callable")
    return chosen


def _full_competence(t: float) -> float:
    """A schedule stand-in used while a file's curriculum options are checked."""
    return 1.0


def curriculum_line(plan: LoaderPlan) -> str:
    """The ``curriculum`` line of ``explain()``: the difficulty and the competence schedule."""
    spec = plan.curriculum
    assert spec is not None
    if spec.fn is not None:
        how = f"competence from {spec.fn.describe()}"
    elif spec.schedule == "discrete":
        table = ", ".join(f"{c:g} until {u:g}" for u, c in spec.steps)
        how = f"competence {table}, then 1"
    else:
        shape = "linear" if spec.schedule == "linear" else f"root (degree {spec.degree:g})"
        how = f"{shape} competence from {spec.start:g} to 1 over {spec.horizon:g} {spec.by}s"
    return f"easiest first by {spec.difficulty.describe()}, {how}, per {spec.by}"


def curriculum_calls(cur: CurriculumSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_curriculum`` call."""
    args = [ctx.source_arg(cur.difficulty, "difficulties")]
    if cur.fn is not None:
        args.append(ctx.callable_arg(cur.fn))
    elif cur.schedule != "linear":
        args.append(repr(cur.schedule))
    defaults = {"by": "epoch", "horizon": None, "start": 0.1, "degree": 2.0, "steps": ()}
    args.extend(ctx.changed_args(cur, defaults))
    return (f".with_curriculum({', '.join(args)})",)


def _rules(ctx: RuleContext) -> list[Problem]:
    """The curriculum's sources, and what it cannot be combined with."""
    curriculum: CurriculumSpec = ctx.sections["curriculum"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    problems = source_problems(
        "curriculum.difficulty", curriculum.difficulty, dataset, ctx.bindings, ctx.needs_pickle
    )
    if curriculum.fn is not None:
        problems.extend(
            callable_problems("curriculum.schedule", curriculum.fn, ctx.bindings, ctx.needs_pickle)
        )
    if dataset is not None and dataset.iterable:
        problems.append(
            Problem(
                "curriculum",
                f"needs random access to pick the easiest samples, and {dataset.binding!r} "
                f"is an iterable dataset; pass a map-style dataset",
            )
        )
    if ctx.sections.get("sampling_weights") is not None:
        problems.append(
            Problem(
                "curriculum",
                "cannot be combined with with_sampling_weights yet; choose one of them: "
                ".without('sampling_weights') or .without('curriculum')",
            )
        )
    if ctx.sections.get("bucketing") is not None and curriculum.by == "step":
        problems.append(
            Problem(
                "curriculum.by",
                "a per-step curriculum cannot be combined with with_bucketing: it draws "
                "each batch from the eligible samples of its own step, while bucketing "
                "regroups a whole epoch's samples by length; use with_curriculum(..., "
                "by='epoch') (the eligible samples of each epoch are bucketed), or drop the "
                "bucketing with .without('bucketing')",
                related=("bucketing",),
            )
        )
    return problems


SECTION: Section[CurriculumSpec] = Section(
    rules={"curriculum": _rules},
    name="curriculum",
    explain=explain_row("curriculum", curriculum_line, of="curriculum"),
    builder_calls=curriculum_calls,
    read=read_curriculum,
    to_dict=curriculum_to_dict,
    bindings=CurriculumSpec.bound_names,
    fingerprint="stream",
    why=(
        "difficulty source, schedule (name or function), `by`, `horizon`, `start`, "
        "`degree`, `steps`"
    ),
)
