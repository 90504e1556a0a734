"""The shard-aware shuffle (``loaderkit.order.shard_order``): the contract and its properties."""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import DEFAULT_WINDOW_SHARDS, FeistelPermutation, ShardOrder, derive_key
from loaderkit.order.shard_order import COMPONENT, check_counts

FAST = settings(deadline=None)

COUNTS = st.lists(st.integers(min_value=0, max_value=40), min_size=0, max_size=30)
WINDOWS = st.integers(min_value=1, max_value=40)
SEEDS = st.integers(min_value=0, max_value=2**63 - 1)
EPOCHS = st.integers(min_value=0, max_value=1000)

# ------------------------------------------------------------------------------------------------
# Golden vectors: these literal numbers ARE the order contract of the shard-aware shuffle
# (docs/sampling.md, "Shard-aware shuffle"). A change that makes them fail is a breaking change
# of every sharded plan's batches: fix the change, do not update the numbers.
# ------------------------------------------------------------------------------------------------

GOLDEN_SMALL_COUNTS = (3, 0, 5, 2, 4, 1)
GOLDEN_SMALL = {
    # (seed, epoch, window_shards): (shards in order, the whole epoch)
    (0, 0, 2): (
        [5, 0, 2, 1, 3, 4],
        [2, 14, 0, 1, 5, 7, 6, 3, 4, 8, 9, 11, 10, 12, 13],
    ),
}
GOLDEN_LARGE_COUNTS = (1000,) * 100
GOLDEN_LARGE_FIRST_10 = {
    (1, 3, 16): [77694, 59358, 86609, 92472, 84009, 87010, 2348, 22119, 38430, 98114],
}


def test_golden_small() -> None:
    for (seed, epoch, window), (shards, epoch_order) in GOLDEN_SMALL.items():
        order = ShardOrder(GOLDEN_SMALL_COUNTS, seed, epoch, window)
        assert order.shards.tolist() == shards
        assert order.indices(0, order.n).tolist() == epoch_order


def test_golden_large() -> None:
    for (seed, epoch, window), first in GOLDEN_LARGE_FIRST_10.items():
        order = ShardOrder(GOLDEN_LARGE_COUNTS, seed, epoch, window)
        assert order.indices(0, 10).tolist() == first


