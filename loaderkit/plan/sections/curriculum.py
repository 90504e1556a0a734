"""The ``[curriculum]`` section: easy samples first, by a competence schedule."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table, source_to_dict
from loaderkit.plan.specs import CurriculumSpec

__all__ = ["SECTION", "curriculum_to_dict"]


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


SECTION: Section[CurriculumSpec] = Section(
    name="curriculum",
    key="curriculum",
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
