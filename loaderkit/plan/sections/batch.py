"""The ``[batch]`` section: batch size (fixed, scheduled or a function) and ``drop_last``."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table
from loaderkit.plan.specs import BatchSpec

__all__ = ["SECTION", "batch_to_dict"]


def batch_to_dict(spec: BatchSpec) -> dict[str, Any]:
    """The ``[batch]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"batch_size": spec.batch_size, "drop_last": spec.drop_last}
    if spec.schedule:
        out["schedule"] = [[until, size] for until, size in spec.schedule]
    if spec.fn is not None:
        out["size_fn"] = function_table(spec.fn)
    if spec.scheduled:
        out["by"] = spec.by
    return out


SECTION: Section[BatchSpec] = Section(
    name="batch",
    key="batch",
    to_dict=batch_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`batch.batch_size`",
            "stream",
            "batch boundaries (with a schedule: its table or function, and `by`)",
        ),
        FingerprintRow("`batch.drop_last`", "stream", "whether the tail is delivered"),
    ),
)
