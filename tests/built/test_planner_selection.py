"""The planner selection table: which planner each kind of plan gets (first matching row)."""

from __future__ import annotations

import pytest

from loaderkit import DataLoaderBuilder
from loaderkit.runtime.planners import (
    PLANNERS,
    BucketPlanner,
    CurriculumPlanner,
    MixturePlanner,
    PlainPlanner,
    PlannerContext,
    Selected,
    StepSizedPlanner,
    WeightedPlanner,
    select_planner,
)
from loaderkit.runtime.planners.schedules import batch_sizes

pytestmark = pytest.mark.timeout(120)

SAMPLES = [
    {"idx": i, "w": float(1 + i % 4), "hardness": float(i % 7), "input_ids": list(range(1 + i % 9))}
    for i in range(60)
]
OTHER = [{"idx": 100 + i, "input_ids": list(range(1 + i % 5))} for i in range(30)]


def doubling(step: int) -> int:
    return 2 if step < 3 else 4


def base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(SAMPLES, name="train").with_batch_size(4)


def mixture() -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_mixture({"a": SAMPLES, "b": OTHER}, mode="round_robin")
        .with_batch_size(4)
    )


def select(builder: DataLoaderBuilder) -> Selected:
    plan = builder.compile()
    assert plan.dataset.length is not None
    context = PlannerContext(plan, plan.dataset.length, None, 1, 0, batch_sizes(plan))
    return select_planner(context)


CASES = {
    "plain": (base, PlainPlanner, None),
    "step-sized": (lambda: base().with_batch_size(doubling, by="step"), StepSizedPlanner, None),
    "weights": (lambda: base().with_sampling_weights("w"), WeightedPlanner, None),
    "curriculum": (lambda: base().with_curriculum("hardness", horizon=3), CurriculumPlanner, None),
    "mixture": (mixture, MixturePlanner, None),
    "bucketing": (lambda: base().with_bucketing("input_ids"), BucketPlanner, None),
    "bucketing+weights": (
        lambda: base().with_sampling_weights("w").with_bucketing("input_ids"),
        BucketPlanner,
        WeightedPlanner,
    ),
    "bucketing+curriculum": (
        lambda: base().with_curriculum("hardness", horizon=3).with_bucketing("input_ids"),
        BucketPlanner,
        CurriculumPlanner,
    ),
    "bucketing+mixture": (
        lambda: mixture().with_bucketing("input_ids"),
        BucketPlanner,
        MixturePlanner,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_kind_of_plan_gets_its_planner(name: str) -> None:
    make, planner, sampler = CASES[name]
    selected = select(make())
    assert type(selected.planner) is planner
    assert (None if selected.sampler is None else type(selected.sampler)) is sampler
    assert selected.planner.num_batches(0) > 0


def test_bucketing_comes_first_and_plain_batches_last() -> None:
    # bucketing groups the other samplers' epochs, so it must be asked first; plain is the
    # fallback every plan matches
    assert PLANNERS[0].name == "bucketing"
    assert PLANNERS[-1].name == "plain"
    assert all(PLANNERS[-1].applies(make().compile()) for make, _, _ in CASES.values())
