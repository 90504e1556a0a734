"""The ``diskcache`` folder of a disk cache, opened as untrusted input.

``diskcache`` trusts its folder: it unpickles values (and keys) whose row says so, opens,
writes and deletes files at whatever path a row names (following symbolic links), applies the
settings table of the SQLite file as SQLite pragmas, and lets SQLite memory-map the index
(``mmap_size``, and the ``-shm`` file of WAL mode), which kills the process with ``SIGBUS``
when another process truncates the file. A cache folder may come from anywhere (a copy,
another user, a damaged disk), so loaderkit opens it through :class:`SafeCache` and
:class:`DataDisk`:

- every file inside the folder is reached from a descriptor of the folder, one name at a
  time, with ``O_NOFOLLOW``: no symbolic link inside the folder is followed, for reading or
  writing, so no entry is read from or written outside it; only value files named the way
  ``diskcache`` names them are read or removed, and only regular files are read;
- nothing is unpickled (a pickled row reads as an empty value: a corrupt entry for
  :mod:`loaderkit.runtime.cache.format`);
- the SQLite file is opened with loaderkit's own pragmas only (never the file's settings
  table): rollback journal (``journal_mode=DELETE``, no ``-shm`` shared memory) and no memory
  mapping (``mmap_size=0``), so a truncated or damaged index is an SQLite error, never a
  signal; the file itself must be a regular file, not a link.

Who may write the folder is checked before it is used (:func:`~loaderkit.runtime.cache.trust.
folder_problem`): a folder that
another user can change (it, a folder in it, or a folder on the way to it that lets others
rename what it holds) is refused unless the caller opts in with ``shared=True``; then every
entry is authenticated with a key that only the caller can read, kept outside the folder
(:func:`~loaderkit.runtime.cache.trust.signing_key`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import stat
import tempfile
from collections.abc import Iterable, Sequence
from typing import Any

import diskcache
from diskcache.core import (
    DBNAME,
    DEFAULT_SETTINGS,
    EVICTION_POLICY,
    METADATA,
    MODE_BINARY,
    MODE_RAW,
)

from loaderkit.runtime.cache.trust import CLOEXEC, NOFOLLOW, others_can_write

__all__ = [
    "SUPPORTED",
    "DataDisk",
    "FolderError",
    "SafeCache",
    "check_folder",
    "open_folder",
]

_VALUE_FILE = re.compile(r"([0-9a-f]{2})[/\\]([0-9a-f]{2})[/\\]([0-9a-f]{28}\.val)")
"""How ``diskcache.Disk.filename`` names a value file, relative to the folder."""

_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_OPEN_DIR = os.O_RDONLY | _DIRECTORY | NOFOLLOW | CLOEXEC
_INDEX_FILES = (DBNAME, f"{DBNAME}-wal", f"{DBNAME}-shm", f"{DBNAME}-journal")
"""The SQLite file of the folder and the files SQLite keeps beside it."""

PRAGMAS = (
    "PRAGMA mmap_size = 0",  # read with read(): a truncated file is an error, not SIGBUS
    "PRAGMA journal_mode = DELETE",  # no WAL, so no -shm file mapped into memory
    "PRAGMA synchronous = 1",
    "PRAGMA cache_size = 8192",
)
"""What every connection to a cache's SQLite file runs first (never the file's settings)."""

_BUSY_SECONDS = 60.0
"""How long a connection waits for another process's lock on the SQLite file (at least)."""

SUPPORTED = hasattr(os, "O_NOFOLLOW") and hasattr(os, "geteuid") and os.open in os.supports_dir_fd
"""Whether this system can open files below a folder descriptor without following links
(POSIX): the disk cache needs it."""
_CHUNK = 500
"""Keys per ``SELECT`` of :meth:`SafeCache.get_many` (SQLite bounds a statement's values)."""


class FolderError(Exception):
    """A cache folder that cannot be used as it is: the reason, for a loaderkit error."""


# -- the files of the folder ----------------------------------------------------------------


class DataDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache has no type hints
    """A ``diskcache.Disk`` storing ``bytes``/``str``/``int`` only, reached through descriptors.

    It never unpickles, and reaches the files of the folder only through descriptors of the
    folder, never through a link.
    ``private`` (set by :func:`open_folder`): value files must also be owned by this user and
    not writable by others to be read. ``written`` lists the value files written since it
    was last emptied, so that a failed transaction can remove them.
    """

    private = True

    def __init__(self, directory: str, **kwargs: Any) -> None:
        super().__init__(directory, **kwargs)
        self.written: list[str] = []

    def put(self, key: Any) -> tuple[Any, bool]:
        """The database key of ``key``: ints and strings only, never pickled."""
        if type(key) not in (int, str):
            raise TypeError(f"a disk cache key is an int or a str (got {type(key).__name__})")
        return super().put(key)  # type: ignore[no-any-return]

    def get(self, key: Any, raw: bool) -> Any:
        """The key of a row; ``None`` for a pickled one (never unpickled)."""
        if not raw:  # a pickled key: never written by loaderkit, never unpickled
            return None
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        """The row fields of ``value``: bytes, str or int only, never pickled."""
        if read or type(value) not in (bytes, str, int):
            raise TypeError(f"a disk cache stores bytes or str (got {type(value).__name__})")
        if type(value) is str and len(value) >= self.min_file_size:
            raise TypeError("a disk cache keeps no text files")
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        """The value of a row: raw or a value file of the folder; ``b""`` for anything else."""
        if read:
            raise TypeError("a disk cache does not hand out open files")
        if mode == MODE_RAW:
            return bytes(value) if type(value) is sqlite3.Binary else value
        if mode == MODE_BINARY and type(filename) is str:
            return self._read(filename)
        return b""  # pickled, text, or a file elsewhere: fails the entry's check

    def _write(
        self, full_path: str, iterator: Iterable[Any], mode: str, encoding: Any = None
    ) -> int:
        """Write a new value file, created in the folder through descriptors (never a link)."""
        if mode != "xb":
            raise TypeError("a disk cache writes binary value files only")
        relative = os.path.relpath(full_path, self._directory)
        parts = _parts(relative)
        if parts is None:
            raise OSError(f"not a value file of the folder: {relative!r}")
        for attempt in range(10):  # another process may remove an emptied folder meanwhile
            try:
                with self._folder(parts[:2], create=True) as fd:
                    out = os.open(
                        parts[2],
                        os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC,
                        0o600,
                        dir_fd=fd,
                    )
                self.written.append(relative)
                with os.fdopen(out, "wb") as writer:
                    size = 0
                    for chunk in iterator:
                        size += len(chunk)
                        writer.write(chunk)
                    return size
            except FileNotFoundError:
                if attempt == 9:
                    raise
        raise AssertionError("unreachable")

    def remove(self, file_path: Any) -> None:
        """Remove a value file of the folder (and its emptied folders); others are left alone."""
        parts = _parts(file_path)
        if parts is None:
            return
        try:
            with self._folder(parts[:2]) as fd:
                os.unlink(parts[2], dir_fd=fd)
                try:
                    with self._folder(parts[:1]) as top:
                        os.rmdir(parts[1], dir_fd=top)
                    with self._folder(()) as root:
                        os.rmdir(parts[0], dir_fd=root)
                except OSError:  # not empty, or removed by another process
                    pass
        except OSError:  # already removed by another process, or a link: left alone
            pass

    def _read(self, filename: str) -> bytes:
        parts = _parts(filename)
        if parts is None:
            return b""
        try:
            with self._folder(parts[:2]) as folder:
                flags = os.O_RDONLY | NOFOLLOW | CLOEXEC | getattr(os, "O_NONBLOCK", 0)
                fd = os.open(parts[2], flags, dir_fd=folder)
        except OSError:  # missing, or a link: a miss
            return b""
        with os.fdopen(fd, "rb") as reader:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return b""  # a pipe, a device: never read
            if self.private and (st.st_uid != os.geteuid() or others_can_write(st)):
                return b""  # a file someone else could have written
            return reader.read()

    def _folder(self, names: tuple[str, ...], create: bool = False) -> _Descriptor:
        """A descriptor of the folder ``names`` below the cache folder, never through a link."""
        fd = os.open(self._directory, os.O_RDONLY | _DIRECTORY | CLOEXEC)
        try:
            for name in names:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o700, dir_fd=fd)
                below = os.open(name, _OPEN_DIR, dir_fd=fd)
                os.close(fd)
                fd = below
        except BaseException:
            os.close(fd)
            raise
        return _Descriptor(fd)


