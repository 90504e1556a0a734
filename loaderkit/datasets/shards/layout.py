"""What a sharded dataset is made of, as the order, the shard cache and the writer see it.

A sharded dataset is a sequence of shards, each an object in a store
(:mod:`loaderkit.storage`) holding a known number of samples. Sample ``i`` of the dataset is
sample ``i - start(k)`` of shard ``k``, the shards taken in list order. The order engine
needs only :attr:`ShardLayout.shard_counts`; the shard cache and the prefetcher need each
shard's :class:`ShardInfo` (where it is, how big, which version) and fetch its bytes through a
:data:`ShardFetch`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["ShardFetch", "ShardInfo", "ShardLayout"]


@attrs.frozen
class ShardInfo:
    """One shard: the object it is (URL, size in bytes, version) and its number of samples."""

    url: str
    size: int
    version: str
    """The store's version of the object (:attr:`loaderkit.storage.ObjectInfo.version`)."""
    samples: int


ShardFetch = Callable[[ShardInfo], "bytes | memoryview"]
"""The whole bytes of a shard, checked against its version (the store, or the shard cache)."""


@runtime_checkable
class ShardLayout(Protocol):
    """A dataset made of shards: what the order engine and the shard cache read of it."""

    @property
    def shard_counts(self) -> tuple[int, ...]:
        """Samples in each shard, in the dataset's shard order (they sum to ``len(dataset)``)."""
        ...

    @property
    def shard_infos(self) -> tuple[ShardInfo, ...]:
        """Each shard's :class:`ShardInfo`, in the same order."""
        ...
