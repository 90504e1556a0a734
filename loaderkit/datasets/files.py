"""Local data files as a dataset: the built-in ``hf_files`` factory of :mod:`loaderkit.datasets`.

``hf_files(data_files, format=None, split="train")`` reads local json/jsonl/csv/parquet/text
files (glob patterns allowed) with HF ``datasets.load_dataset``; the format is guessed from the
suffix (:data:`FORMATS`, compression suffixes looked through). The dataset's identity is
:func:`files_digest`, a sha256 of the files' bytes with the format and split, so moving or
copying the files keeps it. :func:`loaderkit.datasets.from_files` is the usual way in;
``loaderkit.datasets`` registers the factory under the name ``hf_files``.

HF ``datasets`` is imported inside :func:`hf_files`, when a plan calls it.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loaderkit.errors import PlanError, PlanTypeError

__all__ = ["FORMATS", "files_digest", "format_of", "hf_files", "path_list"]

FORMATS = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".txt": "text",
}
"""File suffix -> the HF packaged builder ``from_files`` and ``hf_files`` choose for it."""

_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
_GLOB = frozenset("*?[")


def format_of(path: str) -> str | None:
    """The :data:`FORMATS` builder the suffix of ``path`` names (``.gz`` etc. looked through)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes.pop()
    return FORMATS.get(suffixes[-1]) if suffixes else None


def path_list(path: str, value: object) -> list[str]:
    """``value`` (a path or a non-empty list of them) as a list, or a PlanTypeError at ``path``."""
    if isinstance(value, str | os.PathLike):
        return [os.fspath(value)]
    if (
        isinstance(value, Sequence)
        and value
        and all(isinstance(v, str | os.PathLike) for v in value)
    ):
        return [os.fspath(v) for v in value]
    raise PlanTypeError.single(
        path, f"must be a path or a non-empty list of paths (got {type(value).__name__} {value!r})"
    )


def _expand(paths: list[str]) -> list[str]:
    files: list[str] = []
    for pattern in paths:
        if _GLOB & set(pattern):
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise PlanError.single(
                    "dataset.source.options.data_files",
                    f"{pattern!r} matches no file; check the pattern and the plan's folder",
                )
            files.extend(matched)
        elif not os.path.isfile(pattern):
            raise PlanError.single(
                "dataset.source.options.data_files",
                f"{pattern!r} is not a file; check the path (relative paths in a plan file "
                f"resolve against the file's folder)",
            )
        else:
            files.append(pattern)
    return files


def _guess_format(files: list[str]) -> str:
    formats = {f: format_of(f) for f in files}
    unknown = [f for f, fmt in formats.items() if fmt is None]
    if unknown:
        raise PlanError.single(
            "dataset.source.options.format",
            f"cannot tell the format of {Path(unknown[0]).name!r} from its suffix; pass "
            f"format= one of {', '.join(sorted(set(FORMATS.values())))}",
        )
    found = sorted({fmt for fmt in formats.values() if fmt is not None})
    if len(found) > 1:
        raise PlanError.single(
            "dataset.source.options.data_files",
            f"mixes formats {', '.join(found)}; load each format with its own from_files() and "
            f"mix them with with_mixture",
        )
    return found[0]


def files_digest(files: Sequence[str], format: str, split: str) -> str:
    """sha256 (hex) of the files' bytes in order, with the format and split."""
    digest = hashlib.sha256(f"hf_files\0{format}\0{split}".encode())
    for name in files:
        file_hash = hashlib.sha256()
        with open(name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                file_hash.update(chunk)
        digest.update(file_hash.digest())
    return digest.hexdigest()


def hf_files(data_files: str | list[str], format: str | None = None, split: str = "train") -> Any:
    """Local json/jsonl/csv/parquet/text files read with HF ``datasets.load_dataset``."""
    paths = path_list("dataset.source.options.data_files", data_files)
    files = _expand(paths)
    builders = sorted(set(FORMATS.values()))
    if format is None:
        format = _guess_format(files)
    elif format not in builders:
        raise PlanError.single(
            "dataset.source.options.format",
            f"unknown format {format!r}; pass one of {', '.join(builders)}",
        )
    if not isinstance(split, str) or not split:
        raise PlanTypeError.single(
            "dataset.source.options.split", f"must be a split name such as 'train' (got {split!r})"
        )
    import datasets

    loaded = datasets.load_dataset(format, data_files={split: files}, split=split)
    # HF's own fingerprint depends on where the files are; the content's does not
    return datasets.Dataset(
        loaded.data,
        info=loaded.info,
        split=loaded.split,
        fingerprint=files_digest(files, format, split)[:32],
    )
