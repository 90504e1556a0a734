"""Which positions of an epoch each rank's batches hold: the elastic layout.

Global batch ``s`` is the positions ``[s*G, (s+1)*G)`` of the epoch order, ``G = batch_size *
world_size``, and rank ``r`` holds the ``r``-th slice of ``batch_size`` positions in it. So the
concatenation of the ranks' ``s``-th batches in rank order is the same global batch for every
world size that divides ``G``.

The tail (the last, partial global batch):

- ``world_size == 1``: torch semantics: dropped with ``drop_last``, else delivered smaller.
- ``drop_last``: dropped on every rank.
- ``even_batches`` (the default): completed by wrapping around to the start of the epoch order
  (position ``p`` reads position ``p mod n``), so every rank gets the same number of full
  batches and collectives cannot hang; the repeated samples are counted in :attr:`repeated`.
- otherwise: each rank holds what is left of its slice, possibly fewer or no samples.

Pure index math (numpy only); every batch is computed directly in O(batch_size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loaderkit.order.epoch import EpochOrder

__all__ = ["ShardLayout"]


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The batches of one rank in an epoch of ``n`` samples."""

    n: int
    batch_size: int
    world_size: int = 1
    rank: int = 0
    drop_last: bool = False
    even_batches: bool = True

    def __post_init__(self) -> None:
        if self.n < 0 or self.batch_size < 1 or self.world_size < 1:
            raise ValueError(
                f"need n >= 0, batch_size >= 1, world_size >= 1 (got n={self.n}, "
                f"batch_size={self.batch_size}, world_size={self.world_size})"
            )
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}) (got {self.rank})")

    @property
    def global_batch(self) -> int:
        """Samples per global batch: ``batch_size * world_size``."""
        return self.batch_size * self.world_size

    def __len__(self) -> int:
        """Batches per epoch on this rank (the same on every rank unless uneven)."""
        g = self.global_batch
        if self.drop_last:
            return self.n // g
        if self.world_size == 1 or self.even_batches:
            return -(-self.n // g)
        # uneven: this rank has a batch in the tail only if its slice starts before n
        full = self.n // g
        tail_start = full * g + self.rank * self.batch_size
        return full + (1 if tail_start < self.n else 0)

    @property
    def repeated(self) -> int:
        """Samples delivered twice per epoch, over all ranks, to complete the tail."""
        if self.drop_last or self.world_size == 1 or not self.even_batches:
            return 0
        return len(self) * self.global_batch - self.n

    @property
    def samples(self) -> int:
        """Samples this rank delivers per epoch (repeats included)."""
        batches = len(self)
        if batches == 0:
            return 0
        return (batches - 1) * self.batch_size + self.positions(batches - 1).size

    @property
    def dropped(self) -> int:
        """Samples of the epoch no rank delivers (``drop_last``)."""
        return self.n - (self.n // self.global_batch) * self.global_batch if self.drop_last else 0

    def positions(self, batch_index: int) -> npt.NDArray[np.int64]:
        """Positions in the epoch order that batch ``batch_index`` of this rank holds."""
        if not 0 <= batch_index < len(self):
            raise IndexError(
                f"batch {batch_index} is outside [0, {len(self)}) for this rank's epoch"
            )
        start = batch_index * self.global_batch + self.rank * self.batch_size
        stop = start + self.batch_size
        if self.world_size == 1 or not self.even_batches or self.drop_last:
            stop = min(stop, self.n)
            return np.arange(start, stop, dtype=np.int64)
        return np.arange(start, stop, dtype=np.int64) % self.n

    def indices(self, order: EpochOrder, batch_index: int) -> npt.NDArray[np.int64]:
        """Sample indices of batch ``batch_index``: the epoch order read at its positions."""
        positions = self.positions(batch_index)
        permutation = order.permutation
        return positions if permutation is None else permutation(positions)
