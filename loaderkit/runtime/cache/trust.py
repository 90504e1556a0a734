"""Who may change a disk cache's folder, and the key that signs the entries of a shared one.

A folder another user could change (it, a folder in it, or a folder on the way to it that
lets others rename what it holds) is refused unless the caller opts in with ``shared=True``
(:func:`folder_problem`); then every entry is authenticated with a key that only the caller
can read, kept outside the folder (:func:`signing_key`). The folder itself is opened by
:mod:`loaderkit.runtime.cache.disk`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import stat
import tempfile
from collections import deque
from pathlib import Path

__all__ = [
    "CLOEXEC",
    "KEY_BYTES",
    "NOFOLLOW",
    "KeyFileError",
    "folder_problem",
    "key_path",
    "others_can_write",
    "signing_key",
]

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``os.O_NOFOLLOW`` where the system has it: a symbolic link is an error, never followed."""
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
"""``os.O_CLOEXEC`` where the system has it: no descriptor leaks into a child process."""

KEY_BYTES = 32
"""The length of the key that authenticates the entries of a shared folder."""

_MAX_LINKS = 40


class KeyFileError(Exception):
    """A key file that cannot be trusted or read: the reason, for a loaderkit error."""


# -- who may change the folder --------------------------------------------------------------


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}"


@functools.cache
def _own_group(gid: int) -> bool:
    """A group that holds this user only (a user private group): its write bit is ours."""
    import grp
    import pwd

    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def others_can_write(st: os.stat_result) -> bool:
    """Whether users other than the owner can write this file or folder."""
    mode = st.st_mode
    return bool(mode & stat.S_IWOTH) or (bool(mode & stat.S_IWGRP) and not _own_group(st.st_gid))


def _owner_problem(where: str, st: os.stat_result, *, root_ok: bool) -> str | None:
    owner = st.st_uid
    if owner == os.geteuid() or (root_ok and owner == 0):
        return None
    return f"{where!r} is owned by another user (uid {owner})"


def _chain_problem(path: str) -> str | None:
    """Why someone else could change ``path`` or replace it by renaming; ``None`` if no one can.

    Walks the path from ``/``, resolving links as the system does: every folder on the way
    must be owned by this user or root and let no one else write it, unless its sticky bit
    keeps others from renaming what they do not own (``/tmp``); a link on the way must be
    owned by this user or root. ``path`` itself must be owned by this user and let no one
    else write it.
    """
    todo = deque(Path(os.path.abspath(path)).parts[1:])
    current = os.path.sep
    links = 0
    st = os.lstat(current)
    while True:
        last = not todo
        if last:
            problem = _owner_problem(current, st, root_ok=False)
            if problem is None and others_can_write(st):
                problem = f"other users can write {current!r} ({_mode(st)})"
            return problem
        problem = _owner_problem(current, st, root_ok=True)
        if problem is None and others_can_write(st) and not st.st_mode & stat.S_ISVTX:
            problem = (
                f"other users can write {current!r} ({_mode(st)}, no sticky bit), so they "
                f"can rename what it holds and put a folder of theirs in its place"
            )
        if problem is not None:
            return problem
        name = todo.popleft()
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            st = os.lstat(current)
            continue
        candidate = os.path.join(current, name)
        st = os.lstat(candidate)
        if stat.S_ISLNK(st.st_mode):
            problem = _owner_problem(candidate, st, root_ok=True)
            if problem is not None:
                return f"{problem}, and is a link on the way"
            links += 1
            if links > _MAX_LINKS:
                return f"{path!r} goes through more than {_MAX_LINKS} links"
            target = os.readlink(candidate)
            if os.path.isabs(target):
                current = os.path.sep
            todo.extendleft(reversed(Path(target).parts[1 if os.path.isabs(target) else 0 :]))
            st = os.lstat(current)
            continue
        if not stat.S_ISDIR(st.st_mode):
            return f"{candidate!r} is not a folder"
        current = candidate


