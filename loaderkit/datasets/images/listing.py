"""Listing image files: regular files only, links kept inside the root, no system trees.

:func:`folder_listing` is torchvision's ``find_classes`` and ``make_dataset`` for
``image_folder``; :func:`expand_patterns` the files and glob matches of ``image_files``; both
fill a :class:`Listing` (paths, sizes, times, labels, and what was left out with why).
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Sequence

from loaderkit.datasets.files import PSEUDO_FILESYSTEMS
from loaderkit.datasets.images.options import OPTION
from loaderkit.errors import PlanError

__all__ = ["IMG_EXTENSIONS", "Listing", "expand_patterns", "folder_listing"]

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
"""The file name endings read as images (torchvision's ``IMG_EXTENSIONS``), compared lower-cased."""

_SYSTEM_TREES = (*PSEUDO_FILESYSTEMS, "/dev")
"""Folders whose files are not data (kernel views, devices): never read, even through links."""


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


class Listing:
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
    top: str, root: str, root_real: str, follow_external: bool, listing: Listing
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


def folder_listing(
    root: str, allow_empty: bool, follow_external: bool
) -> tuple[list[str], Listing]:
    """Run torchvision's ``find_classes`` and ``make_dataset``, under the listing rules above."""
    where = f"{OPTION}.root"
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
    listing = Listing()
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


def expand_patterns(patterns: Sequence[str]) -> list[tuple[str, bool]]:
    """Each file named or matched, and whether a glob pattern matched it (sorted matches)."""
    files: list[tuple[str, bool]] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matched = sorted(glob.glob(pattern, recursive=True))
            if not matched:
                raise PlanError.single(
                    f"{OPTION}.files",
                    f"{pattern!r} matches no file; check the pattern and the plan's folder",
                )
            files.extend((m, True) for m in matched)
        else:
            files.append((pattern, False))
    return files
