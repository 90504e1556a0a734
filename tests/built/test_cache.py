"""The sample cache (with_cache): same batches, fewer reads, shared on disk, safe with workers."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import attrs
import pytest
import torch
from lk_testdata import IndexDataset, LoggedDataset, noisy

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(180)


def shifted(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A pure transform that changes the sample in place (the cache must not see that)."""
    sample["x"] = sample["x"] + 1000
    return sample


def _builder(ds, workers: int = 0, transform=shifted) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(ds).with_batch_size(6).with_shuffle().with_seed(3)
    if transform is not None:
        b = b.with_transform(transform)
    return b.with_workers(workers)


def _log(tmp_path, name: str = "log") -> str:
    folder = tmp_path / name
    folder.mkdir()
    return str(folder)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("stage", ["fetched", "transformed"])
@pytest.mark.parametrize("storage", ["memory", "disk"])
def test_cache_keeps_the_batches_and_saves_the_reads(tmp_path, storage, stage, workers):
    ds = LoggedDataset(40, _log(tmp_path))
    path = str(tmp_path / "cache") if storage == "disk" else None
    plan = _builder(ds, workers).with_cache(storage, stage=stage, path=path).compile()
    loader = plan.build()
    got = collect(loader) + collect(loader) + collect(loader)  # three epochs
    reference = _builder(IndexDataset(40)).compile().build()
    assert_batches_equal(got, collect(reference) + collect(reference) + collect(reference))
    reads = Counter(ds.reads())
    assert set(reads) == set(range(40))
    stats = loader.cache_stats
    assert stats is not None and stats.hits + stats.misses == 120
    if storage == "disk" or workers == 0:  # one cache for everybody: each sample read once
        assert all(count == 1 for count in reads.values()), reads
        assert stats.misses == 40 and stats.hits == 80
    else:  # a memory cache per worker: at most one read per worker
        assert max(reads.values()) <= workers
        assert stats.misses == sum(reads.values())


@pytest.mark.parametrize("storage", ["memory", "disk"])
def test_cache_with_spawned_workers(tmp_path, storage):
    """Spawned workers get the cache and its counters (which share no arena with the pool's)."""
    path = str(tmp_path / "cache") if storage == "disk" else None
    plan = (
        _builder(IndexDataset(24), transform=None)
        .with_workers(2, start_method="spawn")
        .with_cache(storage, path=path)
        .compile()
    )
    loader = plan.build()
    got = collect(loader) + collect(loader)
    reference = _builder(IndexDataset(24), transform=None).compile().build()
    assert_batches_equal(got, collect(reference) + collect(reference))
    stats = loader.cache_stats
    assert stats is not None and stats.hits + stats.misses == 48 and stats.hits > 0
    loader.close()


def test_a_disk_cache_is_reused_by_a_later_run(tmp_path):
    path = str(tmp_path / "cache")
    first = LoggedDataset(30, _log(tmp_path, "a"))
    collect(_builder(first).with_cache("disk", path=path).compile().build())
    again = LoggedDataset(30, _log(tmp_path, "b"))
    loader = _builder(again, 2).with_cache("disk", path=path).compile().build()
    assert_batches_equal(collect(loader), collect(_builder(IndexDataset(30)).compile().build()))
    assert again.reads() == []
    assert loader.cache_stats == (30, 0, 0, 0)


def test_a_disk_cache_of_another_dataset_is_refused(tmp_path):
    path = str(tmp_path / "cache")
    collect(_builder(IndexDataset(30)).with_cache("disk", path=path).compile().build())
    with pytest.raises(PlanError, match=r"cache\.path.*another dataset.*delete the folder"):
        _builder(IndexDataset(31)).with_cache("disk", path=path).compile().build()
    with pytest.raises(PlanError, match=r"cache\.path.*fetched"):
        _builder(IndexDataset(30)).with_cache(
            "disk", stage="transformed", path=path
        ).compile().build()


def test_a_random_transform_still_draws_anew_each_epoch_over_fetched_samples(tmp_path):
    b = _builder(IndexDataset(12), transform=noisy)
    cached = b.with_cache().compile().build()
    plain = b.compile().build()
    first, second = collect(cached), collect(cached)
    assert_batches_equal(first + second, collect(plain) + collect(plain))
    assert not torch.equal(
        torch.cat([x["noise"] for x in first]), torch.cat([x["noise"] for x in second])
    )


