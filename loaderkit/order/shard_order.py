"""The shard-aware shuffle: shards shuffled, then samples shuffled within a window of shards.

A sharded dataset is a sequence of shards of ``counts[k]`` samples each; sample ``i`` of the
dataset is sample ``i - start[k]`` of shard ``k``, ``start`` the exclusive cumulative sum of
``counts``. Epoch ``e`` of seed ``s`` with a window of ``N`` shards (:class:`ShardOrder`) is:

1. **The shards in order.** ``shards[j] = FeistelPermutation(S, derive_key(s, "shard_order",
   "shards", e))(j)`` for ``j`` in ``[0, S)``, ``S`` the number of shards.
2. **Windows.** Window ``w`` is the ``N`` consecutive shards ``shards[w*N : (w+1)*N]`` (the
   last one may hold fewer). Laid end to end in that order, the shards' samples cover
   positions ``[0, n)``: window ``w`` covers ``[W[w], W[w+1])``, where ``W`` is the
   cumulative sample count of the windows.
3. **Within a window.** Position ``p`` of window ``w`` is its ``q = p - W[w]``-th position;
   ``q' = FeistelPermutation(W[w+1] - W[w], derive_key(s, "shard_order", "window", e, w))(q)``
   is a position in the window's shards laid end to end, which names one shard of the window
   and a sample in it: that sample's dataset index is the value at ``p``.

So an epoch reads the shards of one window, every one of them from its first sample to its
last, in a random interleaving, before the next window; the samples of a window come only
from its shards. The order is a pure function of ``(counts, seed, epoch, N)``: it does not
depend on the batch size, the number of workers or ranks, or where the shard files are.
Memory is a few arrays of one entry per shard (the shard order and cumulative counts); there
is never an array of the epoch's samples, and any position costs the same to map (two binary
searches and one Feistel evaluation).

The shard cache reads the future of the order here: :meth:`ShardOrder.shard_uses` gives, for
a range of positions, the shards in the order they are first needed and the first and last
position each is used at (:class:`ShardUses`); :meth:`ShardOrder.window_spans` the span of
positions that holds every use of each shard (its window's), for one array of per-shard size.

Pure numpy (never torch); the values are part of the order contract (golden vectors in the
tests pin them).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from loaderkit.order.epoch import check_positions
from loaderkit.order.feistel import MAX_N, FeistelPermutation
from loaderkit.order.keys import as_int, derive_key

__all__ = [
    "COMPONENT",
    "DEFAULT_WINDOW_SHARDS",
    "ShardOrder",
    "ShardUses",
    "check_counts",
]

COMPONENT = "shard_order"
"""The stable component name every key of the shard-aware shuffle derives from."""

DEFAULT_WINDOW_SHARDS = 16
"""The window of a shard-aware shuffle when ``with_shuffle()`` sets none (see
``docs/sampling.md``, "Shard-aware shuffle", for the measurements behind it)."""

USES_CHUNK = 1 << 16
"""Positions mapped per step of :meth:`ShardOrder.shard_uses` (speed only, never values)."""

_WINDOW_CACHE = 8
"""Window permutations kept per order (the windows a batch and its neighbours touch)."""

_I64 = npt.NDArray[np.int64]


def check_counts(counts: object) -> _I64:
    """Return ``counts`` (samples per shard) as a read-only 1-D int64 array.

    Raises:
        TypeError: ``counts`` is not a sequence or array of integers.
        ValueError: ``counts`` is not 1-D, holds a negative count, or sums past ``2**63 - 1``.

    """
    arr = np.asarray(counts)
    if arr.size == 0 and arr.ndim == 1:
        arr = arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"shard counts must be integers (samples per shard), got dtype {arr.dtype}; pass "
            f"a tuple of ints such as (1000, 1000, 512)"
        )
    if arr.ndim != 1:
        raise ValueError(
            f"shard counts must be one count per shard (1-D), got shape {arr.shape}; pass a "
            f"flat tuple of ints"
        )
    if arr.size and int(arr.min()) < 0:
        raise ValueError(
            f"shard counts must be >= 0, got {int(arr.min())} for shard "
            f"{int(np.argmin(arr))}; pass the number of samples in each shard"
        )
    largest = int(arr.max()) if arr.size else 0
    if largest * arr.size > MAX_N and sum(int(c) for c in arr.tolist()) > MAX_N:
        raise ValueError("shard counts sum past 2**63 - 1; use fewer samples")
    out = arr.astype(np.int64)  # a fresh array: the caller's is never frozen
    out.flags.writeable = False
    return out


def _exclusive_cumsum(values: _I64) -> _I64:
    """``[0, v0, v0+v1, ...]``: ``len(values) + 1`` entries, read-only."""
    out = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(values, out=out[1:])
    out.flags.writeable = False
    return out


class ShardUses(NamedTuple):
    """The shards a range of positions reads, in the order they are first needed.

    Three int64 arrays of one entry per shard used: ``shards[i]`` is first read at position
    ``first[i]`` and last at ``last[i]`` (both inside the range); ``first`` is increasing.
    At position ``t`` (``start <= t``), the next use of every shard the range ``[t, stop)``
    reads is its ``first`` in ``shard_uses(t, stop)``: the furthest one is the shard an
    optimal cache evicts (Belady's rule).
    """

    shards: _I64
    first: _I64
    last: _I64


class ShardOrder:
    """The shard-aware order of one epoch: position -> dataset index, computed pointwise.

    See the module docstring for the definition. ``window_shards`` larger than the number of
    shards makes one window of every shard: a full shuffle of the epoch (keyed differently
    from :class:`~loaderkit.order.epoch.EpochOrder`'s).

    Safe to share between threads (the window permutations are a cache replaced in one store).
    """

    __slots__ = (
        "_key_epoch",
        "_order_starts",
        "_shard_starts",
        "_windows",
        "counts",
        "epoch",
        "n",
        "seed",
        "shards",
        "window_shards",
        "window_starts",
    )

    def __init__(self, counts: object, seed: int, epoch: int, window_shards: int) -> None:
        """The order of ``epoch`` over shards of ``counts`` samples, with ``window_shards``.

        Args:
            counts: samples per shard, in the dataset's shard order (empty shards allowed).
            seed: the user's seed (``>= 0``).
            epoch: the epoch number (``>= 0``).
            window_shards: shards per window (``>= 1``).

        Raises:
            TypeError / ValueError: an argument has the wrong type or range.

        """
        self.counts = check_counts(counts)
        self.seed = as_int("seed", seed)
        self.epoch = as_int("epoch", epoch)
        self.window_shards = as_int("window_shards", window_shards, minimum=1)
        num = self.counts.size
        self._shard_starts = _exclusive_cumsum(self.counts)
        self.n = int(self._shard_starts[-1])
        perm = FeistelPermutation(num, derive_key(self.seed, COMPONENT, "shards", self.epoch))
        shards = perm.slice(0, num)
        shards.flags.writeable = False
        self.shards: _I64 = shards
        """The shards in the epoch's order (read-only, one entry per shard)."""
        self._order_starts = _exclusive_cumsum(self.counts[shards])
        window_starts = np.append(self._order_starts[: num : self.window_shards], self.n)
        if num == 0:
            window_starts = np.zeros(1, dtype=np.int64)
        window_starts.flags.writeable = False
        self.window_starts: _I64 = window_starts
        """The first position of each window, then ``n`` (read-only)."""
        self._windows: tuple[tuple[int, FeistelPermutation], ...] = ()

    def __repr__(self) -> str:
        """``ShardOrder(shards=..., n=..., seed=..., epoch=..., window_shards=...)``."""
        return (
            f"ShardOrder(shards={self.counts.size}, n={self.n}, seed={self.seed}, "
            f"epoch={self.epoch}, window_shards={self.window_shards})"
        )

    def __reduce__(self) -> tuple[type[ShardOrder], tuple[Any, int, int, int]]:
        """Pickle as the four arguments: the rest is recomputed."""
        return ShardOrder, (self.counts, self.seed, self.epoch, self.window_shards)

    @property
    def num_windows(self) -> int:
        """Windows in the epoch: ``ceil(shards / window_shards)``."""
        return int(self.window_starts.size - 1)

    def window(self, w: int) -> _I64:
        """The shards of window ``w``, in the epoch's shard order (a read-only view)."""
        number = as_int("w", w)
        if number >= self.num_windows:
            raise IndexError(
                f"window {number} is outside [0, {self.num_windows}) for this epoch; pass "
                f"0 <= w < {self.num_windows}"
            )
        size = self.window_shards
        return self.shards[number * size : (number + 1) * size]

    def _permutation(self, w: int) -> FeistelPermutation:
        """The permutation within window ``w`` (the last few are kept)."""
        for number, perm in self._windows:
            if number == w:
                return perm
        size = int(self.window_starts[w + 1] - self.window_starts[w])
        perm = FeistelPermutation(size, derive_key(self.seed, COMPONENT, "window", self.epoch, w))
        self._windows = ((w, perm), *self._windows[: _WINDOW_CACHE - 1])
        return perm

    def _checked(self, positions: npt.ArrayLike) -> npt.NDArray[Any]:
        """``positions`` as an integer array, every value in ``[0, n)``."""
        arr = np.asarray(positions)
        check_positions(arr, self.n)
        return arr

    def _slots(self, flat: _I64) -> _I64:
        """Positions (flat, valid) -> positions in the epoch's shards laid end to end."""
        starts = self.window_starts
        windows = np.searchsorted(starts, flat, side="right") - 1
        out = np.empty_like(flat)
        if not flat.size:
            return out
        if windows[0] == windows[-1] and (windows == windows[0]).all():  # one window: a batch
            base = starts[windows[0]]
            out[:] = self._permutation(int(windows[0]))(flat - base) + base
            return out
        by_window = np.argsort(windows, kind="stable")
        sorted_windows = windows[by_window]
        cuts = np.flatnonzero(np.diff(sorted_windows)) + 1
        for group in np.split(by_window, cuts):
            w = int(windows[group[0]])
            base = starts[w]
            out[group] = self._permutation(w)(flat[group] - base) + base
        return out

    def _shard_positions(self, flat: _I64) -> tuple[_I64, _I64]:
        """Positions -> (index in the shard order, offset in that shard)."""
        slots = self._slots(flat)
        j = np.searchsorted(self._order_starts, slots, side="right") - 1
        return j, slots - self._order_starts[j]

    def at(self, positions: npt.ArrayLike) -> _I64:
        """The dataset indices at ``positions`` (any shape), as a new int64 array.

        Raises:
            TypeError: ``positions`` is not an integer array.
            ValueError: a position lies outside ``[0, n)``.

        """
        arr = self._checked(positions)
        flat = arr.reshape(-1).astype(np.int64)
        j, offset = self._shard_positions(flat)
        out: _I64 = self._shard_starts[self.shards[j]] + offset
        return out.reshape(arr.shape)

    def indices(self, start: int, stop: int) -> _I64:
        """The dataset indices at positions ``[start, stop)`` (``0 <= start <= stop <= n``)."""
        lo, hi = as_int("start", start), as_int("stop", stop)
        if not lo <= hi <= self.n:
            raise ValueError(
                f"need 0 <= start <= stop <= n, got start={lo}, stop={hi}, n={self.n}; pass "
                f"a position range inside the epoch"
            )
        return self.at(np.arange(lo, hi, dtype=np.int64))

    def shard_of(self, positions: npt.ArrayLike) -> _I64:
        """The shard each of ``positions`` (any shape) reads, as a new int64 array."""
        arr = self._checked(positions)
        j, _ = self._shard_positions(arr.reshape(-1).astype(np.int64))
        out: _I64 = self.shards[j]
        return out.reshape(arr.shape)

    def iter_shard_ids(self, start: int, stop: int, chunk: int = USES_CHUNK) -> Iterator[_I64]:
        """The shard of every position of ``[start, stop)``, in arrays of ``chunk`` positions.

        The input of a simulation of a cache over the epoch (bytes downloaded at a budget):
        O(chunk) memory whatever the range.
        """
        lo, hi = as_int("start", start), as_int("stop", stop)
        step = as_int("chunk", chunk, minimum=1)
        if not lo <= hi <= self.n:
            raise ValueError(
                f"need 0 <= start <= stop <= n, got start={lo}, stop={hi}, n={self.n}; pass "
                f"a position range inside the epoch"
            )
        for a in range(lo, hi, step):
            yield self.shard_of(np.arange(a, min(a + step, hi), dtype=np.int64))

    def shard_uses(self, start: int, stop: int) -> ShardUses:
        """The shards positions ``[start, stop)`` read, in the order they are first needed.

        O(stop - start) time in chunks of :data:`USES_CHUNK` positions, O(shards) memory.
        """
        num = self.counts.size
        first = np.full(num, -1, dtype=np.int64)
        last = np.full(num, -1, dtype=np.int64)
        lo = as_int("start", start)
        for ids in self.iter_shard_ids(lo, stop):
            seen, where = np.unique(ids, return_index=True)
            new = seen[first[seen] < 0]
            first[new] = where[first[seen] < 0] + lo
            _, back = np.unique(ids[::-1], return_index=True)
            last[seen] = ids.size - 1 - back + lo
            lo += ids.size
        used = np.flatnonzero(first >= 0)
        ordered = used[np.argsort(first[used], kind="stable")]
        return ShardUses(ordered, first[ordered], last[ordered])

    def window_spans(self) -> tuple[_I64, _I64]:
        """For each shard ``k`` (dataset order), the positions ``[lo[k], hi[k])`` of its window.

        Every use of shard ``k`` in the epoch lies in its span (an empty shard is never used:
        its span is its window's all the same). One array of per-shard size each.
        """
        num = self.counts.size
        which = np.arange(num, dtype=np.int64) // self.window_shards  # window of order slot j
        lo = np.empty(num, dtype=np.int64)
        hi = np.empty(num, dtype=np.int64)
        lo[self.shards] = self.window_starts[which]
        hi[self.shards] = self.window_starts[which + 1]
        return lo, hi
