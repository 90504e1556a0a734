"""Tests of length bucketing (``loaderkit.order.bucketing``) and ``EpochBatches``."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import EpochOrder, FeistelPermutation, derive_key
from loaderkit.order.batches import EpochBatches
from loaderkit.order.bucketing import bucket_ids, bucketed_batches
from loaderkit.order.token_budget import padding_stats

FAST = settings(deadline=None)
SEEDS = st.integers(min_value=0, max_value=2**64)
EPOCHS = st.integers(min_value=0, max_value=5)


# ------------------------------------------------------------------------------------------------
# A straightforward pure-Python reading of the algorithm in the module docstring of
# loaderkit/order/bucketing.py (lists, Python's stable sort, a sample-by-sample greedy).
# The vectorized implementation must agree with it exactly.
# ------------------------------------------------------------------------------------------------


def reference_bucket_ids(lengths: list[int], num_buckets: int) -> list[int]:
    n = len(lengths)
    k = min(num_buckets, n)
    ranking = sorted(range(n), key=lambda i: (lengths[i], i))
    ids = [0] * n
    for rank, i in enumerate(ranking):
        ids[i] = rank * k // n
    return ids


def reference_batches(
    lengths: list[int],
    ids: list[int],
    *,
    seed: int,
    epoch: int,
    batch_size: int | None,
    max_tokens: int | None = None,
    cost: str = "linear",
    drop_last: bool = False,
) -> list[list[int]]:
    n = len(lengths)
    perm = FeistelPermutation(n, derive_key(seed, "bucketing", epoch))
    order = [int(perm(np.array([p]))[0]) for p in range(n)]
    s = sorted(order, key=lambda i: ids[i])  # stable
    batches: list[list[int]] = []
    if max_tokens is None:
        assert batch_size is not None
        batches = [s[k : k + batch_size] for k in range(0, n, batch_size)]
        if drop_last and n % batch_size:
            batches.pop()
    else:
        lam = [max(length, 1) for length in lengths]

        def unit(length: int) -> int:
            return length * length if cost == "quadratic" else length

        for i in range(n):
            if unit(lam[i]) > max_tokens:
                raise ValueError(f"sample {i} has length {lengths[i]}")
        p = 0
        while p < n:
            k, longest = 1, lam[s[p]]
            while p + k < n and (batch_size is None or k < batch_size):
                candidate = max(longest, lam[s[p + k]])
                if (k + 1) * unit(candidate) > max_tokens:
                    break
                longest, k = candidate, k + 1
            batches.append(s[p : p + k])
            p += k
        if (
            drop_last
            and batches
            and not (batch_size is not None and len(batches[-1]) == batch_size)
        ):
            batches.pop()
    m = len(batches)
    shuffle = FeistelPermutation(m, derive_key(seed, "bucketing-batches", epoch))
    return [batches[int(q)] for q in shuffle.slice(0, m)]


def as_lists(batches: EpochBatches) -> list[list[int]]:
    return [batches.batch(b).tolist() for b in range(len(batches))]


def uniform_lengths(n: int = 20_000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(16, 513, n)


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    """A random bucketing problem: lengths, buckets, seed, epoch and a batching mode."""
    n = draw(st.integers(min_value=0, max_value=250))
    lengths = draw(st.lists(st.integers(0, 120), min_size=n, max_size=n))
    num_buckets = draw(st.integers(min_value=1, max_value=40))
    problem: dict[str, object] = {
        "lengths": lengths,
        "num_buckets": num_buckets,
        "seed": draw(SEEDS),
        "epoch": draw(EPOCHS),
        "drop_last": draw(st.booleans()),
        "cost": "linear",
        "max_tokens": None,
    }
    if draw(st.booleans()):
        problem["batch_size"] = draw(st.integers(min_value=1, max_value=40))
    else:
        cost = draw(st.sampled_from(["linear", "quadratic"]))
        longest = max([max(length, 1) for length in lengths], default=1)
        unit = longest * longest if cost == "quadratic" else longest
        problem["cost"] = cost
        problem["max_tokens"] = draw(st.integers(min_value=unit, max_value=unit * 30))
        problem["batch_size"] = draw(st.none() | st.integers(min_value=1, max_value=40))
    return problem


def run(problem: dict[str, object]) -> tuple[EpochBatches, list[list[int]]]:
    lengths = problem["lengths"]
    assert isinstance(lengths, list)
    num_buckets = problem["num_buckets"]
    assert isinstance(num_buckets, int)
    kwargs = {k: problem[k] for k in ("seed", "epoch", "batch_size", "max_tokens", "cost")}
    kwargs["drop_last"] = problem["drop_last"]
    arr = np.array(lengths, dtype=np.int64)
    ids = bucket_ids(arr, num_buckets)
    got = bucketed_batches(arr, bucket_ids=ids, **kwargs)  # type: ignore[arg-type]
    expected = reference_batches(
        lengths,
        reference_bucket_ids(lengths, num_buckets),
        **kwargs,  # type: ignore[arg-type]
    )
    return got, expected


# ------------------------------------------------------------------------------------------------
# Golden vectors: the bucketed order is part of the order contract. If one of these tests fails,
# the change is a BREAKING CHANGE of the order (see docs/order.md): do not update the numbers.
# ------------------------------------------------------------------------------------------------

GOLDEN_LENGTHS = [(i * 37) % 61 + 5 for i in range(40)]
GOLDEN_IDS = [
    0, 2, 0, 3, 1, 0, 2, 1, 3, 1, 0, 2, 1, 3, 2, 0, 2, 1, 3, 2,
    0, 3, 1, 3, 2, 0, 3, 1, 3, 2, 0, 3, 1, 0, 2, 1, 3, 1, 0, 2,
]  # fmt: skip
# bucketed_batches(GOLDEN_LENGTHS, bucket_ids=GOLDEN_IDS, seed=0, epoch=0, ...): first 3 batches
GOLDEN_FIXED = [[26, 36, 3, 31, 18, 21], [20, 5, 38, 2, 25, 15], [35, 32, 16, 14, 34, 24]]
GOLDEN_TOKENS = [[19, 39, 1, 6], [29, 11, 26], [27, 4, 17, 37, 9, 22]]
GOLDEN_QUADRATIC = [[24, 19, 39], [1, 6, 29], [27, 4, 17, 37, 9, 22, 12]]


def golden(**kwargs: object) -> list[list[int]]:
    lengths = np.array(GOLDEN_LENGTHS)
    out = bucketed_batches(lengths, bucket_ids=bucket_ids(lengths, 4), seed=0, epoch=0, **kwargs)  # type: ignore[arg-type]
    return as_lists(out)


def test_golden_bucket_ids() -> None:
    assert bucket_ids(np.array(GOLDEN_LENGTHS), 4).tolist() == GOLDEN_IDS


def test_golden_fixed_size() -> None:
    batches = golden(batch_size=6)
    assert len(batches) == 7
    assert batches[:3] == GOLDEN_FIXED


def test_golden_token_budget() -> None:
    batches = golden(batch_size=None, max_tokens=200)
    assert len(batches) == 9
    assert batches[:3] == GOLDEN_TOKENS


def test_golden_quadratic_budget() -> None:
    batches = golden(batch_size=None, max_tokens=8000, cost="quadratic")
    assert len(batches) == 12
    assert batches[:3] == GOLDEN_QUADRATIC


# ------------------------------------------------------------------------------------------------
# The implementation is the algorithm.
# ------------------------------------------------------------------------------------------------


@FAST
@given(problems())
def test_matches_the_reference(problem: dict[str, object]) -> None:
    got, expected = run(problem)
    assert as_lists(got) == expected


@FAST
@given(
    st.lists(st.integers(0, 10**6), max_size=300),
    st.integers(min_value=1, max_value=400),
)
def test_bucket_ids_match_the_reference(lengths: list[int], num_buckets: int) -> None:
    ids = bucket_ids(np.array(lengths, dtype=np.int64), num_buckets)
    assert ids.dtype == np.int32
    assert ids.tolist() == reference_bucket_ids(lengths, num_buckets)
    if lengths:  # equal counts, ids grow with the length
        counts = np.bincount(ids)
        k = min(num_buckets, len(lengths))
        assert counts.size == k
        assert set(counts.tolist()) <= {len(lengths) // k, -(-len(lengths) // k)}
        order = np.argsort(np.array(lengths), kind="stable")
        assert np.all(np.diff(ids[order]) >= 0)


def test_bucket_ids_break_ties_by_index() -> None:
    assert bucket_ids(np.full(8, 7), 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert bucket_ids(np.array([5, 1, 5, 1]), 2).tolist() == [1, 0, 1, 0]
    assert bucket_ids(np.array([3, 2, 1]), 10).tolist() == [2, 1, 0]  # K = min(10, n)
    assert bucket_ids(np.zeros(0, dtype=np.int64), 3).tolist() == []


def test_wide_lengths_and_many_buckets_take_the_general_sort_paths() -> None:
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 2**31, 70_000)  # beyond uint16: the int sort of the lengths
    ids = bucket_ids(lengths, 70_000)  # K > 65536: int32 bucket keys
    ranks = np.empty(lengths.size, dtype=np.int64)
    ranks[np.lexsort((np.arange(lengths.size), lengths))] = np.arange(lengths.size)
    assert np.array_equal(ids, ranks)
    small = lengths[:300] % 500
    small_ids = ids[:300]  # arbitrary, sparse ids: only their order matters
    got = bucketed_batches(small, bucket_ids=small_ids, seed=1, epoch=2, batch_size=7)
    expected = reference_batches(small.tolist(), small_ids.tolist(), seed=1, epoch=2, batch_size=7)
    assert as_lists(got) == expected


# ------------------------------------------------------------------------------------------------
# Properties.
# ------------------------------------------------------------------------------------------------


@FAST
@given(problems())
def test_every_sample_once_and_budgets_kept(problem: dict[str, object]) -> None:
    got, _ = run(problem)
    lengths = np.array(problem["lengths"], dtype=np.int64)
    n = lengths.size
    indices = got.indices
    assert indices.dtype == np.int32
    assert np.unique(indices).size == indices.size  # at most once
    if not problem["drop_last"]:
        assert np.array_equal(np.sort(indices), np.arange(n))
    sizes = got.sizes()
    assert got.offsets[0] == 0 and got.offsets[-1] == indices.size
    assert np.all(sizes >= 1)
    size, budget = problem["batch_size"], problem["max_tokens"]
    if isinstance(size, int):
        assert np.all(sizes <= size)
    if budget is None:
        assert isinstance(size, int)
        assert np.all(sizes[sizes != size] == n % size) and np.count_nonzero(sizes != size) <= 1
        assert len(got) == (n // size if problem["drop_last"] else -(-n // size))
    else:
        assert isinstance(budget, int)
        stats = padding_stats(lengths, got, max_tokens=budget, cost=str(problem["cost"]))
        assert stats["max_batch_cost"] <= budget
        for b in range(len(got)):
            longest = max(1, int(lengths[got.batch(b)].max()))
            unit = longest**2 if problem["cost"] == "quadratic" else longest
            assert got.batch(b).size * unit <= budget


@FAST
@given(problems())
def test_drop_last_drops_exactly_the_final_partial_batch(problem: dict[str, object]) -> None:
    kept, _ = run({**problem, "drop_last": True})
    full, _ = run({**problem, "drop_last": False})
    lengths = problem["lengths"]
    assert isinstance(lengths, list)
    dropped = set(range(len(lengths))) - set(kept.indices.tolist())
    if len(full) == len(kept):
        assert not dropped
        return
    assert len(full) == len(kept) + 1
    # the dropped samples are one whole batch of the epoch without drop_last: the cut's last one
    partial = [full.batch(b).tolist() for b in range(len(full))]
    assert sorted(dropped) in [sorted(batch) for batch in partial]
    size = problem["batch_size"]
    if problem["max_tokens"] is None:
        assert isinstance(size, int)
        assert len(dropped) == len(lengths) % size
    elif isinstance(size, int):
        assert len(dropped) < size


def test_reproducible_and_different_across_epochs_and_seeds() -> None:
    lengths = uniform_lengths(2_000)
    ids = bucket_ids(lengths, 10)

    def epoch(seed: int, e: int, **kwargs: object) -> np.ndarray:
        out = bucketed_batches(lengths, bucket_ids=ids, seed=seed, epoch=e, **kwargs)  # type: ignore[arg-type]
        return np.asarray(out.indices)

    for kwargs in ({"batch_size": 32}, {"batch_size": None, "max_tokens": 4096}):
        first = epoch(3, 1, **kwargs)
        assert np.array_equal(first, epoch(3, 1, **kwargs))
        assert np.array_equal(first, epoch(3, 1, **kwargs))  # nothing cached changes it
        assert not np.array_equal(first, epoch(3, 2, **kwargs))
        assert not np.array_equal(first, epoch(4, 1, **kwargs))


def test_batches_are_shuffled_and_buckets_are_random_inside() -> None:
    lengths = uniform_lengths(20_000)
    ids = bucket_ids(lengths, 78)
    out = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=64)
    longest = np.array([lengths[out.batch(b)].max() for b in range(len(out))])
    # consecutive batches do not go from short to long: about half the steps go down
    downs = np.count_nonzero(np.diff(longest) < 0) / (len(out) - 1)
    assert 0.4 < downs < 0.6
    # samples of a bucket are in a random order: not in index order
    first = out.batch(0)
    assert not np.all(np.diff(first) > 0)


def test_padding_waste_far_below_random_batching() -> None:
    lengths = uniform_lengths(20_000)
    size = 64
    ids = bucket_ids(lengths, lengths.size // (4 * size))
    bucketed = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=size)
    order = EpochOrder(lengths.size, 0, 0, True).indices(0, lengths.size)
    offsets = np.minimum(np.arange(0, lengths.size + size, size), lengths.size)
    random = EpochBatches(order, np.unique(offsets).astype(np.int64))
    bucketed_waste = padding_stats(lengths, bucketed)["waste"]
    random_waste = padding_stats(lengths, random)["waste"]
    assert bucketed_waste < 0.015
    assert 0.45 < random_waste < 0.51
    budget = bucketed_batches(
        lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=16384
    )
    assert padding_stats(lengths, budget, max_tokens=16384)["utilization"] > 0.96


def test_epoch_memory_is_the_int32_indices_plus_a_little() -> None:
    n = 1_000_000
    lengths = uniform_lengths(n)
    ids = bucket_ids(lengths, n // 256)
    for kwargs in ({"batch_size": 64}, {"batch_size": None, "max_tokens": 16384}):
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            out = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, **kwargs)  # type: ignore[arg-type]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert out.indices.nbytes == 4 * n
        assert peak - base < 4 * n + 8 * 2**20


# ------------------------------------------------------------------------------------------------
# Token budgets.
# ------------------------------------------------------------------------------------------------


def test_oversize_sample_raises_naming_it() -> None:
    lengths = np.array([10, 20, 5000, 30, 9000, 40])
    ids = bucket_ids(lengths, 2)
    with pytest.raises(ValueError, match=r"sample 2 has length 5000.*max_tokens=4096"):
        bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=4096)
    # quadratic: a sample of length L alone costs L*L
    with pytest.raises(ValueError, match=r"sample 4 has length 9000: alone it costs 9000²"):
        bucketed_batches(
            lengths,
            bucket_ids=ids,
            seed=0,
            epoch=0,
            batch_size=None,
            max_tokens=9000**2 - 1,
            cost="quadratic",
        )
    out = bucketed_batches(
        lengths,
        bucket_ids=ids,
        seed=0,
        epoch=0,
        batch_size=None,
        max_tokens=9000**2,
        cost="quadratic",
    )
    assert sorted(out.indices.tolist()) == list(range(6))


def test_budget_with_a_cap_and_exact_fits() -> None:
    lengths = np.full(100, 10)
    ids = bucket_ids(lengths, 3)
    out = bucketed_batches(
        lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=100
    )
    assert out.sizes().tolist() == [10] * 10  # 10 samples of 10 tokens fill 100 exactly
    out = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=7, max_tokens=100)
    assert sorted(out.sizes().tolist()) == [2] + [7] * 14
    out = bucketed_batches(
        lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=7, max_tokens=100, drop_last=True
    )
    assert out.sizes().tolist() == [7] * 14
    out = bucketed_batches(
        lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=10, max_tokens=100, drop_last=True
    )
    assert out.sizes().tolist() == [10] * 10  # the last batch is full: kept
    out = bucketed_batches(
        lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=1000, cost="quadratic"
    )
    assert out.sizes().tolist() == [10] * 10  # 10 * 10² = 1000


def test_zero_lengths_cost_one_token() -> None:
    lengths = np.zeros(10, dtype=np.int64)
    ids = bucket_ids(lengths, 2)
    out = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=3)
    assert sorted(out.sizes().tolist()) == [1, 3, 3, 3]


def test_long_windows_grow_and_mixed_lengths() -> None:
    # short samples then one long one: the window grows many times, then stops at the long one
    lengths = np.array([1] * 5000 + [1000] * 3)
    ids = np.zeros(lengths.size, dtype=np.int32)  # one bucket: a random mix
    out = bucketed_batches(
        lengths, bucket_ids=ids, seed=9, epoch=0, batch_size=None, max_tokens=4000
    )
    expected = reference_batches(
        lengths.tolist(), ids.tolist(), seed=9, epoch=0, batch_size=None, max_tokens=4000
    )
    assert as_lists(out) == expected


def test_many_batches_under_a_budget() -> None:
    lengths = np.ones(5_000, dtype=np.int64)
    ids = bucket_ids(lengths, 7)
    out = bucketed_batches(lengths, bucket_ids=ids, seed=2, epoch=1, batch_size=None, max_tokens=2)
    assert out.sizes().tolist() == [2] * 2_500
    expected = reference_batches(
        lengths.tolist(), ids.tolist(), seed=2, epoch=1, batch_size=None, max_tokens=2
    )
    assert as_lists(out) == expected


# ------------------------------------------------------------------------------------------------
# EpochBatches.
# ------------------------------------------------------------------------------------------------


def small_epoch() -> EpochBatches:
    lengths = uniform_lengths(1_003)
    return bucketed_batches(
        lengths, bucket_ids=bucket_ids(lengths, 4), seed=1, epoch=0, batch_size=10
    )


def test_batch_bounds_and_dtypes() -> None:
    out = small_epoch()
    assert len(out) == 101
    assert out.indices.dtype == np.int32 and not out.indices.flags.writeable
    assert out.offsets.dtype == np.int64 and not out.offsets.flags.writeable
    batch = out.batch(100)
    assert batch.dtype == np.int64 and batch.flags.writeable
    assert out.batch(0).size + out.batch(100).size in (13, 20)
    for bad in (101, -1, 10**9):
        with pytest.raises(IndexError, match=rf"batch {bad} is out of range: this epoch has 101"):
            out.batch(bad)
    with pytest.raises(TypeError, match="b must be an integer"):
        out.batch(True)
    assert out.num_samples == 1_003
    assert int(out.sizes().sum()) == 1_003


@pytest.mark.parametrize("world", [1, 2, 3, 4, 7, 101, 200])
@pytest.mark.parametrize("even", [True, False])
def test_shard_disjoint_equal_and_complete(world: int, even: bool) -> None:
    out = small_epoch()
    shards = [out.shard(world, r, even=even) for r in range(world)]
    dealt = len(out) - len(out) % world if even else len(out)
    counts = [len(s) for s in shards]
    if even:
        assert counts == [len(out) // world] * world
        assert all(s.dropped_batches == len(out) % world for s in shards)
    else:
        assert sum(counts) == len(out) and max(counts) - min(counts) <= 1
        assert all(s.dropped_batches == 0 for s in shards)
    for r, s in enumerate(shards):
        for k in range(len(s)):
            assert np.array_equal(s.batch(k), out.batch(r + k * world))
    union = np.concatenate([s.indices for s in shards])
    assert np.unique(union).size == union.size  # disjoint
    kept = out.indices[: out.offsets[dealt]]
    assert np.array_equal(np.sort(union), np.sort(kept))


def test_shard_errors() -> None:
    out = small_epoch()
    with pytest.raises(ValueError, match="world_size must be >= 1"):
        out.shard(0, 0)
    with pytest.raises(ValueError, match=r"rank must be in \[0, world_size\) = \[0, 2\), got 2"):
        out.shard(2, 2)
    with pytest.raises(TypeError, match="even must be a bool"):
        out.shard(2, 0, even=1)  # type: ignore[arg-type]


def test_epoch_batches_validation() -> None:
    ok = np.array([3, 1, 2], dtype=np.int64)
    EpochBatches(ok, np.array([0, 2, 3], dtype=np.int64))
    EpochBatches(ok.astype(np.int32), np.array([0, 0, 3], dtype=np.int64))  # empty batch ok
    with pytest.raises(TypeError, match="int32 or int64"):
        EpochBatches(ok.astype(np.float64), np.array([0, 3], dtype=np.int64))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="offsets must be a 1-d int64"):
        EpochBatches(ok, np.array([0, 3], dtype=np.int32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="end at len"):
        EpochBatches(ok, np.array([0, 2], dtype=np.int64))
    with pytest.raises(ValueError, match="non-decreasing"):
        EpochBatches(ok, np.array([0, 2, 1, 3], dtype=np.int64))
    with pytest.raises(ValueError, match="start at 0"):
        EpochBatches(ok, np.zeros(0, dtype=np.int64))


def test_empty_dataset() -> None:
    empty = np.zeros(0, dtype=np.int64)
    out = bucketed_batches(empty, bucket_ids=bucket_ids(empty, 4), seed=0, epoch=0, batch_size=4)
    assert len(out) == 0 and out.num_samples == 0
    assert out.shard(2, 1).dropped_batches == 0
    stats = padding_stats(empty, out)
    assert stats["waste"] == 0.0 and stats["num_batches"] == 0.0


def test_drop_last_can_leave_nothing() -> None:
    lengths = np.arange(5)
    out = bucketed_batches(
        lengths, bucket_ids=bucket_ids(lengths, 2), seed=0, epoch=0, batch_size=8, drop_last=True
    )
    assert len(out) == 0


# ------------------------------------------------------------------------------------------------
# padding_stats and argument checks.
# ------------------------------------------------------------------------------------------------


def test_padding_stats_by_hand() -> None:
    lengths = np.array([1, 2, 3, 4, 10])
    batches = EpochBatches(
        np.array([0, 3, 4, 1, 2], dtype=np.int32), np.array([0, 2, 5], dtype=np.int64)
    )
    stats = padding_stats(lengths, batches, max_tokens=40)
    # batch 0: lengths 1, 4 -> 2 * 4 = 8; batch 1: lengths 10, 2, 3 -> 3 * 10 = 30
    assert stats["real_tokens"] == 20 and stats["padded_tokens"] == 38
    assert math.isclose(stats["waste"], 1 - 20 / 38)
    assert stats["batch_size_min"] == 2 and stats["batch_size_max"] == 3
    assert stats["batch_size_median"] == 2.5 and stats["batch_size_mean"] == 2.5
    assert math.isclose(stats["utilization"], 20 / 80)
    assert math.isclose(stats["fill"], 38 / 80)
    assert stats["max_batch_cost"] == 30 and stats["mean_batch_cost"] == 19
    quad = padding_stats(lengths, batches, max_tokens=400, cost="quadratic")
    assert quad["max_batch_cost"] == 300 and math.isclose(quad["utilization"], 130 / 800)
    with pytest.raises(ValueError, match="hold sample 4 but lengths has only 3"):
        padding_stats(lengths[:3], batches)


def test_argument_errors() -> None:
    lengths = np.array([3, 1, 2])
    ids = bucket_ids(lengths, 2)
    common = {"bucket_ids": ids, "seed": 0, "epoch": 0}
    with pytest.raises(ValueError, match="pass batch_size"):
        bucketed_batches(lengths, batch_size=None, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cost must be one of"):
        bucketed_batches(lengths, batch_size=None, max_tokens=9, cost="cubic", **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        bucketed_batches(lengths, batch_size=0, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens must be < 2"):
        bucketed_batches(lengths, batch_size=None, max_tokens=2**63, **common)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="drop_last must be a bool"):
        bucketed_batches(lengths, batch_size=2, drop_last=1, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one entry per sample"):
        bucketed_batches(lengths, bucket_ids=ids[:2], seed=0, epoch=0, batch_size=2)
    with pytest.raises(ValueError, match="sample 1 has length -1"):
        bucket_ids(np.array([2, -1]), 2)
    with pytest.raises(TypeError, match="lengths must be a 1-d array of integers"):
        bucket_ids(np.array([1.5, 2.0]), 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lengths must be a 1-d array of integers"):
        bucket_ids(np.array([True, False]), 2)
    with pytest.raises(ValueError, match="num_buckets must be >= 1"):
        bucket_ids(lengths, 0)
    with pytest.raises(TypeError, match="seed must be an integer"):
        bucketed_batches(lengths, bucket_ids=ids, seed=True, epoch=0, batch_size=2)
