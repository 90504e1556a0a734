"""The batches of one epoch, materialized: :class:`EpochBatches`.

The batch layouts of :mod:`loaderkit.order.epoch` and :mod:`loaderkit.order.shard` are
arithmetic (batch ``b`` is a range of positions of the epoch order), so they are never
materialized. Layouts whose batches have different sizes and are not ranges of one order (the
length-bucketed batches of :mod:`loaderkit.order.bucketing`) are stored instead, compactly, as
two arrays in the CSR style:

- ``indices``: the sample indices of all batches, concatenated in batch order;
- ``offsets``: ``len == num_batches + 1``, ``offsets[0] == 0``, non-decreasing, and
  ``offsets[-1] == len(indices)``; batch ``b`` is ``indices[offsets[b]:offsets[b + 1]]``.

``indices`` is ``int32`` whenever every index fits (always for datasets below ``2**31``
samples: a 10M-sample epoch then takes 40 MB instead of 80), else ``int64``; :meth:`batch`
always returns a fresh ``int64`` array. The arrays built by loaderkit are read-only, so an
``EpochBatches`` can be shared between threads.

Pure numpy; never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.keys import as_int

__all__ = ["EpochBatches", "batch_count", "even_offsets", "frozen_batches", "index_dtype"]

_I64 = npt.NDArray[np.int64]
_Indices = npt.NDArray[np.int32] | npt.NDArray[np.int64]

#: Largest number of samples whose indices are stored as int32.
INT32_LIMIT = 2**31


def index_dtype(n: int) -> type[np.int32] | type[np.int64]:
    """The dtype :class:`EpochBatches` uses for the indices of a dataset of ``n`` samples."""
    return np.int32 if n <= INT32_LIMIT else np.int64


@dataclass(frozen=True, slots=True, eq=False)
class EpochBatches:
    """The batches of one epoch as two arrays: all sample indices concatenated, and offsets.

    Batch ``b`` is ``indices[offsets[b]:offsets[b + 1]]``.

    Attributes:
        indices: the sample indices of every batch, concatenated in batch order; ``int32``
            when the dataset has at most ``2**31`` samples, else ``int64``. Read
            :meth:`batch` for an ``int64`` copy of one batch.
        offsets: ``int64``, ``len(offsets) == len(self) + 1``, ``offsets[0] == 0``,
            non-decreasing, ``offsets[-1] == len(indices)``.
        dropped_batches: for the result of :meth:`shard` or :meth:`split`, the number of
            batches of the epoch that no rank delivers (:meth:`shard` with ``even=True``: the
            incomplete last round; :meth:`split` with ``drop_last``: the partial global
            batches); ``0`` otherwise.
        repeated_samples: for the result of :meth:`shard` (``wrap=True``) or :meth:`split`
            (``even=True``), the samples all ranks together deliver a second time to even
            out the ranks (the wrap-around); ``0`` otherwise.

    Instances compare by identity (compare the arrays to compare contents). The constructor
    validates the layout in O(number of batches); it does not copy the arrays.

    """

    indices: _Indices
    offsets: _I64
    dropped_batches: int = 0
    repeated_samples: int = 0

    def __post_init__(self) -> None:
        """Validate the layout (dtypes, shapes, offsets)."""
        indices, offsets = self.indices, self.offsets
        if not isinstance(indices, np.ndarray) or indices.ndim != 1:
            raise TypeError(
                f"indices must be a 1-d numpy array, got {_describe(indices)}; "
                f"pass numpy.asarray(..., dtype=numpy.int64)"
            )
        if indices.dtype not in (np.int32, np.int64):
            raise TypeError(
                f"indices must have dtype int32 or int64, got {indices.dtype}; "
                f"convert with indices.astype(numpy.int64)"
            )
        if not isinstance(offsets, np.ndarray) or offsets.ndim != 1 or offsets.dtype != np.int64:
            raise TypeError(
                f"offsets must be a 1-d int64 numpy array, got {_describe(offsets)}; "
                f"convert with numpy.asarray(offsets, dtype=numpy.int64)"
            )
        if offsets.size == 0 or offsets[0] != 0 or offsets[-1] != indices.size:
            raise ValueError(
                f"offsets must start at 0 and end at len(indices) = {indices.size} "
                f"(got {offsets.size} offsets"
                + (f", first {int(offsets[0])}, last {int(offsets[-1])})" if offsets.size else ")")
                + "; offsets has one more entry than there are batches"
            )
        if offsets.size > 1 and bool(np.any(offsets[1:] < offsets[:-1])):
            bad = int(np.argmax(offsets[1:] < offsets[:-1]))
            raise ValueError(
                f"offsets must be non-decreasing, but offsets[{bad + 1}] = "
                f"{int(offsets[bad + 1])} < offsets[{bad}] = {int(offsets[bad])}"
            )
        dropped = as_int("dropped_batches", self.dropped_batches)
        object.__setattr__(self, "dropped_batches", dropped)
        repeated = as_int("repeated_samples", self.repeated_samples)
        object.__setattr__(self, "repeated_samples", repeated)

    def __len__(self) -> int:
        """The number of batches."""
        return int(self.offsets.size) - 1

    @property
    def num_samples(self) -> int:
        """The number of samples in all batches (``len(indices)``)."""
        return int(self.indices.size)

    def batch(self, b: int) -> _I64:
        """The sample indices of batch ``b`` as a new ``int64`` array.

        Raises:
            TypeError: ``b`` is not an int.
            IndexError: ``b`` is not in ``[0, len(self))``.

        """
        index = as_int("b", b, minimum=None)
        count = len(self)
        if not 0 <= index < count:
            raise IndexError(
                f"batch {index} is out of range: this epoch has {count} batches; "
                f"pass 0 <= b < {count}"
            )
        lo, hi = int(self.offsets[index]), int(self.offsets[index + 1])
        return self.indices[lo:hi].astype(np.int64)

    def sizes(self) -> _I64:
        """The number of samples of every batch (a new ``int64`` array of ``len(self)``)."""
        return np.diff(self.offsets)

    def shard(
        self, world_size: int, rank: int, *, even: bool = True, wrap: bool = False
    ) -> EpochBatches:
        """The batches of one rank: global batches ``rank, rank + W, rank + 2W, ...``.

        ``W = world_size``. With ``even=True`` (the default) only the first
        ``W * (len(self) // W)`` global batches are dealt, so every rank gets exactly
        ``len(self) // W`` batches (collectives cannot hang on a missing batch) and the last
        ``len(self) % W`` batches are dropped on every rank, counted in the result's
        :attr:`dropped_batches`. With ``even=False`` every batch is dealt and the first
        ``len(self) % W`` ranks get one batch more. Either way the ranks are disjoint and
        their union is the dealt batches. With ``even=True`` and ``wrap=True`` the last round is
        completed instead of dropped: dealing goes on from the first batch of the epoch
        (global batch ``j`` reads batch ``j mod len(self)``), and the samples of the batches
        dealt twice are counted in :attr:`repeated_samples` (over all ranks).

        Raises:
            TypeError: an argument has the wrong type.
            ValueError: ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.

        """
        world = as_int("world_size", world_size, minimum=1)
        r = as_int("rank", rank)
        if r >= world:
            raise ValueError(
                f"rank must be in [0, world_size) = [0, {world}), got {r}; pass the rank of "
                f"this process"
            )
        if not isinstance(even, (bool, np.bool_)):
            raise TypeError(f"even must be a bool, got {type(even).__name__} {even!r}")
        if not isinstance(wrap, (bool, np.bool_)):
            raise TypeError(f"wrap must be a bool, got {type(wrap).__name__} {wrap!r}")
        count = len(self)
        repeated = 0
        if even and wrap and count % world:
            dealt = count + world - count % world
            extra = np.arange(count, dealt, dtype=np.int64) % count
            repeated = int((self.offsets[extra + 1] - self.offsets[extra]).sum())
        else:
            dealt = count - count % world if even else count
        chosen = np.arange(r, dealt, world, dtype=np.int64) % max(count, 1)
        starts = self.offsets[chosen]
        sizes = self.offsets[chosen + 1] - starts
        offsets = np.zeros(chosen.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        # position k of the shard reads position k + (start of its batch - its new offset)
        source = np.repeat(starts - offsets[:-1], sizes)
        source += np.arange(total, dtype=np.int64)
        indices = self.indices[source]
        indices.flags.writeable = False
        offsets.flags.writeable = False
        return EpochBatches(indices, offsets, max(count - dealt, 0), repeated)

    def split(
        self,
        world_size: int,
        rank: int,
        per_rank: int,
        *,
        even: bool = True,
        drop_last: bool = False,
        segment_starts: npt.ArrayLike | None = None,
    ) -> EpochBatches:
        """The batches of one rank when every batch of ``self`` is a *global* batch.

        Rank ``r`` holds positions ``[r * per_rank, (r + 1) * per_rank)`` of every global batch,
        so the ranks' ``s``-th batches in rank order are global batch ``s``: the same for every
        world size when the global batch size ``world_size * per_rank`` is. A global batch
        with fewer than ``G = world_size * per_rank`` samples (a partial one):

        - ``drop_last=True``: dropped on every rank;
        - ``even=True``: completed to ``G`` samples by wrapping around to the start of its
          segment (the whole epoch, or the segment given by ``segment_starts``), cyclically;
          every rank gets one batch of ``per_rank`` samples, and the added samples are
          counted in :attr:`repeated_samples` (over all ranks);
        - otherwise: each rank holds what is left of its slice; a rank whose slice is empty
          has no batch there (ranks may then have different numbers of batches).

        ``segment_starts`` are the batch numbers where a segment begins (the first one 0),
        e.g. the sources of a sequential mixture, so that a partial batch is completed from
        its own segment.

        Raises:
            TypeError / ValueError: an argument has the wrong type or is out of range.

        """
        world = as_int("world_size", world_size, minimum=1)
        r = as_int("rank", rank)
        size = as_int("per_rank", per_rank, minimum=1)
        if r >= world:
            raise ValueError(
                f"rank must be in [0, world_size) = [0, {world}), got {r}; pass the rank of "
                f"this process"
            )
        for name, flag in (("even", even), ("drop_last", drop_last)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__} {flag!r}")
        count = len(self)
        whole = world * size
        lengths = np.diff(self.offsets)
        if bool((lengths > whole).any()):
            bad = int(np.argmax(lengths > whole))
            raise ValueError(
                f"batch {bad} holds {int(lengths[bad])} samples, more than a global batch of "
                f"world_size x per_rank = {whole}; build the epoch with that batch size"
            )
        kept = np.arange(count, dtype=np.int64)
        if drop_last:
            kept = kept[lengths == whole]
        if segment_starts is None:
            firsts = np.zeros(1, dtype=np.int64)
        else:
            firsts = np.asarray(segment_starts, dtype=np.int64).reshape(-1)
            if firsts.size == 0 or firsts[0] != 0 or bool((np.diff(firsts) <= 0).any()):
                raise ValueError(
                    "segment_starts must be increasing batch numbers starting at 0, got "
                    f"{firsts.tolist()[:8]}"
                )
        bounds = np.append(firsts, count)
        segment = np.searchsorted(firsts, kept, side="right") - 1
        seg_lo = self.offsets[bounds[segment]]
        seg_len = self.offsets[bounds[segment + 1]] - seg_lo
        starts, sizes = self.offsets[kept], lengths[kept]
        slot = r * size + np.arange(size, dtype=np.int64)  # positions of this rank's slice
        inside = slot[None, :] < sizes[:, None]
        wrapped = (slot[None, :] - sizes[:, None]) % np.maximum(seg_len, 1)[:, None]
        source = np.where(inside, starts[:, None] + slot[None, :], seg_lo[:, None] + wrapped)
        if even:
            rows = source
            counts = np.full(kept.size, size, dtype=np.int64)
            repeated = int(np.maximum(whole - sizes, 0).sum())
        else:
            counts = inside.sum(axis=1).astype(np.int64)
            rows = source[inside]
            repeated = 0
        offsets = np.zeros(int((counts > 0).sum()) + 1, dtype=np.int64)
        np.cumsum(counts[counts > 0], out=offsets[1:])
        indices = self.indices[rows.reshape(-1)]
        indices.flags.writeable = False
        offsets.flags.writeable = False
        return EpochBatches(indices, offsets, count - int(kept.size), repeated)


def batch_count(count: int, size: int, drop_last: bool) -> int:
    """The number of consecutive batches of ``size`` that ``count`` positions make.

    ``ceil(count / size)``, the last batch possibly partial, or ``count // size`` with
    ``drop_last`` (PyTorch ``BatchSampler`` semantics).
    """
    full, rest = divmod(count, size)
    return full + (1 if rest and not drop_last else 0)


def even_offsets(count: int, size: int, batches: int) -> _I64:
    """The offsets of ``batches`` consecutive batches of ``size`` over ``count`` positions.

    Batch ``b`` starts at ``b * size``; the last one ends at ``min(batches * size, count)``
    (a partial last batch ends at ``count``).
    """
    offsets = np.arange(batches + 1, dtype=np.int64) * size
    offsets[-1] = min(batches * size, count)
    return offsets


def frozen_batches(indices: npt.NDArray[Any], offsets: _I64) -> EpochBatches:
    """An :class:`EpochBatches` over ``indices`` and ``offsets``, made read-only (not copied)."""
    indices.flags.writeable = False
    offsets.flags.writeable = False
    return EpochBatches(indices, offsets)


def _describe(value: Any) -> str:
    """A short description of a value for error messages."""
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    return type(value).__name__
