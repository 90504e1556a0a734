"""The ``diskcache`` folder of a disk cache, opened as untrusted input.

``diskcache`` trusts its folder: it unpickles values (and keys) whose row says so, opens and
deletes files at whatever relative path a row names, and applies the settings table of the
SQLite file as SQLite pragmas and attributes. A cache folder may come from anywhere (a copy,
another user, a damaged disk), so loaderkit opens it through :class:`DataDisk`, which never
unpickles, reads and removes only value files named the way ``diskcache`` names them (regular
files, no symbolic link on the way), and hands back anything else as an empty value (a
corrupt entry for :mod:`loaderkit.runtime.cache_format`). Before the first use in a run,
:func:`check_folder` refuses a SQLite file that cannot be read, holds other tables, triggers
or views than ``diskcache`` creates, or settings it does not know.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import stat
import tempfile
from typing import Any

import diskcache
from diskcache.core import DEFAULT_SETTINGS, EVICTION_POLICY, METADATA, MODE_BINARY, MODE_RAW

__all__ = ["DataDisk", "FolderError", "check_folder", "open_folder"]

_VALUE_FILE = re.compile(r"[0-9a-f]{2}[/\\][0-9a-f]{2}[/\\][0-9a-f]{28}\.val")
"""How ``diskcache.Disk.filename`` names a value file, relative to the folder."""


class FolderError(Exception):
    """A cache folder that cannot be used as it is: the reason, for a loaderkit error."""


class DataDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache has no type hints
    """A ``diskcache.Disk`` that stores only ``bytes``/``str``/``int`` and never unpickles."""

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
        return super().store(value, read, key)

    def fetch(self, mode: int, filename: Any, value: Any, read: bool) -> Any:
        """The value of a row: raw or a value file of the folder; ``b""`` for anything else."""
        if read:
            raise TypeError("a disk cache does not hand out open files")
        if mode == MODE_RAW:
            return bytes(value) if type(value) is sqlite3.Binary else value
        if mode == MODE_BINARY and self._ours(filename):
            return self._read(filename)
        return b""  # pickled, text, or a file elsewhere: fails the entry's check

    def remove(self, file_path: Any) -> None:
        """Remove a value file of the folder; a path named otherwise is left alone."""
        if self._ours(file_path):
            super().remove(file_path)

    def _ours(self, filename: Any) -> bool:
        """A value file named as ``diskcache`` names them, below no symbolic link."""
        if type(filename) is not str or _VALUE_FILE.fullmatch(filename) is None:
            return False
        top = os.path.join(self._directory, filename[:2])
        return not os.path.islink(top) and not os.path.islink(os.path.join(top, filename[3:5]))

    def _read(self, filename: str) -> bytes:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(os.path.join(self._directory, filename), flags)  # OSError: a miss
        with os.fdopen(fd, "rb") as reader:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return b""  # a pipe, a device: never read
            return reader.read()


def _settings(max_bytes: int | None) -> dict[str, Any]:
    """Every ``diskcache`` setting, given: none is taken from the folder's SQLite file."""
    settings: dict[str, Any] = dict(DEFAULT_SETTINGS)
    settings.update(statistics=0, tag_index=0)
    if max_bytes is None:
        settings.update(eviction_policy="none")
    else:
        settings.update(eviction_policy="least-recently-stored", size_limit=max_bytes)
    return settings


def open_folder(path: str, max_bytes: int | None) -> Any:
    """A ``diskcache.Cache`` at ``path`` read and written through :class:`DataDisk`."""
    return diskcache.Cache(path, disk=DataDisk, **_settings(max_bytes))


@functools.cache
def _expected_schema() -> frozenset[tuple[str, str, str]]:
    """The (type, name, sql) rows of ``sqlite_master`` that ``diskcache`` creates."""
    rows: set[tuple[str, str, str]] = set()
    for policy in EVICTION_POLICY:
        with tempfile.TemporaryDirectory() as folder:
            cache = diskcache.Cache(folder, eviction_policy=policy)
            cache.close()
            with sqlite3.connect(os.path.join(folder, diskcache.core.DBNAME)) as con:
                rows.update(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            con.close()
    return frozenset(rows)


def check_folder(path: str) -> None:
    """Refuse a cache folder whose SQLite file is unreadable or not what ``diskcache`` writes.

    Raises :class:`FolderError` with the reason. A folder without a SQLite file yet is fine.
    """
    db = os.path.join(path, diskcache.core.DBNAME)
    if not os.path.lexists(db):
        return
    if not os.path.isfile(db) or os.path.islink(db):
        raise FolderError(f"{diskcache.core.DBNAME} is not a regular file")
    try:
        con = sqlite3.connect(db, timeout=60)
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
