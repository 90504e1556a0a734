"""The ``[curriculum]`` section: easy samples first, by a competence schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit.plan.fields import curriculum_spec
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table, source_to_dict
from loaderkit.plan.specs import CallableSpec, CurriculumSpec

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "curriculum_to_dict", "read_curriculum"]


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


SECTION: Section[CurriculumSpec] = Section(
    name="curriculum",
    key="curriculum",
    read=read_curriculum,
    to_dict=curriculum_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`curriculum`",
            "stream",
            "difficulty source, schedule (name or function), `by`, `horizon`, `start`, "
            "`degree`, `steps`",
        ),
    ),
)
