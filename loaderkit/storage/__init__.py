"""Where shard files live: local disks and object stores, behind one small interface.

:func:`store_for` gives the :class:`~loaderkit.storage.base.Store` of a URL. Schemes are
declared once, in :data:`SCHEMES` (the module that implements each, imported on first use, so
``import loaderkit`` never imports a client library): local paths and ``file://``, ``s3://``
(boto3, the ``[s3]`` extra), ``http://`` and ``https://`` (urllib3, the ``[http]`` extra).
Which ``storage_options`` a plan file may record, and whom a plan file may send credentials
to, is :mod:`loaderkit.storage.options`.
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
from loaderkit.storage.options import (
    check_endpoint,
    check_options,
    option_tables,
    recordable_options,
)

__all__ = [
    "SCHEMES",
    "UNSUPPORTED",
    "ObjectChangedError",
    "ObjectInfo",
    "RangeRequest",
    "StorageError",
    "Store",
    "check_endpoint",
    "check_options",
    "option_tables",
    "recordable_options",
    "scheme_of",
    "store_for",
]

SCHEMES: dict[str, str] = {
    "file": "loaderkit.storage.local:LocalStore",
    "s3": "loaderkit.storage.s3:S3Store",
    "http": "loaderkit.storage.http:HttpStore",
    "https": "loaderkit.storage.http:HttpStore",
}
"""URL scheme -> ``module:class`` of its store (the class takes ``storage_options`` as keywords)."""

UNSUPPORTED: dict[str, str] = {
    "gs": (
        "gs:// URLs have no store yet; Google Cloud Storage serves the S3 protocol: use "
        "s3://bucket/key with storage_options={'endpoint_url': 'https://storage.googleapis.com'} "
        "and HMAC keys as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or the https:// URLs of "
        "public objects"
    ),
}
"""Schemes a user may expect, and what to use instead."""


def scheme_of(url: str) -> str:
    """``"file"`` for a path or ``file://`` URL, else the URL's scheme (``"s3"``, ``"https"``)."""
    head, sep, _ = url.partition("://")
    if not sep or "/" in head or len(head) < 2:  # a path (a Windows drive is one letter)
        return "file"
    return head.lower()


def _target(url: str, scheme: str) -> str:
    """The ``module:class`` of ``scheme``'s store; a ``StorageError`` naming what to use."""
    target = SCHEMES.get(scheme)
    if target is not None:
        return target
    instead = UNSUPPORTED.get(scheme)
    if instead is not None:
        raise StorageError(f"{shown(url)}: {instead}")
    raise StorageError(
        f"{shown(url)}: no store for URLs of scheme {shown(scheme)}; supported: "
        f"{', '.join(sorted(SCHEMES))} (and local paths)"
    )


def store_for(url: str, storage_options: Mapping[str, Any] | None = None) -> Store:
    """The store that reads ``url``, made with ``storage_options`` (a fresh one per call).

    An option the store does not take is a ``PlanError`` naming it (with a suggestion).
    """
    options = dict(storage_options or {})
    module, _, name = _target(url, scheme_of(url)).partition(":")
    check_options(url, options)
    cls = getattr(importlib.import_module(module), name)
    store: Store = cls(**options)
    return store
