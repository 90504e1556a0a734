"""Mixtures: the batches of an epoch drawn from several datasets (sources) read as one.

``k`` sources of sizes ``n_0 .. n_{k-1}`` (each ``>= 1``) share one *global index space*:
sample ``i`` of source ``s`` is global index ``offset_s + i`` with ``offset_s = n_0 + ... +
n_{s-1}`` (:func:`source_of` maps back). :func:`mixture_batches` builds the batches of one
epoch (an :class:`EpochBatches` of global indices) under one of five modes (:data:`MODES`):

- ``"weighted"``: every position draws its source at random by weight (fixed, or one weight
  row per batch for schedules), optionally *stratified* so each batch's per-source counts
  follow the weights as closely as integers allow;
- ``"sequential"``: the sources one after the other, each cut into its own batches;
- ``"round_robin"``: one sample of each source in turn, each sample of each source once;
- ``"max_size_cycle"`` / ``"min_size"``: one sample of each source in turn until the longest
  source is used up (the shorter ones cycle) / until the shortest one is.

:func:`mixture_num_batches` gives the number of batches without building them (the loader
evaluates per-step weight schedules with it).

**The algorithm is part of the order contract** (``docs/order.md`` §10): the batches are a
pure function of the arguments, the same on every platform and with every numpy release,
and never use a global RNG or a numpy ``Generator``: only :class:`FeistelPermutation`,
:func:`uniform_draws` (counter-based uniforms in ``[0, 1)``, multiples of ``2**-53``) and
IEEE-754 binary64 ``+ * /`` (each correctly rounded). Changing any step below is a breaking
change. ``B = batch_size``.

1. **Source streams.** The stream of source ``s`` in an epoch is the infinite sequence
   ``t_s(j) = offset_s + P_{s,c}(j mod n_s)``, ``c = j // n_s`` (the *cycle*), with
   ``P_{s,c} = FeistelPermutation(n_s, derive_key(seed, "mixture", names[s], epoch, c))``
   when ``shuffle`` is true, else the identity (``t_s(j) = offset_s + j mod n_s``). Every
   cycle visits each sample of the source once, in a new order. Keying by the source's
   *name*, not its position, keeps a source's stream unchanged when sources are added,
   removed or reordered. Every mode takes source ``s``'s samples from its stream in order:
   its ``j``-th use in the epoch (``j = 0, 1, ...``) is ``t_s(j)``.

2. **Labels.** A mode fixes the *label sequence* ``L``: position ``p`` of the epoch uses the
   next stream element of source ``L[p]``, i.e. ``t_{L[p]}(j)`` where ``j`` is the number of
   positions ``q < p`` with ``L[q] = L[p]``. Except for ``"sequential"``, the sequence is cut
   into consecutive batches of ``B``: ``ceil(T / B)`` batches, the last possibly partial, or
   ``T // B`` with ``drop_last=True`` (the dropped positions do not use stream elements
   before the kept ones, so the kept batches are the same either way). ``T`` is:

   - ``"round_robin"``: rounds ``r = 0, 1, ..., max(n) - 1``; in round ``r`` every source
     with ``n_s > r`` contributes one position, in source order. ``T = sum(n)``; every
     sample of every source is used exactly once (cycle 0 of every stream).
   - ``"max_size_cycle"``: rounds ``r = 0 .. max(n) - 1``, every source one position per
     round in source order (``L[p] = p mod k``). ``T = k * max(n)``; the shorter sources
     continue into later cycles of their streams.
   - ``"min_size"``: the same for ``r = 0 .. min(n) - 1``. ``T = k * min(n)``.
   - ``"weighted"``: ``T = num_samples`` (default ``sum(n)``); see steps 3 and 4.

   ``"sequential"``: source 0's whole cycle 0 (``n_0`` positions), then source 1's, and so
   on; batches never straddle sources: each source is cut into its own ``ceil(n_s / B)``
   batches (``n_s // B`` with ``drop_last=True``, dropping that source's partial last
   batch), in source order.

3. **Weighted draw** (``mode="weighted"``, ``stratified=False``). Weight row ``w`` of batch
   ``b``: ``weights[b]`` for a 2-d ``weights`` of shape ``(num_batches, k)``, else the 1-d
   ``weights`` (default: the sizes ``n``, so sources are drawn in proportion to their size).
   The weights are converted to binary64 and need not be normalized. With the running sums
   ``c_0 = w_0, c_s = fl(c_{s-1} + w_s)`` (``numpy.cumsum``, left to right) and ``S =
   c_{k-1}``, position ``p`` of batch ``b = p // B`` draws, with ``u_p = uniform_draws(seed,
   "mixture-weights", epoch, p, p + 1)[0]``::

       t_p   = fl(u_p * S)
       L[p]  = min(#{s : c_s <= t_p}, z)     # z = the last source with w_s > 0

   the smallest ``s`` with ``c_s > t_p`` (as in ``loaderkit.order.weighted`` step 2):
   ``P(L[p] = s) = (c_s - c_{s-1}) / S ~ w_s / sum(w)``. A source with weight 0 is never
   drawn.

4. **Stratified** (``mode="weighted"``, ``stratified=True``). Batch ``b`` holding ``m_b``
   positions (``B``, or fewer in a partial last batch) gets per-source counts from its row
   ``w`` (``c``, ``S`` as in step 3) by *systematic sampling* of the cumulative quotas::

       Q_s  = fl(m_b * fl(c_s / S))          (s = 0 .. k-1;  Q_{-1} = 0)
       N(Q) = floor(Q) + [Q - floor(Q) > u_b],   u_b = uniform_draws(seed, "mixture-strata",
                                                       epoch, b, b + 1)[0]
       count_s = N(Q_s) - N(Q_{s-1})

   ``N(Q)`` is exactly ``ceil(Q - u_b)``, the number of points ``u_b, u_b + 1, ...`` below
   ``Q``; so ``count_s`` is the number of those points in ``[Q_{s-1}, Q_s)``, an interval of
   length ``q_s = Q_s - Q_{s-1} ~ m_b * w_s / sum(w)`` (the quota). Hence (exactly, for the
   computed ``Q``): ``count_s`` is ``floor(q_s)`` or ``ceil(q_s)``, the counts sum to ``m_b``
   (``c_{k-1} / S = 1`` makes ``Q_{k-1} = m_b``), ``count_s = 0`` when ``w_s = 0``, and
   ``count_s = ceil(q_s)`` with probability ``frac(q_s)`` over ``u_b`` (so long-run
   frequencies follow the weights). The batch's labels are grouped in source order: ``count_0``
   times ``0``, then ``count_1`` times ``1``, and so on.

Complexity: ``O(T)`` time for a fixed number of sources (the weighted draw is ``O(T log k)``,
stratification adds ``O(nb * k)`` for ``nb`` batches) plus, for every cycle of every stream
that is used, one :class:`FeistelPermutation` (about 0.2 ms: a tiny source cycled very many
times costs that per cycle); memory a few arrays of ``T`` entries (the ``int32``/``int64``
indices, one byte per label for up to 128 sources, and one ``int64`` position per weighted
draw).

Pure numpy and the standard library; never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from loaderkit.order.feistel import FeistelPermutation
from loaderkit.order.keys import as_bool, as_int, derive_key
from loaderkit.order.mixture_weights import (
    COMPONENT_STRATA,
    COMPONENT_WEIGHTS,
    draw_labels,
    stratified_labels,
    weight_rows,
)

__all__ = [
    "COMPONENT_STRATA",
    "COMPONENT_STREAM",
    "COMPONENT_WEIGHTS",
    "MODES",
    "mixture_batches",
    "mixture_num_batches",
    "source_of",
]

#: The mixture modes (see the module docstring).
MODES = ("weighted", "sequential", "round_robin", "max_size_cycle", "min_size")

#: Key path component of the source streams. Part of the order contract.
COMPONENT_STREAM = "mixture"

#: Global indices (``sum(sizes)``) must lie below this (they are int64).
MAX_TOTAL = 2**63

_I64 = npt.NDArray[np.int64]
_Int = npt.NDArray[Any]


# -- validation -----------------------------------------------------------------------------------


def _check_sizes(sizes: object) -> tuple[int, ...]:
    """The sizes of the sources: at least one, each an int ``>= 1``, summing below ``2**63``."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (Sequence, np.ndarray)):
        raise TypeError(
            f"sizes must be a sequence of ints (the number of samples of each source), got "
            f"{type(sizes).__name__} {sizes!r}; pass e.g. sizes=[len(a), len(b)]"
        )
    if isinstance(sizes, np.ndarray) and sizes.ndim != 1:
        raise ValueError(f"sizes must be 1-d (one size per source), got shape {sizes.shape}")
    values = tuple(as_int(f"sizes[{s}]", n, minimum=None) for s, n in enumerate(sizes))
    if not values:
        raise ValueError("sizes must not be empty: a mixture needs at least one source")
    for s, n in enumerate(values):
        if n < 1:
            raise ValueError(
                f"sizes[{s}] must be >= 1 (every source needs a sample), got {n}; "
                f"leave empty sources out of the mixture"
            )
    if sum(values) >= MAX_TOTAL:
        raise ValueError(
            f"the sizes must sum to less than 2**63 (global indices are int64), got {sum(values)}"
        )
    return values


