"""``with_workers("auto")``: the resolution rule, and "auto" through compile, files and explain."""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError, PlanTypeError
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.workers import (
    AUTO_MAX_WORKERS,
    local_world_size,
    resolve_auto_workers,
    resolve_workers,
    usable_cpus,
)

DATA = list(range(40))
BASE = DataLoaderBuilder().with_dataset(DATA, name="train").with_batch_size(4).with_shuffle()


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):
    """Pretend this process may use ``cpus`` CPUs and the node runs ``ranks`` local ranks."""

    def pretend(cpus: int, ranks: int | None = None) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
        if ranks is None:
            monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
        else:
            monkeypatch.setenv("LOCAL_WORLD_SIZE", str(ranks))

    return pretend


# -- the rule ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpus", "ranks", "workers", "prefetch"),
    [
        (1, 1, 0, None),  # one CPU: load in the main process
        (2, 1, 1, 4),  # one worker prefetches 4 batches
        (3, 1, 2, 2),
        (5, 1, 4, 2),
        (9, 1, 8, 2),
        (64, 1, AUTO_MAX_WORKERS, 2),  # capped
        (16, 4, 3, 2),  # 4 CPUs per rank, one for the main process
        (8, 8, 0, None),  # one CPU per rank
        (4, 8, 0, None),  # fewer CPUs than ranks: still a share of 1
        (7, 2, 2, 2),  # 7 // 2 = 3 per rank
    ],
)
def test_the_rule(cpus, ranks, workers, prefetch):
    auto = resolve_auto_workers(cpus, ranks)
    assert (auto.num_workers, auto.prefetch_factor) == (workers, prefetch)
    assert auto.persistent is (True if workers else None)


