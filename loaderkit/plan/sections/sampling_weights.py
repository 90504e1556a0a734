"""The ``[sampling_weights]`` section: weighted sampling of the dataset."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import source_to_dict
from loaderkit.plan.specs import WeightsSpec

__all__ = ["SECTION", "weights_to_dict"]


def weights_to_dict(spec: WeightsSpec) -> dict[str, Any]:
    """The ``[sampling_weights]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"weights": source_to_dict(spec.source), "replacement": spec.replacement}
    if spec.num_samples is not None:
        out["num_samples"] = spec.num_samples
    return out


SECTION: Section[WeightsSpec] = Section(
    name="sampling_weights",
    key="sampling_weights",
    to_dict=weights_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`sampling_weights`",
            "stream",
            "weight source (column, function or digest), `replacement`, `num_samples`",
        ),
    ),
)
