"""``plan.autotune()`` and ``with_workers("auto")`` at build time."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
import torch
from lk_testdata import IndexDataset
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.runtime.autotune import AutotuneReport, AutotuneResult
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(180)


def slow(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A transform costing 2 ms a sample (a stand-in for decoding)."""
    time.sleep(0.002)
    return sample


class Numbers(IterableDataset[int]):
    """The stream 0, 1, ..., n - 1."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def _plan(n: int = 240, **workers: object) -> LoaderPlan:
    builder = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(n), name="train")
        .with_batch_size(8)
        .with_shuffle()
        .with_seed(11)
        .with_transform(slow)
    )
    if workers:
        builder = builder.with_workers(**workers)  # type: ignore[arg-type]
    return builder.compile()


def _epochs(plan: LoaderPlan, epochs: int = 2) -> list[object]:
    with plan.build() as loader:
        return [b for _ in range(epochs) for b in collect(loader)]


def test_autotune_keeps_the_stream_and_its_budget():
    plan = _plan()
    start = time.perf_counter()
    result = plan.autotune(budget_s=3.0, batches=10)
    wall = time.perf_counter() - start
    assert isinstance(result, AutotuneResult)
    tuned, report = result  # it unpacks
    assert tuned.fingerprint == plan.fingerprint
    assert all(line.startswith("workers.") for line in plan.diff(tuned))
    assert_batches_equal(_epochs(plan), _epochs(tuned), label="autotuned plan")
    # the budget bounds the search; closing the last pool may overrun it a little
    assert wall < 3.0 + 15.0
    assert report.elapsed_s <= wall
    assert report.budget_s == 3.0
    assert report.trials
    assert report.trials[0].note.startswith("current")
    assert (report.trials[0].num_workers, report.trials[0].prefetch_factor) == (0, None)
    settings = [t.setting for t in report.trials]
    assert len(settings) == len(set(settings))  # no setting measured twice
    if report.chosen is not None:
        assert report.chosen in report.trials
        assert (tuned.workers.num_workers, tuned.workers.prefetch_factor) == report.chosen.setting
        fastest = max(t.samples_per_s or 0.0 for t in report.trials)
        assert report.chosen.samples_per_s is not None
        assert report.chosen.samples_per_s >= fastest * 0.95


def test_the_report_lists_every_setting_tried():
    plan = _plan(160, num_workers=1)
    tuned, report = plan.autotune(
        budget_s=60.0, num_workers=(0, 1), prefetch_factors=(2, 3), batches=5, warmup_batches=1
    )
    assert report.stopped == "every setting was measured"
    tried = [t.setting for t in report.trials]
    assert tried[:2] == [(1, 2), (0, None)]  # the plan's own first, then the sweep
    assert report.chosen is not None
    if report.chosen.num_workers == 0:
        assert tried == [(1, 2), (0, None)]
    else:  # the best count (1) then tries the other prefetch factor
        assert tried == [(1, 2), (0, None), (1, 3)]
    for trial in report.trials:
        assert trial.samples_per_s is not None
        assert trial.samples_per_s > 0
        assert trial.batches == 5
        assert trial.startup_s is not None
    text = str(report)
    rows = text.splitlines()[2 : 2 + len(report.trials)]
    for trial, row in zip(report.trials, rows, strict=True):
        assert row.split()[:2] == [str(trial.num_workers), str(trial.prefetch_factor or "-")]
        assert f"{trial.samples_per_s:,.0f}" in row
    assert "chosen" in rows[report.trials.index(report.chosen)]
    assert "stopped: every setting was measured" in text
    assert "not tuned: batched fetch" in text
    assert tuned.fingerprint == plan.fingerprint


def test_a_spent_budget_stops_the_search():
    plan = _plan(400)
    start = time.perf_counter()
    _, report = plan.autotune(budget_s=0.8, num_workers=(0, 1, 2), batches=40)
    wall = time.perf_counter() - start
    assert wall < 0.8 + 15.0
    # 40 batches of 8 samples at 2 ms each take 0.64 s in the main process alone: the shares
    # of the budget run out before the settings are measured in full
    assert any("budget" in t.note for t in report.trials) or "budget" in report.stopped
    assert isinstance(report, AutotuneReport)
    assert report.stopped in str(report)


def test_autotune_refuses_bad_arguments():
    plan = _plan(40)
    for kwargs, path in [
        ({"budget_s": 0}, "autotune.budget_s"),
        ({"budget_s": "10"}, "autotune.budget_s"),
        ({"num_workers": ()}, "autotune.num_workers"),
        ({"num_workers": (1, -1)}, "autotune.num_workers[1]"),
        ({"prefetch_factors": (0,)}, "autotune.prefetch_factors[0]"),
        ({"batches": 0}, "autotune.batches"),
    ]:
        with pytest.raises(PlanError) as info:
            plan.autotune(**kwargs)  # type: ignore[arg-type]
        assert info.value.paths == (path,)
    unbound = LoaderPlan.from_dict(plan.to_dict(), require_bindings=False, allow_imports=True)
    with pytest.raises(PlanError, match="bindings"):
        unbound.autotune(budget_s=1.0)


def test_a_stream_keeps_its_num_workers():
    plan = DataLoaderBuilder().with_dataset(Numbers(64)).with_batch_size(4).with_workers(1)
    compiled = plan.compile()
    tuned, report = compiled.autotune(budget_s=10.0, prefetch_factors=(2, 3), batches=5)
    assert tuned.fingerprint == compiled.fingerprint
    assert tuned.workers.num_workers == 1
    assert {t.num_workers for t in report.trials} == {1}
    assert any("num_workers: kept at 1" in item for item in report.not_tuned)


def test_auto_resolves_at_build(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    plan = _plan(48, num_workers="auto")
    with plan.build() as loader:
        assert loader.workers.num_workers == 2
        assert (loader.workers.prefetch_factor, loader.workers.persistent) == (2, True)
        assert loader.workers.auto is not None
        explained = loader.explain()
        batches = [b for _ in range(2) for b in collect(loader)]
        assert loader._torch_loader is not None  # workers served the batches
    assert "resolved auto: 2 workers = 3 usable CPUs - 1 for the main process" in explained
    assert_batches_equal(_epochs(_plan(48)), batches, label="auto vs 0 workers")


def test_auto_resolves_to_the_main_process_on_one_cpu(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    plan = _plan(24, num_workers="auto", prefetch_factor=4, timeout=5)
    with plan.build() as loader:
        assert loader.workers.num_workers == 0
        assert loader.workers.prefetch_factor is None
        assert len(collect(loader)) == 3
        assert loader._torch_loader is None


def test_a_bad_local_world_size_fails_the_build(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "eight")
    plan = _plan(24, num_workers="auto")  # compiles: the variable is read where it builds
    with pytest.raises(PlanError) as info:
        plan.build()
    assert info.value.paths == ("workers.num_workers",)
    assert "LOCAL_WORLD_SIZE is 'eight'" in str(info.value)
