"""The weighted mode of mixtures: the weight rows and the source label of every position.

:func:`~loaderkit.order.mixture.mixture_batches` with ``mode="weighted"`` decides which source
each position of the epoch reads with the functions here: :func:`weight_rows` checks the
weights (one row, or one row per batch) and makes their running sums, :func:`draw_labels`
draws each position's source by weight (step 3 of the :mod:`loaderkit.order.mixture`
docstring, part of the order contract) and :func:`stratified_labels` gives each batch its
per-source counts by systematic sampling (step 4). The labels are small signed integers
(:func:`label_dtype`); :mod:`loaderkit.order.mixture` then places the sources' samples.

Pure numpy and the standard library; never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.keys import as_real_array
from loaderkit.order.uniforms import BLOCK, uniform_draws

__all__ = [
    "COMPONENT_STRATA",
    "COMPONENT_WEIGHTS",
    "draw_labels",
    "label_dtype",
    "stratified_labels",
    "weight_rows",
]

#: Key path component of the weighted draws. Part of the order contract.
COMPONENT_WEIGHTS = "mixture-weights"
#: Key path component of the stratified counts. Part of the order contract.
COMPONENT_STRATA = "mixture-strata"

# Up to this many sources the weighted draw counts ``c_s <= t`` directly (faster than a search).
_FEW_SOURCES = 8

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]
_Int = npt.NDArray[Any]


def weight_rows(
    weights: object, sizes: tuple[int, ...], num_batches: int
) -> tuple[_F64, _F64, _I64]:
    """The weight rows, validated: ``(cdf, totals, last)``.

    ``cdf`` is ``numpy.cumsum`` of each row (shape ``(rows, k)``, one row for 1-d weights),
    ``totals`` its last column, ``last`` the last positive-weight source of each row.
    """
    k = len(sizes)
    if weights is None:
        w = np.asarray(sizes, dtype=np.float64).reshape(1, k)
    else:
        arr = as_real_array(
            "weights",
            weights,
            bool_hint="pass numeric source weights, e.g. weights=[0.7, 0.3]",
            hint="pass e.g. weights=[0.7, 0.3] (one weight per source)",
        )
        if arr.ndim not in (1, 2) or arr.shape[-1] != k:
            raise ValueError(
                f"weights must have shape ({k},) (one weight per source) or "
                f"({num_batches}, {k}) (one row per batch), got shape {arr.shape}"
            )
        if arr.ndim == 2 and arr.shape[0] != num_batches:
            raise ValueError(
                f"weights of shape (rows, {k}) must have one row per batch: this epoch has "
                f"{num_batches} batches (mixture_num_batches), got {arr.shape[0]} rows; "
                f"pass a 1-d array of {k} weights for weights that do not change"
            )
        w = np.asarray(arr, dtype=np.float64).reshape(-1, k)
        one_d = arr.ndim == 1

        def where(flat: int) -> str:
            row, col = divmod(flat, k)
            return f"weights[{col}]" if one_d else f"weights[{row}, {col}]"

        finite = np.isfinite(w)
        if not bool(finite.all()):
            bad = int(np.argmin(finite.ravel()))
            raise ValueError(
                f"weights must be finite, but {where(bad)} = {float(w.flat[bad])}; "
                f"give every source a finite weight >= 0"
            )
        if w.size and float(w.min()) < 0:
            bad = int(np.argmax(w.ravel() < 0))
            raise ValueError(
                f"weights must be >= 0, but {where(bad)} = {float(w.flat[bad])}; "
                f"use 0 for a source that must not be drawn"
            )
        if w.size:
            empty = w.max(axis=1) == 0.0
            if bool(empty.any()):
                row = int(np.argmax(empty))
                what = "weights are" if one_d else f"weights of row {row} (batch {row}) are"
                raise ValueError(f"the {what} all zero; give at least one source a positive weight")
    with np.errstate(over="ignore"):  # an infinite sum is refused below
        cdf: _F64 = np.cumsum(w, axis=1)
    totals: _F64 = cdf[:, -1].copy()
    if not bool(np.isfinite(totals).all()):
        raise ValueError(
            "the sum of the weights overflows float64 (it is inf); rescale the weights, "
            "e.g. weights / weights.max()"
        )
    last: _I64 = (k - 1 - np.argmax(w[:, ::-1] > 0, axis=1)).astype(np.int64)
    return cdf, totals, last


def label_dtype(k: int) -> type[np.signedinteger[Any]]:
    """The smallest signed dtype holding the labels ``0 .. k-1``."""
    if k <= 2**7:
        return np.int8
    if k <= 2**15:
        return np.int16
    return np.int32


def draw_labels(
    cdf: _F64, totals: _F64, last: _I64, seed: int, epoch: int, count: int, size: int
) -> _Int:
    """The labels of the weighted draw (step 3) for positions ``0 .. count-1``."""
    k = int(cdf.shape[1])
    per_batch = cdf.shape[0] > 1
    labels = np.empty(count, dtype=label_dtype(k))
    flat = cdf.ravel()
    steps = k.bit_length()  # halvings of the k + 1 possible answers down to one
    found: _Int
    for a in range(0, count, BLOCK):
        b = min(a + BLOCK, count)
        u = uniform_draws(seed, COMPONENT_WEIGHTS, epoch, a, b)
        if not per_batch and k <= _FEW_SOURCES:
            u *= totals[0]
            found = np.zeros(b - a, dtype=labels.dtype)  # #{s : c_s <= t}, counted directly
            for c in cdf[0, :-1].tolist():  # c_{k-1} needs no test: the clip to last <= k - 1
                found += u >= c
            np.minimum(found, last[0], out=found)
        elif not per_batch:
            u *= totals[0]
            found = np.searchsorted(cdf[0], u, side="right")
            np.minimum(found, last[0], out=found)
        else:
            rows = np.arange(a, b, dtype=np.int64) // size
            u *= totals[rows]
            # #{s : c_s <= t} in each position's row: a binary search over [0, k]
            base = rows * k
            lo = np.zeros(b - a, dtype=np.int64)
            hi = np.full(b - a, k, dtype=np.int64)
            for _ in range(steps):
                mid = lo + hi
                mid >>= 1
                open_ = lo < hi
                probe = np.minimum(mid, k - 1)
                probe += base
                passed = flat[probe] <= u
                lo = np.where(open_ & passed, mid + 1, lo)
                hi = np.where(open_ & ~passed, mid, hi)
            found = np.minimum(lo, last[rows])
        labels[a:b] = found
    return labels


def stratified_labels(
    cdf: _F64, totals: _F64, seed: int, epoch: int, count: int, size: int
) -> _Int:
    """The labels of the stratified batches (step 4) for positions ``0 .. count-1``."""
    k = int(cdf.shape[1])
    per_batch = cdf.shape[0] > 1
    num_batches = -(-count // size)
    ratios: _F64 = cdf / totals[:, None]  # fl(c_s / S); the last column is exactly 1
    labels = np.empty(count, dtype=label_dtype(k))
    sources = np.arange(k, dtype=labels.dtype)
    step = max(1, BLOCK // k)  # batches per block: a block's counts hold about BLOCK entries
    written = 0
    for first in range(0, num_batches, step):
        stop = min(first + step, num_batches)
        fill = np.full(stop - first, float(size))
        if stop == num_batches:
            fill[-1] = float(count - (num_batches - 1) * size)  # a partial last batch
        u = uniform_draws(seed, COMPONENT_STRATA, epoch, first, stop)
        counts = np.empty((stop - first, k), dtype=np.int64)
        below = np.zeros(stop - first, dtype=np.int64)  # N(Q_{s-1})
        for s in range(k):
            quota = fill * (ratios[first:stop, s] if per_batch else ratios[0, s])
            whole = np.floor(quota)
            reached = whole.astype(np.int64)
            reached += (quota - whole) > u
            np.subtract(reached, below, out=counts[:, s])
            below = reached
        chunk = np.repeat(np.tile(sources, stop - first), counts.ravel())
        labels[written : written + chunk.size] = chunk
        written += chunk.size
    return labels
