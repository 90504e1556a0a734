"""The ``device`` key: where batches are delivered."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from loaderkit._limits import LIMITS
from loaderkit._validate import check_str
from loaderkit.errors import PlanError
from loaderkit.plan.sections.base import Section, explain_row

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "DEVICES",
    "SECTION",
    "CudaIndex",
    "Device",
    "DeviceName",
    "device_calls",
    "device_spec",
    "device_to_dict",
    "read_device",
]

DeviceName = Literal["auto", "cpu", "cuda", "mps"]
"""A device kind ``with_device`` takes (besides ``"cuda:N"``, see :data:`Device`)."""
DEVICES: tuple[DeviceName, ...] = get_args(DeviceName)

CudaIndex = Literal[
    "cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cuda:6", "cuda:7",
    "cuda:8", "cuda:9", "cuda:10", "cuda:11", "cuda:12", "cuda:13", "cuda:14", "cuda:15",
]  # fmt: skip
"""``"cuda:N"`` for the first 16 devices, spelled for type checkers; at run time
``with_device`` takes any index up to ``LIMITS.device_index``."""

Device = DeviceName | CudaIndex
"""What ``with_device`` takes: a :data:`DeviceName` or ``"cuda:N"``."""

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda)(:(0|[1-9][0-9]*))?$")


def device_spec(device: object) -> str:
    """``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``, lower-cased."""
    text = check_str("device", device).strip().lower()
    if not _DEVICE.match(text) or text.startswith(("auto:", "cpu:", "mps:")):
        listed = ", ".join(repr(d) for d in DEVICES)
        raise PlanError.single("device", f"must be one of {listed} or 'cuda:N' (got {device!r})")
    _, _, index = text.partition(":")
    if index and (len(index) > 6 or int(index) > LIMITS.device_index):
        raise PlanError.single(
            "device",
            f"the device index must be <= {LIMITS.device_index} (got {text[:40]!r}); name "
            f"a device this machine has, e.g. 'cuda:0', or 'auto'",
        )
    return text


def device_to_dict(device: str) -> str:
    """The ``device`` value of a plan file (a string, not a table)."""
    return device


def read_device(reader: Reader, data: Mapping[str, Any]) -> str | None:
    """Read the ``device`` value."""
    device: str | None = reader.attempt(lambda: device_spec(data.get("device", "cpu")))
    return device


def device_calls(device: str, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_device`` call (none for the CPU, the default)."""
    return () if device == "cpu" else (f".with_device({device!r})",)


SECTION: Section[str] = Section(
    name="device",
    explain=explain_row("device", lambda plan: plan.device),
    builder_calls=device_calls,
    read=read_device,
    to_dict=device_to_dict,
    fingerprint="exec",
    why="where batches are delivered, not what they hold",
)
