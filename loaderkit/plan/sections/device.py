"""The ``device`` key: where batches are delivered."""

from __future__ import annotations

from loaderkit.plan.sections.base import FingerprintRow, Section

__all__ = ["SECTION", "device_to_dict"]


def device_to_dict(device: str) -> str:
    """The ``device`` value of a plan file (a string, not a table)."""
    return device


SECTION: Section[str] = Section(
    name="device",
    key="device",
    to_dict=device_to_dict,
    fingerprint="exec",
    rows=(FingerprintRow("`device`", "exec", "where batches are delivered, not what they hold"),),
)
