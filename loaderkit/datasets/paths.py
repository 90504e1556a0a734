"""File paths in dataset sources: made absolute, confined to a plan file's folder, shown relative.

Nothing here reads a file: paths are compared as written, normalised (except
:func:`relative_path`, which also tries the real location of the path's folder).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from loaderkit.errors import PlanError, PlanTypeError

__all__ = ["absolute_path", "confined", "map_paths", "path_mapper", "relative_path", "shown_path"]


def absolute_path(path: str, base_dir: Path | None) -> str:
    """``path`` made absolute against ``base_dir`` (``None``: the working directory), normalised.

    ``~`` is expanded; nothing on disk is read.
    """
    expanded = Path(os.path.expanduser(path))
    if not expanded.is_absolute():
        expanded = (base_dir if base_dir is not None else Path.cwd()) / expanded
    return os.path.normpath(expanded)


def path_mapper(where: str, base_dir: Path | None, confine: Path | None) -> Callable[[str], str]:
    """A path option's value made absolute against ``base_dir``, then :func:`confined`."""

    def mapped(path: str) -> str:
        return confined(where, absolute_path(path, base_dir), confine)

    return mapped


def confined(where: str, path: str, folder: Path | None) -> str:
    """``path`` (absolute, normalised) if it lies inside ``folder``; else a ``PlanError``.

    ``folder=None`` accepts any path. The test is on the path as written, normalised (no
    file is opened, no link followed): a plan file names data and folders below its own.
    """
    if folder is None:
        return path
    base = os.path.normpath(folder)
    if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
        return path
    raise PlanError.single(
        where,
        f"{path!r} lies outside the plan file's folder {base!r}; a plan file may only name "
        f"paths inside its folder: move the data (or the plan file), or pass "
        f"allow_external_paths=True (`--allow-external-paths` on the command line) if you "
        f"trust this file",
    )


def relative_path(path: str, folder: Path) -> str:
    """``path`` relative to ``folder`` (POSIX form) when it lies inside it, else unchanged."""
    real = Path(os.path.realpath(os.path.dirname(path))) / os.path.basename(path)
    for candidate, base in ((Path(path), folder), (real, folder.resolve())):
        try:
            return candidate.relative_to(base).as_posix()
        except ValueError:
            continue
    return path


def shown_path(path: str) -> str:
    """``path`` as ``describe()`` shows it: relative when it lies under the working directory."""
    return relative_path(path, Path.cwd())


def map_paths(value: object, fn: Callable[[str], str], where: str = "") -> object:
    """``fn`` applied to a path option's value (a path or a tuple of paths); else a type error."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return tuple(fn(v) for v in value)
    raise PlanTypeError.single(
        where or "dataset.source.options",
        f"must be a path or a list of paths (got {type(value).__name__} {value!r})",
    )
