"""Tests of ``bucketed_sequence_batches``: bucketing an epoch that another sampler chose."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import (
    EpochBatches,
    FeistelPermutation,
    bucket_ids,
    bucketed_batches,
    bucketed_sequence_batches,
    curriculum_epoch_batches,
    derive_key,
    difficulty_order,
    mixture_batches,
    padding_stats,
    weighted_batches,
)
from loaderkit.order import bucketing as bucketing_module

FAST = settings(deadline=None)
SEEDS = st.integers(min_value=0, max_value=2**64)


# ------------------------------------------------------------------------------------------------
# A straightforward pure-Python reading of steps 2'-4' of the module docstring of
# loaderkit/order/bucketing.py (lists, Python's stable sort, a sample-by-sample greedy).
# ------------------------------------------------------------------------------------------------


def reference(
    sequence: list[int],
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
    s = sorted(sequence, key=lambda i: ids[i])  # stable: each bucket keeps the sequence order
    total = len(s)
    batches: list[list[int]] = []
    if max_tokens is None:
        assert batch_size is not None
        batches = [s[k : k + batch_size] for k in range(0, total, batch_size)]
        if drop_last and total % batch_size:
            batches.pop()
    else:
        lam = [max(length, 1) for length in lengths]

        def unit(length: int) -> int:
            return length * length if cost == "quadratic" else length

        for i in sorted(set(sequence)):
            if unit(lam[i]) > max_tokens:
                raise ValueError(f"sample {i} has length {lengths[i]}")
        p = 0
        while p < total:
            k, longest = 1, lam[s[p]]
            while p + k < total and (batch_size is None or k < batch_size):
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
    shuffle = FeistelPermutation(m, derive_key(seed, "bucketing-sequence-batches", epoch))
    return [batches[int(q)] for q in shuffle.slice(0, m)]


def as_lists(batches: EpochBatches) -> list[list[int]]:
    return [batches.batch(b).tolist() for b in range(len(batches))]


def uniform_lengths(n: int = 20_000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(16, 513, n)


@st.composite
def problems(draw: st.DrawFn) -> dict[str, object]:
    """Lengths, buckets, a sequence with repeats, a seed, an epoch and a batching mode."""
    n = draw(st.integers(min_value=1, max_value=120))
    lengths = draw(st.lists(st.integers(0, 120), min_size=n, max_size=n))
    sequence = draw(st.lists(st.integers(0, n - 1), max_size=300))
    problem: dict[str, object] = {
        "lengths": lengths,
        "sequence": sequence,
        "num_buckets": draw(st.integers(min_value=1, max_value=40)),
        "seed": draw(SEEDS),
        "epoch": draw(st.integers(min_value=0, max_value=5)),
        "drop_last": draw(st.booleans()),
        "cost": "linear",
        "max_tokens": None,
    }
    if draw(st.booleans()):
        problem["batch_size"] = draw(st.integers(min_value=1, max_value=40))
    else:
        cost = draw(st.sampled_from(["linear", "quadratic"]))
        longest = max([max(lengths[i], 1) for i in sequence], default=1)
        unit = longest * longest if cost == "quadratic" else longest
        problem["cost"] = cost
        problem["max_tokens"] = draw(st.integers(min_value=unit, max_value=unit * 30))
        problem["batch_size"] = draw(st.none() | st.integers(min_value=1, max_value=40))
    return problem


def run(problem: dict[str, object]) -> tuple[EpochBatches, list[list[int]]]:
    lengths, sequence = problem["lengths"], problem["sequence"]
    assert isinstance(lengths, list) and isinstance(sequence, list)
    kwargs = {k: problem[k] for k in ("seed", "epoch", "batch_size", "max_tokens", "cost")}
    kwargs["drop_last"] = problem["drop_last"]
    arr = np.array(lengths, dtype=np.int64)
    ids = bucket_ids(arr, problem["num_buckets"])  # type: ignore[arg-type]
    seq = np.array(sequence, dtype=np.int64)
    got = bucketed_sequence_batches(seq, arr, bucket_ids=ids, **kwargs)  # type: ignore[arg-type]
    expected = reference(sequence, lengths, ids.tolist(), **kwargs)  # type: ignore[arg-type]
    return got, expected


# ------------------------------------------------------------------------------------------------
# Golden vectors: the bucketed order of a sequence is part of the order contract (docs/order.md
# §11). If one of these tests fails, the change is a BREAKING CHANGE: do not update the numbers.
# ------------------------------------------------------------------------------------------------

GOLDEN_LENGTHS = [(i * 37) % 61 + 5 for i in range(40)]
GOLDEN_SEQUENCE = [(7 * i + 3) % 40 for i in range(30)] + [1, 1, 2, 5]
GOLDEN_FIXED = [
    [21, 28, 23, 18], [7, 35, 9, 37, 4, 32], [30, 25, 2, 5, 17, 12],
    [6, 1, 1, 3, 31, 26], [24, 19, 14, 16, 11, 39], [10, 38, 5, 33, 0, 2],
]  # fmt: skip
GOLDEN_TOKENS = [
    [10, 38, 5, 33, 0, 2, 30, 25, 2, 5], [1, 1, 3], [4, 32, 24, 19, 14], [16, 11, 39, 6],
    [31, 26, 21], [17, 12, 7, 35, 9, 37], [28, 23, 18],
]  # fmt: skip


def golden(**kwargs: object) -> list[list[int]]:
    lengths = np.array(GOLDEN_LENGTHS)
    out = bucketed_sequence_batches(
        np.array(GOLDEN_SEQUENCE),
        lengths,
        bucket_ids=bucket_ids(lengths, 4),
        seed=0,
        epoch=0,
        **kwargs,  # type: ignore[arg-type]
    )
    return as_lists(out)


def test_golden_fixed_size() -> None:
    assert golden(batch_size=6) == GOLDEN_FIXED


def test_golden_token_budget() -> None:
    assert golden(batch_size=None, max_tokens=200) == GOLDEN_TOKENS


def test_golden_vectors_match_the_reference() -> None:
    ids = bucket_ids(np.array(GOLDEN_LENGTHS), 4).tolist()
    args = (GOLDEN_SEQUENCE, GOLDEN_LENGTHS, ids)
    assert reference(*args, seed=0, epoch=0, batch_size=6) == GOLDEN_FIXED
    assert reference(*args, seed=0, epoch=0, batch_size=None, max_tokens=200) == GOLDEN_TOKENS


# ------------------------------------------------------------------------------------------------
# The implementation is the algorithm.
# ------------------------------------------------------------------------------------------------


@FAST
@given(problems())
def test_matches_the_reference(problem: dict[str, object]) -> None:
    got, expected = run(problem)
    assert as_lists(got) == expected


@FAST
@given(problems())
def test_matches_the_reference_across_chunk_boundaries(problem: dict[str, object]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bucketing_module, "CHUNK", 7)  # many chunks, each bucket split across them
        got, expected = run(problem)
    assert as_lists(got) == expected


@FAST
@given(problems())
def test_every_position_once_and_budgets_kept(problem: dict[str, object]) -> None:
    got, _ = run({**problem, "drop_last": False})
    sequence = problem["sequence"]
    lengths = np.array(problem["lengths"], dtype=np.int64)
    assert isinstance(sequence, list)
    assert got.indices.dtype == np.int32
    assert Counter(got.indices.tolist()) == Counter(sequence)  # the same multiset
    sizes = got.sizes()
    assert np.all(sizes >= 1)
    size, budget = problem["batch_size"], problem["max_tokens"]
    if isinstance(size, int):
        assert np.all(sizes <= size)
    if budget is None:
        assert isinstance(size, int)
        assert len(got) == -(-len(sequence) // size)
    else:
        assert isinstance(budget, int)
        stats = padding_stats(lengths, got, max_tokens=budget, cost=str(problem["cost"]))
        assert stats["max_batch_cost"] <= budget


@FAST
@given(problems())
def test_drop_last_drops_the_final_partial_batch(problem: dict[str, object]) -> None:
    kept, _ = run({**problem, "drop_last": True})
    full, _ = run({**problem, "drop_last": False})
    assert len(full) - len(kept) in (0, 1)
    dropped = Counter(full.indices.tolist()) - Counter(kept.indices.tolist())
    if problem["max_tokens"] is None:
        size = problem["batch_size"]
        sequence = problem["sequence"]
        assert isinstance(size, int) and isinstance(sequence, list)
        assert len(kept) == len(sequence) // size
        assert dropped.total() == len(sequence) % size


def test_the_sequence_dtype_does_not_matter() -> None:
    lengths = uniform_lengths(1_000)
    ids = bucket_ids(lengths, 8)
    seq = np.random.default_rng(1).integers(0, 1_000, 3_000)
    outs = [
        bucketed_sequence_batches(
            seq.astype(dtype), lengths, bucket_ids=ids, seed=5, epoch=2, batch_size=16
        )
        for dtype in (np.int64, np.int32, np.uint16)
    ]
    for out in outs[1:]:
        assert np.array_equal(out.indices, outs[0].indices)
        assert np.array_equal(out.offsets, outs[0].offsets)


def test_reproducible_and_different_across_epochs_and_seeds() -> None:
    lengths = uniform_lengths(2_000)
    ids = bucket_ids(lengths, 10)
    seq = np.random.default_rng(3).integers(0, 2_000, 2_500)

    def epoch(seed: int, e: int, **kwargs: object) -> np.ndarray:
        out = bucketed_sequence_batches(seq, lengths, bucket_ids=ids, seed=seed, epoch=e, **kwargs)  # type: ignore[arg-type]
        return np.asarray(out.indices)

    for kwargs in ({"batch_size": 32}, {"batch_size": None, "max_tokens": 4096}):
        first = epoch(3, 1, **kwargs)
        assert np.array_equal(first, epoch(3, 1, **kwargs))
        assert not np.array_equal(first, epoch(3, 2, **kwargs))  # the batch order differs
        assert not np.array_equal(first, epoch(4, 1, **kwargs))


def test_its_key_differs_from_plain_bucketing() -> None:
    """A permutation of [0, n) bucketed as a sequence is not bucketed_batches' epoch."""
    lengths = uniform_lengths(2_000)
    ids = bucket_ids(lengths, 10)
    plain = bucketed_batches(lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=32)
    seq = FeistelPermutation(2_000, derive_key(0, "bucketing", 0)).slice(0, 2_000)
    again = bucketed_sequence_batches(seq, lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=32)
    # the same cut (step 2 is this sort of that permutation) but another batch order
    assert sorted(map(tuple, as_lists(plain))) == sorted(map(tuple, as_lists(again)))
    assert as_lists(plain) != as_lists(again)


