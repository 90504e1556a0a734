"""Streams: the loader of an iterable source, its sharding, reading, producing and delivery.

``loaderkit.runtime.stream.StreamLoader`` (the path the docs gave before the stream modules
became this package) is served from :mod:`loaderkit.runtime.moved`, on first use: the
package itself imports nothing, so its modules import each other without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderkit.runtime.moved import moved_name

if TYPE_CHECKING:
    from loaderkit.runtime.stream.loader import StreamLoader

__all__ = ["StreamLoader"]


def __getattr__(name: str) -> Any:
    return moved_name(__name__, name)
