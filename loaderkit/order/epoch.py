"""Epoch and batch index math: which sample indices form each batch of an epoch.

An epoch of ``n`` samples is an :class:`EpochOrder` (position -> sample index;
the identity without shuffling, a :class:`~loaderkit.order.feistel.FeistelPermutation`
keyed by ``derive_key(seed, "shuffle", epoch)`` with shuffling) cut into
consecutive batches by a :class:`BatchLayout` (torch ``DataLoader`` semantics
for ``drop_last``).  Any batch can be computed directly, independently of the
others, which makes mid-epoch resume free.

A shuffled :class:`EpochOrder` computes its order in chunks of :data:`CHUNK`
positions and keeps the last two chunks, so reading an epoch batch by batch
costs one bulk computation per chunk instead of one per batch.  A chunk depends
only on ``(n, seed, epoch, chunk number)``: the first batch after a resume
computes one chunk (O(CHUNK), about a millisecond), whatever its position.

This module never imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.feistel import MAX_N, FeistelPermutation
from loaderkit.order.keys import as_int, derive_key

__all__ = [
    "CHUNK",
    "BatchLayout",
    "EpochOrder",
    "batch_indices",
    "check_positions",
    "epoch_batches",
]

#: Positions per cached chunk of a shuffled epoch.  An implementation detail: it changes the
#: speed and the memory held (two chunks of int64, 512 KiB), never the order.
CHUNK = 1 << 15

_I64 = npt.NDArray[np.int64]


def _check_n(n: object) -> int:
    """Validate a sample count."""
    value = as_int("n", n)
    if value > MAX_N:
        raise ValueError(f"n must be <= 2**63 - 1, got {value}; use a smaller dataset size")
    return value


def _check_bool(name: str, value: object) -> bool:
    """Validate a flag: only ``True``/``False`` (or numpy bools) are accepted."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be a bool, got {type(value).__name__} {value!r}; "
            f"pass {name}=True or {name}=False"
        )
    return bool(value)


class _ChunkCache:
    """The last two computed chunks of an epoch order, as ``((chunk, values), ...)``.

    The entries tuple is replaced in one attribute store and the arrays are read-only, so
    threads sharing an order at worst compute a chunk twice; they never see a torn entry.
    """

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: tuple[tuple[int, _I64], ...] = ()

    def get(self, chunk: int) -> _I64 | None:
        """The values of ``chunk`` if cached, else ``None``."""
        for number, values in self.entries:
            if number == chunk:
                return values
        return None

    def put(self, chunk: int, values: _I64) -> None:
        """Cache ``values`` as ``chunk``, keeping the previous most recent entry."""
        values.flags.writeable = False
        self.entries = ((chunk, values), *self.entries[:1])


