"""What size a JPEG may be decoded at for the transform's first step (PIL's DCT ``draft``).

:func:`shrink_target` reads the step (torchvision ``Resize`` or ``RandomResizedCrop``) without
importing torchvision; :func:`draft_factor` is the largest DCT scale that still gives the step
what it makes; :func:`jpeg_size` reads a JPEG's size from its frame header, without PIL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["Target", "draft_factor", "jpeg_size", "may_draft", "shrink_target"]

Target = (
    tuple[Literal["shorter"], int]
    | tuple[Literal["box"], int, int]
    | tuple[Literal["crop"], int, int, float]
)
"""What the first transform step makes of an image: shorter side ``s``; ``(h, w)``; or
``(h, w)`` from a random crop whose sides are at least ``fraction`` x sqrt(image area)."""

_DCT_SCALES = (8, 4, 2)
"""The factors JPEG decoding can shrink by (PIL's ``draft``), largest first."""


def _is_torchvision(obj: object, *names: str) -> bool:
    cls = type(obj)
    return cls.__module__.startswith("torchvision.transforms") and cls.__name__ in names


def shrink_target(transform: object) -> tuple[Target, str] | None:
    """What the first step of ``transform`` resizes every image to, and that step's name.

    Recognised: torchvision's ``Resize`` (to a shorter side or to ``(h, w)``) and
    ``RandomResizedCrop`` (to ``(h, w)``, from crops of ``scale`` and ``ratio``), v1 or v2,
    bare or first in a ``Compose`` (also nested). Anything else: ``None`` (images are
    decoded at full size). torchvision is not imported: the transform's class is looked at
    by module and name.
    """
    step: object = transform
    while _is_torchvision(step, "Compose"):
        inner = getattr(step, "transforms", None)
        if not isinstance(inner, Sequence) or not inner:
            return None
        step = inner[0]
    size = getattr(step, "size", None)
    name = type(step).__name__
    if isinstance(size, int):
        size = [size]
    if not isinstance(size, Sequence) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size
    ):
        return None
    if _is_torchvision(step, "Resize"):
        if len(size) == 1:
            return ("shorter", int(size[0])), f"{name}({size[0]})"
        if len(size) == 2:
            return ("box", int(size[0]), int(size[1])), f"{name}(({size[0]}, {size[1]}))"
        return None
    if _is_torchvision(step, "RandomResizedCrop"):
        h, w = (size[0], size[0]) if len(size) == 1 else (size[0], size[1])
        scale, ratio = getattr(step, "scale", None), getattr(step, "ratio", None)
        numbers = (
            (*scale, *ratio) if isinstance(scale, Sequence) and isinstance(ratio, Sequence) else ()
        )
        if len(numbers) != 4 or not all(isinstance(x, int | float) and x > 0 for x in numbers):
            return None
        fraction = math.sqrt(numbers[0] * min(numbers[2], 1 / numbers[3]))
        shown = f"{name}(({h}, {w}), scale=({numbers[0]:g}, {numbers[1]:g}))"
        return ("crop", int(h), int(w), fraction), shown
    return None


def draft_factor(target: Target, width: int, height: int, transposed: bool) -> int:
    """The DCT factor (8, 4, 2, or 1: none) a ``width`` x ``height`` JPEG may shrink by.

    The largest that still leaves the step at least its size: the shorter side ``s``; both
    sides of ``(h, w)`` (given upright: ``transposed`` for EXIF orientations 5-8); or, for a
    random crop, the smallest crop it can draw (``fraction`` x sqrt(area)) at least
    ``max(h, w)`` on each side, so that the crop is never enlarged more than it would be
    from the full image.
    """
    if target[0] == "shorter":
        limit = min(width, height) / target[1]
    elif target[0] == "box":
        h, w = (target[2], target[1]) if transposed else (target[1], target[2])
        limit = min(width / w, height / h)
    else:
        limit = math.sqrt(width * height) * target[3] / max(target[1], target[2])
    return next((k for k in _DCT_SCALES if k <= limit), 1)


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from a JPEG's frame header (its SOF marker), or ``None``."""
    i, end = 2, len(data)
    while i + 4 <= end:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > end:
                return None
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return (width, height) if width and height else None
        if marker == 0xDA:  # the scan starts: no frame header before it
            return None
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def may_draft(target: Target, size: tuple[int, int]) -> bool:
    """Whether a JPEG of ``size`` can be drafted for ``target`` (in either orientation)."""
    return any(draft_factor(target, *size, transposed) > 1 for transposed in (False, True))