class _Descriptor:
    """An open folder descriptor, closed at the end of a ``with`` block."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _parts(filename: Any) -> tuple[str, str, str] | None:
    """The two folders and the name of a value file, as ``diskcache`` names them; else None."""
    if type(filename) is not str:
        return None
    match = _VALUE_FILE.fullmatch(filename)
    if match is None:
        return None
    first, second, name = match.groups()
    return first, second, name


# -- the SQLite file -------------------------------------------------------------------------


def connect(directory: str, timeout: float) -> sqlite3.Connection:
    """A connection to the folder's SQLite file, with :data:`PRAGMAS` run first.

    The file (when it exists) and the files SQLite keeps beside it must not be links, and the
    file must be a regular file, before and after it is opened (:class:`FolderError`).
    """
    db = os.path.join(directory, DBNAME)
    before = _index_file(directory)
    con = sqlite3.connect(db, timeout=_BUSY_SECONDS, isolation_level=None)
    try:
        after = _index_file(directory)
        if before is not None and (after is None or after[:2] != before[:2]):
            raise FolderError(f"{DBNAME} was replaced while it was opened")
        for pragma in PRAGMAS:
            con.execute(pragma).fetchall()
        # the busy timeout stays connect()'s 60 s, also while diskcache opens the folder (it
        # passes 0 then and retries some statements itself, not all: without the wait, a
        # worker opening the folder while another writes got "database is locked")
        con.execute(f"PRAGMA busy_timeout = {int(max(timeout, _BUSY_SECONDS) * 1000)}").fetchall()
    except BaseException:
        con.close()
        raise
    return con


def _index_file(directory: str) -> tuple[int, int] | None:
    """``(device, inode)`` of the SQLite file, ``None`` if missing; refuses links."""
    found = None
    for name in _INDEX_FILES:
        try:
            st = os.lstat(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise FolderError(f"{name} is not a regular file (a link, a folder, a device)")
        if name == DBNAME:
            found = (st.st_dev, st.st_ino)
    return found


class SafeCache(diskcache.Cache):  # type: ignore[misc]  # diskcache has no type hints
    """A ``diskcache.Cache`` whose SQLite connections are made by :func:`connect`."""

    def get_many(self, keys: Sequence[int]) -> dict[int, Any]:
        """The values stored under the integer ``keys`` that are present, in one statement.

        The rows ``get`` would read (an integer key is stored raw), read by one ``SELECT`` per
        :data:`_CHUNK` keys: one lock of the SQLite file and one statement for a batch, where
        ``get`` takes both for every key. Values are fetched as ``get`` fetches them.
        """
        found: dict[int, Any] = {}
        disk = self._disk
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._sql(
                f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})",
                list(chunk),
            ).fetchall()
            for key, mode, filename, value in rows:
                if type(key) is int:
                    found[key] = disk.fetch(mode, filename, value, False)
        return found

    @property
    def _con(self) -> sqlite3.Connection:
        pid = os.getpid()
        if getattr(self._local, "pid", None) != pid:  # as diskcache: a fork closes it
            self.close()
            self._local.pid = pid
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = connect(self._directory, self._timeout)
        return con


def _settings(max_bytes: int | None) -> dict[str, Any]:
    """Every ``diskcache`` setting, given: none is taken from the folder's SQLite file."""
    settings: dict[str, Any] = dict(DEFAULT_SETTINGS)
    settings.update(statistics=0, tag_index=0, sqlite_journal_mode="delete", sqlite_mmap_size=0)
    if max_bytes is None:
        settings.update(eviction_policy="none")
    else:
        settings.update(eviction_policy="least-recently-stored", size_limit=max_bytes)
    return settings


def open_folder(path: str, max_bytes: int | None, *, private: bool = True) -> Any:
    """A :class:`SafeCache` at ``path`` read and written through :class:`DataDisk`."""
    cache = SafeCache(path, disk=DataDisk, **_settings(max_bytes))
    cache.disk.private = private
    return cache


@functools.cache
def _expected_schema() -> frozenset[tuple[str, str, str]]:
    """The (type, name, sql) rows of ``sqlite_master`` that ``diskcache`` creates."""
    rows: set[tuple[str, str, str]] = set()
    for policy in EVICTION_POLICY:
        with tempfile.TemporaryDirectory() as folder:
            cache = diskcache.Cache(folder, eviction_policy=policy)
            cache.close()
            with sqlite3.connect(os.path.join(folder, DBNAME)) as con:
                rows.update(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            con.close()
    return frozenset(rows)


def check_folder(path: str) -> None:
    """Refuse a cache folder whose SQLite file is unreadable or not what ``diskcache`` writes.

    Raises :class:`FolderError` with the reason. A folder without a SQLite file yet is fine.
    """
    if _index_file(path) is None:
        return
    try:
        con = connect(path, 60)
        try:
            schema = con.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
            settings = con.execute("SELECT key, value FROM Settings").fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise FolderError(f"its SQLite file cannot be read ({type(exc).__name__}: {exc})") from exc
    unknown = sorted(str(row[1]) for row in set(schema) - _expected_schema())
    if unknown:
        raise FolderError(f"its SQLite file holds objects diskcache does not create: {unknown}")
    known = set(DEFAULT_SETTINGS) | set(METADATA)
    for key, value in settings:
        if key not in known or type(value) not in (int, float, str):
            raise FolderError(f"its SQLite file holds an unknown setting {str(key)[:40]!r}")