@dataclass(frozen=True, slots=True)
class EpochOrder:
    """The order of one epoch: maps a position ``p`` in ``[0, n)`` to a sample index.

    With ``shuffle=False`` it is the identity (``p -> p``).  With
    ``shuffle=True`` it is ``FeistelPermutation(n, derive_key(seed, "shuffle",
    epoch))``.  The order depends only on ``(n, seed, epoch, shuffle)``: not on
    the batch size, the number of workers or the platform.

    Shuffled orders are computed in chunks of :data:`CHUNK` positions, of which the two
    most recent are cached: :meth:`indices` and :meth:`at` read from them and compute only
    what is missing.  The cache is excluded from equality, hashing and ``repr``.

    Attributes:
        n: number of samples in the dataset (``>= 0``).
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        shuffle: whether the epoch is shuffled.

    """

    n: int
    seed: int
    epoch: int
    shuffle: bool
    _perm: FeistelPermutation | None = field(init=False, repr=False, compare=False, hash=False)
    _chunks: _ChunkCache = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        """Validate the fields and build the permutation once."""
        object.__setattr__(self, "n", _check_n(self.n))
        object.__setattr__(self, "seed", as_int("seed", self.seed))
        object.__setattr__(self, "epoch", as_int("epoch", self.epoch))
        object.__setattr__(self, "shuffle", _check_bool("shuffle", self.shuffle))
        perm = None
        if self.shuffle:
            perm = FeistelPermutation(self.n, derive_key(self.seed, "shuffle", self.epoch))
        object.__setattr__(self, "_perm", perm)
        object.__setattr__(self, "_chunks", _ChunkCache())

    def __reduce__(self) -> tuple[type[EpochOrder], tuple[int, int, int, bool]]:
        """Pickle (and copy) as the four fields: the cached chunks are not worth shipping."""
        return EpochOrder, (self.n, self.seed, self.epoch, self.shuffle)

    @property
    def permutation(self) -> FeistelPermutation | None:
        """The underlying permutation, or ``None`` when the epoch is not shuffled."""
        return self._perm

    def indices(self, start: int, stop: int) -> _I64:
        """Return the sample indices at positions ``[start, stop)`` as a new int64 array.

        Shuffled: served from the cached chunks, computing (and caching) the chunk that
        holds ``stop - 1`` when it is missing; other missing parts of a range spanning
        several chunks are computed without being cached.

        Raises:
            TypeError: ``start`` or ``stop`` is not an int.
            ValueError: unless ``0 <= start <= stop <= n``.

        """
        lo = as_int("start", start)
        hi = as_int("stop", stop)
        if not lo <= hi <= self.n:
            raise ValueError(
                f"need 0 <= start <= stop <= n, got start={lo}, stop={hi}, n={self.n}; "
                f"pass a position range inside the epoch"
            )
        return self._range(lo, hi)

    def _range(self, lo: int, hi: int) -> _I64:
        """:meth:`indices` without the argument checks (``0 <= lo <= hi <= n``)."""
        perm = self._perm
        if perm is None:
            return np.arange(lo, hi, dtype=np.int64)
        if lo == hi:
            return np.empty(0, dtype=np.int64)
        first, last = lo // CHUNK, (hi - 1) // CHUNK
        if first == last:
            base = first * CHUNK
            return self._chunk(first)[lo - base : hi - base].copy()
        out = np.empty(hi - lo, dtype=np.int64)
        for number in range(first, last + 1):
            base = number * CHUNK
            a, b = max(lo, base), min(hi, base + CHUNK)
            values = self._chunk(number) if number == last else self._chunks.get(number)
            if values is None:
                out[a - lo : b - lo] = perm.slice(a, b)
            else:
                out[a - lo : b - lo] = values[a - base : b - base]
        return out

    def at(self, positions: npt.ArrayLike) -> _I64:
        """Return the sample indices at arbitrary ``positions`` (any shape) as a new int64 array.

        Positions inside one cached chunk are read from it; anything else is computed
        pointwise (nothing is cached).

        Raises:
            TypeError: ``positions`` is not an integer array.
            ValueError: a position lies outside ``[0, n)``.

        """
        arr = np.asarray(positions)
        perm = self._perm
        if perm is None:
            check_positions(arr, self.n)
            return arr.astype(np.int64)
        if arr.size and np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_:
            low, high = int(arr.min()), int(arr.max())
            number = low // CHUNK
            if low >= 0 and high < self.n and high // CHUNK == number:
                values = self._chunks.get(number)
                if values is not None:
                    offsets = arr.astype(np.intp).reshape(-1) - number * CHUNK
                    return values[offsets].reshape(arr.shape)
        return perm(arr)

    def _chunk(self, number: int) -> _I64:
        """The values at positions ``[number*CHUNK, (number+1)*CHUNK)``, computed if missing."""
        values = self._chunks.get(number)
        if values is None:
            assert self._perm is not None
            base = number * CHUNK
            values = self._perm.slice(base, min(base + CHUNK, self.n))
            self._chunks.put(number, values)
        return values


def check_positions(arr: npt.NDArray[Any], n: int) -> None:
    """Validate an array of positions in ``[0, n)`` (the messages of FeistelPermutation).

    Shared by every order over positions (:class:`EpochOrder`, the shard-aware order).
    """
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"positions must be an array of integers, got dtype {arr.dtype}; "
            f"convert with numpy.asarray(..., dtype=numpy.int64)"
        )
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= n:
            raise ValueError(
                f"positions must lie in [0, n) = [0, {n}), got values in [{low}, {high}]; "
                f"pass only positions below n={n}"
            )


