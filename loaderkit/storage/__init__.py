"""Where shard files live: local disks and object stores, behind one small interface.

:func:`store_for` gives the :class:`~loaderkit.storage.base.Store` of a URL. Schemes are
declared once, in :data:`SCHEMES` (the module that implements each, imported on first use, so
``import loaderkit`` never imports a client library).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from loaderkit._text import shown
from loaderkit.storage.base import (
    ObjectChangedError,
    ObjectInfo,
    RangeRequest,
    StorageError,
    Store,
)

__all__ = [
    "SCHEMES",
    "ObjectChangedError",
    "ObjectInfo",
    "RangeRequest",
    "StorageError",
    "Store",
    "scheme_of",
    "store_for",
]

SCHEMES: dict[str, str] = {"file": "loaderkit.storage.local:LocalStore"}
"""URL scheme -> ``module:class`` of its store (the class takes ``storage_options`` as keywords)."""


def scheme_of(url: str) -> str:
    """``"file"`` for a path or ``file://`` URL, else the URL's scheme (``"s3"``, ``"https"``)."""
    head, sep, _ = url.partition("://")
    if not sep or "/" in head or len(head) < 2:  # a path (a Windows drive is one letter)
        return "file"
    return head.lower()


def store_for(url: str, storage_options: Mapping[str, Any] | None = None) -> Store:
    """The store that reads ``url``, made with ``storage_options`` (a fresh one per call)."""
    scheme = scheme_of(url)
    target = SCHEMES.get(scheme)
    if target is None:
        raise StorageError(
            f"{shown(url)}: no store for URLs of scheme {shown(scheme)}; supported: "
            f"{', '.join(sorted(SCHEMES))} (and local paths)"
        )
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    store: Store = cls(**dict(storage_options or {}))
    return store
