"""Image sources: ``image_folder`` and ``image_files``, decoded lazily where samples are fetched.

``image_folder(root, ...)`` reads torchvision's ``ImageFolder`` layout: every folder directly
under ``root`` is a class, classes sorted by name get indices 0, 1, ...; the images are the files
below each class folder (subfolders included) whose names end in one of :data:`IMG_EXTENSIONS`
(torchvision's list, compared lower-cased), sorted as torchvision sorts them. A sample is
``(image, class_index)``, as ``ImageFolder`` gives it. ``image_files(files, labels=None, ...)``
reads a list of files or glob patterns (matches sorted); a sample is ``(image, label)`` with
``labels``, else the bare image.

An image is a ``torch.uint8`` tensor laid out ``(C, H, W)`` (what ``torchvision.io`` decodes to
and what ``torchvision.transforms.v2`` works on; the ``vision`` collator stacks and normalizes a
batch of them at once). ``mode="RGB"`` (the default) converts every image as ``ImageFolder``'s
loader does (``PIL.Image.convert("RGB")``: grayscale repeated, alpha dropped, palette looked up,
CMYK converted, 16-bit values clipped to 255); ``"L"`` gives one channel, ``"RGBA"`` four. The
EXIF orientation is applied (``PIL.ImageOps.exif_transpose``), which ``ImageFolder`` does not do.

Decoding (:func:`decode_image`) happens in ``__getitem__``, in the worker: the dataset holds
only paths, sizes and labels, so it pickles cheaply. A file that cannot be read or decoded
(truncated, corrupt, not an image) raises a :class:`~loaderkit.DataError` naming the file; under
``with_error_policy("skip")`` the sample is skipped and counted like any other bad sample.

Fast decode: when a plan's transform starts with a step that shrinks the image (torchvision
``Resize`` or ``RandomResizedCrop``, v1 or v2, bare or first in a ``Compose``), the loader hands
it to :meth:`ImageDataset.loaderkit_prepare` and JPEG files are decoded at a reduced scale (PIL's
``draft``: DCT scaling by 1/2, 1/4 or 1/8), the smallest one at which that step still gets at
least what it makes (for a random crop: its smallest crop still covers the output). JPEGs
decoded whole use the faster of PIL and ``torchvision.io.decode_jpeg`` (which give the same
pixels; a file torchvision refuses goes to PIL), measured once when the loader is built, on
the dataset's first JPEG. ``decode_scale="full"`` turns reduced-scale decoding off,
``decoder="pil"`` or ``"torchvision"`` fixes the decoder; ``loader.explain()`` says which path
a plan uses.

Listing rules (both factories): only regular files are read. A file that is not one (a FIFO, a
device, a socket), a symlink whose target lies outside ``root`` (``image_folder``; pass
``follow_external_links=True`` to follow those), and any path under ``/proc``, ``/sys`` or
``/dev`` are refused; files without an image extension are left out. Both are recorded in
:attr:`ImageDataset.skipped` (``(path, reason)`` pairs) and counted in ``repr()`` and
``explain()``. A class folder without images is an error, as in torchvision, unless
``allow_empty=True``.

Identity (what a plan's fingerprint covers, and what loading a plan file checks): the sorted
file list with each file's size and modification time (and label); with
``hash_contents=True`` a sha256 of each file's bytes replaces the time, so copies and moves of
the folder keep it. The content hashes are computed when the identity is first needed and kept
for the process (per path, size, time and inode). A file added, removed or changed gives
another identity, and ``LoaderPlan.load`` of a plan made before refuses it (a ``PlanError``
saying the data changed and how many files it lists now against then). Each file is checked
against its listing when it is read (size and time; size alone with ``hash_contents``): one
changed after the dataset was made is a ``DataError`` naming it.

PIL and torch are imported when an image is decoded (or the decoder measured), never when this
module is: the plan layer imports it.
"""

from __future__ import annotations

import glob
import hashlib
import io
import math
import os
import stat
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from loaderkit.datasets.files import PSEUDO_FILESYSTEMS
from loaderkit.errors import PlanError, PlanTypeError, data_error

if TYPE_CHECKING:
    import torch
    from PIL import Image

