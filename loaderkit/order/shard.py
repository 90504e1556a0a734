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

Pure index math (numpy only); every batch is computed directly, independently of the others.
Reading the shuffled order is amortized: with one rank, a batch is the contiguous range of
positions it covers, read with :meth:`EpochOrder.indices` (which computes and caches the order
in chunks); with several ranks, this rank's positions of the next ``CHUNK // batch_size`` batches
are mapped in one bulk call and cached here (the last two such chunks), so a rank never
computes the order at the other ranks' positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from loaderkit.order.epoch import CHUNK, EpochOrder

__all__ = ["ShardLayout"]


_I64 = npt.NDArray[np.int64]


class _RankCache:
    """The last two chunks of this rank's batches, as ``((order, chunk, values), ...)``.

    ``values`` is a read-only ``(batches, batch_size)`` array holding the sample indices of
    the regular (full, unwrapped) batches ``chunk*K, chunk*K + 1, ...``.  The entries tuple
    is replaced in one attribute store, so sharing a layout between threads is safe.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: tuple[tuple[EpochOrder, int, _I64], ...] = ()

    def get(self, order: EpochOrder, chunk: int) -> _I64 | None:
        """The values of ``chunk`` of ``order`` if cached, else ``None``."""
        for cached_order, number, values in self.entries:
            if number == chunk and (cached_order is order or cached_order == order):
                return values
        return None

    def put(self, order: EpochOrder, chunk: int, values: _I64) -> None:
        """Cache ``values`` as ``chunk`` of ``order``, keeping the previous most recent entry."""
        values.flags.writeable = False
        self.entries = ((order, chunk, values), *self.entries[:1])


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The batches of one rank in an epoch of ``n`` samples."""

    n: int
    batch_size: int
    world_size: int = 1
    rank: int = 0
    drop_last: bool = False
    even_batches: bool = True
    _cache: _RankCache = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.n < 0 or self.batch_size < 1 or self.world_size < 1:
            raise ValueError(
                f"need n >= 0, batch_size >= 1, world_size >= 1 (got n={self.n}, "
                f"batch_size={self.batch_size}, world_size={self.world_size})"
            )
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}) (got {self.rank})")
        object.__setattr__(self, "_cache", _RankCache())

    def __reduce__(self) -> tuple[type[ShardLayout], tuple[int, int, int, int, bool, bool]]:
        """Pickle (and copy) as the six fields, without the cached chunks."""
        fields = (self.n, self.batch_size, self.world_size, self.rank)
        return ShardLayout, (*fields, self.drop_last, self.even_batches)

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

    def _start(self, batch_index: int) -> int:
        """First position of batch ``batch_index`` (checked to be a batch of this rank)."""
        if not 0 <= batch_index < len(self):
            raise IndexError(
                f"batch {batch_index} is outside [0, {len(self)}) for this rank's epoch"
            )
        return batch_index * self.global_batch + self.rank * self.batch_size

    def positions(self, batch_index: int) -> npt.NDArray[np.int64]:
        """Positions in the epoch order that batch ``batch_index`` of this rank holds."""
        start = self._start(batch_index)
        stop = start + self.batch_size
        if self.world_size == 1 or not self.even_batches or self.drop_last:
            stop = min(stop, self.n)
            return np.arange(start, stop, dtype=np.int64)
        return np.arange(start, stop, dtype=np.int64) % self.n

    def indices(self, order: EpochOrder, batch_index: int) -> npt.NDArray[np.int64]:
        """Sample indices of batch ``batch_index``: the epoch order read at its positions.

        Returns a new int64 array.  Equal to ``order.at(self.positions(batch_index))``, but
        amortized (see the module docstring): one rank reads a contiguous range through
        ``order.indices``; several ranks read this rank's chunk of batches, cached here.
        """
        start = self._start(batch_index)
        if order.permutation is None:
            return self.positions(batch_index)
        if self.world_size == 1:  # contiguous and never wrapped
            return order._range(start, min(start + self.batch_size, self.n))
        if start + self.batch_size > self.n:  # the tail: clipped or wrapped, read pointwise
            return order.at(self.positions(batch_index))
        per_chunk = max(1, CHUNK // self.batch_size)
        number = batch_index // per_chunk
        values = self._cache.get(order, number)
        if values is None:
            values = self._rank_chunk(order, number, per_chunk)
            self._cache.put(order, number, values)
        row: _I64 = values[batch_index - number * per_chunk].copy()
        return row

    def _rank_chunk(self, order: EpochOrder, number: int, per_chunk: int) -> _I64:
        """The indices of this rank's regular batches ``number*per_chunk, ...`` in one call.

        Regular batches lie entirely before ``n`` (no clipping, no wrap-around); they are a
        prefix of the batches, so the chunk holds those of its batches that are regular.
        """
        first = number * per_chunk
        # batch s is regular when s*G + (rank + 1)*batch_size <= n
        regular = (self.n - (self.rank + 1) * self.batch_size) // self.global_batch + 1
        last = min(first + per_chunk, regular, len(self))
        starts = np.arange(first, last, dtype=np.int64) * self.global_batch
        starts += self.rank * self.batch_size
        positions = starts[:, None] + np.arange(self.batch_size, dtype=np.int64)
        return order.at(positions)
