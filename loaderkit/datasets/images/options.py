"""The choices the image factories take: ``mode``, ``decode_scale``, ``decoder``."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["DECODERS", "DECODE_SCALES", "IMAGE_MODES", "DecodeScale", "Decoder", "ImageMode"]

ImageMode = Literal["RGB", "L", "RGBA"]
"""What every image is converted to (``PIL.Image.convert``): 3, 1 or 4 channels."""
IMAGE_MODES: tuple[str, ...] = get_args(ImageMode)

DecodeScale = Literal["auto", "full"]
"""``"auto"``: reduced-scale JPEG decoding when the transform's first step shrinks the image."""
DECODE_SCALES: tuple[str, ...] = get_args(DecodeScale)

Decoder = Literal["auto", "pil", "torchvision"]
"""Who decodes full-size JPEGs: the faster one measured (``"auto"``), or the one named."""
DECODERS: tuple[str, ...] = get_args(Decoder)

OPTION = "dataset.source.options"
"""Where the factories' options are in a plan (errors name ``dataset.source.options.<key>``)."""
