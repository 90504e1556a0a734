"""The ``[cache]`` section: samples kept in memory or on disk to load them faster."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import CacheSpec

__all__ = ["SECTION", "cache_to_dict"]


def cache_to_dict(spec: CacheSpec) -> dict[str, Any]:
    """The ``[cache]`` table of a plan file (execution only: never fingerprinted)."""
    out: dict[str, Any] = {"storage": spec.storage, "stage": spec.stage}
    if spec.path is not None:
        out["path"] = spec.path
    if spec.max_bytes is not None:
        out["max_bytes"] = spec.max_bytes
    return out


SECTION: Section[CacheSpec] = Section(
    name="cache",
    key="cache",
    to_dict=cache_to_dict,
    fingerprint="exec",
    rows=(
        FingerprintRow(
            "`cache`",
            "exec",
            "`with_cache` keeps samples to load them faster; a transformed cache needs a "
            "transform without `rng` (a pure function)",
        ),
    ),
)
