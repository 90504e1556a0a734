"""The guide table: a faster ``numpy.searchsorted`` of many draws in one large CDF.

Weighted sampling with replacement (:mod:`loaderkit.order.weighted`, step 2) looks up each
draw ``t = fl(u * T)`` in the running sums ``c`` of the weights: ``#{i : c_i <= t}``. For many
draws in a large CDF, ``numpy.searchsorted``'s binary search of the whole array misses the
cache at every step; a guide table narrows each search to one bucket first. It is an
implementation detail, not part of the order contract: it changes the speed, never the values
(the result is the same count as the plain search).

With ``K = 2**m >= n`` buckets (``m = bit_length(n - 1)``), ``b_j = fl((j * 2**-m) * T)`` and
``g_j = #{i : c_i <= b_j}``, ``fl(u * T)`` is non-decreasing in ``u``, so draw ``p`` of bucket
``j = k_p >> (53 - m)`` (``j * 2**-m <= u_p < (j + 1) * 2**-m``, ``k_p`` the 53-bit integer of
:func:`~loaderkit.order.uniforms.bits53`) lies in ``[g_j, g_{j+1}]``. Entry ``j`` stores
``g_j``, or ``~g_j`` when ``g_{j+1} > g_j``: one lookup settles about half of the draws, a
short binary search inside the bucket the others. The table takes ``4 K`` bytes (``int32``)
next to the ``8 n`` of the CDF.

Pure numpy and the standard library; never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.uniforms import BLOCK

__all__ = ["build_guide", "search_guided"]

# Correction steps allowed per guide entry (the first estimate is off by at most one or two).
_GUIDE_STEPS = 16

_F64 = npt.NDArray[np.float64]
_U64 = npt.NDArray[np.uint64]
_Int = npt.NDArray[Any]


def build_guide(cdf: _F64, m: int) -> _Int | None:
    """The guide table of ``2**m`` buckets, with its open buckets marked (or ``None``).

    With ``b_j = fl((j * 2**-m) * T)`` and ``g_j = #{i : c_i <= b_j}`` (``j = 0 .. 2**m``),
    entry ``j`` is ``g_j`` when ``g_{j+1} == g_j`` (every draw of bucket ``j`` is ``g_j``) and
    ``~g_j`` (negative) when the bucket is *open* and must be searched. ``g`` is the running
    count of ``J_i = min{j : b_j >= c_i}`` (``c_i <= b_j`` iff ``J_i <= j``). ``None``
    (search without a guide) when ``T`` is so small that the ``b_j`` would lose precision.
    """
    n = int(cdf.size)
    buckets = 1 << m
    total = float(cdf[-1])
    if total < 2.0 ** (m - 1000):
        return None
    scale = 2.0**-m
    dtype = np.int32 if n < 2**31 else np.int64
    guide: _Int = np.zeros(buckets + 2, dtype=dtype)  # first the number of i with J_i == j
    for a in range(0, n, BLOCK):
        c = cdf[a : a + BLOCK]
        j = c / total  # in [0, 1] since 0 <= c <= T
        j *= float(buckets)
        np.ceil(j, out=j)  # J, or one off it (the rounding of b_j and of the estimate)
        todo: _Int | None = None  # None: all of them
        for _ in range(_GUIDE_STEPS):
            jt = j if todo is None else j[todo]
            ct = c if todo is None else c[todo]
            bj = jt * scale
            bj *= total
            below = bj < ct  # b_j < c: j is too small (b_{2**m} = T >= c stops it)
            bj = jt - 1.0
            bj *= scale
            bj *= total
            above = bj >= ct  # b_{j-1} >= c: j is too large (b_{-1} = -T < c stops it)
            moved = np.flatnonzero(below | above)
            if not moved.size:
                break
            todo = moved if todo is None else todo[moved]
            j[todo] += below[moved]
            j[todo] -= above[moved]
        else:  # not reached for finite weights; the plain search is always right
            return None
        ends = j.astype(np.intp)
        first = int(ends[0])
        counts = np.bincount(ends - first)  # J is non-decreasing: a short, dense count
        guide[first : first + counts.size] += counts.astype(dtype)
    carry = 0  # running sum, and the marks: bucket j is open iff some J_i == j + 1
    for a in range(0, buckets + 1, BLOCK):
        b = min(a + BLOCK, buckets + 1)
        opened = guide[a + 1 : b + 1] > 0
        sums: _Int = np.cumsum(guide[a:b], dtype=dtype)
        sums += carry
        carry = int(sums[-1])
        marks: _Int = opened.astype(dtype)
        np.negative(marks, out=marks)  # -1 (all ones) where open, else 0
        sums ^= marks  # ~g where open
        guide[a:b] = sums
    return guide[:-1]


def _take(values: npt.NDArray[Any], indices: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values[indices]`` for indices known to be in range (``wrap`` skips the bounds checks)."""
    return np.take(values, indices, mode="wrap")


def search_guided(cdf: _F64, guide: _Int, m: int, bits: _U64, t: _F64) -> _Int:
    """``#{i : c_i <= t}`` for each draw, found in its guide bucket ``j = bits >> (53 - m)``."""
    j = (bits >> np.uint64(53 - m)).view(np.int64)
    found = _take(guide, j)
    pending = np.flatnonzero(found < 0)
    if not pending.size:
        return found
    lo = _take(found, pending).astype(np.int64)
    np.invert(lo, out=lo)
    j = _take(j, pending)
    j += 1
    hi = _take(guide, j).astype(np.int64)
    hi ^= hi >> 63  # undo the mark of an open bucket
    t = _take(t, pending)
    # binary search of [lo, hi] (lo < hi), which holds the answer; most open buckets hold a
    # single c_i, so one step on the whole array settles most draws
    mid = lo + hi
    mid >>= 1
    passed = _take(cdf, mid) <= t  # c_mid <= t: the answer is above mid
    lo = np.where(passed, mid + 1, lo)
    hi = np.where(passed, hi, mid)
    active = np.flatnonzero(lo < hi)
    while active.size:
        a_lo = _take(lo, active)
        a_hi = _take(hi, active)
        mid = a_lo + a_hi
        mid >>= 1
        passed = _take(cdf, mid) <= _take(t, active)
        a_lo = np.where(passed, mid + 1, a_lo)
        a_hi = np.where(passed, a_hi, mid)
        lo[active] = a_lo
        hi[active] = a_hi
        active = active[a_lo < a_hi]
    found[pending] = lo
    return found
