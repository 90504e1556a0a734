"""Weighted sampling: with replacement (inverse CDF) and without (Efraimidis-Spirakis).

**The algorithm is part of the order contract** (``docs/order.md``): the sampled indices are a
pure function of ``(weights, seed, epoch, num_samples, replacement)``, the same on every
platform and with every numpy release. No numpy ``Generator`` stream and no transcendental
function of numpy or libm is involved (their last bits are not promised stable): only the
splitmix64 finalizer on ``uint64``, exact integer/float conversions, and IEEE-754 binary64
``+ - * /`` with round-to-nearest-even (each correctly rounded, with no fused multiply-add).
Changing any step below is a breaking change. Notation as in ``docs/order.md``: ``wrap(x) = x
mod 2**64``, ``^`` XOR, ``>>`` logical shift; ``fl(x)`` is the binary64 value nearest to the
real ``x`` (ties to even), and every float operation below is one such rounding.

1. **Counter-based uniforms** (:func:`uniform_draws`). With ``key = derive_key(seed, component,
   epoch)`` and, for a position ``p`` (``0 <= p < 2**63``)::

       z = key ^ p
       z = z ^ (z >> 30); z = wrap(z * 0xBF58476D1CE4E5B9)
       z = z ^ (z >> 27); z = wrap(z * 0x94D049BB133111EB)
       z = z ^ (z >> 31)                 # mix64, the finalizer of docs/order.md §2
       k_p = z >> 11                     # an integer in [0, 2**53)
       u_p = k_p * 2**-53                # exact in binary64: u_p in [0, 1 - 2**-53]

   ``u_p`` depends only on ``(seed, component, epoch, p)``, so any range of positions can be
   computed alone (a resumed epoch does not replay the earlier draws).

2. **With replacement** (``replacement=True``, component ``"weights"``). Let ``w_i`` be the
   weights converted to binary64 (``fl`` of each value; exact for ``float16/32/64`` and for
   integers below ``2**53``), ``n = len(w)``, and the running sums computed left to right::

       c_0 = w_0,   c_i = fl(c_{i-1} + w_i)   (i = 1 .. n-1),   T = c_{n-1}

   (``numpy.cumsum``: sequential, never pairwise). Draw ``p`` (``0 <= p < num_samples``) with
   ``u_p`` from step 1 under ``key = derive_key(seed, "weights", epoch)`` is::

       t_p   = fl(u_p * T)
       i_p   = #{ i : c_i <= t_p }          # searchsorted(c, t_p, side="right")
       index = min(i_p, z)                  # z = the largest i with w_i > 0

   That is, ``index`` is the smallest ``i`` with ``c_i > t_p``, and ``P(index = i) = (c_i -
   c_{i-1}) / T``, which is ``w_i / sum(w)`` up to rounding (an absolute error of about
   ``2**-53`` from one addition and from the grid of ``u``, and a relative one of at most
   ``n * 2**-53`` from ``T``). Ties: a ``t_p`` equal to ``c_i`` counts item ``i`` as passed,
   so the draw is a later item. A zero-weight item is never drawn: ``c_i = c_{i-1}`` makes the
   smallest ``i`` with ``c_i > t_p`` a positive-weight item, zero-weight items at the front
   have ``c_i = 0 <= t_p``, and the clip to ``z`` only ever moves to a positive-weight item. A
   positive weight so small against its running sum that ``fl(c_{i-1} + w_i) = c_{i-1}`` is
   absorbed and likewise never drawn. When ``T >= 2**-1022`` (not subnormal), ``u_p <= 1 -
   2**-53`` gives ``t_p < T`` and so ``i_p <= z``; the clip matters only for subnormal totals,
   where ``fl(u_p * T)`` can round up to ``T``.

3. **Without replacement** (``replacement=False``, component ``"weights-noreplace"``): the
   Efraimidis-Spirakis exponential-clock order. Item ``i`` uses ``u_i`` from step 1 at
   position ``p = i`` (its index, whether or not its weight is positive) under ``key =
   derive_key(seed, "weights-noreplace", epoch)``. Every item with ``w_i > 0`` gets the key
   ``r_i = fl(L(u_i) / w_i)``, where ``L`` is the natural logarithm of step 4: ``r_i <= 0``,
   and ``-inf`` when ``u_i = 0`` or the quotient overflows (IEEE). The items sorted by
   ``r_i`` **descending**, ties (equal binary64 values) broken by **ascending index**, form a
   weighted random order: its first item is ``i`` with probability ``w_i / sum(w)``, the
   next one is drawn the same way from the rest, and so on. The result is its first
   ``num_samples`` items (default: all items with a positive weight). Zero-weight items never
   appear; asking for more items than there are positive weights is an error.

4. **The logarithm** ``L(x)`` for ``x = u_p`` in ``[0, 1)``: a fixed sequence of binary64
   operations (within a few ulp of ``ln x``; numpy's and libm's ``log`` are not used because
   their last bit differs between platforms and releases)::

       L(0) = -inf
       (m, e) = frexp(x)                       # exact: x = m * 2**e, 0.5 <= m < 1
       if m < 0x1.6a09e667f3bcdp-1:            # fl(sqrt(1/2))
           m = m + m; e = e - 1                # exact; now sqrt(1/2) <= m < sqrt(2)
       s = fl((m - 1) / fl(m + 1))             # m - 1 is exact
       z = fl(s * s)
       q = C[10]
       for j in 9, 8, ..., 1:  q = fl(fl(q * z) + C[j])   # C[j] = fl(1 / (2j + 1))
       h = fl(s + s)
       r = fl(h + fl(fl(h * z) * q))           # ln(m) = 2 atanh(s) = h (1 + z/3 + z**2/5 ...)
       L(x) = fl(fl(e * LN2_HI) + fl(r + fl(e * LN2_LO)))

   with ``LN2_HI = 0x1.62e42fee00000p-1`` and ``LN2_LO = 0x1.a39ef35793c76p-33`` (fdlibm's
   split of ``ln 2``; ``e * LN2_HI`` is exact) and ``e`` converted exactly to binary64.

The first ``k`` draws do not depend on ``num_samples`` (``>= k``): with replacement draw ``p``
uses ``u_p`` alone, and without replacement the result is a prefix of one order. So
:func:`weighted_batches` with ``drop_last=True`` equals the undropped sequence minus its tail.

**Implementation (not part of the contract: it changes the speed, never the values).** Draws
are computed in blocks of :data:`BLOCK`. With replacement, for at least ``n / 64`` draws, a
guide table (:mod:`loaderkit.order.guide_table`) replaces ``numpy.searchsorted``'s
cache-missing binary search of the whole CDF. Without replacement, the clocks ``-r_i``
(non-negative binary64, so ordered as their bit patterns) get their low bits replaced by the
item's rank among the positive items; one ``numpy.sort`` of these distinct integers orders
them, and the rare runs whose truncated clocks tie are re-sorted by full clock and rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.batches import (
    EpochBatches,
    batch_count,
    even_offsets,
    frozen_batches,
    index_dtype,
)
from loaderkit.order.guide_table import build_guide, search_guided
from loaderkit.order.keys import as_bool, as_int, as_real_array, derive_key
from loaderkit.order.uniforms import BLOCK, UNIT, bits53, bits53_range, uniform_draws

__all__ = ["BLOCK", "uniform_draws", "weighted_batches", "weighted_sample"]

# Block of the float work without replacement (its temporaries stay in the CPU cache).
_SMALL_BLOCK = 1 << 13

#: Key components (part of the contract).
COMPONENT_REPLACE = "weights"
COMPONENT_NOREPLACE = "weights-noreplace"

# The logarithm of step 4 (part of the contract).
_SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_LOG_COEFFS = tuple(1.0 / (2 * j + 1) for j in range(1, 11))  # C[1] .. C[10]

# With replacement: use the guide table when drawing at least n / _GUIDE_RATIO samples (it
# costs about as much to build as _GUIDE_RATIO plain binary searches of a large CDF).
_GUIDE_RATIO = 64

_F64 = npt.NDArray[np.float64]
_U64 = npt.NDArray[np.uint64]
_I64 = npt.NDArray[np.int64]
_Int = npt.NDArray[Any]


# -- validation -------------------------------------------------------------------------------


def _check_weights(weights: object) -> _F64:
    """Validate weights; return them as a 1-d float64 array (not a copy when already one)."""
    arr = as_real_array(
        "weights",
        weights,
        bool_hint="pass numeric weights, e.g. mask.astype(numpy.float64) to sample the True "
        "items uniformly",
        hint="pass numpy.asarray(weights, dtype=numpy.float64)",
    )
    if arr.ndim != 1:
        raise ValueError(
            f"weights must be a 1-d array (one weight per sample), got shape {arr.shape}; "
            f"pass weights.reshape(-1) if that is what you mean"
        )
    if arr.size == 0:
        raise ValueError("weights must not be empty; pass one weight >= 0 per sample")
    w = np.asarray(arr, dtype=np.float64)
    low, high = float(w.min()), float(w.max())  # NaN propagates into both
    if not (np.isfinite(low) and np.isfinite(high)):
        bad = int(np.argmin(np.isfinite(w)))
        raise ValueError(
            f"weights must be finite, but weights[{bad}] = {float(w[bad])}; replace NaN/inf "
            f"weights (e.g. with numpy.nan_to_num) or drop those samples"
        )
    if low < 0:
        bad = int(np.argmax(w < 0))
        raise ValueError(
            f"weights must be >= 0, but weights[{bad}] = {float(w[bad])}; use 0 for a sample "
            f"that must never be drawn"
        )
    if high == 0.0:
        raise ValueError(
            f"weights must not all be zero (got {w.size} zeros); give at least one sample a "
            f"positive weight"
        )
    return w


def _last_positive(w: _F64) -> int:
    """The largest ``i`` with ``w_i > 0`` (there is one), searching from the end."""
    stop = int(w.size)
    step = 64
    while True:
        start = max(stop - step, 0)
        hits = np.flatnonzero(w[start:stop])
        if hits.size:
            return start + int(hits[-1])
        stop = start
        step *= 4


def _resolve_count(w: _F64, num_samples: object, replacement: bool) -> int:
    """Validate ``num_samples``; return it, with its default filled in."""
    if num_samples is None and replacement:
        return int(w.size)
    positives = int(np.count_nonzero(w)) if not replacement else 0
    if num_samples is None:
        return positives
    count = as_int("num_samples", num_samples)
    if not replacement and count > positives:
        raise ValueError(
            f"num_samples={count} is more than the {positives} samples with a positive weight: "
            f"without replacement each of them can be drawn once; pass num_samples <= "
            f"{positives}, or replacement=True"
        )
    return count


# -- 2. with replacement ----------------------------------------------------------------------


def _cdf(w: _F64) -> _F64:
    """The running sums ``c`` (left to right); raises if the total overflows."""
    cdf = np.cumsum(w)
    total = float(cdf[-1])
    if not np.isfinite(total):
        raise ValueError(
            "the sum of the weights overflows float64 (it is inf); rescale the weights, "
            "e.g. weights / weights.max()"
        )
    return cdf


def _with_replacement(
    w: _F64, key: int, count: int, out: _Int, *, guided: bool | None = None
) -> None:
    """Write the ``count`` draws of step 2 into ``out``."""
    n = int(w.size)
    cdf = _cdf(w)
    total = float(cdf[-1])
    last = _last_positive(w)
    if guided is None:
        guided = count * _GUIDE_RATIO >= n
    m = max(n - 1, 0).bit_length()
    guide = build_guide(cdf, m) if guided and m <= 53 else None
    for a in range(0, count, BLOCK):
        b = min(a + BLOCK, count)
        bits = bits53_range(key, a, b)
        t = bits.astype(np.float64)
        t *= UNIT
        t *= total
        if guide is None:
            index: _Int = np.searchsorted(cdf, t, side="right")
        else:
            index = search_guided(cdf, guide, m, bits, t)
        np.minimum(index, last, out=index)
        out[a:b] = index


# -- 3 and 4. without replacement ---------------------------------------------------------------


def _log(x: _F64) -> _F64:
    """The logarithm ``L`` of step 4 for an array of ``x`` in ``[0, 1)`` (a new array)."""
    m, e = np.frexp(x)
    shift = (m < _SQRT_HALF).astype(np.float64)  # 1.0 where m is moved up to [1, sqrt 2)
    ef = e.astype(np.float64)
    ef -= shift
    shift += 1.0
    m *= shift  # m + m or m, exactly (masked updates are much slower)
    s = m - 1.0
    m += 1.0
    s /= m
    z = s * s
    q = z * _LOG_COEFFS[-1]
    q += _LOG_COEFFS[-2]
    for coeff in reversed(_LOG_COEFFS[:-2]):
        q *= z
        q += coeff
    s += s  # h
    z *= s  # h * z
    z *= q
    z += s  # r
    out = ef * _LN2_LO
    out += z
    ef *= _LN2_HI
    out += ef
    np.copyto(out, -np.inf, where=x == 0.0)
    return out


def _clock_bits(w: _F64, key: int, items: _Int) -> _U64:
    """The bit patterns of ``-r_i = -L(u_i) / w_i`` (``>= +0.0``, so ordered as integers)."""
    u = bits53(key, items.astype(np.uint64)).astype(np.float64)
    u *= UNIT
    y = _log(u)
    np.negative(y, out=y)
    y /= w[items]
    return y.view(np.uint64)


def _run_end(packed: _U64, stop: int, mask: np.uint64) -> int:
    """The end of the run of equal truncated values (``packed >> b``) around ``stop - 1``."""
    size = int(packed.size)
    step = 64
    while stop < size:
        window = packed[stop - 1 : stop + step]
        breaks = np.flatnonzero((window[1:] ^ window[:-1]) > mask)
        if breaks.size:
            return stop + int(breaks[0])
        stop = min(stop + step, size)
        step *= 4
    return size


def _without_replacement(w: _F64, key: int, count: int, out: _Int) -> None:
    """Write the first ``count`` items of the order of step 3 into ``out``.

    Sorts one ``uint64`` per positive item: its clock's bits with the low ``b`` bits replaced
    by its rank ``r`` among the positive items (``b = bit_length(#positive - 1)``). The values
    are distinct, so any sort gives the same result, ordered by (truncated clock, rank); runs
    of equal truncated clocks are then re-sorted by (full clock, rank).
    """
    if count == 0:
        return
    positive = w > 0
    items: _Int | None = None
    if not bool(positive.all()):
        items = np.flatnonzero(positive)
        if w.size < 2**31:
            items = items.astype(np.int32)
    del positive
    size = int(w.size) if items is None else int(items.size)
    low_bits = max(size - 1, 0).bit_length()
    mask = np.uint64((1 << low_bits) - 1)
    packed = np.empty(size, dtype=np.uint64)
    for a in range(0, size, _SMALL_BLOCK):
        b = min(a + _SMALL_BLOCK, size)
        ranks = np.arange(a, b, dtype=np.uint64)
        chosen = ranks.astype(np.intp) if items is None else items[a:b]
        block = _clock_bits(w, key, chosen)
        block &= ~mask
        block |= ranks
        packed[a:b] = block
    packed.sort()  # distinct values: the result does not depend on the sort algorithm
    # only the runs that reach into the first `count` items matter; a run may extend past it
    stop = _run_end(packed, count, mask)
    ties = _tied(packed[:stop], mask)
    ranks = packed[:stop]
    ranks &= mask
    head = ranks.view(np.int64)  # ranks < 2**63: the same values
    if ties.size:  # equal truncated clocks: order those runs by full clock, then rank
        involved = np.union1d(ties, ties + 1)
        sub = head[involved]
        chosen = sub if items is None else items[sub]
        full = _clock_bits(w, key, chosen)
        head[involved] = sub[np.lexsort((sub, full))]
    for a in range(0, count, BLOCK):
        b = min(a + BLOCK, count)
        out[a:b] = head[a:b] if items is None else items[head[a:b]]


def _tied(values: _U64, mask: np.uint64) -> _I64:
    """The positions ``q`` where ``values[q]`` and ``values[q + 1]`` agree outside ``mask``."""
    found = [np.empty(0, dtype=np.int64)]
    for a in range(0, int(values.size) - 1, BLOCK):
        window = values[a : a + BLOCK + 1]
        hits = np.flatnonzero((window[1:] ^ window[:-1]) <= mask)
        if hits.size:
            found.append(hits + a)
    return np.concatenate(found)


# -- the public functions -----------------------------------------------------------------------


def _sample_into(
    w: _F64, seed: int, epoch: int, count: int, replacement: bool, dtype: type[Any]
) -> _Int:
    """The first ``count`` draws as a new array of ``dtype``."""
    out = np.empty(count, dtype=dtype)
    # IEEE results are intended: a clock overflows to inf for a tiny weight, a product or
    # sum of tiny weights underflows; an infinite total is checked and refused
    with np.errstate(over="ignore", under="ignore"):
        _sample_inner(w, seed, epoch, count, replacement, out)
    return out


def _sample_inner(w: _F64, seed: int, epoch: int, count: int, replacement: bool, out: _Int) -> None:
    """Fill ``out`` with the first ``count`` draws."""
    if replacement:
        _with_replacement(w, derive_key(seed, COMPONENT_REPLACE, epoch), count, out)
    else:
        _without_replacement(w, derive_key(seed, COMPONENT_NOREPLACE, epoch), count, out)


def weighted_sample(
    weights: npt.ArrayLike,
    *,
    seed: int,
    epoch: int,
    num_samples: int | None = None,
    replacement: bool = True,
) -> npt.NDArray[np.int64]:
    """Sample indices ``i`` with probability proportional to ``weights[i]`` (module docstring).

    - ``replacement=True``: ``num_samples`` independent draws, ``P(i) = w_i / sum(w)``, by the
      inverse CDF (step 2), keyed by ``derive_key(seed, "weights", epoch)``.
    - ``replacement=False``: the first ``num_samples`` items of a weighted random order
      (Efraimidis-Spirakis, step 3), keyed by ``derive_key(seed, "weights-noreplace",
      epoch)``: distinct indices, heavier items tending to come first.

    Zero-weight items are never drawn. The first ``k`` results do not depend on
    ``num_samples``.

    Args:
        weights: one weight per sample: a 1-d array-like of finite integers or floats, all
            ``>= 0``, not all zero (converted to float64; need not sum to 1).
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        num_samples: how many indices, ``>= 0`` (``0`` gives an empty array). Default: with
            replacement ``len(weights)``, without it the number of positive weights (a full
            weighted order), which is also the largest value allowed then.
        replacement: draw independently (``True``) or without repeats (``False``).

    Returns:
        A new int64 array of ``num_samples`` sample indices.

    Raises:
        TypeError: an argument has the wrong type (bool weights or counts are refused).
        ValueError: a value is out of range (see the messages), or the weights sum to inf.

    """
    w = _check_weights(weights)
    seed_int = as_int("seed", seed)
    epoch_int = as_int("epoch", epoch)
    with_replacement = as_bool("replacement", replacement)
    count = _resolve_count(w, num_samples, with_replacement)
    return _sample_into(w, seed_int, epoch_int, count, with_replacement, np.int64)


def weighted_batches(
    weights: npt.ArrayLike,
    *,
    seed: int,
    epoch: int,
    batch_size: int,
    num_samples: int | None = None,
    replacement: bool = True,
    drop_last: bool = False,
) -> EpochBatches:
    """The sequence of :func:`weighted_sample` cut into consecutive batches of ``batch_size``.

    With ``s = weighted_sample(weights, seed=seed, epoch=epoch, num_samples=num_samples,
    replacement=replacement)`` (``N = len(s)``), batch ``b`` is ``s[b * batch_size : (b + 1) *
    batch_size]``: ``ceil(N / batch_size)`` batches, the last one possibly partial, or with
    ``drop_last=True`` ``N // batch_size`` full batches (PyTorch ``BatchSampler``
    semantics). The dropped tail is not even computed; the kept draws are the same.

    Args:
        weights: one weight per sample, as for :func:`weighted_sample`.
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        batch_size: samples per batch, ``>= 1``.
        num_samples: the length ``N`` of the sampled sequence, as for
            :func:`weighted_sample` (default: ``len(weights)`` with replacement, the number
            of positive weights without).
        replacement: draw independently (``True``) or without repeats (``False``).
        drop_last: drop the last batch when it is partial.

    Returns:
        An :class:`EpochBatches` over read-only arrays (``int32`` indices when
        ``len(weights) <= 2**31``).

    Raises:
        TypeError / ValueError: as for :func:`weighted_sample`, or a bad ``batch_size`` /
            ``drop_last``.

    """
    w = _check_weights(weights)
    seed_int = as_int("seed", seed)
    epoch_int = as_int("epoch", epoch)
    with_replacement = as_bool("replacement", replacement)
    size = as_int("batch_size", batch_size, minimum=1)
    drop = as_bool("drop_last", drop_last)
    count = _resolve_count(w, num_samples, with_replacement)
    batches = batch_count(count, size, drop)
    kept = min(batches * size, count)
    indices = _sample_into(w, seed_int, epoch_int, kept, with_replacement, index_dtype(w.size))
    return frozen_batches(indices, even_offsets(count, size, batches))