def _inside_problem(path: str, private: bool) -> str | None:
    """A link planted in the folder, or (``private``) a part of it another user can change.

    Looks at the folder's own entries and at the folders in its folders (``diskcache`` keeps
    value files two levels down); value files themselves are checked as they are read.
    """
    with os.scandir(path) as top:
        entries = list(top)
    for entry in entries:
        st = entry.stat(follow_symlinks=False)
        where = os.path.join(path, entry.name)
        if stat.S_ISLNK(st.st_mode):
            return f"{where!r} is a symbolic link (a cache folder holds none); delete it"
        if private:
            problem = _owner_problem(where, st, root_ok=False)
            if problem is None and others_can_write(st):
                problem = f"other users can write {where!r} ({_mode(st)})"
            if problem is not None:
                return problem
        if stat.S_ISDIR(st.st_mode) and len(entry.name) == 2:
            problem = _inside_problem_below(where, private)
            if problem is not None:
                return problem
    return None


def _inside_problem_below(path: str, private: bool) -> str | None:
    with os.scandir(path) as below:
        for entry in below:
            st = entry.stat(follow_symlinks=False)
            where = os.path.join(path, entry.name)
            if stat.S_ISLNK(st.st_mode):
                return f"{where!r} is a symbolic link (a cache folder holds none); delete it"
            if private and stat.S_ISDIR(st.st_mode):
                problem = _owner_problem(where, st, root_ok=False)
                if problem is None and others_can_write(st):
                    problem = f"other users can write {where!r} ({_mode(st)})"
                if problem is not None:
                    return problem
    return None


def folder_problem(path: str, shared: bool) -> tuple[str, bool] | None:
    """Why the cache folder ``path`` cannot be trusted: ``(reason, fixed by shared=True)``.

    ``None`` when it can. Without ``shared``, the folder, the folders in it, its SQLite files
    and every folder on the way to it must be out of other users' reach
    (:func:`_chain_problem`). A symbolic link in the folder is refused either way.
    """
    if not shared:
        problem = _chain_problem(path)
        if problem is not None:
            return problem, True
    problem = _inside_problem(path, private=not shared)
    if problem is None:
        return None
    return problem, "symbolic link" not in problem


# -- the key of a shared folder -------------------------------------------------------------


def key_path() -> Path:
    """Where the key that signs the entries of shared cache folders is kept.

    ``$XDG_CONFIG_HOME/loaderkit/cache.key``, or ``~/.config/loaderkit/cache.key``.
    """
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "loaderkit" / "cache.key"


def signing_key(folder: str) -> bytes:
    """The caller's key for shared cache folders, created on first use (:func:`key_path`).

    Raises :class:`KeyFileError` when the key file or its folder can be read or changed by
    another user, is a link, is not :data:`KEY_BYTES` bytes, or lies inside ``folder``.
    """
    path = key_path()
    home = path.parent
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    problem = _chain_problem(str(home))
    if problem is not None:
        raise KeyFileError(f"the folder of the key file {str(path)!r} is not private: {problem}")
    real, cache = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([real, cache]) == cache:
        raise KeyFileError(f"the key file {str(path)!r} lies inside the cache folder")
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | CLOEXEC)
    except FileNotFoundError:
        _create_key(path)
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | CLOEXEC)
    except OSError as exc:  # ELOOP: a link
        raise KeyFileError(f"the key file {str(path)!r} cannot be opened safely ({exc})") from exc
    with os.fdopen(fd, "rb") as reader:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KeyFileError(f"the key file {str(path)!r} is not a regular file")
        problem = _owner_problem(str(path), st, root_ok=False)
        if problem is not None:
            raise KeyFileError(problem)
        if st.st_mode & 0o077:
            raise KeyFileError(
                f"other users can read or write the key file {str(path)!r} ({_mode(st)})"
            )
        key = reader.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"the key file {str(path)!r} does not hold {KEY_BYTES} bytes")
    return key


def _create_key(path: Path) -> None:
    """Write a new random key at ``path``, whole or not at all (another process may race)."""
    fd, draft = tempfile.mkstemp(dir=path.parent, prefix=".cache.key.")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs
            os.link(draft, path)
    finally:
        os.unlink(draft)