def _check_names(names: object, k: int) -> tuple[str, ...]:
    """One distinct non-empty str per source."""
    if isinstance(names, (str, bytes)) or not isinstance(names, (Sequence, np.ndarray)):
        raise TypeError(
            f"names must be a sequence of str (one name per source), got "
            f"{type(names).__name__} {names!r}; pass e.g. names=['wiki', 'code']"
        )
    values = list(names)
    if len(values) != k:
        raise ValueError(
            f"names must give one name per source: got {len(values)} names for {k} sizes"
        )
    seen: dict[str, int] = {}
    for s, name in enumerate(values):
        if not isinstance(name, str):
            raise TypeError(
                f"names[{s}] must be a str, got {type(name).__name__} {name!r}; "
                f"pass str({name!r}) if that is what you mean"
            )
        if not name:
            raise ValueError(
                f"names[{s}] must not be empty: a source's name keys its shuffle; "
                f"give every source a distinct name"
            )
        if name in seen:
            raise ValueError(
                f"names must be distinct, but names[{seen[name]}] and names[{s}] are both "
                f"{name!r}; a source's name keys its shuffle, so give each source its own"
            )
        seen[name] = s
    return tuple(str(name) for name in values)


def _check_mode(mode: object) -> str:
    """One of :data:`MODES`."""
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, got {type(mode).__name__} {mode!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def _check_num_samples(mode: str, num_samples: object) -> int | None:
    """``num_samples``: ``None``, or an int ``>= 0`` with ``mode="weighted"``."""
    if num_samples is None:
        return None
    if mode != "weighted":
        raise ValueError(
            f"num_samples only applies to mode='weighted' (got mode={mode!r}, "
            f"num_samples={num_samples!r}); leave it None, or use mode='weighted'"
        )
    return as_int("num_samples", num_samples)


def _sample_count(sizes: tuple[int, ...], mode: str, num_samples: int | None) -> int:
    """``T``: the length of the label sequence before cutting (``sum(n)`` for sequential)."""
    if mode == "weighted":
        return sum(sizes) if num_samples is None else num_samples
    if mode == "max_size_cycle":
        return len(sizes) * max(sizes)
    if mode == "min_size":
        return len(sizes) * min(sizes)
    return sum(sizes)


def _num_batches(
    sizes: tuple[int, ...], mode: str, size: int, num_samples: int | None, drop: bool
) -> int:
    """The number of batches of an epoch (arguments validated)."""
    if mode == "sequential":
        return sum(batch_count(n, size, drop) for n in sizes)
    return batch_count(_sample_count(sizes, mode, num_samples), size, drop)


# -- streams and labels ---------------------------------------------------------------------------


class _Streams:
    """The source streams of one epoch (step 1), evaluated as prefixes."""

    def __init__(
        self, sizes: tuple[int, ...], names: tuple[str, ...], seed: int, epoch: int, shuffle: bool
    ) -> None:
        self.sizes = sizes
        self.names = names
        self.seed = seed
        self.epoch = epoch
        self.shuffle = shuffle
        self.offsets = [0]
        for n in sizes:
            self.offsets.append(self.offsets[-1] + n)

    def prefix(self, s: int, m: int) -> _I64:
        """``t_s(0), ..., t_s(m - 1)`` as a new int64 array."""
        n = self.sizes[s]
        if not self.shuffle or n == 1:  # FeistelPermutation(1, key) is the identity too
            out = np.arange(m, dtype=np.int64)
            if m > n:
                np.remainder(out, n, out=out)
        else:
            out = np.empty(m, dtype=np.int64)
            for c, a in enumerate(range(0, m, n)):
                b = min(a + n, m)
                key = derive_key(self.seed, COMPONENT_STREAM, self.names[s], self.epoch, c)
                out[a:b] = FeistelPermutation(n, key).slice(0, b - a)
        out += self.offsets[s]
        return out


def _place(labels: _Int, streams: _Streams, out: _Int) -> None:
    """``out[p] = t_{L[p]}(j)``, ``j`` the occurrence of ``L[p]`` at ``p`` (step 2)."""
    k = len(streams.sizes)
    order = np.argsort(labels, kind="stable")  # positions grouped by source, ascending
    counts = np.bincount(labels, minlength=k)
    start = 0
    for s in range(k):
        m = int(counts[s])
        if m:
            out[order[start : start + m]] = streams.prefix(s, m)
        start += m


def _round_robin_positions(sizes: tuple[int, ...], s: int) -> _I64:
    """The positions of source ``s``'s rounds ``r = 0 .. n_s - 1`` in the round-robin order."""
    n = sizes[s]
    r = np.arange(n, dtype=np.int64)
    ordered = np.sort(np.asarray(sizes, dtype=np.int64))
    sums = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(ordered, out=sums[1:])
    # the positions before round r: sum over sources of min(n_s', r)
    done = np.searchsorted(ordered, r, side="right")
    pos: _I64 = sums[done] + r * (len(sizes) - done)
    # and in round r the earlier sources that are still active (n_s' > r)
    earlier = np.sort(np.asarray(sizes[:s], dtype=np.int64))
    if earlier.size:
        pos += s - np.searchsorted(earlier, r, side="right")
    return pos


# -- the public functions -------------------------------------------------------------------------


def mixture_num_batches(
    sizes: Sequence[int],
    *,
    mode: str,
    batch_size: int,
    num_samples: int | None = None,
    drop_last: bool = False,
) -> int:
    """The number of batches of a mixture epoch, computed in ``O(k)`` without building them.

    Equal to ``len(mixture_batches(sizes, mode=mode, batch_size=batch_size,
    num_samples=num_samples, drop_last=drop_last, ...))`` for any names, seed, epoch, shuffle,
    weights and stratification: ``sum(ceil(n_s / B))`` for ``"sequential"`` (``n_s // B``
    with ``drop_last``), else ``ceil(T / B)`` (``T // B``) with ``T`` the length of the label
    sequence (module docstring, step 2). A 2-d ``weights`` for :func:`mixture_batches` has
    this many rows.

    Raises:
        TypeError / ValueError: an argument has the wrong type or is out of range, or
            ``num_samples`` is given for a mode other than ``"weighted"``.

    """
    values = _check_sizes(sizes)
    kind = _check_mode(mode)
    size = as_int("batch_size", batch_size, minimum=1)
    count = _check_num_samples(kind, num_samples)
    drop = as_bool("drop_last", drop_last)
    return _num_batches(values, kind, size, count, drop)


def mixture_batches(
    sizes: Sequence[int],
    *,
    names: Sequence[str],
    mode: str,
    seed: int,
    epoch: int,
    batch_size: int,
    shuffle: bool = True,
    weights: npt.ArrayLike | None = None,
    num_samples: int | None = None,
    stratified: bool = False,
    drop_last: bool = False,
) -> EpochBatches:
    """The batches of one epoch of a mixture of ``k`` sources, as global indices.

    Source ``s`` sample ``i`` is global index ``sum(sizes[:s]) + i``. Each source's samples
    come from its *stream*, a new permutation of the source per cycle keyed by ``(seed,
    names[s], epoch, cycle)``; the mode decides which source each position of the epoch uses
    (the module docstring states the algorithm, part of the order contract):

    - ``"weighted"``: ``num_samples`` positions (default ``sum(sizes)``), each drawing its
      source with probability proportional to its weight (``weights=None``: proportional to
      ``sizes``); with ``stratified=True`` each batch's per-source counts are the floor or
      the ceiling of its quotas ``batch_len * w_s / sum(w)``, its samples grouped by source.
    - ``"sequential"``: each source's samples once, source by source; batches never straddle
      sources (each source's last batch may be partial).
    - ``"round_robin"``: one sample per source in turn, each sample of each source once.
    - ``"max_size_cycle"``: one sample per source in turn, ``max(sizes)`` rounds (shorter
      sources cycle through new permutations).
    - ``"min_size"``: one sample per source in turn, ``min(sizes)`` rounds.

    Args:
        sizes: the number of samples of each source, each ``>= 1`` (at least one source).
        names: one distinct non-empty name per source; it keys the source's stream, so a
            source's order does not change when other sources are added or removed.
        mode: one of :data:`MODES`.
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        batch_size: samples per batch, ``>= 1``.
        shuffle: permute each source's samples (``False``: in index order, cycle after cycle;
            the weighted draws stay random).
        weights: ``mode="weighted"`` only: finite weights ``>= 0`` with a positive sum, of
            shape ``(k,)``, or ``(num_batches, k)`` for one row per batch (a weight schedule;
            ``num_batches`` from :func:`mixture_num_batches`). ``None``: the sizes.
        num_samples: ``mode="weighted"`` only: positions per epoch, ``>= 0`` (default
            ``sum(sizes)``).
        stratified: ``mode="weighted"`` only: per-batch counts by systematic sampling.
        drop_last: drop a partial last batch (for ``"sequential"``: every source's).

    Returns:
        An :class:`EpochBatches` over read-only arrays: ``int32`` global indices when
        ``sum(sizes) <= 2**31``, else ``int64``.

    Raises:
        TypeError: an argument has the wrong type (bools are refused for numbers).
        ValueError: an argument is out of range (the message names it), or ``weights``,
            ``num_samples`` or ``stratified=True`` is given for a mode other than
            ``"weighted"``.

    """
    values = _check_sizes(sizes)
    k = len(values)
    labels_of = _check_names(names, k)
    kind = _check_mode(mode)
    seed_int = as_int("seed", seed)
    epoch_int = as_int("epoch", epoch)
    size = as_int("batch_size", batch_size, minimum=1)
    shuffled = as_bool("shuffle", shuffle)
    strata = as_bool("stratified", stratified)
    drop = as_bool("drop_last", drop_last)
    count = _check_num_samples(kind, num_samples)
    if kind != "weighted" and (weights is not None or strata):
        given = "weights" if weights is not None else "stratified=True"
        raise ValueError(
            f"{given} only applies to mode='weighted' (got mode={kind!r}); drop it, or use "
            f"mode='weighted'"
        )
    num_batches = _num_batches(values, kind, size, count, drop)
    streams = _Streams(values, labels_of, seed_int, epoch_int, shuffled)
    dtype = index_dtype(sum(values))

    if kind == "sequential":
        parts = []
        batch_sizes = []
        for s, n in enumerate(values):
            full, rest = divmod(n, size)
            kept = full * size if drop else n
            parts.append(streams.prefix(s, kept))
            batch_sizes.append(np.full(full, size, dtype=np.int64))
            if rest and not drop:
                batch_sizes.append(np.array([rest], dtype=np.int64))
        indices = np.concatenate(parts).astype(dtype, copy=False)
        offsets = np.zeros(num_batches + 1, dtype=np.int64)
        np.cumsum(np.concatenate(batch_sizes), out=offsets[1:])
        return frozen_batches(indices, offsets)

    total = _sample_count(values, kind, count)
    kept = min(num_batches * size, total)
    out = np.empty(kept, dtype=dtype)
    if kind == "weighted":
        cdf, totals, last = weight_rows(weights, values, num_batches)
        with np.errstate(over="ignore", under="ignore"):  # IEEE results are intended
            if strata:
                labels = stratified_labels(cdf, totals, seed_int, epoch_int, kept, size)
            else:
                labels = draw_labels(cdf, totals, last, seed_int, epoch_int, kept, size)
        _place(labels, streams, out)
    elif kind == "round_robin":
        for s in range(k):
            pos = _round_robin_positions(values, s)
            m = int(np.searchsorted(pos, kept))  # increasing: the kept ones are a prefix
            out[pos[:m]] = streams.prefix(s, m)
    else:  # max_size_cycle, min_size: L[p] = p mod k
        for s in range(k):
            out[s::k] = streams.prefix(s, len(range(s, kept, k)))
    return frozen_batches(out, even_offsets(kept, size, num_batches))


def source_of(indices: npt.ArrayLike, sizes: Sequence[int]) -> npt.NDArray[np.int64]:
    """The source of each global index: ``s`` with ``offset_s <= index < offset_s + n_s``.

    Args:
        indices: global indices (any shape, any integer dtype), each in ``[0, sum(sizes))``.
        sizes: the number of samples of each source, as for :func:`mixture_batches`.

    Returns:
        A new int64 array of the same shape.

    Raises:
        TypeError: ``indices`` is not an integer array, or ``sizes`` is bad.
        ValueError: an index lies outside ``[0, sum(sizes))``, or ``sizes`` is bad.

    """
    values = _check_sizes(sizes)
    arr = np.asarray(indices)
    if arr.size == 0 and arr.dtype.kind == "f":  # an empty list
        arr = arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"indices must be integers (global sample indices), got dtype {arr.dtype}; "
            f"pass numpy.asarray(indices, dtype=numpy.int64)"
        )
    total = sum(values)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= total:
            bad = low if low < 0 else high
            raise ValueError(
                f"indices must lie in [0, sum(sizes)) = [0, {total}), got {bad}; "
                f"pass global indices of this mixture"
            )
    ends = np.cumsum(np.asarray(values, dtype=np.int64))
    found = np.searchsorted(ends, arr.astype(np.int64), side="right")
    return np.asarray(found, dtype=np.int64)
