"""Length bucketing: batches of samples of similar length, fixed-size or under a token budget.

Padding a batch of sequences to its longest one wastes ``1 - real / padded`` of the compute:
about 48 % for random batches of 64 sequences with lengths uniform in ``[16, 512]``. Grouping
samples of similar length cuts that to about 1 % while keeping the epochs random:

- :func:`bucket_ids` splits the dataset, once per loader, into ``num_buckets`` quantile
  buckets of its lengths;
- :func:`bucketed_batches` builds the batches of one epoch (an :class:`EpochBatches`): every
  bucket's samples in a random order, buckets from short to long, cut into batches of a fixed
  size or under a token budget, and the batches shuffled;
- :func:`bucketed_sequence_batches` does the same for an epoch whose samples another sampler
  chose (weighted draws, a curriculum's eligible samples, a mixture): the given sequence is
  grouped by bucket, cut and shuffled the same way;
- :func:`padding_stats` measures the padding of any batching.

**The algorithm is part of the order contract** (``docs/order.md``): the batches are a pure
function of ``(lengths, num_buckets, seed, epoch, batch_size, max_tokens, cost, padding,
drop_last)``,
the same on every platform and with every numpy release, and never use a global RNG. Changing
any step below is a breaking change. Notation as in ``docs/order.md``; ``n = len(lengths)``.

1. **Buckets** (:func:`bucket_ids`, computed once). Let ``K = min(num_buckets, n)``. Rank the
   samples by ``(lengths[i], i)`` ascending (ties broken by index): sample ``i`` has rank
   ``r(i)`` in ``[0, n)``. Its bucket is ``floor(r(i) * K / n)``. So the buckets are quantiles
   of the length ranking, of ``floor(n / K)`` or ``ceil(n / K)`` samples each, and bucket ids
   grow with length. :func:`bucketed_batches` accepts any integer bucket ids; only their
   order matters (bucket ``a`` comes before bucket ``b`` when ``a < b``).

2. **Order of the epoch.** ``P = FeistelPermutation(n, derive_key(seed, "bucketing", epoch))``
   (``docs/order.md`` §2; the component ``"bucketing"`` keeps it apart from the plain
   shuffle). The sequence ``s`` is ``P(0), P(1), ..., P(n - 1)`` sorted *stably* by bucket id:
   sample ``i`` comes before sample ``j`` when ``(bucket[i], P⁻¹(i)) < (bucket[j], P⁻¹(j))``.
   Each bucket's samples are in a random order, buckets in ascending length order.

3. **Cut** ``s`` into consecutive batches ``c_0, c_1, ..., c_{m-1}`` (in the order of ``s``):

   - *Fixed size* (``max_tokens is None``): ``c_k = s[k*B : (k+1)*B]`` with ``B = batch_size``;
     batches straddle adjacent buckets, so only the last batch can be partial. With
     ``drop_last=True`` a partial last batch is dropped (``n % B`` samples, all from the
     longest bucket(s), a different random subset of them each epoch).
   - *Token budget* (``max_tokens = T``): every sample costs at least one token: let
     ``λ(i) = max(lengths[i], 1)``. The budget bounds the **padded** tensor the collator makes,
     so the cost follows the collator's padding rule (``padding``, declared by the collator's
     ``padded_length()``, :mod:`loaderkit.order.padding`). With :class:`PaddedLength` rows
     (the default: padded to the longest sample), a batch of ``k`` samples whose longest has
     ``L = max λ`` is a ``(k, W)`` tensor, ``W = width(L)`` (``L`` itself by default;
     ``round_up(min(L, max_length), pad_to_multiple_of)`` for the text collators), and costs

     * ``cost="linear"``: ``k * W``, the tokens of the padded ``(k, W)`` batch, padding
       included; ``T`` is a number of tokens;
     * ``cost="quadratic"``: ``k * W * W``, the entries of the batch's padded ``(W, W)``
       attention-score matrices (per head and layer): attention's cost; ``T`` is then a
       number of *token² units*, e.g. ``T = 64 * 512**2`` admits 64 samples of 512 tokens or
       256 of 256.

     With :class:`PackedRows` (the ``packed`` collator: rows of ``R`` tokens), the batch's
     samples, in the order of ``s``, are placed next-fit into rows exactly as the collator
     places them; a batch that fills ``r`` rows costs ``r * R`` (``r * R * R`` quadratic).

     Greedy from the start of ``s``: each batch takes the next samples of ``s`` as long as the
     batch's cost stays ``<= T`` and, when ``batch_size`` is given, it holds at most
     ``batch_size`` samples. (The cost of a prefix never decreases as it grows, so each batch
     is the longest prefix of the rest of ``s`` that fits.) A sample that alone costs more
     than ``T`` (``W > T``, or ``W² > T`` for ``"quadratic"``, with ``W`` its own padded width;
     more than ``T`` in rows when packed) raises ``ValueError`` naming the smallest such
     sample index, its length and the budget; it is never dropped silently.
     Every batch but the last is *closed* by the budget or the cap; the last one by the end
     of ``s``. With ``drop_last=True`` the last batch is dropped unless ``batch_size`` is
     given and it holds exactly ``batch_size`` samples.

4. **Shuffle the batches.** With ``m`` the number of batches kept,
   ``Q = FeistelPermutation(m, derive_key(seed, "bucketing-batches", epoch))`` and batch
   ``j`` of the epoch is ``c_{Q(j)}``: consecutive batches do not go from short to long.

The number of batches is ``ceil(n / B)`` (``n // B`` with ``drop_last``) with a fixed size,
but depends on the epoch under a token budget.

**Bucketing a given sequence** (:func:`bucketed_sequence_batches`, also part of the contract:
its batches are a pure function of ``(sequence, lengths, bucket_ids, seed, epoch, batch_size,
max_tokens, cost, padding, drop_last)``). Another sampler made the epoch's sequence ``x_0, x_1, ...,
x_{N-1}`` of sample indices in ``[0, n)``, in any order and with repeats allowed (weighted
draws with replacement, a curriculum's eligible samples, a mixture's positions); it is
already random, so no permutation is drawn. Steps 1, 3 and 4 are the same, with ``N``
positions in place of ``n`` samples:

2'. **Order of the epoch.** ``s`` is ``x`` sorted *stably* by bucket id: position ``p``
    comes before position ``q`` when ``(bucket[x_p], p) < (bucket[x_q], q)``. Each bucket's
    samples keep the order they have in ``x``, buckets in ascending length order. Every
    position of ``x`` is in ``s`` exactly once: a sample drawn twice is batched twice.

3'. **Cut** ``s`` exactly as in step 3 (fixed size ``B``, or the greedy under the budget
    ``T`` with the same cost models and the same rule for ``drop_last``). The oversize check
    covers the samples of ``x`` only (samples absent from ``x`` are not batched): the
    ``ValueError`` names the smallest sample index of ``x`` that alone costs more than
    ``T``.

4'. **Shuffle the batches** as in step 4 but with ``Q = FeistelPermutation(m,
    derive_key(seed, "bucketing-sequence-batches", epoch))``.

So the batches hold ``x``'s multiset of samples (without ``drop_last``): ``ceil(N / B)``
batches with a fixed size, ``N // B`` with ``drop_last``. (Its implementation is the one
below with the epoch's permutation replaced by slices of ``x`` and the bucket counts taken
over ``x`` in one more pass; ``x`` is never copied whole.)

**Implementation (not part of the contract: it changes the speed and memory, never the
values).** No Python list of samples and no full-size int64 temporary: the permutation is
evaluated in chunks of :data:`CHUNK` positions; each chunk is sorted stably by bucket (numpy's
stable argsort on a uint8/uint16 key is a radix sort) and scattered to its place in ``s``
through one cursor per bucket (a counting sort, chunk by chunk: each chunk's samples of a
bucket follow the previous chunks' samples of that bucket). With a fixed size the place of
sorted position ``q`` in the final, shuffled layout is known from ``q // B``, so every sample
is written once, straight to its final place in the ``int32`` indices. Under a token budget
the greedy needs the lengths in the order of ``s``: a first pass scatters them (as uint8,
uint16 or uint32), the greedy cuts them with a Python loop over *batches* (per batch:
``np.maximum.accumulate`` over a window of candidates, the allowed count ``T // cost unit``,
and a count of the prefix that fits; the window adapts to the previous batch's size and grows
when too small, so each sample is read a bounded number of times), then the lengths are
freed and a second pass recomputes the chunks and writes the indices to their final places. A
10M-sample epoch takes about 40 MB (the ``int32`` indices) plus about 8 MB, and 16 bytes per
bucket. :func:`bucket_ids` ranks lengths below ``2**16`` with the same chunked counting sort
(one cursor per length value), longer ones with numpy's stable argsort.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
from loaderkit.order.epoch import CHUNK as ORDER_CHUNK
from loaderkit.order.feistel import FeistelPermutation
from loaderkit.order.keys import as_int, derive_key
from loaderkit.order.padding import BatchPadding
from loaderkit.order.token_budget import (
    MAX_BUDGET,
    check_budget,
    check_cost,
    check_lengths,
    check_padding,
    check_sequence_budget,
    cut_budget,
    int_array,
    length_dtype,
    optional_int,
)

__all__ = [
    "CHUNK",
    "COMPONENT_BATCHES",
    "COMPONENT_ORDER",
    "COMPONENT_SEQUENCE_BATCHES",
    "bucket_ids",
    "bucketed_batches",
    "bucketed_sequence_batches",
]

#: Key path component of the order within buckets (step 2). Part of the order contract.
COMPONENT_ORDER = "bucketing"
#: Key path component of the order of the batches (step 4). Part of the order contract.
COMPONENT_BATCHES = "bucketing-batches"
#: Key path component of the order of the batches of a given sequence (step 4'). Part of the
#: order contract.
COMPONENT_SEQUENCE_BATCHES = "bucketing-sequence-batches"

#: Positions of the epoch order sorted and scattered per step (an implementation detail: it
#: changes the speed and the memory held, never the batches).
CHUNK = 2 * ORDER_CHUNK

_I64 = npt.NDArray[np.int64]
_I32 = npt.NDArray[np.int32]
_Int = npt.NDArray[Any]

# bucket_ids ranks lengths below this by a counting sort (one cursor per length value)
_COUNTING_SORT_LIMIT = 2**16


# -- 1. buckets -------------------------------------------------------------------------------


def _narrow(values: _Int, high: int) -> _Int:
    """``values`` (all in ``[0, high]``) in the smallest unsigned dtype of numpy's radix sort.

    numpy's stable sort is a radix sort for integer types of at most 16 bits and a timsort
    otherwise; the order is the same, only the speed differs.
    """
    if high < 2**8:
        return values.astype(np.uint8)
    if high < 2**16:
        return values.astype(np.uint16)
    return values


def bucket_ids(lengths: npt.NDArray[np.integer[Any]], num_buckets: int) -> _I32:
    """Quantile buckets of the length ranking: ``floor(rank * K / n)``, ``K = min(num_buckets, n)``.

    The rank of sample ``i`` is its position when the samples are sorted by
    ``(lengths[i], i)`` (ties broken by index, so the result is deterministic). Every bucket
    holds ``floor(n / K)`` or ``ceil(n / K)`` samples and bucket ids grow with length. Meant to
    be computed once per dataset and passed to every epoch's :func:`bucketed_batches`.

    Args:
        lengths: the length of every sample (a 1-d integer array, values in ``[0, 2**31)``).
        num_buckets: the number of buckets, ``>= 1`` (more than ``n`` acts as ``n``). A good
            default with a fixed batch size ``B`` is ``n // (4 * B)``: each bucket then
            holds about four batches, so batches still mix samples at random within a narrow
            range of lengths.

    Returns:
        An int32 array of ``n`` bucket ids in ``[0, K)``.

    Raises:
        TypeError / ValueError: an argument has the wrong type or range.

    """
    arr = check_lengths(lengths)
    buckets = as_int("num_buckets", num_buckets, minimum=1)
    n = int(arr.size)
    if buckets >= 2**31:
        raise ValueError(f"num_buckets must be < 2**31 (bucket ids are int32), got {buckets}")
    k = min(buckets, n)
    if n * k >= 2**63:
        raise ValueError(
            f"n * num_buckets must be < 2**63, got n={n}, num_buckets={buckets}; use fewer buckets"
        )
    out = np.empty(n, dtype=np.int32)
    if n == 0:
        return out
    high = int(arr.max())
    if high < _COUNTING_SORT_LIMIT:  # ranks by a counting sort over the length values
        for samples, ranks in _sorted_chunks(_identity, n, arr, high + 1):
            ranks *= k
            ranks //= n
            out[samples] = ranks
        return out
    ranking = np.argsort(arr, kind="stable")
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        ranks = np.arange(lo, hi, dtype=np.int64)
        ranks *= k
        ranks //= n
        out[ranking[lo:hi]] = ranks
    return out


def _identity(lo: int, hi: int) -> _I64:
    """The positions ``[lo, hi)`` of the identity order."""
    return np.arange(lo, hi, dtype=np.int64)


# -- 2. the stable sort of the epoch order by bucket ------------------------------------------


def _bucket_keys(ids: object, n: int) -> tuple[_Int, int]:
    """Validate bucket ids; return them (remapped to ``[0, K)`` if sparse) and ``K``."""
    arr = int_array("bucket_ids", ids)
    if arr.size != n:
        raise ValueError(
            f"bucket_ids must have one entry per sample (len(lengths) = {n}), got {arr.size}; "
            f"compute them with bucket_ids(lengths, num_buckets)"
        )
    if n == 0:
        return arr, 0
    low, high = int(arr.min()), int(arr.max())
    if low < 0 or high >= 2**31:
        raise ValueError(f"bucket ids must lie in [0, 2**31), got values in [{low}, {high}]")
    if high >= 2 * n + 1024:  # sparse ids: only their order matters, make them dense
        unique, dense = np.unique(arr, return_inverse=True)
        return dense.reshape(-1).astype(np.int32), int(unique.size)
    return arr, high + 1


def _bincount(keys: _Int, buckets: int) -> _I64:
    """``np.bincount(keys, minlength=buckets)`` without an int64 copy of all the keys."""
    step = max(CHUNK, buckets // 8)  # bincount casts to intp: count a slice at a time
    counts = np.zeros(buckets, dtype=np.int64)
    for lo in range(0, int(keys.size), step):
        counts += np.bincount(keys[lo : lo + step], minlength=buckets)
    return counts


def _sorted_chunks(
    order: Callable[[int, int], _I64],
    n: int,
    keys: _Int,
    buckets: int,
    counts: _I64 | None = None,
) -> Iterator[tuple[_I64, _I64]]:
    """Yield ``(samples, sorted_positions)`` chunk by chunk: ``order`` sorted stably by key.

    ``order(lo, hi)`` gives the samples at positions ``[lo, hi)`` of a sequence of ``n``
    samples and ``keys`` (values in ``[0, buckets)``) the key of every sample. Each step yields
    one chunk's samples sorted stably by key and their positions in the whole sequence sorted
    stably by key (every position of ``[0, n)`` exactly once over all chunks): step 2 with the
    epoch's permutation and the bucket ids, step 2' with a given sequence, or the length
    ranking of :func:`bucket_ids` with the identity and the lengths. ``counts`` is how many
    positions of the sequence hold a sample of each key; ``None``: the sequence is an order of
    ``[0, n)``, so it is the count of each key in ``keys``.
    """
    if counts is None:
        counts = _bincount(keys, buckets)
    cursor = np.zeros(buckets, dtype=np.int64)  # next free position of each bucket in s
    np.cumsum(counts[:-1], out=cursor[1:])
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        samples = order(lo, hi)
        chunk_keys = _narrow(keys[samples], buckets - 1)
        by_bucket = np.argsort(chunk_keys, kind="stable")
        samples = samples[by_bucket]
        chunk_keys = chunk_keys[by_bucket]
        size = hi - lo
        run_starts = np.flatnonzero(chunk_keys[1:] != chunk_keys[:-1])
        run_starts += 1
        run_starts = np.concatenate(([0], run_starts))
        run_sizes = np.diff(run_starts, append=size)
        run_keys = chunk_keys[run_starts].astype(np.intp)
        # the j-th sorted sample of the chunk goes to cursor[its bucket] + (j - its run's start)
        positions = np.repeat(cursor[run_keys] - run_starts, run_sizes)
        positions += np.arange(size, dtype=np.int64)
        cursor[run_keys] += run_sizes
        yield samples, positions


# -- 4. the final layout ----------------------------------------------------------------------


def _shuffled_layout(
    cut: _I64, seed: int, epoch: int, component: str = COMPONENT_BATCHES
) -> tuple[_I64, _I64]:
    """Shuffle the batches of ``cut`` (offsets in the order of ``s``), step 4 (or 4').

    Returns the offsets of the shuffled layout and, per batch of ``cut``, the shift from a
    position in ``s`` to its position in the shuffled indices.
    """
    count = int(cut.size) - 1
    order = FeistelPermutation(count, derive_key(seed, component, epoch)).slice(0, count)
    sizes = np.diff(cut)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes[order], out=offsets[1:])
    slot = np.empty(count, dtype=np.int64)
    slot[order] = np.arange(count, dtype=np.int64)  # batch c of the cut is batch slot[c]
    shift = offsets[slot]
    shift -= cut[:-1]
    return offsets, shift


class _Batching:
    """The validated batching arguments shared by both public functions (steps 3 and 4)."""

    def __init__(
        self,
        seed: object,
        epoch: object,
        batch_size: object,
        max_tokens: object,
        cost: object,
        drop_last: object,
        padding: object = None,
    ) -> None:
        self.padding = check_padding(padding)
        self.seed = as_int("seed", seed)
        self.epoch = as_int("epoch", epoch)
        self.size = optional_int("batch_size", batch_size)
        self.budget = optional_int("max_tokens", max_tokens)
        if self.budget is not None and self.budget >= MAX_BUDGET:
            raise ValueError(f"max_tokens must be < 2**63, got {self.budget}")
        self.quadratic = check_cost(cost)
        if not isinstance(drop_last, (bool, np.bool_)):
            raise TypeError(
                f"drop_last must be a bool, got {type(drop_last).__name__} {drop_last!r}"
            )
        self.drop_last = bool(drop_last)
        if self.size is None and self.budget is None:
            raise ValueError(
                "pass batch_size (fixed-size batches), max_tokens (a token budget per batch), "
                "or both (a budget with a cap on the samples per batch)"
            )


def _layout(
    order: Callable[[int, int], _I64],
    total: int,
    keys: _Int,
    buckets: int,
    counts: _I64 | None,
    lengths: _Int,
    how: _Batching,
    component: str,
    dtype: type[Any],
) -> EpochBatches:
    """Steps 2 to 4 over the ``total`` samples of ``order`` (budget already checked)."""
    size, budget = how.size, how.budget
    if total == 0:
        return frozen_batches(np.empty(0, dtype=dtype), np.zeros(1, dtype=np.int64))
    if budget is None:
        assert size is not None
        cut = even_offsets(total, size, batch_count(total, size, how.drop_last))
    else:
        ordered = np.empty(total, dtype=length_dtype(int(lengths.max())))
        for samples, positions in _sorted_chunks(order, total, keys, buckets, counts):
            ordered[positions] = lengths[samples]
        np.maximum(ordered, 1, out=ordered)
        cut, last_full = cut_budget(ordered, budget, how.quadratic, size, how.padding)
        del ordered
        if how.drop_last and not last_full:
            cut = cut[:-1]

    offsets, shift = _shuffled_layout(cut, how.seed, how.epoch, component)
    kept = int(cut[-1])
    out = np.empty(kept, dtype=dtype)
    for samples, positions in _sorted_chunks(order, total, keys, buckets, counts) if kept else ():
        if kept < total:
            inside = positions < kept
            samples, positions = samples[inside], positions[inside]
        if budget is None:
            assert size is not None
            batch = positions // size
        else:
            batch = np.searchsorted(cut, positions, side="right")
            batch -= 1
        positions += shift[batch]
        out[positions] = samples
    return frozen_batches(out, offsets)


def bucketed_batches(
    lengths: npt.NDArray[np.integer[Any]],
    *,
    bucket_ids: npt.NDArray[np.integer[Any]],
    seed: int,
    epoch: int,
    batch_size: int | None,
    max_tokens: int | None = None,
    cost: str = "linear",
    drop_last: bool = False,
    padding: BatchPadding | None = None,
) -> EpochBatches:
    """The length-bucketed batches of one epoch (the algorithm of the module docstring).

    Args:
        lengths: the length (tokens) of every sample, a 1-d integer array with values in
            ``[0, 2**31)``.
        bucket_ids: the bucket of every sample, usually ``bucket_ids(lengths, num_buckets)``
            computed once; only their order matters.
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        batch_size: samples per batch with a fixed size; under a token budget, the largest
            number of samples per batch (``None``: no cap). ``>= 1``.
        max_tokens: the token budget per batch, ``>= 1``; ``None`` for fixed-size batches.
        cost: ``"linear"`` (a batch costs ``count * max_len`` tokens, padding included) or
            ``"quadratic"`` (``count * max_len**2`` token² units, attention's cost); only
            used with ``max_tokens``.
        drop_last: drop the last batch when it is partial (see the module docstring).
        padding: how the collator pads a batch (its ``padded_length()``): the budget bounds
            the padded tensor. ``None``: padded to the longest sample of the batch.

    Returns:
        The batches, in their shuffled order (``int32`` indices for datasets of at most
        ``2**31`` samples).

    Raises:
        TypeError / ValueError: an argument has the wrong type or range, both ``batch_size``
            and ``max_tokens`` are ``None``, or a sample alone exceeds the token budget.

    """
    arr = check_lengths(lengths)
    n = int(arr.size)
    keys, buckets = _bucket_keys(bucket_ids, n)
    how = _Batching(seed, epoch, batch_size, max_tokens, cost, drop_last, padding)
    if how.budget is not None:
        check_budget(arr, how.budget, how.quadratic, how.padding)
    perm = FeistelPermutation(n, derive_key(how.seed, COMPONENT_ORDER, how.epoch))
    return _layout(perm.slice, n, keys, buckets, None, arr, how, COMPONENT_BATCHES, index_dtype(n))


def _check_sequence(sequence: object, n: int) -> _Int:
    """Validate an epoch's sequence: a 1-d integer array of sample indices in ``[0, n)``."""
    arr = int_array("sequence", sequence)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= n:
            bad = low if low < 0 else high
            raise ValueError(
                f"sequence must hold sample indices in [0, len(lengths)) = [0, {n}), but it "
                f"holds {bad}; pass the lengths of the whole dataset the sequence indexes"
            )
    return arr


def _sequence_counts(sequence: _Int, keys: _Int, buckets: int) -> _I64:
    """How many positions of ``sequence`` hold a sample of each bucket."""
    counts = np.zeros(buckets, dtype=np.int64)
    for lo in range(0, int(sequence.size), CHUNK):
        counts += np.bincount(keys[sequence[lo : lo + CHUNK]], minlength=buckets)
    return counts


def bucketed_sequence_batches(
    sequence: npt.NDArray[np.integer[Any]],
    lengths: npt.NDArray[np.integer[Any]],
    *,
    bucket_ids: npt.NDArray[np.integer[Any]],
    seed: int,
    epoch: int,
    batch_size: int | None,
    max_tokens: int | None = None,
    cost: str = "linear",
    drop_last: bool = False,
    padding: BatchPadding | None = None,
) -> EpochBatches:
    """Group an epoch's given sequence of samples into length-bucketed batches (steps 2'-4').

    ``sequence`` is the epoch of another sampler (weighted draws, a curriculum's eligible
    samples, a mixture's positions): sample indices in any order, repeats allowed. It is
    sorted stably by bucket (each bucket keeps the sequence's order, which is already
    random), cut like :func:`bucketed_batches` (a fixed size or a token budget), and the
    batches are shuffled under the key component ``"bucketing-sequence-batches"``. Every
    position of the sequence is in exactly one batch (unless ``drop_last`` drops the last
    one), so the batches hold the sequence's multiset of samples.

    Args:
        sequence: the epoch's samples, a 1-d integer array of indices in
            ``[0, len(lengths))`` (any order, repeats allowed).
        lengths: the length (tokens) of every sample of the dataset the sequence indexes, a
            1-d integer array with values in ``[0, 2**31)``.
        bucket_ids: the bucket of every sample of the dataset (``bucket_ids(lengths,
            num_buckets)``, computed once); only their order matters.
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        batch_size: samples per batch with a fixed size; under a token budget, the largest
            number of samples per batch (``None``: no cap). ``>= 1``.
        max_tokens: the token budget per batch, ``>= 1``; ``None`` for fixed-size batches.
        cost: ``"linear"`` or ``"quadratic"``, as for :func:`bucketed_batches`.
        drop_last: drop the last batch when it is partial (as for :func:`bucketed_batches`).
        padding: how the collator pads a batch, as for :func:`bucketed_batches`.

    Returns:
        The batches, in their shuffled order (``int32`` indices when ``len(lengths) <=
        2**31``).

    Raises:
        TypeError / ValueError: an argument has the wrong type or range, an index of the
            sequence is outside ``[0, len(lengths))``, both ``batch_size`` and ``max_tokens``
            are ``None``, or a sample of the sequence alone exceeds the token budget.

    """
    arr = check_lengths(lengths)
    n = int(arr.size)
    keys, buckets = _bucket_keys(bucket_ids, n)
    seq = _check_sequence(sequence, n)
    how = _Batching(seed, epoch, batch_size, max_tokens, cost, drop_last, padding)
    if how.budget is not None:
        check_sequence_budget(arr, seq, how.budget, how.quadratic, how.padding)
    total = int(seq.size)
    counts = _sequence_counts(seq, keys, buckets) if total else None

    def order(lo: int, hi: int) -> _I64:
        return seq[lo:hi].astype(np.int64)

    return _layout(
        order, total, keys, buckets, counts, arr, how, COMPONENT_SEQUENCE_BATCHES, index_dtype(n)
    )
