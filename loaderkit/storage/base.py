"""What every store offers: stat, glob, ranged reads (many at once), atomic writes.

A *store* reads objects named by URL: a local path (``/data/x.parquet``, ``file:///...``),
``s3://bucket/key``, ``gs://bucket/key``, ``http(s)://host/path``. Every read names the
version it expects (:attr:`ObjectInfo.version`: an ETag, or for a local file its size and
modification time), so an object replaced while a run reads it is an :class:`ObjectChangedError`
naming it, never bytes of two versions mixed into one sample.

Nothing here imports torch; the client libraries are imported by the stores that need them,
when they are first used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from loaderkit.errors import DataError, LoaderkitError

__all__ = [
    "ObjectChangedError",
    "ObjectInfo",
    "RangeRequest",
    "StorageError",
    "Store",
]


@attrs.frozen
class ObjectInfo:
    """One object: its URL as the store names it, its size in bytes and its version."""

    url: str
    size: int
    version: str
    """An ETag (object stores, HTTP) or ``"<size>-<mtime_ns>"`` (local files): compared, never
    parsed; ``""`` where the server gives none (then only the size is checked)."""


@attrs.frozen
class RangeRequest:
    """Bytes ``[start, end)`` of ``url`` at ``version`` (``end=None``: to the end)."""

    url: str
    start: int = 0
    end: int | None = None
    version: str | None = None


class StorageError(LoaderkitError, OSError):
    """A store could not do what was asked (after its retries): names the URL and the fix.

    An ``OSError`` too, so code written for file I/O (``except OSError``) still catches it.
    """


class ObjectChangedError(DataError):
    """An object is not the version the dataset was made from (replaced, truncated, deleted)."""


@runtime_checkable
class Store(Protocol):
    """The operations the shard sources, the shard cache and the shard writer use."""

    scheme: str
    """``"file"``, ``"s3"``, ``"gs"``, ``"http"``: what :func:`~loaderkit.storage.store_for`
    matched."""

    def stat(self, url: str) -> ObjectInfo:
        """Size and version of ``url``; :class:`StorageError` naming it if it is not there."""
        ...

    def glob(self, pattern: str) -> list[ObjectInfo]:
        """The objects a glob ``pattern`` (``*``, ``?``, ``[...]``, ``**``) names, sorted by URL."""
        ...

    def read(self, request: RangeRequest) -> bytes:
        """The bytes of one range; :class:`ObjectChangedError` if the version differs."""
        ...

    def read_many(self, requests: Sequence[RangeRequest]) -> list[bytes]:
        """Several ranges at once (in flight together where the store can), in request order."""
        ...

    def write(self, url: str, data: bytes) -> ObjectInfo:
        """Write ``data`` as ``url`` atomically (a reader sees the old object or the new one)."""
        ...