__all__ = [
    "IMAGE_MODES",
    "IMG_EXTENSIONS",
    "DecodeScale",
    "Decoder",
    "ImageDataset",
    "ImageMode",
    "decode_image",
    "image_files",
    "image_folder",
    "shrink_target",
]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""The file name endings read as images (torchvision's ``IMG_EXTENSIONS``), compared lower-cased."""

ImageMode = Literal["RGB", "L", "RGBA"]
"""What every image is converted to (``PIL.Image.convert``): 3, 1 or 4 channels."""
IMAGE_MODES: tuple[str, ...] = get_args(ImageMode)

DecodeScale = Literal["auto", "full"]
"""``"auto"``: reduced-scale JPEG decoding when the transform's first step shrinks the image."""
DECODE_SCALES: tuple[str, ...] = get_args(DecodeScale)

Decoder = Literal["auto", "pil", "torchvision"]
"""Who decodes full-size JPEGs: the faster one measured (``"auto"``), or the one named."""
DECODERS: tuple[str, ...] = get_args(Decoder)

_SYSTEM_TREES = (*PSEUDO_FILESYSTEMS, "/dev")
"""Folders whose files are not data (kernel views, devices): never read, even through links."""

Target = (
    tuple[Literal["shorter"], int]
    | tuple[Literal["box"], int, int]
    | tuple[Literal["crop"], int, int, float]
)
"""What the first transform step makes of an image: shorter side ``s``; ``(h, w)``; or
``(h, w)`` from a random crop whose sides are at least ``fraction`` x sqrt(image area)."""

_DCT_SCALES = (8, 4, 2)
"""The factors JPEG decoding can shrink by (PIL's ``draft``), largest first."""

_JPEG_MAGIC = b"\xff\xd8\xff"
_OPTION = "dataset.source.options"


# -- listing ------------------------------------------------------------------------------------


def _in_tree(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)


_OUTSIDE = "a symlink leading outside the folder (follow_external_links=True follows it)"


def _system_tree(real: str) -> str | None:
    """The reason to refuse a real path under ``/proc``, ``/sys`` or ``/dev``, or ``None``."""
    for tree in _SYSTEM_TREES:
        if _in_tree(real, tree):
            return f"under {tree} (system files, not data)"
    return None


def _checked(
    path: str, info: os.stat_result, root_real: str | None, follow_external: bool
) -> tuple[os.stat_result | None, str]:
    """The stat of the file ``path`` leads to, or ``None`` and why it is not read.

    ``info`` is the ``lstat`` of ``path``. A symlink is followed only if its real target lies
    inside ``root_real`` (or ``follow_external``); the file reached must be a regular file
    outside the system trees. Without ``root_real`` (``image_files``: no folder vouches for
    the path) every path's real location is checked against the system trees.
    """
    if stat.S_ISLNK(info.st_mode) or root_real is None:
        real = os.path.realpath(path)
        if stat.S_ISLNK(info.st_mode):
            if root_real is not None and not _in_tree(real, root_real) and not follow_external:
                return None, _OUTSIDE
            try:
                info = os.stat(path)
            except OSError:
                return None, "a broken symlink"
        refused = _system_tree(real)
        if refused is not None:
            return None, refused
    if not stat.S_ISREG(info.st_mode):
        return None, "not a regular file (a FIFO, device, socket or folder)"
    return info, ""


def _is_image_name(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


class _Listing:
    """Files found (absolute paths), their stat, and what was left out with why."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.sizes: list[int] = []
        self.mtimes: list[int] = []
        self.labels: list[int] = []
        self.skipped: list[tuple[str, str]] = []

    def add(
        self,
        path: str,
        shown: str,
        label: int,
        root_real: str | None,
        follow_external: bool,
        info: os.stat_result | None = None,
    ) -> bool:
        """List ``path`` (``info``: its ``lstat``, if known) or record why it is left out."""
        if not _is_image_name(path):
            self.skipped.append((shown, "not an image file name"))
            return False
        try:
            found, reason = _checked(
                path, os.lstat(path) if info is None else info, root_real, follow_external
            )
        except OSError as exc:
            found, reason = None, f"cannot be read ({exc.strerror or type(exc).__name__})"
        if found is None:
            self.skipped.append((shown, reason))
            return False
        self.paths.append(path)
        self.sizes.append(int(found.st_size))
        self.mtimes.append(int(found.st_mtime_ns))
        self.labels.append(label)
        return True


def _walk(
    top: str, root: str, root_real: str, follow_external: bool, listing: _Listing
) -> list[tuple[str, list[os.DirEntry[str]]]]:
    """The folders below ``top`` (itself included) and their non-folder entries, sorted.

    The order of ``sorted(os.walk(top, followlinks=True))`` (torchvision's). Folder links
    are followed under the rules of :func:`_checked`; a folder reached again below itself
    through a link (a cycle, which ``os.walk`` would follow until the path is too long) is
    left out and recorded, as is a folder that cannot be read.
    """
    folders: list[tuple[str, list[os.DirEntry[str]]]] = []
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        shown = os.path.relpath(folder, root)
        try:
            info = os.stat(folder)
            key = (int(info.st_dev), int(info.st_ino))
            if key in seen:
                listing.skipped.append((shown, "a folder reached again through a symlink"))
                continue
            seen.add(key)
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError as exc:
            listing.skipped.append((shown, f"cannot be read ({exc.strerror or exc})"))
            continue
        files = []
        for entry in entries:
            if entry.is_symlink() and os.path.isdir(entry.path):
                real = os.path.realpath(entry.path)
                if not _in_tree(real, root_real) and not follow_external:
                    listing.skipped.append((os.path.relpath(entry.path, root), _OUTSIDE))
                elif (refused := _system_tree(real)) is not None:
                    listing.skipped.append((os.path.relpath(entry.path, root), refused))
                else:
                    stack.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                files.append(entry)
        folders.append((folder, files))
    folders.sort(key=lambda item: item[0])
    return folders


def _folder_listing(
    root: str, allow_empty: bool, follow_external: bool
) -> tuple[list[str], _Listing]:
    """Run torchvision's ``find_classes`` and ``make_dataset``, under the listing rules above."""
    where = f"{_OPTION}.root"
    if not os.path.isdir(root):
        raise PlanError.single(
            where,
            f"{root!r} is not a folder; pass the folder holding one subfolder per class "
            f"(relative paths in a plan file resolve against the file's folder)",
        )
    root_real = os.path.realpath(root)
    refused = _system_tree(root_real)
    if refused is not None:
        raise PlanError.single(where, f"{root!r} is {refused}; pass a folder of image files")
    listing = _Listing()
    classes: list[str] = []
    with os.scandir(root) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            classes.append(entry.name)
        elif entry.is_symlink() and os.path.isdir(entry.path):
            real = os.path.realpath(entry.path)
            if not _in_tree(real, root_real) and not follow_external:
                listing.skipped.append((entry.name, _OUTSIDE))
            elif (refused := _system_tree(real)) is not None:
                listing.skipped.append((entry.name, refused))
            else:
                classes.append(entry.name)
        else:
            listing.skipped.append((entry.name, "not in a class folder"))
    if not classes:
        raise PlanError.single(
            where,
            f"{root!r} has no class folders; image_folder reads root/<class>/<image> "
            f"(torchvision's ImageFolder layout)",
        )
    empty = []
    for index, name in enumerate(classes):
        found = False
        for _folder, files in _walk(
            os.path.join(root, name), root, root_real, follow_external, listing
        ):
            prefix = len(os.path.join(root, ""))  # entry paths start with root + separator
            for entry in sorted(files, key=lambda e: e.name):
                shown = entry.path[prefix:]
                if not _is_image_name(entry.name):
                    listing.skipped.append((shown, "not an image file name"))
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    listing.skipped.append((shown, f"cannot be read ({exc.strerror or exc})"))
                    continue
                found |= listing.add(entry.path, shown, index, root_real, follow_external, info)
        if not found:
            empty.append(name)
    if empty and not allow_empty:
        raise PlanError.single(
            where,
            f"class folder(s) {', '.join(repr(e) for e in empty)} of {root!r} hold no image "
            f"(images end in {', '.join(IMG_EXTENSIONS)}); add images, remove the folder(s), "
            f"or pass allow_empty=True (torchvision's ImageFolder refuses them too)",
        )
    return classes, listing


def _expand(patterns: Sequence[str]) -> list[tuple[str, bool]]:
    """Each file named or matched, and whether a glob pattern matched it (sorted matches)."""
    files: list[tuple[str, bool]] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matched = sorted(glob.glob(pattern, recursive=True))
            if not matched:
                raise PlanError.single(
                    f"{_OPTION}.files",
                    f"{pattern!r} matches no file; check the pattern and the plan's folder",
                )
            files.extend((m, True) for m in matched)
        else:
            files.append((pattern, False))
    return files


# -- the fast-decode target ---------------------------------------------------------------------


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


def _draft_factor(target: Target, width: int, height: int, transposed: bool) -> int:
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


# -- decoding -----------------------------------------------------------------------------------


def _read(path: str, listed: tuple[int, int | None] | None = None) -> bytes:
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
        factor = _draft_factor(target, width, height, orientation in _TRANSPOSED)
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
            data = _read(path)
        else:
            raise TypeError(
                f"an HF image value holds 'bytes' or a 'path' (got keys {sorted(value)})"
            )
    elif isinstance(value, bytes | bytearray):
        data = bytes(value)
    elif isinstance(value, str | os.PathLike):
        data = _read(os.fspath(value))
    else:
        raise TypeError(
            f"cannot decode a {type(value).__name__}; pass a path, bytes, a PIL image or an HF "
            f"image value"
        )
    return _decode_bytes(data, mode, target, decoder)[0]


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
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


def _may_draft(target: Target, size: tuple[int, int]) -> bool:
    """Whether a JPEG of ``size`` can be drafted for ``target`` (in either orientation)."""
    return any(_draft_factor(target, *size, transposed) > 1 for transposed in (False, True))


def _decode_bytes(
    data: bytes, mode: str, target: Target | None, decoder: str
) -> tuple[torch.Tensor, str]:
    """Decode ``data``; also say how (``"pil"``, ``"pil draft"`` or ``"torchvision"``).

    A JPEG too small to draft for ``target`` (read from its frame header, without PIL) is
    decoded whole, by ``decoder``. A JPEG torchvision refuses goes to PIL, so the files that
    fail, and their errors, do not depend on the decoder.
    """
    from PIL import Image

    jpeg = data.startswith(_JPEG_MAGIC)
    size = _jpeg_size(data) if jpeg else None
    if target is not None and size is not None and not _may_draft(target, size):
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


# -- the dataset --------------------------------------------------------------------------------

_HASHES: dict[tuple[str, int, int, int], str] = {}
"""(real path, size, mtime_ns, inode) -> sha256 of the file: content hashes kept per process."""


def _content_hash(path: str) -> str:
    info = os.stat(path)
    key = (os.path.realpath(path), int(info.st_size), int(info.st_mtime_ns), int(info.st_ino))
    found = _HASHES.get(key)
    if found is None:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        found = _HASHES[key] = digest.hexdigest()
    return found


class ImageDataset:
    """Map-style dataset of image files, decoded in ``__getitem__`` (see the module docstring).

    Made by :func:`image_folder` or :func:`image_files`. ``classes``, ``class_to_idx``,
    ``samples`` and ``targets`` are as in torchvision's ``ImageFolder``.
    """

    def __init__(
        self,
        *,
        factory: str,
        root: str,
        paths: Sequence[str],
        sizes: Sequence[int],
        mtimes: Sequence[int],
        labels: Sequence[int] | None,
        classes: Sequence[str],
        skipped: Sequence[tuple[str, str]],
        mode: ImageMode,
        decode_scale: DecodeScale,
        decoder: Decoder,
        hash_contents: bool,
    ) -> None:
        self.factory = factory
        self.root = root
        self.paths = tuple(paths)
        self.sizes = tuple(sizes)
        self.mtimes = tuple(mtimes)
        self.labels = None if labels is None else tuple(labels)
        self.classes = list(classes)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.skipped: tuple[tuple[str, str], ...] = tuple(skipped)
        """What the listing left out: ``(path relative to the root, reason)``."""
        self.mode = mode
        self.decode_scale = decode_scale
        self.decoder = decoder
        self.hash_contents = hash_contents
        self.target: Target | None = None
        """What the plan's first transform step resizes to (set by :meth:`loaderkit_prepare`)."""
        self.full_decoder: Literal["pil", "torchvision"] = "pil"
        self.decode_note = "PIL, full size (no transform seen yet)"
        self._identity: str | None = None

    # torchvision's ImageFolder attributes
    @property
    def targets(self) -> list[int]:
        """The label of every sample (``ImageFolder.targets``); ``[]`` without labels."""
        return [] if self.labels is None else list(self.labels)

    @property
    def samples(self) -> list[tuple[str, int]]:
        """``(path, label)`` of every sample (``ImageFolder.samples``)."""
        labels = self.labels if self.labels is not None else (-1,) * len(self.paths)
        return list(zip(self.paths, labels, strict=True))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        path = self.paths[index]
        listed = (self.sizes[index], None if self.hash_contents else self.mtimes[index])
        try:
            data = _read(path, listed)
            image = _decode_bytes(data, self.mode, self.target, self.full_decoder)[0]
        except Exception as exc:  # any read or decode failure names the file
            raise data_error(
                f"image {os.path.relpath(path, self.root)!r} (in {self.root!r}) cannot be "
                f"read: {type(exc).__name__}: {exc}; replace or remove the file, or skip "
                f"bad samples with with_error_policy('skip')",
                exc,
            ) from exc
        if self.labels is None:
            return image
        return image, self.labels[index]

    # -- identity ---------------------------------------------------------------------------

    @property
    def _fingerprint(self) -> str:
        """The dataset's identity (the plan's ``dataset.identity``): the listing, hashed."""
        if self._identity is None:
            digest = hashlib.sha256(f"{self.factory}\0{self.mode}\0".encode())
            labels = self.labels if self.labels is not None else (-1,) * len(self.paths)
            for path, size, mtime, label in zip(
                self.paths, self.sizes, self.mtimes, labels, strict=True
            ):
                stamp = _content_hash(path) if self.hash_contents else str(mtime)
                shown = os.path.relpath(path, self.root)
                digest.update(f"{shown}\0{size}\0{stamp}\0{label}\n".encode())
            digest.update("\0".join(self.classes).encode())
            self._identity = f"{len(self.paths)} files, {digest.hexdigest()[:32]}"
        return self._identity

    # -- the loader's hooks -----------------------------------------------------------------

    def loaderkit_prepare(self, transform: Callable[..., Any] | None) -> ImageDataset:
        """A copy decoding for ``transform`` (called by the loader at build, in the main process).

        Sets the reduced-scale target from the transform's first step (unless
        ``decode_scale="full"``) and, with ``decoder="auto"``, measures PIL against
        torchvision's ``decode_jpeg`` on the first JPEG and keeps the faster.
        """
        import copy

        prepared = copy.copy(self)
        target, note = self._scale_choice(transform)
        sample = self._first_jpeg()
        if target is not None:
            prepared.target = target
            size = None if sample is None else _jpeg_size(sample)
            if size is not None:
                fits = _may_draft(target, size)
                note += (
                    f" (the first JPEG, {size[0]}x{size[1]}, "
                    f"{'is drafted' if fits else 'is too small: decoded whole'})"
                )
        notes = [note]
        prepared.full_decoder, why = self._choose_decoder(sample)
        notes.append(f"whole JPEGs: {why}")
        prepared.decode_note = f"{self.mode}; " + "; ".join(notes)
        return prepared

    def _scale_choice(self, transform: Callable[..., Any] | None) -> tuple[Target | None, str]:
        """The reduced-scale target for ``transform`` (``None``: full size) and why."""
        found = shrink_target(transform) if transform is not None else None
        if found is not None and self.decode_scale == "auto":
            return found[0], f"reduced-scale JPEGs for {found[1]}, the transform's first step"
        if found is not None:
            return None, f"full size (decode_scale='full', though {found[1]} shrinks)"
        if transform is None:
            return None, "full size (no transform)"
        return None, "full size (the transform's first step does not shrink the image)"

    def loaderkit_plan_explain(self, transform: Callable[..., Any] | None) -> str:
        """The decode path a plan with ``transform`` takes, for ``plan.explain()``.

        Reads no file and measures nothing: which whole-JPEG decoder is faster is measured
        when the loader is built (``loader.explain()`` says what was chosen, with timings).
        """
        _target, note = self._scale_choice(transform)
        fixed = self._fixed_decoder()
        decoder = (
            "the faster of PIL and torchvision.io.decode_jpeg, measured on the first JPEG at "
            "build()"
            if fixed is None
            else fixed[1]
        )
        return f"{self.mode}; {note}; whole JPEGs: {decoder}"

    def _fixed_decoder(self) -> tuple[Literal["pil", "torchvision"], str] | None:
        """The whole-JPEG decoder the options fix, and why (``None``: chosen by measuring)."""
        if self.mode != "RGB":
            return "pil", f"PIL (mode {self.mode!r})"
        if self.decoder == "pil":
            return "pil", "PIL (decoder='pil')"
        if self.decoder == "torchvision":
            return "torchvision", "torchvision.io.decode_jpeg (decoder='torchvision')"
        return None

    def _choose_decoder(self, sample: bytes | None) -> tuple[Literal["pil", "torchvision"], str]:
        fixed = self._fixed_decoder()
        if fixed is not None and fixed[0] == "pil":
            return fixed
        try:
            import torchvision.io  # noqa: F401
        except ImportError:
            if fixed is not None:
                raise PlanError.single(
                    f"{_OPTION}.decoder",
                    "'torchvision' needs torchvision installed; pip install torchvision or "
                    "pass decoder='auto'",
                ) from None
            return "pil", "PIL (torchvision is not installed)"
        if fixed is not None:
            return fixed
        if sample is None:
            return "pil", "PIL (no readable JPEG among the first files to measure on)"
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as in a worker
        try:
            pil_s = _best_time(lambda: _decode_bytes(sample, "RGB", None, "pil"))
            tv_s = _best_time(lambda: _decode_bytes(sample, "RGB", None, "torchvision"))
        except Exception:  # noqa: BLE001 - torchvision cannot read what PIL reads: use PIL
            return "pil", "PIL (torchvision failed on the first JPEG)"
        finally:
            torch.set_num_threads(threads)
        chosen: Literal["pil", "torchvision"] = "torchvision" if tv_s < pil_s else "pil"
        name = "torchvision.io.decode_jpeg" if chosen == "torchvision" else "PIL"
        return chosen, (
            f"{name}, measured faster (PIL {pil_s * 1e3:.2f} ms, torchvision "
            f"{tv_s * 1e3:.2f} ms on the first JPEG)"
        )

    def _first_jpeg(self) -> bytes | None:
        """The bytes of the first JPEG PIL decodes, among the first 16 files."""
        for path in self.paths[:16]:
            try:
                data = _read(path)
            except OSError:
                continue
            if data.startswith(_JPEG_MAGIC):
                try:
                    _decode_bytes(data, "RGB", None, "pil")
                except Exception:  # noqa: BLE001 - a bad file is no sample to measure on
                    continue
                return data
        return None

    def loaderkit_explain(self) -> str:
        """One line for ``loader.explain()``: the files, what was left out, the decode path."""
        left = ""
        if self.skipped:
            counts: dict[str, int] = {}
            for _path, reason in self.skipped:
                counts[reason.split(" (")[0]] = counts.get(reason.split(" (")[0], 0) + 1
            left = "; left out: " + ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))
        return f"{len(self):,} images{left}; decode {self.decode_note}"

    def __repr__(self) -> str:
        classes = f", {len(self.classes)} classes" if self.classes else ""
        left = f", {len(self.skipped)} files left out" if self.skipped else ""
        return f"ImageDataset({self.factory}: {len(self):,} images{classes}{left}, {self.root!r})"


def _best_time(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


# -- the factories ------------------------------------------------------------------------------


def _check_choices(mode: object, decode_scale: object, decoder: object) -> None:
    for key, value, choices in (
        ("mode", mode, IMAGE_MODES),
        ("decode_scale", decode_scale, DECODE_SCALES),
        ("decoder", decoder, DECODERS),
    ):
        if value not in choices:
            raise PlanError.single(
                f"{_OPTION}.{key}",
                f"must be one of {', '.join(repr(c) for c in choices)} (got {value!r})",
            )


def _check_flags(**flags: object) -> None:
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise PlanTypeError.single(f"{_OPTION}.{key}", f"must be True or False (got {value!r})")


def _pillow() -> None:
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise PlanError.single(
            "dataset.source",
            "image sources decode with Pillow, which is not installed; pip install "
            "'loaderkit[vision]' (or pillow)",
        ) from None


def image_folder(
    root: str,
    mode: ImageMode = "RGB",
    allow_empty: bool = False,
    follow_external_links: bool = False,
    hash_contents: bool = False,
    decode_scale: DecodeScale = "auto",
    decoder: Decoder = "auto",
) -> ImageDataset:
    """Images in class folders (torchvision's ``ImageFolder`` layout): ``(image, class)``."""
    if not isinstance(root, str | os.PathLike):
        raise PlanTypeError.single(f"{_OPTION}.root", f"must be a folder path (got {root!r})")
    _check_choices(mode, decode_scale, decoder)
    _check_flags(
        allow_empty=allow_empty,
        follow_external_links=follow_external_links,
        hash_contents=hash_contents,
    )
    _pillow()
    root = os.fspath(root)
    classes, listing = _folder_listing(root, allow_empty, follow_external_links)
    options = {"mode": mode, "decode_scale": decode_scale, "decoder": decoder}
    return _dataset("image_folder", root, listing, listing.labels, classes, hash_contents, options)


def image_files(
    files: str | list[str],
    labels: list[int] | list[str] | None = None,
    mode: ImageMode = "RGB",
    hash_contents: bool = False,
    decode_scale: DecodeScale = "auto",
    decoder: Decoder = "auto",
) -> ImageDataset:
    """Image files or glob patterns (matches sorted): ``(image, label)``, or bare images.

    ``labels`` has one entry per file (after patterns are expanded): ints as they are, or
    class names, which get indices in sorted order (``classes``).
    """
    patterns = [files] if isinstance(files, str) else files
    if (
        not isinstance(patterns, list | tuple)
        or not patterns
        or not all(isinstance(p, str) for p in patterns)
    ):
        raise PlanTypeError.single(
            f"{_OPTION}.files",
            f"must be a path, a pattern or a non-empty list of them (got {files!r})",
        )
    _check_choices(mode, decode_scale, decoder)
    _check_flags(hash_contents=hash_contents)
    _pillow()
    expanded = _expand(patterns)
    paths = [path for path, _ in expanded]
    root = (
        os.path.dirname(os.path.commonpath(paths)) if len(paths) == 1 else os.path.commonpath(paths)
    )
    if not os.path.isdir(root):
        root = os.path.dirname(root)
    listing = _Listing()
    for path, matched in expanded:
        shown = os.path.relpath(path, root)
        if not listing.add(path, shown, 0, None, True) and not matched:
            reason = listing.skipped[-1][1]
            raise PlanError.single(
                f"{_OPTION}.files",
                f"{path!r}: {reason}; name image files (regular files ending in "
                f"{', '.join(IMG_EXTENSIONS)})",
            )
    if not listing.paths:
        raise PlanError.single(
            f"{_OPTION}.files",
            f"no image among the {len(paths)} file(s) matched ({listing.skipped[0][0]!r}: "
            f"{listing.skipped[0][1]}); images end in {', '.join(IMG_EXTENSIONS)}",
        )
    classes: list[str] = []
    numbers: list[int] | None = None
    if labels is not None:
        numbers, classes = _labels(labels, len(paths), listing, paths)
    options = {"mode": mode, "decode_scale": decode_scale, "decoder": decoder}
    return _dataset("image_files", root, listing, numbers, classes, hash_contents, options)


def _dataset(
    factory: str,
    root: str,
    listing: _Listing,
    labels: list[int] | None,
    classes: list[str],
    hash_contents: bool,
    options: dict[str, Any],
) -> ImageDataset:
    """The :class:`ImageDataset` of a listing (the two factories' common end)."""
    return ImageDataset(
        factory=factory,
        root=root,
        paths=listing.paths,
        sizes=listing.sizes,
        mtimes=listing.mtimes,
        labels=labels,
        classes=classes,
        skipped=listing.skipped,
        hash_contents=hash_contents,
        **options,
    )


def _labels(
    labels: object, count: int, listing: _Listing, paths: list[str]
) -> tuple[list[int], list[str]]:
    where = f"{_OPTION}.labels"
    if not isinstance(labels, list | tuple) or len(labels) != count:
        size = len(labels) if isinstance(labels, list | tuple) else type(labels).__name__
        raise PlanError.single(where, f"needs one label per file: {count} files, {size} labels")
    kept = set(listing.paths)
    chosen = [label for path, label in zip(paths, labels, strict=True) if path in kept]
    if all(isinstance(x, int) and not isinstance(x, bool) for x in chosen):
        return [int(x) for x in chosen], []
    if all(isinstance(x, str) for x in chosen):
        classes = sorted(set(chosen))
        index = {name: i for i, name in enumerate(classes)}
        return [index[x] for x in chosen], classes
    raise PlanTypeError.single(where, f"must be all ints or all class names (got {labels!r})")
