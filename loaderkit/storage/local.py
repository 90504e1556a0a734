"""The local store: paths on this machine's disks (``/x``, ``~/x``, ``file:///x``).

Only regular files are read: a FIFO, a device or a socket named as data is refused before a
byte is read (opened non-blocking, so a FIFO never waits for a writer). A version is
``"<size>-<mtime_ns>"``; a read checks it on the open file, so a file replaced or truncated
since the dataset was made is an :class:`~loaderkit.storage.base.ObjectChangedError`. Writes go
to a private temporary file in the same folder, are synced, then renamed over the target: a
reader sees the old file or the new one, never part of one.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import stat
from collections.abc import Sequence
from typing import ClassVar
from urllib.parse import unquote, urlparse

from loaderkit._text import shown
from loaderkit.storage.base import ObjectChangedError, ObjectInfo, RangeRequest, StorageError

__all__ = ["LocalStore", "local_path"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def local_path(url: str) -> str:
    """The path a local URL names (``file:///x`` -> ``/x``; ``~`` expanded)."""
    if url.startswith("file://"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(
                f"{shown(url)}: a file:// URL names a path on this machine (file:///path); "
                f"got host {shown(parsed.netloc)}"
            )
        return unquote(parsed.path)
    return os.path.expanduser(url)


def _version(st: os.stat_result) -> str:
    return f"{st.st_size}-{st.st_mtime_ns}"


def _regular(url: str, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise StorageError(
            f"{shown(url)} is not a regular file (a FIFO, device, socket or folder); name the "
            f"data files themselves"
        )


class LocalStore:
    """:class:`~loaderkit.storage.base.Store` over local files."""

    scheme = "file"
    SAFE_OPTIONS: ClassVar[frozenset[str]] = frozenset()
    """A local path takes no ``storage_options``."""
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def stat(self, url: str) -> ObjectInfo:
        """Size and version of the local file ``url``."""
        path = local_path(url)
        try:
            st = os.stat(path)
        except OSError as e:
            raise StorageError(f"{shown(url)}: {e.strerror or e}; check the path") from e
        _regular(url, st)
        return ObjectInfo(url=url, size=st.st_size, version=_version(st))

    def glob(self, pattern: str) -> list[ObjectInfo]:
        """The regular files ``pattern`` matches (``**`` spans folders), sorted by path."""
        path = local_path(pattern)
        found = []
        for name in sorted(glob.glob(path, recursive=True)):
            try:
                st = os.stat(name)
            except OSError:
                continue  # gone between the listing and the stat
            if stat.S_ISREG(st.st_mode):
                found.append(ObjectInfo(url=name, size=st.st_size, version=_version(st)))
        return found

    def read(self, request: RangeRequest) -> bytes:
        """Bytes ``[start, end)`` of the file, checked against ``request.version``."""
        url = request.url
        try:
            fd = os.open(local_path(url), _OPEN_FLAGS)
        except OSError as e:
            raise StorageError(f"{shown(url)}: {e.strerror or e}; check the path") from e
        try:
            st = os.fstat(fd)
            _regular(url, st)
            if request.version is not None and request.version not in ("", _version(st)):
                raise ObjectChangedError(
                    f"{shown(url)} changed since the dataset was made (version "
                    f"{shown(request.version)}, now {_version(st)}); make the dataset again "
                    f"(or restore the file)"
                )
            end = st.st_size if request.end is None else request.end
            if request.start < 0 or end < request.start or end > st.st_size:
                raise ObjectChangedError(
                    f"{shown(url)}: bytes [{request.start}, {end}) asked of a file of "
                    f"{st.st_size} bytes; the file is shorter than the dataset expects"
                )
            return _pread_exactly(fd, url, request.start, end - request.start)
        finally:
            os.close(fd)

    def read_many(self, requests: Sequence[RangeRequest]) -> list[bytes]:
        """Each range in turn (a local disk gains little from reads in flight together)."""
        return [self.read(r) for r in requests]

    def write(self, url: str, data: bytes) -> ObjectInfo:
        """``data`` written as ``url``: a private temporary file, synced, then renamed over."""
        path = local_path(url)
        folder = os.path.dirname(os.path.abspath(path))
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise StorageError(f"{shown(url)}: cannot write in {shown(folder)}: {e}") from e
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as e:
            _remove(tmp)
            raise StorageError(f"{shown(url)}: writing failed: {e}") from e
        return self.stat(path)


def _pread_exactly(fd: int, url: str, start: int, length: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < length:
        chunk = os.pread(fd, length - got, start + got)
        if not chunk:
            raise ObjectChangedError(
                f"{shown(url)} ended after {start + got} bytes while {start + length} were "
                f"expected; the file was truncated: make the dataset again"
            )
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
