"""Progressive batch sizes: with_batch_size(schedule) by epoch or by step."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import (
    assert_batches_equal,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(240)

DATA = {"x": torch.arange(50)}


def doubling(step: int) -> int:
    return min(2 ** (step // 3), 16)


def base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(DATA).with_shuffle().with_seed(3)


def sizes(batches) -> list[int]:
    return [len(b["x"]) for b in batches]


def test_an_epoch_table_sets_each_epochs_batch_size():
    loader = base().with_batch_size([(1, 5), (3, 10), (4, 25)]).compile().build()
    seen = []
    for epoch in range(5):
        loader.set_epoch(epoch)
        batches = collect(loader)
        seen.append(sizes(batches))
        ids = sorted(int(v) for b in batches for v in b["x"])
        assert ids == list(range(50))  # every sample once, whatever the size
    assert seen == [[5] * 10, [10] * 5, [10] * 5, [25] * 2, [25] * 2]


def test_a_step_function_sizes_each_batch_across_epochs():
    loader = base().with_batch_size(doubling, by="step").compile().build()
    first, second = collect(loader), collect(loader)
    assert sizes(first) == [1, 1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8, 5]
    # the second epoch goes on counting steps where the first ended (13 steps)
    assert sizes(second) == [16, 16, 16, 2]
    assert len(loader) == 4
    loader.set_epoch(1)
    assert_batches_equal(second, collect(loader))


def test_a_constant_schedule_is_the_fixed_batch_size():
    fixed = collect(base().with_batch_size(8).compile().build())
    for spec in ([(10, 8)], lambda t: 8):
        for by in ("epoch", "step"):
            got = collect(base().with_batch_size(spec, by=by).compile().build())
            assert_batches_equal(fixed, got, label=f"{spec} by {by}")


@pytest.mark.parametrize("by", ["epoch", "step"])
def test_drop_last_drops_the_short_tail(by):
    plan = base().with_batch_size([(2, 8), (5, 16)], by=by, drop_last=True).compile()
    expected = [8] * 6 if by == "epoch" else [8, 8, 16, 16]  # 50 samples: the tail is dropped
    assert sizes(collect(plan.build())) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"batch_size": [(2, 4), (6, 8)]},
        {"batch_size": [(5, 3), (9, 7)], "by": "step"},
        {"batch_size": doubling, "by": "step"},
    ],
)
def test_schedules_are_reproducible_resumable_and_worker_invariant(spec):
    plan = base().with_batch_size(**spec).compile()
    assert_reproducible(plan, epochs=3)
    assert_resumable(plan, epoch=2)
    assert_worker_invariant(plan, workers=(0, 2), epochs=2)


@settings(max_examples=20, deadline=None)
@given(
    world=st.integers(1, 4),
    table=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    by=st.sampled_from(["epoch", "step"]),
    drop_last=st.booleans(),
)
def test_ranks_get_equal_counts_and_cover_the_epoch(world, table, by, drop_last):
    schedule = [(i + 1, size) for i, size in enumerate(table)]
    plan = base().with_batch_size(schedule, by=by, drop_last=drop_last)
    per_rank = [
        collect(plan.with_distributed(world_size=world, rank=r).compile().build())
        for r in range(world)
    ]
    assert len({len(batches) for batches in per_rank}) == 1  # even batches: no rank waits
    ids = [int(v) for batches in per_rank for b in batches for v in b["x"]]
    if drop_last:
        assert len(ids) == len(set(ids))  # nothing repeated, only the tail dropped
        assert 50 - len(ids) < world * max(table)
    else:
        assert set(ids) == set(range(50))  # everything delivered
        repeats = len(ids) - 50  # only the wrap-around that completes the last global batch
        assert 0 <= repeats < world * max(table)
        if world == 1:
            assert repeats == 0


def test_even_batches_give_every_rank_the_same_number_of_batches():
    plan = base().with_batch_size(doubling, by="step")
    lengths = {
        len(collect(plan.with_distributed(world_size=3, rank=r).compile().build()))
        for r in range(3)
    }
    assert len(lengths) == 1


def test_a_bad_size_from_the_function_is_named_with_its_step():
    def shrinking(step: int) -> int:
        return 4 - step

    loader = base().with_batch_size(shrinking, by="step").compile().build()
    with pytest.raises(PlanError, match=r"batch.batch_size: the function returned 0 for step 4"):
        collect(loader)


def test_schedules_round_trip_through_files(tmp_path):
    for spec in ({"batch_size": [(2, 4), (6, 8)]}, {"batch_size": doubling, "by": "step"}):
        plan = base().with_batch_size(**spec).compile()
        for suffix in (".json", ".toml"):
            path = tmp_path / f"plan{suffix}"
            plan.save(path)
            again = LoaderPlan.load(path, bindings=plan.bindings)
            assert again == plan
            assert_batches_equal(collect(plan.build()), collect(again.build()))


def test_an_epoch_schedule_works_with_weights_curricula_and_mixtures():
    weighted = base().with_batch_size([(1, 5), (2, 10)]).with_sampling_weights([1.0] * 50).compile()
    loader = weighted.build()
    assert set(sizes(collect(loader))) == {5}
    assert set(sizes(collect(loader))) == {10}
    mixed = (
        DataLoaderBuilder()
        .with_mixture({"a": DATA, "b": DATA}, mode="round_robin")
        .with_batch_size([(1, 4), (2, 20)])
        .compile()
        .build()
    )
    assert sizes(collect(mixed)) == [4] * 25
    assert sizes(collect(mixed)) == [20] * 5
