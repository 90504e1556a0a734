"""with_cache in the plan layer: arguments, rules, files, display."""

from __future__ import annotations

import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError


def _t(sample):
    return sample


def _rt(sample, rng):
    return sample


BASE = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda b: b.with_cache("ram"), r"cache\.storage.*'ram'"),
        (lambda b: b.with_cache(stage="after"), r"cache\.stage.*'after'"),
        (lambda b: b.with_cache("disk"), r"cache\.path.*needs a folder"),
        (lambda b: b.with_cache(path="x"), r"cache\.path.*memory cache keeps no folder"),
        (lambda b: b.with_cache(max_bytes=0), r"cache\.max_bytes"),
        (lambda b: b.with_cache(max_bytes=1.5), r"cache\.max_bytes"),
        (lambda b: b.with_cache("disk", path=""), r"cache\.path"),
    ],
)
def test_bad_cache_arguments_name_the_field(call, match):
    with pytest.raises(PlanError, match=match):
        call(BASE)


def test_transformed_stage_needs_a_pure_transform():
    with pytest.raises(PlanError, match=r"cache\.stage.*no transform"):
        BASE.with_cache(stage="transformed").compile()
    with pytest.raises(PlanError, match=r"cache\.stage.*takes rng.*stage='fetched'"):
        BASE.with_transform(_rt).with_cache(stage="transformed").compile()
    assert BASE.with_transform(_t).with_cache(stage="transformed").compile().cache is not None


def test_a_memory_cache_needs_persistent_workers():
    with pytest.raises(PlanError, match=r"cache\.storage.*persistent=False"):
        BASE.with_workers(2, persistent=False).with_cache().compile()
    BASE.with_workers(2, persistent=False).with_cache("disk", path="c").compile()
    BASE.with_workers(2).with_cache().compile()


def test_a_stream_cannot_be_cached():
    def gen():
        yield from range(5)

    import torch

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return gen()

    with pytest.raises(PlanError, match=r"^cache|\ncache.*iterable"):
        DataLoaderBuilder().with_dataset(Stream()).with_cache().compile()


def test_cache_is_replaced_and_shown():
    b = BASE.with_cache().with_cache("disk", path="c", stage="fetched")
    assert b.compile().cache.storage == "disk"
    assert repr(b).endswith(".with_cache('disk', path='c')")
    assert "with_cache" not in repr(BASE)


def test_cache_round_trips_through_a_dict():
    plan = BASE.with_cache("disk", path="c", max_bytes=100).compile()
    data = plan.to_dict()
    assert data["cache"] == {"storage": "disk", "stage": "fetched", "path": "c", "max_bytes": 100}
    again = LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})
    assert again.cache == plan.cache
    data["cache"]["storage"] = "ssd"
    with pytest.raises(PlanError, match=r"cache\.storage"):
        LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})
    data["cache"] = {"storage": "memory", "size": 3}
    with pytest.raises(PlanError, match=r"cache.*size"):
        LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})


def test_a_shared_disk_cache_is_an_opt_in_kept_in_files_and_shown():
    b = BASE.with_cache("disk", path="c", shared=True)
    plan = b.compile()
    assert plan.cache is not None and plan.cache.shared is True
    assert repr(b).endswith(".with_cache('disk', path='c', shared=True)")
    assert "shared folder (entries signed with your key)" in plan.explain()
    data = plan.to_dict()
    assert data["cache"] == {"storage": "disk", "stage": "fetched", "path": "c", "shared": True}
    again = LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})
    assert again.cache == plan.cache
    assert again.fingerprint == BASE.compile().fingerprint  # execution only
    assert "shared" not in BASE.with_cache("disk", path="c").compile().to_dict()["cache"]
    data["cache"]["shared"] = "yes"
    with pytest.raises(PlanError, match=r"cache\.shared: must be True or False"):
        LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})
    with pytest.raises(PlanError, match=r"cache\.shared: only a disk cache"):
        BASE.with_cache(shared=True)
