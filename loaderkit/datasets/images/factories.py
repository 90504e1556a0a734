"""The ``image_folder`` and ``image_files`` factories: check the options, list, make the dataset."""

from __future__ import annotations

import os
from typing import Any

from loaderkit.datasets.images.dataset import ImageDataset
from loaderkit.datasets.images.listing import (
    IMG_EXTENSIONS,
    Listing,
    expand_patterns,
    folder_listing,
)
from loaderkit.datasets.images.options import (
    DECODE_SCALES,
    DECODERS,
    IMAGE_MODES,
    OPTION,
    Decoder,
    DecodeScale,
    ImageMode,
)
from loaderkit.errors import PlanError, PlanTypeError

__all__ = ["image_files", "image_folder"]


def _check_choices(mode: object, decode_scale: object, decoder: object) -> None:
    for key, value, choices in (
        ("mode", mode, IMAGE_MODES),
        ("decode_scale", decode_scale, DECODE_SCALES),
        ("decoder", decoder, DECODERS),
    ):
        if value not in choices:
            raise PlanError.single(
                f"{OPTION}.{key}",
                f"must be one of {', '.join(repr(c) for c in choices)} (got {value!r})",
            )


def _check_flags(**flags: object) -> None:
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise PlanTypeError.single(f"{OPTION}.{key}", f"must be True or False (got {value!r})")


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
        raise PlanTypeError.single(f"{OPTION}.root", f"must be a folder path (got {root!r})")
    _check_choices(mode, decode_scale, decoder)
    _check_flags(
        allow_empty=allow_empty,
        follow_external_links=follow_external_links,
        hash_contents=hash_contents,
    )
    _pillow()
    root = os.fspath(root)
    classes, listing = folder_listing(root, allow_empty, follow_external_links)
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
            f"{OPTION}.files",
            f"must be a path, a pattern or a non-empty list of them (got {files!r})",
        )
    _check_choices(mode, decode_scale, decoder)
    _check_flags(hash_contents=hash_contents)
    _pillow()
    expanded = expand_patterns(patterns)
    paths = [path for path, _ in expanded]
    root = (
        os.path.dirname(os.path.commonpath(paths)) if len(paths) == 1 else os.path.commonpath(paths)
    )
    if not os.path.isdir(root):
        root = os.path.dirname(root)
    listing = Listing()
    for path, matched in expanded:
        shown = os.path.relpath(path, root)
        if not listing.add(path, shown, 0, None, True) and not matched:
            reason = listing.skipped[-1][1]
            raise PlanError.single(
                f"{OPTION}.files",
                f"{path!r}: {reason}; name image files (regular files ending in "
                f"{', '.join(IMG_EXTENSIONS)})",
            )
    if not listing.paths:
        raise PlanError.single(
            f"{OPTION}.files",
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
    listing: Listing,
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
    labels: object, count: int, listing: Listing, paths: list[str]
) -> tuple[list[int], list[str]]:
    where = f"{OPTION}.labels"
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