def test_failed_samples_are_never_cached_and_fail_again(tmp_path):
    ds = LoggedDataset(24, _log(tmp_path), bad=frozenset({5, 17}))
    plan = _builder(ds, transform=None).with_cache().with_error_policy("skip").compile()
    loader = plan.build()
    collect(loader)
    collect(loader)
    assert sorted(s.sample_index for s in loader.skipped) == [5, 5, 17, 17]
    reads = Counter(ds.reads())
    assert reads[5] >= 2 and reads[17] >= 2
    assert all(reads[i] == 1 for i in range(24) if i not in (5, 17))


def test_transformed_stage_with_the_skip_policy(tmp_path):
    def picky(sample):
        if int(sample["index"]) == 7:
            raise ValueError("bad 7")
        return shifted(sample)

    b = _builder(IndexDataset(20), transform=picky).with_error_policy("skip")
    loader = b.with_cache(stage="transformed").compile().build()
    got = collect(loader) + collect(loader)
    reference = b.compile().build()
    assert_batches_equal(got, collect(reference) + collect(reference))
    assert [s.sample_index for s in loader.skipped] == [7, 7]


def test_memory_cache_limit_stops_storing(tmp_path):
    ds = LoggedDataset(30, _log(tmp_path))
    loader = _builder(ds).with_cache(max_bytes=4000).compile().build()
    collect(loader)
    collect(loader)
    stats = loader.cache_stats
    assert stats is not None and stats.not_stored > 0
    assert 0 < stats.hits < 30
    assert stats.hit_rate == stats.hits / 60


def test_disk_cache_limit_evicts(tmp_path):
    loader = (
        _builder(IndexDataset(200, dim=512), transform=None)
        .with_cache("disk", path=str(tmp_path / "c"), max_bytes=200_000)
        .compile()
        .build()
    )
    reference = _builder(IndexDataset(200, dim=512), transform=None).compile().build()
    assert_batches_equal(collect(loader) + collect(loader), collect(reference) + collect(reference))
    import diskcache

    with diskcache.Cache(str(tmp_path / "c")) as kept:
        assert kept.volume() < 400_000  # the limit plus SQLite's own pages
        assert 10 < len(kept) < 150  # samples of ~2.2 KB each: the oldest were evicted


def test_resume_with_a_cache(tmp_path):
    plan = _builder(IndexDataset(30), 2).with_cache("disk", path=str(tmp_path / "c")).compile()
    loader = plan.build()
    it = iter(loader)
    head = [next(it) for _ in range(2)]
    state = loader.state_dict()
    del it
    resumed = plan.build()
    resumed.load_state_dict(state)
    assert_batches_equal(
        head + collect(resumed), collect(_builder(IndexDataset(30)).compile().build())
    )


def test_cache_with_a_mixture_and_source_ids(tmp_path):
    b = (
        DataLoaderBuilder()
        .with_mixture({"a": IndexDataset(10), "b": IndexDataset(14)}, source_key="source")
        .with_batch_size(4)
        .with_shuffle()
    )
    loader = b.with_cache().compile().build()
    reference = b.compile().build()
    assert_batches_equal(collect(loader) + collect(loader), collect(reference) + collect(reference))
    assert loader.cache_stats is not None and loader.cache_stats.hits == 24


def test_cache_round_trips_through_a_plan_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the relative path is inside the plan file's folder
    ds = IndexDataset(10)
    plan = (
        _builder(ds)
        .with_cache("disk", stage="transformed", path="cache", max_bytes=10**6)
        .compile()
    )
    for name in ("p.toml", "p.json"):
        plan.save(tmp_path / name)
        loaded = LoaderPlan.load(
            tmp_path / name, bindings={"dataset": ds, "test_cache:shifted": shifted}
        )
        assert loaded.cache is not None and plan.cache is not None
        # a relative path of a file is relative to the file's folder: loading resolves it
        assert Path(loaded.cache.path) == tmp_path / "cache"
        assert attrs.evolve(loaded.cache, path="cache") == plan.cache
        assert loaded.fingerprint == plan.fingerprint
    assert "cache       disk at 'cache'" in plan.explain()
    assert repr(plan.to_builder()).endswith(
        ".with_cache('disk', stage='transformed', path='cache', max_bytes=1000000)"
    )


def test_cache_folder_is_created_and_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    collect(_builder(IndexDataset(8)).with_cache("disk", path="nested/cache").compile().build())
    assert os.path.isdir(tmp_path / "nested" / "cache")
