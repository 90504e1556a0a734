"""The shard-aware shuffle end to end: a loader over a sharded dataset reads it in windows.

The same global batches for any ``num_workers`` and world size, an exact resume mid-epoch,
``drop_last`` and batch-size schedules, the planner the selection table picks, and the
samplers that keep their own order over a sharded dataset.
"""

from __future__ import annotations

import numpy as np
import pytest
from lk_shards import MemoryShards

from loaderkit import DataLoaderBuilder
from loaderkit.order import DEFAULT_WINDOW_SHARDS, ShardOrder
from loaderkit.runtime.planners import (
    PlannerContext,
    ShardStepSizedPlanner,
    ShardWindowPlanner,
    WeightedPlanner,
    select_planner,
)
from loaderkit.runtime.planners.schedules import batch_sizes
from loaderkit.testing import (
    assert_elastic,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(240)

COUNTS = (17, 0, 23, 9, 31, 12, 5, 20, 14, 8, 0, 25)  # 164 samples, two of the shards empty
DATA = MemoryShards(COUNTS)
SEED = 3


def base(window: int | None = 3, batch: int = 8) -> DataLoaderBuilder:
    builder = DataLoaderBuilder().with_dataset(DATA, name="train").with_batch_size(batch)
    return builder.with_shuffle(window_shards=window).with_seed(SEED)


def ids(batches: list[dict[str, object]]) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]  # type: ignore[attr-defined]


def test_the_loader_reads_the_shard_order() -> None:
    with base().compile().build() as loader:
        for epoch in range(2):
            got = ids(collect(loader))
            want = ShardOrder(COUNTS, SEED, epoch, 3).indices(0, sum(COUNTS)).tolist()
            assert got == want
    shards = [DATA[i]["shard"] for i in got]
    order = ShardOrder(COUNTS, SEED, 1, 3)
    for w in range(order.num_windows):  # each window's samples come from its shards only
        lo, hi = int(order.window_starts[w]), int(order.window_starts[w + 1])
        assert set(shards[lo:hi]) <= set(order.window(w).tolist())


def test_the_default_window() -> None:
    with base(window=None).compile().build() as loader:
        got = ids(collect(loader))
    order = ShardOrder(COUNTS, SEED, 0, DEFAULT_WINDOW_SHARDS)
    assert got == order.indices(0, order.n).tolist()


def test_reproducible_and_resumable() -> None:
    plan = base().compile()
    assert_reproducible(plan, epochs=2)
    assert_resumable(plan, at=[0, 1, 7, 20, 21], epoch=1)


def test_worker_invariant() -> None:
    assert_worker_invariant(base().compile(), workers=(0, 2), epochs=2)


@pytest.mark.parametrize("drop_last", [False, True])
def test_elastic(drop_last: bool) -> None:
    plan = base(batch=8).with_batch_size(8, drop_last=drop_last).compile()
    assert_elastic(plan, world_sizes=(1, 2, 4), epochs=2)


def test_drop_last_drops_the_tail_of_the_shard_order() -> None:
    plan = base(batch=10).with_batch_size(10, drop_last=True).compile()
    with plan.build() as loader:
        got = ids(collect(loader))
    assert got == ShardOrder(COUNTS, SEED, 0, 3).indices(0, 160).tolist()


def by_epoch(epoch: int) -> int:
    return 4 if epoch == 0 else 6


def by_step(step: int) -> int:
    return 3 if step < 5 else 7


def test_batch_sizes_by_epoch_and_by_step_follow_the_shard_order() -> None:
    for fn, by in ((by_epoch, "epoch"), (by_step, "step")):
        plan = base().with_batch_size(fn, by=by).compile()
        with plan.build() as loader:
            for epoch in range(2):
                batches = collect(loader)
                want = ShardOrder(COUNTS, SEED, epoch, 3).indices(0, sum(COUNTS)).tolist()
                assert ids(batches) == want
        assert_resumable(plan, at=[0, 6], epoch=1)


def select(builder: DataLoaderBuilder) -> object:
    plan = builder.compile()
    assert plan.dataset.length is not None
    context = PlannerContext(
        plan, plan.dataset.length, None, 1, 0, batch_sizes(plan), DATA.shard_counts
    )
    return select_planner(context).planner


def test_the_planner_the_table_selects() -> None:
    assert isinstance(select(base()), ShardWindowPlanner)
    assert isinstance(select(base().with_batch_size(by_step, by="step")), ShardStepSizedPlanner)
    weighted = base(window=None).with_sampling_weights(np.ones(sum(COUNTS)))
    assert isinstance(select(weighted), WeightedPlanner)  # the weights keep their order


def test_weights_over_a_sharded_dataset_work_unchanged() -> None:
    """Without a window set, weights over shards draw as they draw over any dataset."""
    weights = np.ones(sum(COUNTS))
    plan = base(window=None).with_sampling_weights(weights).compile()
    flat = (
        DataLoaderBuilder()
        .with_dataset([DATA[i] for i in range(len(DATA))], name="train")
        .with_batch_size(8)
        .with_shuffle()
        .with_seed(SEED)
        .with_sampling_weights(weights)
        .compile()
    )
    with plan.build() as loader, flat.build() as other:
        assert ids(collect(loader)) == ids(collect(other))


def test_unshuffled_reads_the_shards_in_order() -> None:
    plan = DataLoaderBuilder().with_dataset(DATA, name="train").with_batch_size(8).compile()
    with plan.build() as loader:
        assert ids(collect(loader)) == list(range(sum(COUNTS)))
