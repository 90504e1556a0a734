"""Local data files as a dataset: the built-in ``hf_files`` factory of :mod:`loaderkit.datasets`.

``hf_files(data_files, format=None, split="train")`` reads local json/jsonl/csv/parquet/text
files (glob patterns allowed) with HF ``datasets.load_dataset``; the format is guessed from the
suffix (:data:`FORMATS`, compression suffixes looked through). Every data file must be a
regular file (:func:`regular_file`): a device, FIFO, socket, directory, or an entry of
``/proc`` or ``/sys`` (or a link to one) is refused before anything reads it, so that naming
one cannot make loading block or read without end. The dataset's identity is
:func:`files_digest`, a sha256 of the files' bytes with the format and split, so moving or
copying the files keeps it. :func:`loaderkit.datasets.from_files` is the usual way in;
``loaderkit.datasets`` registers the factory under the name ``hf_files``.

HF ``datasets`` is imported inside :func:`hf_files`, when a plan calls it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from loaderkit.errors import PlanError, PlanTypeError

__all__ = [
    "FORMATS",
    "PSEUDO_FILESYSTEMS",
    "files_digest",
    "format_of",
    "hf_files",
    "path_list",
    "regular_file",
]

FORMATS = {
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".txt": "text",
}
"""File suffix -> the HF packaged builder ``from_files`` and ``hf_files`` choose for it."""

PSEUDO_FILESYSTEMS = ("/proc", "/sys")
"""Folders whose entries claim to be regular files but are made by the kernel as they are read
(``/proc/self/pagemap`` reads as hundreds of GB): refused as data files, links to them too."""

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


_WHERE = "dataset.source.options.data_files"


def _kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, for messages."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _refused(path: str, resolved: str, what: str) -> PlanError:
    via = "" if resolved == os.path.abspath(path) else f" (it links to {resolved!r})"
    return PlanError.single(
        _WHERE,
        f"{path!r}{via} is {what}; a data file must be a regular file (not a directory, "
        f"device, FIFO, socket or a {' or '.join(PSEUDO_FILESYSTEMS)} entry, nor a link to "
        f"one): name the data file itself",
    )


def regular_file(path: str) -> os.stat_result:
    """The ``os.stat`` of ``path`` if it is a regular data file, else a :class:`PlanError`.

    Links are followed first: the file they end at is judged. Refused: a missing file,
    anything but a regular file (``S_ISREG``), and anything under :data:`PSEUDO_FILESYSTEMS`,
    whose entries claim to be regular. ``stat`` opens nothing, so a FIFO cannot block here.
    """
    resolved = os.path.realpath(path)
    for root in PSEUDO_FILESYSTEMS:
        if resolved == root or resolved.startswith(root + os.sep):
            raise _refused(path, resolved, f"an entry of {root}")
    try:
        found = os.stat(resolved)
    except OSError as exc:
        raise PlanError.single(
            _WHERE,
            f"{path!r} is not a file ({exc.strerror or exc}); check the path (relative paths "
            f"in a plan file resolve against the file's folder)",
        ) from None
    if not stat.S_ISREG(found.st_mode):
        raise _refused(path, resolved, _kind(found.st_mode))
    return found


def open_regular(path: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular data file (:func:`regular_file`).

    Opened without blocking (``O_NONBLOCK``: a FIFO put in its place after the check does
    not block the open), then checked again on the open file (``fstat``): it must be the
    regular file that was checked.
    """
    checked = regular_file(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        opened = os.fstat(fd)
        same = (opened.st_dev, opened.st_ino) == (checked.st_dev, checked.st_ino)
        if not stat.S_ISREG(opened.st_mode) or not same:
            raise _refused(path, os.path.realpath(path), "not the regular file it was a moment ago")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _expand(paths: list[str]) -> list[str]:
    files: list[str] = []
    for pattern in paths:
        if _GLOB & set(pattern):
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise PlanError.single(
                    _WHERE, f"{pattern!r} matches no file; check the pattern and the plan's folder"
                )
            files.extend(matched)
        else:
            files.append(pattern)
    for name in files:
        regular_file(name)
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
        with open_regular(name) as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                file_hash.update(chunk)
        digest.update(file_hash.digest())
    return digest.hexdigest()


def hf_files(
    data_files: str | list[str],
    format: str | None = None,
    split: str = "train",
    cache_dir: str | None = None,
) -> Any:
    """Local json/jsonl/csv/parquet/text files read with HF ``datasets.load_dataset``.

    HF converts the files to an Arrow file it keeps (and memory-maps) in its cache: under
    ``cache_dir`` when given, else HF's default (``HF_DATASETS_CACHE``, by default
    ``~/.cache/huggingface/datasets``); see docs/security.md, "Workers and data files".
    """
    paths = path_list(_WHERE, data_files)
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
    if cache_dir is not None and not isinstance(cache_dir, str | os.PathLike):
        raise PlanTypeError.single(
            "dataset.source.options.cache_dir",
            f"must be a folder path or None (got {type(cache_dir).__name__})",
        )
    digest = files_digest(files, format, split)  # reads each file once, checked (open_regular)
    import datasets

    loaded = datasets.load_dataset(
        format,
        data_files={split: files},
        split=split,
        cache_dir=None if cache_dir is None else os.fspath(cache_dir),
    )
    # HF's own fingerprint depends on where the files are; the content's does not
    return datasets.Dataset(
        loaded.data, info=loaded.info, split=loaded.split, fingerprint=digest[:32]
    )
