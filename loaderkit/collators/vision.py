"""The ``vision`` collator: images of one size into one normalized ``(B, C, H, W)`` batch.

Samples are mappings with the image under ``image_key`` (the other keys go through the
``default`` collator), ``(image, target, ...)`` tuples (the image first), or bare images. An
image is a numpy array, a torch tensor or a PIL image, ``uint8`` or floating point, laid out
``(H, W, C)``, ``(C, H, W)`` or ``(H, W)`` (grayscale).

The work is done once per batch, not once per image: the images are stacked into one array in
the layout of the first one (``(B, H, W, C)`` for the usual HWC images), viewed as
``(B, C, H, W)`` by one permute, and one pass converts the whole batch to float while
transposing it; normalization is an in-place multiply-add over the batch, with the ``1/255``
of ``uint8`` images folded into the scale. With ``normalize_on_device=True`` (what ``"auto"``,
the default, becomes when the loader delivers to a CUDA device) the batch leaves
the collator as ``uint8`` (4x fewer bytes to pin and copy) and :meth:`VisionCollator.on_device`
does the same conversion where the batch landed; both paths run the same code, so they give
the same numbers.

Layout rule for ``layout="auto"``: an ``(a, b, c)`` image is HWC when ``c`` is 1, 3 or 4 and
``a`` is not; CHW when ``a`` is 1, 3 or 4 and ``c`` is not. Any other shape (``(3, 4, 4)``,
``(13, 64, 64)``) is ambiguous and needs ``layout="hwc"`` or ``"chw"``. PIL images and 2-d
arrays are unambiguous whatever the option says.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from loaderkit.collators.base import (
    BatchContext,
    Collator,
    check_auto_bool_option,
    check_bool_option,
    check_choice_option,
    check_float_list_option,
    check_keys,
    check_name_option,
    check_not_empty,
    data_error,
    option_error,
)
from loaderkit.collators.default import default_collate

if TYPE_CHECKING:
    import torch

__all__ = ["AUTO_CHANNELS", "DTYPES", "LAYOUTS", "PRESETS", "VisionCollator"]

PRESETS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}
"""Normalization presets: name -> (mean, std), per RGB channel, for images scaled to [0, 1]."""

LAYOUTS = ("auto", "hwc", "chw")
DTYPES = ("float32", "float64", "float16", "bfloat16")
AUTO_CHANNELS = (1, 3, 4)
"""Channel counts ``layout="auto"`` recognises."""

_PIL_DIRECT = ("L", "RGB", "RGBA")
_PIL_REFUSED = ("I", "F")  # and "I;16*": high bit depths have no uint8/[0, 1] reading
_SHOWN_POSITIONS = 8


def _positions(positions: Sequence[int]) -> str:
    shown = ", ".join(str(p) for p in positions[:_SHOWN_POSITIONS])
    more = f", ... ({len(positions)} in all)" if len(positions) > _SHOWN_POSITIONS else ""
    word = "position" if len(positions) == 1 else "positions"
    return f"batch {word} {shown}{more}"


class VisionCollator(Collator):
    """Stack HWC/CHW images (numpy, torch, PIL; uint8 or float) into a normalized float batch.

    Options (all plain data, checked when the plan compiles):

    - ``image_key``: the key of the image in mapping samples (default ``"pixel_values"``).
    - ``layout``: ``"auto"`` (see the module docstring for the rule), ``"hwc"`` or ``"chw"``.
    - ``to_rgb``: make every image 3-channel: grayscale is repeated, a 4th (alpha) channel is
      dropped, PIL images of other modes are converted with ``image.convert("RGB")``.
    - ``normalize``: ``"imagenet"``, ``"cifar10"`` or ``None``; or give ``mean`` and ``std``
      (lists, one number per channel, or one number for all channels).
    - ``dtype``: ``"float32"`` (default), ``"float64"``, ``"float16"`` or ``"bfloat16"``.
    - ``normalize_on_device``: ``True`` ships the stacked images unconverted (``uint8`` stays
      ``uint8``) and converts and normalizes them in :meth:`on_device`, after they reached the
      device; ``False`` normalizes in the collator (in the workers); ``"auto"`` (the default)
      is ``True`` when the loader delivers to a CUDA device (a quarter of the bytes pinned and
      copied, the arithmetic on the GPU) and ``False`` otherwise (on a CPU the workers do it in
      parallel, off the training loop's process). A collator called by hand, outside a loader,
      takes ``"auto"`` as ``False``.

    ``uint8`` images are scaled to ``[0, 1]`` (divided by 255) before normalization; float
    images are taken as they are. The output is ``(B, C, H, W)``, contiguous.
    """

    name = "vision"

    def __init__(
        self,
        *,
        image_key: str = "pixel_values",
        layout: str = "auto",
        to_rgb: bool = False,
        normalize: str | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        dtype: str = "float32",
        normalize_on_device: bool | Literal["auto"] = "auto",
    ) -> None:
        self.image_key = check_name_option("image_key", image_key)
        self.layout = check_choice_option("layout", layout, LAYOUTS)
        self.to_rgb = check_bool_option("to_rgb", to_rgb)
        self.normalize = check_choice_option(
            "normalize",
            normalize,
            list(PRESETS),
            allow_none=True,
            suggest=True,
            fix="for other statistics pass mean=[...] and std=[...]",
        )
        if normalize is not None and (mean is not None or std is not None):
            raise option_error(
                "mean" if mean is not None else "std",
                f"normalize={normalize!r} already sets mean and std; pass either the preset or "
                f"mean=[...] and std=[...]",
            )
        if (mean is None) != (std is None):
            missing = "std" if std is None else "mean"
            raise option_error(missing, f"mean and std go together: pass {missing}=[...] as well")
        self.mean: tuple[float, ...] | None = None
        self.std: tuple[float, ...] | None = None
        if mean is not None and std is not None:
            what = "numbers, one per channel"
            self.mean = check_float_list_option("mean", mean, nonempty=True, what=what)
            self.std = check_float_list_option(
                "std", std, minimum=0, exclusive_minimum=True, nonempty=True, what=what
            )
            if len(self.mean) != len(self.std) and 1 not in (len(self.mean), len(self.std)):
                raise option_error(
                    "std",
                    f"has {len(self.std)} numbers but mean has {len(self.mean)}; give one per "
                    f"channel (or one for all channels)",
                )
        self.dtype = check_choice_option("dtype", dtype, DTYPES)
        self.normalize_on_device = check_auto_bool_option(
            "normalize_on_device", normalize_on_device
        )
        self._device: str | None = None
        """The device :meth:`for_device` decided ``"auto"`` for (``None``: not decided)."""

    # -- the device --------------------------------------------------------------------------

    def for_device(self, device: torch.device) -> VisionCollator:
        """A copy with ``normalize_on_device="auto"`` decided for ``device``: on it for CUDA."""
        if self.normalize_on_device != "auto":
            return self
        decided = copy.copy(self)
        decided.normalize_on_device = device.type == "cuda"
        decided._device = str(device)
        return decided

    def loaderkit_explain(self) -> str:
        """Where the images are converted and normalized, and why."""
        device = self._device
        why = "" if device is None else f" (normalize_on_device='auto', device {device})"
        if self.normalize_on_device is True:
            return (
                f"images cross to the device as uint8 (4x fewer bytes than float32) and are "
                f"normalized there{why}"
            )
        return f"images normalized on the host by the collator (in the workers, if any){why}"

    # -- the statistics ---------------------------------------------------------------------

    def statistics(self) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
        """The (mean, std) applied, from the preset or the options; ``None`` without any."""
        if self.normalize is not None:
            return PRESETS[self.normalize]
        if self.mean is not None and self.std is not None:
            return self.mean, self.std
        return None

    def _check_channels(self, channels: int, where: str) -> None:
        stats = self.statistics()
        if stats is None:
            return
        widths = {len(s) for s in stats} - {1}
        if widths and widths != {channels}:
            source = f"normalize={self.normalize!r}" if self.normalize else "mean/std"
            fix = " or pass to_rgb=True" if channels == 1 and not self.to_rgb else ""
            raise data_error(
                self.name,
                f"{where} have {channels} channel(s) but {source} has "
                f"{widths.pop()}; give statistics for {channels} channel(s){fix}",
            )

    # -- collating ---------------------------------------------------------------------------

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Stack the images of ``samples``; collate the other fields with ``default``."""
        check_not_empty(samples, collator=self.name)
        first = samples[0]
        if isinstance(first, Mapping):
            keys = check_keys(samples, collator="vision")
            key = self.image_key
            if key not in keys:
                raise data_error(
                    self.name,
                    f"the samples have no image under {key!r} (keys: "
                    f"{keys}); pass image_key=... naming the image field",
                )
            images = self._stack([s[key] for s in samples], f"images under {key!r}")
            rest = [k for k in keys if k != key]
            others = default_collate([{k: s[k] for k in rest} for s in samples]) if rest else {}
            return {k: images if k == key else others[k] for k in keys}
        if isinstance(first, tuple | list):
            for position, sample in enumerate(samples):
                if not isinstance(sample, tuple | list) or len(sample) != len(first):
                    got = len(sample) if isinstance(sample, tuple | list) else type(sample)
                    raise data_error(
                        self.name,
                        f"sample at batch position {position} is {got!r}, "
                        f"position 0 a {type(first).__name__} of {len(first)}",
                    )
            images = self._stack([s[0] for s in samples], "images (element 0)")
            if len(first) == 1:
                return [images]
            others = default_collate([tuple(s[1:]) for s in samples])
            return [images, *others]
        return self._stack(list(samples), "images")

    def on_device(self, batch: Any) -> Any:
        """With ``normalize_on_device``: convert and normalize the images where they landed."""
        if self.normalize_on_device is not True:
            return batch
        import torch

        if isinstance(batch, torch.Tensor):
            return self._finish(batch)
        if isinstance(batch, Mapping):
            out = dict(batch)
            out[self.image_key] = self._finish(batch[self.image_key])
            return out
        if isinstance(batch, list | tuple):
            return type(batch)([self._finish(batch[0]), *batch[1:]])
        return batch

    def _finish(self, images: torch.Tensor) -> torch.Tensor:
        """One (B, C, H, W) batch, uint8 or float, any strides -> contiguous normalized float.

        The same code runs on the host and in :meth:`on_device`: one converting copy (which
        also makes an HWC view contiguous), then an in-place multiply-add per channel.
        """
        import torch

        compute = torch.float64 if self.dtype == "float64" else torch.float32
        out = torch.empty(images.shape, dtype=compute, device=images.device)
        out.copy_(images)
        scaled = images.dtype == torch.uint8
        stats = self.statistics()
        if stats is not None:
            mean, std = stats
            factor = 255.0 if scaled else 1.0
            channels = images.shape[1]
            if len(mean) == len(std) == 1:
                out.mul_(1.0 / (factor * std[0])).add_(-mean[0] / std[0])
            else:
                for c in range(channels):
                    m, s = mean[c if len(mean) > 1 else 0], std[c if len(std) > 1 else 0]
                    out[:, c].mul_(1.0 / (factor * s)).add_(-m / s)
        elif scaled:
            out.div_(255.0)
        target: torch.dtype = getattr(torch, self.dtype)
        return out if out.dtype == target else out.to(target)

    def _stack(self, images: Sequence[Any], where: str) -> Any:
        """Stack the images (any layout, any container) into one (B, C, H, W) batch."""
        import torch

        arrays: list[np.ndarray[Any, Any]] = []
        layouts: list[str] = []
        for position, image in enumerate(images):
            array, layout = self._array(image, position, where)
            arrays.append(array)
            layouts.append(layout)
        target = layouts[0]
        chw_shapes = []
        for i, (array, layout) in enumerate(zip(arrays, layouts, strict=True)):
            if layout != target:  # a view: the stack below copies once
                arrays[i] = array.transpose((1, 2, 0) if target == "hwc" else (2, 0, 1))
            chw_shapes.append(
                array.shape if layout == "chw" else (array.shape[2], *array.shape[:2])
            )
        if any(shape != chw_shapes[0] for shape in chw_shapes):
            groups: dict[tuple[int, ...], list[int]] = {}
            for position, shape in enumerate(chw_shapes):
                groups.setdefault(tuple(shape), []).append(position)
            described = "; ".join(f"{shape} at {_positions(p)}" for shape, p in groups.items())
            raise data_error(
                self.name,
                f"{where} differ in shape (C, H, W): {described}; resize or "
                f"crop them to one size in a transform",
            )
        self._check_channels(int(chw_shapes[0][0]), where)
        if all(a.dtype == np.uint8 for a in arrays):
            stacked = np.stack(arrays)
        else:
            stacked = np.stack(
                [
                    a.astype(np.float32) / np.float32(255.0) if a.dtype == np.uint8 else a
                    for a in arrays
                ]
            )
        batch = torch.from_numpy(stacked)
        if target == "hwc":
            batch = batch.permute(0, 3, 1, 2)
        if self.normalize_on_device is True:
            return batch
        return self._finish(batch)

    def _array(self, image: Any, position: int, where: str) -> tuple[np.ndarray[Any, Any], str]:
        """The image as a numpy array (a view where possible) and its layout, "hwc" or "chw"."""
        import torch

        known: str | None = None
        if isinstance(image, np.ndarray):
            array = image
        elif isinstance(image, torch.Tensor):
            tensor = image.detach().cpu()
            if tensor.dtype == torch.bfloat16:
                tensor = tensor.float()
            array = tensor.numpy()
        elif type(image).__module__.startswith("PIL.") and hasattr(image, "convert"):
            array = self._pil_array(image, position, where)
            known = "hwc"
        else:
            raise data_error(
                self.name,
                f"{where}: batch position {position} holds a "
                f"{type(image).__name__}; images are numpy arrays, torch tensors or PIL images",
            )
        if array.dtype != np.uint8 and not np.issubdtype(array.dtype, np.floating):
            raise data_error(
                self.name,
                f"{where}: batch position {position} has dtype {array.dtype}; "
                f"images are uint8 (0..255) or floating point (0..1): convert them in a transform",
            )
        if array.ndim == 2:
            array, known = array[:, :, None], "hwc"
        if array.ndim != 3:
            raise data_error(
                self.name,
                f"{where}: batch position {position} has shape "
                f"{tuple(array.shape)}; an image is (H, W, C), (C, H, W) or (H, W)",
            )
        layout = known or self._layout_of(array.shape, position, where)
        channel_axis = 2 if layout == "hwc" else 0
        channels = array.shape[channel_axis]
        if self.to_rgb and channels != 3:
            if channels not in (1, 4):
                raise data_error(
                    self.name,
                    f"{where}: batch position {position} has {channels} "
                    f"channels (shape {tuple(array.shape)}, {layout.upper()}); to_rgb=True "
                    f"converts 1 (grayscale) or 4 (RGBA) channels",
                )
            if channels == 4:
                array = array[:, :, :3] if layout == "hwc" else array[:3]
            else:
                shape = list(array.shape)
                shape[channel_axis] = 3
                array = np.broadcast_to(array, tuple(shape))
        return array, layout

    def _layout_of(self, shape: tuple[int, ...], position: int, where: str) -> str:
        if self.layout != "auto":
            return self.layout
        first, last = shape[0] in AUTO_CHANNELS, shape[2] in AUTO_CHANNELS
        if last and not first:
            return "hwc"
        if first and not last:
            return "chw"
        raise data_error(
            self.name,
            f"{where}: cannot tell the layout of batch position {position}, "
            f"shape {tuple(shape)}: layout='auto' reads (H, W, C) when only the last dimension "
            f"is 1, 3 or 4 and (C, H, W) when only the first is; pass layout='hwc' or "
            f"layout='chw'",
        )

    def _pil_array(self, image: Any, position: int, where: str) -> np.ndarray[Any, Any]:
        mode = str(image.mode)
        if self.to_rgb and mode != "RGB":
            image = image.convert("RGB")
        elif mode.startswith(_PIL_REFUSED):
            raise data_error(
                self.name,
                f"{where}: batch position {position} is a PIL image of mode "
                f"{mode!r} (high bit depth); convert it to 'L' or 'RGB' (or an array) in a "
                f"transform",
            )
        elif mode == "1":
            image = image.convert("L")
        elif mode not in _PIL_DIRECT:
            alpha = "A" in mode or "transparency" in getattr(image, "info", {})
            image = image.convert("RGBA" if alpha else "RGB")
        return np.asarray(image)


BUILTINS: list[tuple[str, type, str | None, str]] = [
    (
        "vision",
        VisionCollator,
        "vision",
        "stack HWC/CHW images (numpy, torch, PIL; uint8 or float) into a normalized "
        "(B, C, H, W) float batch, optionally normalized on the device",
    ),
]
"""(registry name, collator class, modality, one-line description) of this module's collators."""
