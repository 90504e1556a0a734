"""The ``[sampling_weights]`` section: weighted sampling of the dataset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit.plan.fields import weights_spec
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import source_to_dict
from loaderkit.plan.specs import WeightsSpec

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "read_weights", "weights_to_dict"]


def weights_to_dict(spec: WeightsSpec) -> dict[str, Any]:
    """The ``[sampling_weights]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"weights": source_to_dict(spec.source), "replacement": spec.replacement}
    if spec.num_samples is not None:
        out["num_samples"] = spec.num_samples
    return out


def read_weights(reader: Reader, data: Mapping[str, Any]) -> WeightsSpec | None:
    """Read the ``[sampling_weights]`` table: the weight source and the options."""
    if "sampling_weights" not in data:
        return None
    sec = reader.section(data, "sampling_weights", ("weights", "replacement", "num_samples"))
    options = {k: sec[k] for k in ("replacement", "num_samples") if k in sec}
    base = reader.attempt(lambda: weights_spec("placeholder", **options))
    source = reader.values_source(
        sec.get("weights"), "sampling_weights.weights", lambda v: weights_spec(v)[0].source
    )
    if base is None or source is None:
        return None
    chosen: WeightsSpec = attrs.evolve(base[0], source=source)
    return chosen


SECTION: Section[WeightsSpec] = Section(
    name="sampling_weights",
    key="sampling_weights",
    read=read_weights,
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
