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

from loaderkit.order.keys import _as_int

__all__ = ["EpochBatches"]

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
        dropped_batches: for the result of :meth:`shard` with ``even=True``, the number of
            batches of the sharded epoch that no rank delivers (``len(epoch) % world_size``,
            the last ones); ``0`` otherwise. It describes the last :meth:`shard` call only.

    Instances compare by identity (compare the arrays to compare contents). The constructor
    validates the layout in O(number of batches); it does not copy the arrays.

    """

    indices: _Indices
    offsets: _I64
    dropped_batches: int = 0

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
        dropped = _as_int("dropped_batches", self.dropped_batches)
        object.__setattr__(self, "dropped_batches", dropped)

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
        index = _as_int("b", b, minimum=None)
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

    def shard(self, world_size: int, rank: int, *, even: bool = True) -> EpochBatches:
        """The batches of one rank: global batches ``rank, rank + W, rank + 2W, ...``.

        ``W = world_size``. With ``even=True`` (the default) only the first
        ``W * (len(self) // W)`` global batches are dealt, so every rank gets exactly
        ``len(self) // W`` batches (collectives cannot hang on a missing batch) and the last
        ``len(self) % W`` batches are dropped on every rank, counted in the result's
        :attr:`dropped_batches`. With ``even=False`` every batch is dealt and the first
        ``len(self) % W`` ranks get one batch more. Either way the ranks are disjoint and
        their union is the dealt batches.

        Raises:
            TypeError: an argument has the wrong type.
            ValueError: ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.

        """
        world = _as_int("world_size", world_size, minimum=1)
        r = _as_int("rank", rank)
        if r >= world:
            raise ValueError(
                f"rank must be in [0, world_size) = [0, {world}), got {r}; pass the rank of "
                f"this process"
            )
        if not isinstance(even, (bool, np.bool_)):
            raise TypeError(f"even must be a bool, got {type(even).__name__} {even!r}")
        count = len(self)
        dealt = count - count % world if even else count
        chosen = np.arange(r, dealt, world, dtype=np.int64)
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
        return EpochBatches(indices, offsets, count - dealt)


def _describe(value: Any) -> str:
    """A short description of a value for error messages."""
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {value.shape}"
    return type(value).__name__