@dataclass(frozen=True, slots=True)
class BatchLayout:
    """How an epoch of ``n`` samples splits into batches of ``batch_size``.

    Torch semantics: batch ``b`` covers positions ``[b*batch_size,
    min((b+1)*batch_size, n))``.  With ``drop_last=True`` a final partial batch
    is dropped (``len == n // batch_size``); otherwise the last batch may be
    partial (``len == ceil(n / batch_size)``).

    Attributes:
        n: number of samples in the epoch (``>= 0``).
        batch_size: samples per batch (``>= 1``).
        drop_last: drop the final partial batch.

    """

    n: int
    batch_size: int
    drop_last: bool

    def __post_init__(self) -> None:
        """Validate the fields."""
        object.__setattr__(self, "n", _check_n(self.n))
        object.__setattr__(self, "batch_size", as_int("batch_size", self.batch_size, minimum=1))
        object.__setattr__(self, "drop_last", _check_bool("drop_last", self.drop_last))

    def __len__(self) -> int:
        """Return the number of batches in the epoch."""
        if self.drop_last:
            return self.n // self.batch_size
        return (self.n + self.batch_size - 1) // self.batch_size

    @property
    def samples_per_epoch(self) -> int:
        """Number of samples actually delivered in an epoch."""
        if self.drop_last:
            return (self.n // self.batch_size) * self.batch_size
        return self.n

    @property
    def dropped(self) -> int:
        """Number of samples dropped per epoch by ``drop_last`` (``0`` without it)."""
        return self.n - self.samples_per_epoch

    def bounds(self, batch_index: int) -> tuple[int, int]:
        """Return the position range ``(start, stop)`` of batch ``batch_index``.

        Raises:
            TypeError: ``batch_index`` is not an int.
            IndexError: ``batch_index`` is not in ``[0, len(self))``.

        """
        b = as_int("batch_index", batch_index, minimum=None)
        count = len(self)
        if not 0 <= b < count:
            raise IndexError(
                f"batch_index {b} is out of range: this epoch has {count} batches "
                f"(n={self.n}, batch_size={self.batch_size}, drop_last={self.drop_last}); "
                f"pass 0 <= batch_index < {count}"
            )
        start = b * self.batch_size
        return start, min(start + self.batch_size, self.n)


def epoch_batches(
    n: int,
    batch_size: int,
    *,
    seed: int,
    epoch: int,
    shuffle: bool,
    drop_last: bool,
    start_batch: int = 0,
) -> Iterator[npt.NDArray[np.int64]]:
    """Lazily yield the sample-index arrays of batches ``start_batch, ..., len - 1``.

    Arguments are validated eagerly (when this function is called, not on the
    first ``next``).  Each step reads one batch from the order's cached chunks
    (computing a chunk of :data:`CHUNK` positions when the batch enters it), so
    memory stays O(CHUNK + batch_size); nothing is materialized up front.

    Args:
        n: number of samples (``>= 0``).
        batch_size: samples per batch (``>= 1``).
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        shuffle: shuffle the epoch (see :class:`EpochOrder`).
        drop_last: drop the final partial batch (see :class:`BatchLayout`).
        start_batch: first batch to yield, ``0 <= start_batch <= len`` (``len``
            yields nothing): resuming mid-epoch yields exactly the tail.

    Raises:
        TypeError / ValueError: an argument has the wrong type or range.

    """
    order = EpochOrder(n=n, seed=seed, epoch=epoch, shuffle=shuffle)
    layout = BatchLayout(n=n, batch_size=batch_size, drop_last=drop_last)
    first = as_int("start_batch", start_batch)
    if first > len(layout):
        raise ValueError(
            f"start_batch must be <= the number of batches ({len(layout)}), got {first}; "
            f"pass 0 <= start_batch <= {len(layout)}"
        )
    return _iter_batches(order, layout, first)


def _iter_batches(
    order: EpochOrder, layout: BatchLayout, first: int
) -> Iterator[npt.NDArray[np.int64]]:
    """Yield the batches of ``layout`` from ``first`` on (the generator behind epoch_batches)."""
    for b in range(first, len(layout)):
        start, stop = layout.bounds(b)
        yield order.indices(start, stop)


def batch_indices(
    n: int,
    batch_size: int,
    *,
    seed: int,
    epoch: int,
    shuffle: bool,
    drop_last: bool,
    batch_index: int,
) -> npt.NDArray[np.int64]:
    """Return the sample indices of batch ``batch_index`` directly, as an int64 array.

    O(batch_size) time and memory (computed pointwise, nothing cached), with no
    dependence on other batches: equal to the ``batch_index``-th array of
    :func:`epoch_batches` with the same arguments.  To read many batches of one
    epoch, keep one :class:`EpochOrder` and call its :meth:`~EpochOrder.indices`
    instead: it computes the order in chunks and reuses them.

    Raises:
        TypeError / ValueError: an argument has the wrong type or range.
        IndexError: ``batch_index`` is not in ``[0, number of batches)``.

    """
    order = EpochOrder(n=n, seed=seed, epoch=epoch, shuffle=shuffle)
    layout = BatchLayout(n=n, batch_size=batch_size, drop_last=drop_last)
    start, stop = layout.bounds(batch_index)
    perm = order.permutation
    if perm is None:
        return np.arange(start, stop, dtype=np.int64)
    return perm.slice(start, stop)  # a throwaway order: a cached chunk would not be reused
