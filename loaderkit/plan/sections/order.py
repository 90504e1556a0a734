"""The ``[order]`` section: shuffle, seed and a streamed source's shuffle buffer."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import OrderSpec

__all__ = ["SECTION", "order_to_dict"]


def order_to_dict(spec: OrderSpec) -> dict[str, Any]:
    """The ``[order]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"shuffle": spec.shuffle, "seed": spec.seed}
    if spec.buffer_size is not None:  # absent otherwise: older fingerprints are unchanged
        out["buffer_size"] = spec.buffer_size
    return out


SECTION: Section[OrderSpec] = Section(
    name="order",
    key="order",
    to_dict=order_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`order.shuffle`, `order.seed`",
            "stream",
            "the order of the epoch and every random stream",
        ),
        FingerprintRow(
            "`order.buffer_size`", "stream", "(only when set) a streamed source's shuffle buffer"
        ),
    ),
)
