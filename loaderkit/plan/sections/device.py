"""The ``device`` key: where batches are delivered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loaderkit.plan.fields import device_spec
from loaderkit.plan.sections.base import FingerprintRow, Section

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "device_to_dict", "read_device"]


def device_to_dict(device: str) -> str:
    """The ``device`` value of a plan file (a string, not a table)."""
    return device


def read_device(reader: Reader, data: Mapping[str, Any]) -> str | None:
    """Read the ``device`` value."""
    device: str | None = reader.attempt(lambda: device_spec(data.get("device", "cpu")))
    return device


SECTION: Section[str] = Section(
    name="device",
    key="device",
    read=read_device,
    to_dict=device_to_dict,
    fingerprint="exec",
    rows=(FingerprintRow("`device`", "exec", "where batches are delivered, not what they hold"),),
)