def test_definition_spelled_out() -> None:
    """The docstring's definition, computed step by step, is the order (the keys included)."""
    counts = np.array([4, 7, 0, 3, 9, 1, 6], dtype=np.int64)
    seed, epoch, window = 11, 2, 3
    order = ShardOrder(counts, seed, epoch, window)
    shards = FeistelPermutation(counts.size, derive_key(seed, COMPONENT, "shards", epoch))
    assert order.shards.tolist() == shards(np.arange(counts.size)).tolist()
    starts = np.concatenate([[0], np.cumsum(counts)])
    expected: list[int] = []
    for w in range(0, counts.size, window):
        members = order.shards[w : w + window]
        laid = [int(starts[k]) + i for k in members for i in range(int(counts[k]))]
        perm = FeistelPermutation(len(laid), derive_key(seed, COMPONENT, "window", epoch, w // 3))
        expected.extend(laid[int(q)] for q in perm(np.arange(len(laid))))
    assert order.indices(0, order.n).tolist() == expected


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------


@FAST
@given(COUNTS, SEEDS, EPOCHS, WINDOWS)
def test_a_permutation_of_the_samples(counts: list[int], seed: int, epoch: int, w: int) -> None:
    order = ShardOrder(counts, seed, epoch, w)
    assert order.n == sum(counts)
    full = order.indices(0, order.n)
    assert full.dtype == np.int64
    assert sorted(full.tolist()) == list(range(order.n))
    assert sorted(order.shards.tolist()) == list(range(len(counts)))


@FAST
@given(COUNTS, SEEDS, EPOCHS, WINDOWS)
def test_each_window_reads_only_its_shards(
    counts: list[int], seed: int, epoch: int, w: int
) -> None:
    order = ShardOrder(counts, seed, epoch, w)
    starts = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))])
    assert order.num_windows == -(-len(counts) // w)
    for number in range(order.num_windows):
        lo, hi = int(order.window_starts[number]), int(order.window_starts[number + 1])
        members = order.window(number).tolist()
        samples = {int(starts[k]) + i for k in members for i in range(counts[k])}
        got = order.indices(lo, hi).tolist()
        assert sorted(got) == sorted(samples)  # exactly the window's shards' samples
        assert set(order.shard_of(np.arange(lo, hi)).tolist()) <= set(members)


@FAST
@given(COUNTS, SEEDS, EPOCHS, WINDOWS, st.data())
def test_pointwise_equals_the_whole_epoch(
    counts: list[int], seed: int, epoch: int, w: int, data: st.DataObject
) -> None:
    """Single positions, slices and any array of positions agree with the whole epoch."""
    order = ShardOrder(counts, seed, epoch, w)
    full = order.indices(0, order.n)
    if order.n == 0:
        assert order.at(np.empty(0, dtype=np.int64)).size == 0
        return
    p = data.draw(st.integers(0, order.n - 1))
    assert order.at([p]).tolist() == [full[p]]
    assert ShardOrder(counts, seed, epoch, w).at(np.int64(p)) == full[p]  # a fresh order too
    a = data.draw(st.integers(0, order.n))
    b = data.draw(st.integers(a, order.n))
    assert order.indices(a, b).tolist() == full[a:b].tolist()
    picks = np.asarray(data.draw(st.lists(st.integers(0, order.n - 1), max_size=50)), np.int64)
    assert order.at(picks.reshape(-1, 1)).reshape(-1).tolist() == full[picks].tolist()


@FAST
@given(st.lists(st.integers(1, 40), min_size=2, max_size=30), SEEDS, WINDOWS)
def test_epochs_differ(counts: list[int], seed: int, w: int) -> None:
    if sum(counts) < 20:
        counts = [*counts, 20]
    first = ShardOrder(counts, seed, 0, w).indices(0, sum(counts))
    second = ShardOrder(counts, seed, 1, w).indices(0, sum(counts))
    assert first.tolist() != second.tolist()


@FAST
@given(COUNTS, SEEDS, EPOCHS, WINDOWS)
def test_window_spans_hold_every_use(counts: list[int], seed: int, epoch: int, w: int) -> None:
    order = ShardOrder(counts, seed, epoch, w)
    lo, hi = order.window_spans()
    positions = np.arange(order.n, dtype=np.int64)
    shard = order.shard_of(positions)
    assert ((lo[shard] <= positions) & (positions < hi[shard])).all()


@FAST
@given(COUNTS, SEEDS, EPOCHS, WINDOWS, st.data())
def test_shard_uses_is_the_order_of_need(
    counts: list[int], seed: int, epoch: int, w: int, data: st.DataObject
) -> None:
    order = ShardOrder(counts, seed, epoch, w)
    a = data.draw(st.integers(0, order.n))
    b = data.draw(st.integers(a, order.n))
    shard = order.shard_of(np.arange(a, b, dtype=np.int64)).tolist()
    firsts: dict[int, int] = {}
    lasts: dict[int, int] = {}
    for offset, k in enumerate(shard):
        firsts.setdefault(k, a + offset)
        lasts[k] = a + offset
    uses = order.shard_uses(a, b)
    assert uses.shards.tolist() == sorted(firsts, key=firsts.__getitem__)
    assert uses.first.tolist() == [firsts[k] for k in uses.shards.tolist()]
    assert uses.last.tolist() == [lasts[k] for k in uses.shards.tolist()]


def test_shard_uses_spans_chunks() -> None:
    """Over several chunks of positions, the first use is kept and the last one advances."""
    order = ShardOrder([50_000] * 5, 3, 0, 2)
    full = order.shard_of(np.arange(order.n))
    uses = order.shard_uses(1000, order.n)
    for k, first, last in zip(uses.shards, uses.first, uses.last, strict=True):
        where = np.flatnonzero(full[1000:] == k) + 1000
        assert (first, last) == (where[0], where[-1])


def test_one_window_is_a_full_shuffle_and_window_one_keeps_shards_whole() -> None:
    counts = (30, 30, 30, 30)
    wide = ShardOrder(counts, 5, 0, 100).indices(0, 120)
    assert ShardOrder(counts, 5, 0, 100).num_windows == 1
    assert len({int(i) // 30 for i in wide[:8]}) > 1  # one window: shards interleave
    narrow = ShardOrder(counts, 5, 0, 1)
    blocks = narrow.indices(0, 120).reshape(4, 30) // 30
    assert (blocks == blocks[:, :1]).all()  # window 1: each shard read whole, in turn
    assert sorted(blocks[:, 0].tolist()) == [0, 1, 2, 3]


def test_memory_is_per_shard_not_per_sample() -> None:
    """1e8 samples over 1e5 shards: a batch anywhere costs per-shard arrays, never per-sample."""
    counts = np.full(100_000, 1000, dtype=np.int64)
    tracemalloc.start()
    try:
        order = ShardOrder(counts, 7, 3, DEFAULT_WINDOW_SHARDS)
        batch = order.indices(73_000_000, 73_001_024)
        again = order.at(np.arange(73_000_000, 73_001_024))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert batch.tolist() == again.tolist()
    assert peak < 8 * 2**20  # a per-sample int64 array of the epoch would be 800 MB


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        check_counts([3, -1])
    with pytest.raises(TypeError, match="integers"):
        check_counts([1.5, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        check_counts([[1, 2]])
    with pytest.raises(ValueError, match="2\\*\\*63"):
        check_counts(np.array([2**62, 2**62, 2**62], dtype=np.int64))
    with pytest.raises(ValueError, match="window_shards must be >= 1"):
        ShardOrder([1, 2], 0, 0, 0)
    order = ShardOrder([1, 2], 0, 0, 1)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        order.at([3])
    with pytest.raises(TypeError, match="integers"):
        order.at([0.5])
    with pytest.raises(IndexError, match="window 2"):
        order.window(2)
    with pytest.raises(ValueError, match="start <= stop"):
        order.indices(2, 1)


def test_counts_are_copied_and_frozen() -> None:
    counts = np.array([2, 3], dtype=np.int64)
    order = ShardOrder(counts, 0, 0, 1)
    counts[0] = 100
    assert order.n == 5
    assert not order.counts.flags.writeable
    assert not order.shards.flags.writeable


def test_pickles_and_reprs() -> None:
    order = ShardOrder((4, 5, 6), 9, 1, 2)
    copy = pickle.loads(pickle.dumps(order))
    assert copy.indices(0, 15).tolist() == order.indices(0, 15).tolist()
    assert repr(order) == "ShardOrder(shards=3, n=15, seed=9, epoch=1, window_shards=2)"
