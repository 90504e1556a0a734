"""``load()`` of the built-in file factories under their own names: from_files, image_folder, ...

Each makes relative paths absolute against the working directory (``load`` does) and returns a
dataset that remembers its source, so a plan file can make it again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from loaderkit.datasets.files import path_list
from loaderkit.datasets.images import ImageDataset
from loaderkit.datasets.provenance import load

__all__ = ["from_files", "image_files", "image_folder"]


def from_files(
    path_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    format: str | None = None,
    *,
    split: str = "train",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """Local files as an HF dataset that remembers them: ``load("hf_files", ...)``.

    ``format`` defaults to the one the suffix says (see :data:`FORMATS`). Relative paths are
    made absolute against the working directory; a plan file stores them relative to its own
    folder when they lie inside it. ``cache_dir`` is the folder HF ``datasets`` writes its
    Arrow copy of the files to (``None``: HF's cache, ``HF_DATASETS_CACHE``).
    """
    paths = path_list("dataset.source.options.data_files", path_or_paths)
    files: str | list[str] = paths[0] if len(paths) == 1 else paths
    options: dict[str, Any] = {"data_files": files, "split": split}
    if format is not None:
        options["format"] = format
    if cache_dir is not None:
        options["cache_dir"] = os.fspath(cache_dir)
    return load("hf_files", **options)


# -- images (the factories are in loaderkit.datasets.images) -----------------------------------


def image_folder(root: str | os.PathLike[str], **options: Any) -> ImageDataset:
    """Images in class folders (torchvision's ``ImageFolder`` layout): ``load("image_folder")``.

    Samples are ``(image, class_index)``, the image a ``uint8`` ``(C, H, W)`` tensor decoded
    in the worker. ``options`` are :func:`loaderkit.datasets.images.image_folder`'s:
    ``mode`` (``"RGB"``, ``"L"``, ``"RGBA"``), ``allow_empty``, ``follow_external_links``,
    ``hash_contents``, ``decode_scale`` (``"auto"``, ``"full"``) and ``decoder`` (``"auto"``,
    ``"pil"``, ``"torchvision"``). A plan file stores ``root`` relative to its own folder.
    """
    dataset: ImageDataset = load("image_folder", root=os.fspath(root), **options)
    return dataset


def image_files(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: Any
) -> ImageDataset:
    """Image files or glob patterns: ``load("image_files", ...)``.

    Samples are ``(image, label)`` with ``labels=[...]`` (one per file, ints or class names),
    else bare images. ``options`` are :func:`loaderkit.datasets.images.image_files`'s.
    """
    paths = path_list("dataset.source.options.files", files)
    dataset: ImageDataset = load(
        "image_files", files=paths[0] if len(paths) == 1 else paths, **options
    )
    return dataset
