"""with_bucketing on the plan side: specs, files, fingerprints, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan

SAMPLES = [{"input_ids": [1] * (1 + i % 37), "label": i % 3} for i in range(400)]
BASE = DataLoaderBuilder().with_dataset(SAMPLES, name="train").with_batch_size(8).with_shuffle()


def sample_length(sample):
    return len(sample["input_ids"])


def other_length(sample):
    return len(sample["input_ids"]) + 1


LENGTHS = np.array([1 + i % 37 for i in range(400)])


@pytest.mark.parametrize(
    "builder",
    [
        BASE.with_bucketing("input_ids"),
        BASE.with_bucketing("input_ids", num_buckets=10),
        BASE.with_bucketing(sample_length, cost="quadratic"),
        BASE.with_batch_size(1).with_bucketing(LENGTHS, max_tokens=256, max_batch_size=32),
    ],
    ids=["column", "buckets", "function", "array"],
)
def test_bucketing_plans_round_trip_through_files(tmp_path, builder):
    plan = builder.compile()
    for suffix in (".json", ".toml"):
        path = tmp_path / f"p{suffix}"
        plan.save(path)
        again = LoaderPlan.load(path, bindings=plan.bindings)
        assert again == plan
        assert again.fingerprint == plan.fingerprint
    assert plan.to_builder().compile() == plan
    assert "bucketing" in plan.explain()


def test_every_bucketing_field_is_a_stream_field():
    variants = [
        BASE,
        BASE.with_bucketing("input_ids"),
        BASE.with_bucketing("label"),
        BASE.with_bucketing("input_ids", num_buckets=5),
        BASE.with_bucketing(sample_length),
        BASE.with_bucketing(other_length),
        BASE.with_bucketing(LENGTHS),
        BASE.with_bucketing(LENGTHS + 1),
        BASE.with_batch_size(1).with_bucketing("input_ids", max_tokens=100),
        BASE.with_batch_size(1).with_bucketing("input_ids", max_tokens=101),
        BASE.with_batch_size(1).with_bucketing("input_ids", max_tokens=100, max_batch_size=4),
        BASE.with_batch_size(1).with_bucketing("input_ids", max_tokens=100, cost="quadratic"),
    ]
    prints = [v.compile().fingerprint for v in variants]
    assert len(set(prints)) == len(prints)


def test_other_lengths_than_the_plan_was_made_for_are_refused():
    plan = BASE.with_bucketing(LENGTHS).compile()
    with pytest.raises(lk.PlanError, match="not the ones the plan was made for"):
        LoaderPlan.from_dict(plan.to_dict(), bindings={"train": SAMPLES, "lengths": LENGTHS + 1})


@pytest.mark.parametrize(
    ("make", "paths"),
    [
        (lambda: BASE.with_bucketing("input_idz").compile(), ("bucketing.length",)),
        (lambda: BASE.with_bucketing(3.5), ("bucketing.length",)),
        (lambda: BASE.with_bucketing(np.array([1.5, 2.0])), ("bucketing.length",)),
        (lambda: BASE.with_bucketing(np.array([-1, 2])), ("bucketing.length",)),
        (lambda: BASE.with_bucketing(np.arange(5)).compile(), ("bucketing.length",)),
        (lambda: BASE.with_bucketing("input_ids", num_buckets=0), ("bucketing.num_buckets",)),
        (
            lambda: BASE.with_bucketing("input_ids", num_buckets=401).compile(),
            ("bucketing.num_buckets",),
        ),
        (lambda: BASE.with_bucketing("input_ids", max_tokens=0), ("bucketing.max_tokens",)),
        (lambda: BASE.with_bucketing("input_ids", max_tokens=True), ("bucketing.max_tokens",)),
        (lambda: BASE.with_bucketing("input_ids", cost="cubic"), ("bucketing.cost",)),
        (lambda: BASE.with_bucketing("input_ids", max_tokens=64).compile(), ("batch.batch_size",)),
        (
            lambda: BASE.with_bucketing("input_ids", max_batch_size=4).compile(),
            ("bucketing.max_batch_size",),
        ),
        (lambda: BASE.with_bucketing("nope:fn"), ("bucketing.length",)),
        (lambda: DataLoaderBuilder().with_dataset([1], name="lengths"), ("dataset.name",)),
    ],
)
def test_bad_bucketing_inputs_name_their_paths(make, paths):
    with pytest.raises(lk.PlanError) as err:
        make()
    assert err.value.paths == paths


def test_bucketing_refuses_iterable_sources():
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __iter__(self):
            return iter([])

    with pytest.raises(lk.PlanError) as err:
        DataLoaderBuilder().with_dataset(Stream()).with_bucketing(LENGTHS[:0]).compile()
    assert "bucketing" in err.value.paths


def test_replacing_bucketing_drops_its_binding():
    b = BASE.with_bucketing(LENGTHS)
    assert "lengths" in b._bound
    assert "lengths" not in b.with_bucketing("input_ids")._bound


def test_repr_shows_the_bucketing_call():
    b = BASE.with_batch_size(1).with_bucketing("input_ids", max_tokens=512, cost="quadratic")
    assert repr(b).endswith(".with_bucketing('input_ids', max_tokens=512, cost='quadratic')")
