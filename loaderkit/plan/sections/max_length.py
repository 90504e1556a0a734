"""The ``[max_length]`` section: a sequence-length curriculum for the collator."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table
from loaderkit.plan.specs import MaxLengthSpec

__all__ = ["SECTION", "max_length_to_dict"]


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


SECTION: Section[MaxLengthSpec] = Section(
    name="max_length",
    key="max_length",
    to_dict=max_length_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`max_length`", "stream", "the sequence length (fixed, table or function) and `by`"
        ),
    ),
)
