"""Decoding one image to a ``uint8`` ``(C, H, W)`` tensor (PIL, or torchvision for whole JPEGs).

PIL and torch are imported inside the functions that decode (in the workers), never when this
module is imported.
"""

from __future__ import annotations

import io
import os
import stat
import warnings
from typing import TYPE_CHECKING, Literal

from loaderkit.datasets.images.decode_size import Target, draft_factor, jpeg_size, may_draft
from loaderkit.datasets.images.options import ImageMode

if TYPE_CHECKING:
    import torch
    from PIL import Image

__all__ = ["JPEG_MAGIC", "decode_bytes", "decode_image", "read_regular"]

JPEG_MAGIC = b"\xff\xd8\xff"
"""The first bytes of every JPEG file."""


def read_regular(path: str, listed: tuple[int, int | None] | None = None) -> bytes:
    """The bytes of ``path``, refusing (without blocking) anything but a regular file.

    ``listed``: the ``(size, mtime_ns)`` the file had when it was listed (``mtime_ns`` ``None``
    when only the size counts); a file that no longer has them raises ``OSError``, so a
    changed file is named rather than read as the sample the plan recorded.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path!r} is no longer a regular file")
        if listed is not None:
            size, mtime = listed
            if info.st_size != size or (mtime is not None and info.st_mtime_ns != mtime):
                raise OSError(
                    f"the file changed after the folder was listed (now {info.st_size:,} "
                    f"bytes, listed {size:,}{'' if mtime is None else ', or a new time'}); "
                    f"make the dataset (and its plan) again to read the new contents"
                )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


_ORIENTATION = 0x0112
_TRANSPOSED = frozenset({5, 6, 7, 8})
"""EXIF orientations that swap width and height."""


def _pil_decode(image: Image.Image, mode: str, target: Target | None) -> tuple[torch.Tensor, bool]:
    """A PIL image (opened, maybe not loaded) -> uint8 (C, H, W); and whether it was drafted."""
    import numpy as np
    import torch
    from PIL import ImageOps

    drafted = False
    if target is not None and image.format == "JPEG":
        orientation = image.getexif().get(_ORIENTATION, 1)
        width, height = image.size
        factor = draft_factor(target, width, height, orientation in _TRANSPOSED)
        if factor > 1:  # PIL picks the largest factor <= min(width // w, height // h)
            image.draft(image.mode, (width // factor, height // factor))
            drafted = image.size != (width, height)
    image = ImageOps.exif_transpose(image)
    if image.mode != mode:
        image = image.convert(mode)
    array = np.array(image, dtype=np.uint8)
    if array.ndim == 2:
        array = array[:, :, None]
    # a (C, H, W) view of the (H, W, C) pixels: no copy (torch's transposing copy is slow
    # where threads compete, and transforms.v2 and the vision collator take views alike)
    return torch.from_numpy(array).permute(2, 0, 1), drafted


def _tv_decode(data: bytes) -> torch.Tensor:
    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    with warnings.catch_warnings():  # torchvision 0.29+ deprecates it for TorchCodec, per call
        warnings.simplefilter("ignore", DeprecationWarning)
        image: torch.Tensor = decode_jpeg(raw, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    return image


def decode_image(
    value: object,
    mode: ImageMode = "RGB",
    *,
    target: Target | None = None,
    decoder: Literal["pil", "torchvision"] = "pil",
) -> torch.Tensor:
    """Decode one image to a ``torch.uint8`` ``(C, H, W)`` tensor, as the image sources do.

    ``value`` is a file path, the file's bytes, a PIL image, or an HF ``Image`` feature's
    value (a PIL image, or ``{"bytes": ..., "path": ...}`` with ``decode=False``): HF datasets
    with an image column go through the same rules as :func:`image_folder` (``mode``
    conversion, EXIF orientation) with this function in a transform. ``target`` (see
    :func:`shrink_target`) lets JPEGs decode at a reduced scale; ``decoder="torchvision"``
    decodes RGB JPEGs at full size with ``torchvision.io.decode_jpeg`` (same pixels).

    Raises what PIL raises for a file that is not a readable image (``OSError``,
    ``PIL.UnidentifiedImageError``, ``DecompressionBombError``); the image sources turn it
    into a :class:`~loaderkit.DataError` naming the file.
    """
    from PIL import Image

    if isinstance(value, Image.Image):
        return _pil_decode(value, mode, None)[0]
    data: bytes
    if isinstance(value, dict):
        raw, path = value.get("bytes"), value.get("path")
        if isinstance(raw, bytes | bytearray):
            data = bytes(raw)
        elif isinstance(path, str):
            data = read_regular(path)
        else:
            raise TypeError(
                f"an HF image value holds 'bytes' or a 'path' (got keys {sorted(value)})"
            )
    elif isinstance(value, bytes | bytearray):
        data = bytes(value)
    elif isinstance(value, str | os.PathLike):
        data = read_regular(os.fspath(value))
    else:
        raise TypeError(
            f"cannot decode a {type(value).__name__}; pass a path, bytes, a PIL image or an HF "
            f"image value"
        )
    return decode_bytes(data, mode, target, decoder)[0]


def decode_bytes(
    data: bytes, mode: str, target: Target | None, decoder: str
) -> tuple[torch.Tensor, str]:
    """Decode ``data``; also say how (``"pil"``, ``"pil draft"`` or ``"torchvision"``).

    A JPEG too small to draft for ``target`` (read from its frame header, without PIL) is
    decoded whole, by ``decoder``. A JPEG torchvision refuses goes to PIL, so the files that
    fail, and their errors, do not depend on the decoder.
    """
    from PIL import Image

    jpeg = data.startswith(JPEG_MAGIC)
    size = jpeg_size(data) if jpeg else None
    if target is not None and size is not None and not may_draft(target, size):
        target = None
    limit = Image.MAX_IMAGE_PIXELS
    if (
        size is not None
        and decoder == "torchvision"
        and mode == "RGB"
        and target is None
        and (limit is None or size[0] * size[1] <= limit)  # PIL's bomb check, else PIL's path
    ):
        try:
            return _tv_decode(data), "torchvision"
        except RuntimeError:  # PIL decides, as with decoder="pil": the same files fail alike
            pass
    with Image.open(io.BytesIO(data)) as image:
        tensor, drafted = _pil_decode(image, mode, target)
    return tensor, "pil draft" if drafted else "pil"
