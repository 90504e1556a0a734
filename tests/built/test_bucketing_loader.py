"""Bucketed loaders: every sample once, little padding, budgets kept, reproducible, resumable,
worker-invariant, sharded evenly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder
from loaderkit.testing import assert_elastic, assert_resumable, assert_worker_invariant, collect

pytestmark = pytest.mark.timeout(180)


def make_samples(n: int, seed: int = 0, low: int = 16, high: int = 512) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"input_ids": np.arange(int(rng.integers(low, high + 1)), dtype=np.int64), "idx": i}
        for i in range(n)
    ]


def sample_length(sample):
    return len(sample["input_ids"])


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]


@given(
    n=st.integers(1, 300),
    batch=st.integers(1, 32),
    seed=st.integers(0, 2**32),
    buckets=st.none() | st.integers(1, 20),
)
def test_every_sample_once_per_epoch(n, batch, seed, buckets):
    samples = make_samples(n, low=1, high=40)
    buckets = None if buckets is None else min(buckets, n)
    loader = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(batch)
        .with_seed(seed)
        .with_bucketing("input_ids", num_buckets=buckets)
        .with_collator("text")
        .compile()
        .build()
    )
    for _ in range(2):
        ids = _ids(collect(loader))
        assert sorted(ids) == list(range(n))


def test_padding_is_far_below_random_batching():
    samples = make_samples(20_000)
    base = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(64)
        .with_shuffle()
        .with_collator("text")
    )

    def waste(loader) -> float:
        real = padded = 0
        for batch in loader:
            mask = batch["attention_mask"]
            real += int(mask.sum())
            padded += mask.numel()
        return 1 - real / padded

    bucketed = waste(base.with_bucketing("input_ids").compile().build())
    random = waste(base.compile().build())
    assert random > 0.4
    assert bucketed < 0.015


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_the_token_budget_is_never_exceeded(cost):
    samples = make_samples(3_000)
    budget = 16_384 if cost == "linear" else 16_384 * 512
    loader = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_shuffle()
        .with_bucketing("input_ids", max_tokens=budget, max_batch_size=48, cost=cost)
        .with_collator("text")
        .compile()
        .build()
    )
    sizes = []
    for batch in loader:
        rows, width = batch["input_ids"].shape
        sizes.append(rows)
        assert rows * (width if cost == "linear" else width * width) <= budget
        assert rows <= 48
    assert len(set(sizes)) > 1  # sizes vary with length
    assert sorted(_ids_from(loader)) == list(range(3_000))
    assert "budget used" in loader.explain()


def _ids_from(loader) -> list[int]:
    loader.set_epoch(0)
    return _ids(collect(loader))


def test_bucketed_plans_are_reproducible_resumable_and_worker_invariant():
    samples = make_samples(300)
    plan = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(16)
        .with_shuffle()
        .with_seed(3)
        .with_bucketing("input_ids", num_buckets=6)
        .with_collator("text")
        .with_workers(2)
        .compile()
    )
    assert_worker_invariant(plan, workers=(0, 2))
    assert_resumable(plan.to_builder().with_workers(0).compile(), at=[0, 5, 19])
    first, second = plan.build(), plan.build()
    assert _ids(collect(first)) == _ids(collect(second))
    assert _ids(collect(first)) != _ids(collect(plan.build()))  # epoch 1 differs from epoch 0


def test_lengths_from_a_function_are_measured_once():
    calls = []

    def counting_length(sample):
        calls.append(1)
        return len(sample["input_ids"])

    samples = make_samples(200)
    plan = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(8)
        .with_bucketing(counting_length)
        .with_collator("text")
        .compile()
    )
    first = plan.build()
    assert len(calls) == 200
    collect(first)
    collect(first)
    plan.build()
    assert len(calls) == 200  # cached for the same dataset and function
    assert "cached" in plan.build().lengths_cost


def test_hf_columns_are_measured_in_arrow():
    datasets = pytest.importorskip("datasets")
    samples = make_samples(500)
    ds = datasets.Dataset.from_dict(
        {"input_ids": [s["input_ids"].tolist() for s in samples], "idx": list(range(500))}
    ).shuffle(seed=1)
    loader = (
        DataLoaderBuilder()
        .with_dataset(ds)
        .with_batch_size(16)
        .with_bucketing("input_ids")
        .with_collator("text")
        .compile()
        .build()
    )
    assert "Arrow" in loader.lengths_cost
    batches = collect(loader)
    assert sorted(_ids(batches)) == list(range(500))
    # lengths follow the shuffled dataset's rows: a batch's padding stays small
    widths = [b["input_ids"].shape[1] for b in batches]
    reals = [int(b["attention_mask"].sum(1).min()) for b in batches]
    assert all(w - r < 200 for w, r in zip(widths, reals, strict=True))


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("token_budget", [False, True])
def test_ranks_get_the_same_number_of_batches_and_repeat_only_the_tail(world, token_budget):
    samples = make_samples(400)
    base = DataLoaderBuilder().with_dataset(samples).with_shuffle().with_collator("text")
    if token_budget:
        base = base.with_bucketing("input_ids", max_tokens=8_192)
    else:
        base = base.with_batch_size(10).with_bucketing("input_ids")
    per_rank = []
    for rank in range(world):
        loader = base.with_distributed(world_size=world, rank=rank).compile().build()
        repeated = loader.repeated_samples  # of the epoch about to be read (epoch 0)
        per_rank.append(collect(loader))
    assert len({len(batches) for batches in per_rank}) == 1
    ids = [i for batches in per_rank for i in _ids(batches)]
    assert set(ids) == set(range(400))
    assert len(ids) - 400 == repeated  # only the wrap-around that evens the ranks out


def test_fixed_size_bucketing_is_elastic():
    base = DataLoaderBuilder().with_dataset(make_samples(400)).with_shuffle().with_collator("text")
    assert_elastic(
        base.with_batch_size(24).with_bucketing("input_ids").compile(), world_sizes=(1, 2, 3, 4)
    )


def test_an_oversize_sample_under_a_budget_is_an_error_naming_it():
    samples = make_samples(50, low=10, high=20)
    samples[7] = {"input_ids": np.arange(5_000), "idx": 7}
    plan = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_bucketing("input_ids", max_tokens=1_000)
        .with_collator("text")
        .compile()
    )
    with pytest.raises(lk.DataError, match="sample 7 has length 5000") as err:
        plan.build()
    assert err.value.sample_index == 7


def test_a_column_of_ints_is_read_as_the_lengths():
    rows = [{"idx": i, "n": 1 + (i * 13) % 90} for i in range(200)]
    plan = DataLoaderBuilder().with_dataset(rows).with_batch_size(10).with_bucketing("n")
    by_int = [b["idx"].tolist() for b in collect(plan.compile().build())]
    precomputed = plan.with_bucketing([r["n"] for r in rows]).compile()
    assert by_int == [b["idx"].tolist() for b in collect(precomputed.build())]
    columns = {"n": [r["n"] for r in rows], "idx": list(range(200))}
    by_column = DataLoaderBuilder().with_dataset(columns).with_batch_size(10).with_bucketing("n")
    assert [b["idx"].tolist() for b in collect(by_column.compile().build())] == by_int


def test_a_column_of_neither_sequences_nor_ints_is_named():
    rows = [{"n": 1.5} for _ in range(20)]
    plan = DataLoaderBuilder().with_dataset(rows).with_batch_size(4).with_bucketing("n").compile()
    with pytest.raises(lk.PlanError, match=r"bucketing.length: sample 0: .*sequences or int"):
        plan.build()