def test_padding_far_below_random_for_a_random_sequence() -> None:
    lengths = uniform_lengths(20_000)
    size = 64
    ids = bucket_ids(lengths, lengths.size // (4 * size))
    weights = np.random.default_rng(2).random(lengths.size)
    draws = weighted_batches(weights, seed=0, epoch=0, batch_size=30_000, num_samples=30_000)
    seq = draws.indices
    offsets = np.minimum(np.arange(0, seq.size + size, size), seq.size).astype(np.int64)
    random = EpochBatches(seq, np.unique(offsets))
    bucketed = bucketed_sequence_batches(
        seq, lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=size
    )
    random_waste = padding_stats(lengths, random)["waste"]
    bucketed_waste = padding_stats(lengths, bucketed)["waste"]
    assert random_waste > 0.45
    assert bucketed_waste < 0.015
    budget = bucketed_sequence_batches(
        seq, lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=None, max_tokens=16384
    )
    stats = padding_stats(lengths, budget, max_tokens=16384)
    assert stats["max_batch_cost"] <= 16384
    assert stats["utilization"] > 0.95


def test_batches_are_shuffled() -> None:
    lengths = uniform_lengths(20_000)
    ids = bucket_ids(lengths, 78)
    seq = np.random.default_rng(4).permutation(20_000)[:15_000]
    out = bucketed_sequence_batches(seq, lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=64)
    longest = np.array([lengths[out.batch(b)].max() for b in range(len(out))])
    downs = np.count_nonzero(np.diff(longest) < 0) / (len(out) - 1)
    assert 0.4 < downs < 0.6


def test_memory_is_the_int32_indices_plus_a_little() -> None:
    n = 1_000_000
    lengths = uniform_lengths(n)
    ids = bucket_ids(lengths, n // 256)
    seq = np.random.default_rng(0).integers(0, n, n).astype(np.int32)
    for kwargs in ({"batch_size": 64}, {"batch_size": None, "max_tokens": 16384}):
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            out = bucketed_sequence_batches(seq, lengths, bucket_ids=ids, seed=0, epoch=0, **kwargs)  # type: ignore[arg-type]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert out.indices.nbytes == 4 * n
        assert peak - base < 4 * n + 8 * 2**20


# ------------------------------------------------------------------------------------------------
# The samplers whose epochs the loader buckets: their sequence does not depend on the batch size,
# so the loader computes it in one batch and buckets it.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_draws_do_not_depend_on_the_batch_size(replacement: bool) -> None:
    weights = np.random.default_rng(0).random(500)
    seqs = [
        weighted_batches(
            weights, seed=1, epoch=3, batch_size=b, num_samples=400, replacement=replacement
        ).indices
        for b in (1, 7, 64, 400, 10_000)
    ]
    for seq in seqs[1:]:
        assert np.array_equal(seq, seqs[0])


def test_a_curriculum_epoch_does_not_depend_on_the_batch_size() -> None:
    order = difficulty_order(np.random.default_rng(0).random(500))
    seqs = [
        curriculum_epoch_batches(order, 0.37, seed=1, epoch=2, batch_size=b).indices
        for b in (1, 7, 64, 500, 10_000)
    ]
    for seq in seqs[1:]:
        assert np.array_equal(seq, seqs[0])


@pytest.mark.parametrize(
    ("mode", "options"),
    [
        ("weighted", {}),
        ("weighted", {"weights": [1.0, 3.0, 0.5], "num_samples": 77}),
        ("round_robin", {}),
        ("max_size_cycle", {}),
        ("min_size", {}),
    ],
)
@pytest.mark.parametrize("shuffle", [True, False])
def test_mixture_epochs_do_not_depend_on_the_batch_size(
    mode: str, options: dict[str, object], shuffle: bool
) -> None:
    seqs = [
        mixture_batches(
            [30, 7, 12],
            names=["a", "b", "c"],
            mode=mode,
            seed=4,
            epoch=1,
            batch_size=b,
            shuffle=shuffle,
            **options,  # type: ignore[arg-type]
        ).indices
        for b in (1, 5, 16, 90, 10_000)
    ]
    for seq in seqs[1:]:
        assert np.array_equal(seq, seqs[0])


# ------------------------------------------------------------------------------------------------
# Edge cases and bad inputs.
# ------------------------------------------------------------------------------------------------


def test_empty_sequence_and_drop_last_leaving_nothing() -> None:
    lengths = np.arange(5)
    ids = bucket_ids(lengths, 2)
    empty = np.zeros(0, dtype=np.int64)
    for kwargs in ({"batch_size": 3}, {"batch_size": None, "max_tokens": 10}):
        out = bucketed_sequence_batches(empty, lengths, bucket_ids=ids, seed=0, epoch=0, **kwargs)  # type: ignore[arg-type]
        assert len(out) == 0 and out.num_samples == 0
    out = bucketed_sequence_batches(
        np.array([1, 2]), lengths, bucket_ids=ids, seed=0, epoch=0, batch_size=3, drop_last=True
    )
    assert len(out) == 0


def test_oversize_checks_only_the_samples_of_the_sequence() -> None:
    lengths = np.array([10, 20, 5000, 30, 9000, 40])
    ids = bucket_ids(lengths, 2)
    common = {"bucket_ids": ids, "seed": 0, "epoch": 0, "batch_size": None, "max_tokens": 4096}
    # samples 2 and 4 are too long, but the sequence never holds them
    out = bucketed_sequence_batches(np.array([0, 1, 3, 5, 5]), lengths, **common)  # type: ignore[arg-type]
    assert sorted(out.indices.tolist()) == [0, 1, 3, 5, 5]
    # the smallest oversize sample *of the sequence* is named
    with pytest.raises(ValueError, match=r"sample 4 has length 9000: alone it costs 9000 > "):
        bucketed_sequence_batches(np.array([0, 4, 1]), lengths, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sample 2 has length 5000.*max_tokens=4096"):
        bucketed_sequence_batches(np.array([4, 0, 2, 4]), lengths, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sample 4 has length 9000: alone it costs 9000²"):
        bucketed_sequence_batches(
            np.array([0, 4]),
            lengths,
            bucket_ids=ids,
            seed=0,
            epoch=0,
            batch_size=None,
            max_tokens=9000**2 - 1,
            cost="quadratic",
        )


def test_argument_errors() -> None:
    lengths = np.array([3, 1, 2])
    ids = bucket_ids(lengths, 2)
    seq = np.array([0, 2, 2])
    common = {"bucket_ids": ids, "seed": 0, "epoch": 0}
    with pytest.raises(TypeError, match="sequence must be a 1-d array of integers"):
        bucketed_sequence_batches(np.array([0.0, 1.0]), lengths, batch_size=2, **common)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence must be a 1-d array of integers"):
        bucketed_sequence_batches(np.array([[0, 1]]), lengths, batch_size=2, **common)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence must be a 1-d array of integers"):
        bucketed_sequence_batches(np.array([True]), lengths, batch_size=2, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"= \[0, 3\), but it holds 3"):
        bucketed_sequence_batches(np.array([0, 3]), lengths, batch_size=2, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"holds -1"):
        bucketed_sequence_batches(np.array([-1, 0]), lengths, batch_size=2, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass batch_size"):
        bucketed_sequence_batches(seq, lengths, batch_size=None, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cost must be one of"):
        bucketed_sequence_batches(seq, lengths, batch_size=None, max_tokens=9, cost="x", **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        bucketed_sequence_batches(seq, lengths, batch_size=0, **common)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="drop_last must be a bool"):
        bucketed_sequence_batches(seq, lengths, batch_size=2, drop_last=1, **common)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one entry per sample"):
        bucketed_sequence_batches(seq, lengths, bucket_ids=ids[:2], seed=0, epoch=0, batch_size=2)
    with pytest.raises(TypeError, match="seed must be an integer"):
        bucketed_sequence_batches(seq, lengths, bucket_ids=ids, seed=True, epoch=0, batch_size=2)
    with pytest.raises(ValueError, match="sample 1 has length -1"):
        bucketed_sequence_batches(
            seq, np.array([2, -1, 3]), bucket_ids=ids, seed=0, epoch=0, batch_size=2
        )