@given(cpus=st.integers(1, 512), ranks=st.integers(1, 64), cap=st.integers(0, 32))
def test_the_rule_leaves_the_main_process_a_cpu_and_keeps_batches_in_flight(cpus, ranks, cap):
    auto = resolve_auto_workers(cpus, ranks, max_workers=cap)
    share = max(cpus // ranks, 1)
    assert 0 <= auto.num_workers <= min(cap, share - 1)
    assert auto.num_workers == min(cap, share - 1)
    if auto.num_workers:
        assert auto.prefetch_factor is not None
        assert auto.prefetch_factor >= 2
        assert auto.num_workers * auto.prefetch_factor >= 4
    else:
        assert auto.prefetch_factor is None


def test_the_reason_states_the_numbers():
    assert resolve_auto_workers(3, 1).reason == (
        "auto: 2 workers = 3 usable CPUs - 1 for the main process, 1 local rank"
    )
    assert resolve_auto_workers(2, 1).reason == (
        "auto: 1 worker = 2 usable CPUs - 1 for the main process, 1 local rank"
    )
    assert resolve_auto_workers(16, 4).reason == (
        "auto: 3 workers = 16 usable CPUs / 4 local ranks (LOCAL_WORLD_SIZE) - 1 for the main "
        "process"
    )
    assert resolve_auto_workers(64, 1).reason.endswith(", capped at 8")
    assert resolve_auto_workers(1, 1).reason == (
        "auto: 0 workers = 1 usable CPU - 1 for the main process, 1 local rank (load in the "
        "main process)"
    )


def test_bad_inputs_to_the_rule_are_refused():
    for kwargs in ({"cpus": 0}, {"cpus": 2, "local_ranks": 0}, {"cpus": 2, "max_workers": -1}):
        with pytest.raises(PlanError, match=r"^workers\.num_workers: \"auto\" needs"):
            resolve_auto_workers(**kwargs)


# -- where the numbers come from ---------------------------------------------------------------


def test_usable_cpus_prefers_the_affinity_mask():
    assert usable_cpus(lambda pid: {0, 5, 7}, lambda: 64) == (3, "affinity")


def test_usable_cpus_falls_back_to_cpu_count():
    def broken(pid: int) -> set[int]:
        raise OSError("not here")

    assert usable_cpus(broken, lambda: 12) == (12, "cpu_count")
    assert usable_cpus(lambda pid: set(), lambda: 6) == (6, "cpu_count")
    assert usable_cpus(broken, lambda: None) == (1, "cpu_count")


def test_usable_cpus_without_sched_getaffinity(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert usable_cpus(cpu_count=os.cpu_count) == (5, "cpu_count")


def test_local_world_size_reads_torchrun_s_variable():
    assert local_world_size({}) == 1
    assert local_world_size({"LOCAL_WORLD_SIZE": "4"}) == 4
    assert local_world_size({"LOCAL_WORLD_SIZE": " "}) == 1
    for bad in ("0", "-2", "four", "1.5"):
        with pytest.raises(PlanError, match=re.escape(f"LOCAL_WORLD_SIZE is {bad!r}")):
            local_world_size({"LOCAL_WORLD_SIZE": bad})


def test_resolution_reads_this_machine(machine):
    machine(6, 2)
    auto = resolve_auto_workers()
    assert (auto.cpus, auto.cpu_source, auto.local_ranks, auto.num_workers) == (
        6,
        "affinity",
        2,
        2,
    )


# -- resolving a plan's workers section -----------------------------------------------------------


def test_numbers_are_kept_as_given(machine):
    machine(32)
    spec = WorkersSpec(3, 5, False, True, "spawn", 9.0)
    resolved = resolve_workers(spec)
    assert (resolved.num_workers, resolved.prefetch_factor, resolved.persistent) == (3, 5, False)
    assert (resolved.pin_memory, resolved.start_method, resolved.timeout) == (True, "spawn", 9.0)
    assert resolved.auto is None
    assert resolved.reason == "given"


def test_auto_keeps_what_the_user_gave(machine):
    machine(5)
    spec = WorkersSpec("auto", 8, False, None, "spawn", 3.0)
    resolved = resolve_workers(spec)
    assert resolved.num_workers == 4
    assert (resolved.prefetch_factor, resolved.persistent) == (8, False)
    assert (resolved.start_method, resolved.timeout) == ("spawn", 3.0)
    assert resolved.auto is not None
    assert resolved.auto.num_workers == 4
    defaults = resolve_workers(WorkersSpec("auto"))
    assert (defaults.prefetch_factor, defaults.persistent) == (2, True)


def test_auto_with_no_workers_drops_the_worker_only_settings(machine):
    machine(1)
    resolved = resolve_workers(WorkersSpec("auto", 8, True, False, "spawn", 3.0))
    assert resolved.num_workers == 0
    assert resolved.prefetch_factor is None
    assert resolved.persistent is None
    assert resolved.start_method is None
    assert resolved.timeout is None
    assert resolved.pin_memory is False


# -- "auto" in builders, plans and files ---------------------------------------------------------


def test_with_workers_accepts_auto():
    plan = BASE.with_workers("auto", prefetch_factor=3).compile()
    assert plan.workers.num_workers == "auto"
    assert plan.workers.prefetch_factor == 3
    assert BASE.with_workers("AUTO ").compile().workers.num_workers == "auto"
    assert repr(BASE.with_workers("auto")).endswith(".with_workers('auto')")


@pytest.mark.parametrize("bad", ["four", "", "automatic"])
def test_other_strings_are_refused(bad):
    with pytest.raises(PlanTypeError) as info:
        BASE.with_workers(bad)
    assert info.value.paths == ("workers.num_workers",)
    assert 'an int >= 0 or "auto"' in str(info.value)
    assert repr(bad) in str(info.value)


def test_worker_settings_beside_auto_compile():
    # with a number 0 these are refused; "auto" may resolve to workers, so they are kept
    plan = BASE.with_workers("auto", prefetch_factor=2, persistent=True, timeout=5).compile()
    assert plan.workers.timeout == 5.0


@pytest.mark.parametrize("count", [0, 1, 3, 16])
def test_auto_leaves_the_fingerprint_of_a_map_style_plan_alone(count):
    auto = BASE.with_workers("auto").compile()
    assert auto.fingerprint == BASE.with_workers(count).compile().fingerprint


def test_auto_is_refused_for_streamed_sources(machine):
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __iter__(self):
            return iter(range(3))

    machine(4)
    with pytest.raises(PlanError) as info:
        DataLoaderBuilder().with_dataset(Stream(), name="s").with_workers("auto").compile()
    assert info.value.paths == ("workers.num_workers",)
    message = str(info.value)
    assert "iterable dataset 's'" in message
    assert "with_workers(3)" in message  # what "auto" would choose here: 4 CPUs - 1


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_auto_survives_plan_files(tmp_path, suffix):
    plan = BASE.with_workers("auto", timeout=2).compile()
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    text = path.read_text()
    assert ('num_workers = "auto"' if suffix == ".toml" else '"num_workers": "auto"') in text
    loaded = LoaderPlan.load(path, bindings={"train": DATA})
    assert loaded == plan
    assert loaded.workers == WorkersSpec("auto", timeout=2.0)
    assert loaded.fingerprint == plan.fingerprint


def test_auto_round_trips_through_dicts():
    plan = BASE.with_workers("auto").compile()
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["workers"] == {"num_workers": "auto"}
    assert LoaderPlan.from_dict(data, bindings={"train": DATA}) == plan
    data["workers"]["num_workers"] = "many"
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"train": DATA})
    assert "workers.num_workers" in info.value.paths


def test_explain_states_the_numbers_and_the_reason(machine):
    machine(3)
    line = next(
        x for x in BASE.with_workers("auto").compile().explain().splitlines() if "workers" in x
    )
    assert "auto: 2 workers = 3 usable CPUs - 1 for the main process, 1 local rank" in line
    assert "prefetch 2, persistent" in line
    machine(16, 4)
    line = next(
        x for x in BASE.with_workers("auto").compile().explain().splitlines() if "workers" in x
    )
    assert "auto: 3 workers = 16 usable CPUs / 4 local ranks" in line
    machine(1)
    line = next(
        x for x in BASE.with_workers("auto").compile().explain().splitlines() if "workers" in x
    )
    assert "auto: 0 workers" in line
    assert "prefetch" not in line


def test_explain_names_a_bad_local_world_size(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    text = BASE.with_workers("auto").compile().explain()
    assert "LOCAL_WORLD_SIZE is 'two'" in text
