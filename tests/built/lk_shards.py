"""A small sharded dataset for the tests of the shard-aware order (a module of its own, so
workers under spawn import it); torch-free: it is what ``ShardLayout`` asks, and no more."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

from loaderkit.datasets.shards.layout import ShardInfo


class MemoryShards:
    """``counts[k]`` samples in shard ``k``; sample ``i`` is ``{"idx": i, "shard": k}``."""

    def __init__(self, counts: tuple[int, ...]) -> None:
        self.counts = tuple(counts)
        self.starts = (0, *accumulate(self.counts))
        self.infos = tuple(
            ShardInfo(f"memory://shard-{k:05d}", 16 * c, "v1", c) for k, c in enumerate(counts)
        )

    @property
    def shard_counts(self) -> tuple[int, ...]:
        """Samples in each shard."""
        return self.counts

    @property
    def shard_infos(self) -> tuple[ShardInfo, ...]:
        """Each shard's object (made up: these shards live in memory)."""
        return self.infos

    def __len__(self) -> int:
        return self.starts[-1]

    def __getitem__(self, index: int) -> dict[str, int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        shard = bisect_right(self.starts, index) - 1
        return {"idx": index, "shard": shard}
