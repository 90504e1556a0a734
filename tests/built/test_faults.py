"""Bad samples and dying workers: the error policy, worker death, timeouts, clean exits."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
import torch
from lk_testdata import PROC_PROBES

import loaderkit as lk
from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError, WorkerError
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(240)


class Flaky(torch.utils.data.Dataset):
    """Samples 0..n-1; the ones in ``bad`` raise when read."""

    def __init__(self, n: int, bad: set[int]) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, int]:
        if i in self.bad:
            raise ValueError(f"corrupt record {i}")
        return {"idx": i}


def doubled(sample: dict[str, int]) -> dict[str, int]:
    if sample["idx"] == 5:
        raise KeyError("no field 'x' in sample 5")
    return {"idx": sample["idx"] * 2}


def builder(bad: set[int], n: int = 40) -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(Flaky(n, bad)).with_batch_size(8).with_shuffle()


def ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]


@pytest.mark.parametrize("workers", [0, 2])
def test_raise_names_the_sample_and_the_worker(workers):
    plan = builder({13}).with_workers(workers).compile()
    with pytest.raises(DataError, match=r"sample 13 .* could not be loaded") as error:
        collect(plan.build())
    assert error.value.sample_index == 13
    assert (error.value.worker_id is None) == (workers == 0)
    assert "corrupt record 13" in str(error.value)


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_drops_records_and_logs_every_bad_sample(workers, caplog):
    plan = builder({0, 13, 27}).with_error_policy("skip").with_workers(workers).compile()
    loader = plan.build()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        got = ids(collect(loader))
    assert sorted(got) == [i for i in range(40) if i not in {0, 13, 27}]
    assert sorted(r.sample_index for r in loader.skipped) == [0, 13, 27]
    assert loader.errors == loader.skipped
    record = next(r for r in loader.skipped if r.sample_index == 13)
    assert record.epoch == 0
    assert record.exc_type == "ValueError"
    assert "corrupt record 13" in record.message
    assert (record.worker_id is None) == (workers == 0)
    assert sum("loaderkit skipped sample" in m for m in caplog.messages) == 3
    loader.close()


def test_skip_is_worker_invariant_and_resumable():
    plan = builder({3, 4, 5, 30}).with_error_policy("skip").compile()
    runs = [ids(collect(plan.to_builder().with_workers(w).compile().build())) for w in (0, 2)]
    assert runs[0] == runs[1]
    loader = plan.build()
    iterator = iter(loader)
    head = [next(iterator), next(iterator)]
    state = loader.state_dict()
    again = plan.build()
    again.load_state_dict(state)
    assert ids(head) + ids(collect(again)) == runs[0]


def test_skip_drops_transform_failures_too():
    plan = builder(set()).with_transform(doubled).with_error_policy("skip").compile()
    loader = plan.build()
    got = sorted(ids(collect(loader)))
    assert got == sorted(2 * i for i in range(40) if i != 5)
    assert [r.sample_index for r in loader.skipped] == [5]
    assert "failed in the transform" in loader.skipped[0].message


def test_a_batch_whose_every_sample_fails_is_skipped_and_counted():
    plan = (
        DataLoaderBuilder()
        .with_dataset(Flaky(24, set(range(8, 16))))
        .with_batch_size(8)
        .with_error_policy("skip")
        .compile()
    )
    loader = plan.build()
    batches = collect(loader)
    assert [b["idx"].tolist() for b in batches] == [list(range(8)), list(range(16, 24))]
    assert len(loader.skipped) == 8
    state = loader.state_dict()
    assert (state["epoch"], state["batches_delivered"]) == (0, 3)  # the empty batch counts


def test_the_budget_stops_with_a_summary():
    plan = builder({1, 2, 3}).with_error_policy("skip", max_errors=2).compile()
    with pytest.raises(DataError, match=r"dropped 3 samples .* 3 ValueError.*max_errors=2"):
        collect(plan.build())
    rate = builder(set(range(0, 200, 10)), n=200).with_error_policy("skip", max_error_rate=0.05)
    with pytest.raises(DataError, match=r"max_error_rate=0\.05"):
        collect(rate.compile().build())
    ok = builder(set(range(0, 200, 50)), n=200).with_error_policy("skip", max_error_rate=0.05)
    assert len(collect(ok.compile().build())) == 25


@pytest.mark.parametrize(
    ("kwargs", "path", "words"),
    [
        ({"policy": "ignore"}, "error_policy.policy", "skip"),
        ({"policy": "skip", "max_errors": -1}, "error_policy.max_errors", ">= 0"),
        ({"policy": "skip", "max_error_rate": 0}, "error_policy.max_error_rate", "(0, 1]"),
        ({"policy": "skip", "max_error_rate": 1.5}, "error_policy.max_error_rate", "(0, 1]"),
        ({"policy": "raise", "max_errors": 3}, "error_policy", "only apply to policy='skip'"),
    ],
)
def test_bad_policies_name_the_field(kwargs, path, words):
    with pytest.raises(PlanError) as error:
        builder(set()).with_error_policy(**kwargs)
    assert error.value.problems[0].path == path
    assert words in error.value.problems[0].message


def test_the_policy_is_in_the_plan_file_explain_and_fingerprint(tmp_path):
    base = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(3)
    plan = base.with_error_policy("skip", max_errors=5, max_error_rate=0.1).compile()
    assert plan.fingerprint != base.compile().fingerprint
    assert base.with_error_policy("raise").compile().fingerprint == base.compile().fingerprint
    assert "errors      skip samples that fail to load or transform (at most 5 samples" in (
        plan.explain()
    )
    assert repr(plan.to_builder()).endswith(
        ".with_error_policy('skip', max_errors=5, max_error_rate=0.1)"
    )
    for suffix in (".json", ".toml"):
        path = tmp_path / f"plan{suffix}"
        plan.save(path)
        assert LoaderPlan.load(path, bindings=plan.bindings) == plan


# -- dying workers --------------------------------------------------------------------------------


class Killer(torch.utils.data.Dataset):
    """Sample ``at`` ends its worker process: by SIGKILL, or with os._exit(code)."""

    def __init__(self, n: int, at: int, how: str) -> None:
        self.n, self.at, self.how = n, at, how

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.at and torch.utils.data.get_worker_info() is not None:
            if self.how == "kill":
                os.kill(os.getpid(), 9)
            elif self.how == "exit":
                os._exit(123)
            elif self.how == "sleep":
                time.sleep(30)
        return i


@pytest.mark.parametrize(
    ("how", "words"), [("kill", "killed by SIGKILL"), ("exit", "exit code 123")]
)
def test_a_dead_worker_is_named_within_seconds(how, words):
    plan = (
        DataLoaderBuilder()
        .with_dataset(Killer(64, 20, how))
        .with_batch_size(4)
        .with_workers(2, start_method="fork")
        .compile()
    )
    started = time.monotonic()
    with plan.build() as loader, pytest.raises(WorkerError, match=words) as error:
        collect(loader)
    assert time.monotonic() - started < 30
    assert error.value.pid is not None
    assert "stays usable" in str(error.value)


def test_a_timeout_says_timed_out_after_n_s():
    plan = (
        DataLoaderBuilder()
        .with_dataset(Killer(16, 5, "sleep"))
        .with_batch_size(4)
        .with_workers(1, timeout=2, start_method="fork")
        .compile()
    )
    with plan.build() as loader, pytest.raises(WorkerError, match=r"timed out after 2 s") as error:
        collect(loader)
    assert error.value.timeout == 2


def test_the_loader_recovers_after_a_worker_died():
    dataset = Killer(32, 9, "kill")
    plan = DataLoaderBuilder().with_dataset(dataset).with_batch_size(4).with_workers(2).compile()
    delivered: list[int] = []
    with plan.build() as loader:  # its persistent workers end with the test, whatever happens

        def read() -> None:
            for batch in loader:
                delivered.extend(batch.tolist())

        with pytest.raises(WorkerError):
            read()
        dataset.at = -1  # the bad sample is gone: iterating again continues after the last batch
        read()
    assert delivered == list(range(32))


# -- every exit path leaves no child process ------------------------------------------------------


_EXIT_SCRIPT = textwrap.dedent(
    """
    import gc, json, os, sys
    import torch
    from loaderkit import DataLoaderBuilder

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            if i == 30 and os.environ.get("EXIT_HOW") == "error":
                raise ValueError("bad")
            return i

    workers, persistent, how = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    os.environ["EXIT_HOW"] = how
    builder = DataLoaderBuilder().with_dataset(Data()).with_batch_size(4)
    if workers:
        builder = builder.with_workers(workers, persistent=persistent, start_method="fork")
    loader = builder.compile().build()
    try:
        for n, batch in enumerate(loader):
            if how == "break" and n == 3:
                break
    except Exception:
        pass
    del loader, batch
    gc.collect()
    import time
    for _ in range(50):
        if not children():
            break
        time.sleep(0.1)
    print(json.dumps(children()))
    """
)


def _exit_cases() -> list[Any]:
    """Every (workers, persistent, how); a spread of them in the default run.

    Each case is a fresh interpreter: the default run keeps every way of leaving with
    persistent workers, and non-persistent workers and no workers once each; the whole matrix
    runs with ``-m slow``.
    """
    default = {
        *((2, True, how) for how in ("normal", "break", "error")),
        (2, False, "break"),
        (0, True, "error"),
    }
    cases = []
    for workers in (0, 2):
        for persistent in (True, False):
            for how in ("normal", "break", "error"):
                case = (workers, persistent, how)
                marks = () if case in default else (pytest.mark.slow,)
                cases.append(pytest.param(*case, marks=marks))
    return cases


@pytest.mark.parametrize(("workers", "persistent", "how"), _exit_cases())
def test_no_child_process_outlives_the_loader(tmp_path, workers, persistent, how):
    if workers == 0 and not persistent:
        pytest.skip("persistence only applies to workers")
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to list child processes")
    script = tmp_path / "exits.py"
    script.write_text(PROC_PROBES + _EXIT_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(workers), "1" if persistent else "0", how],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_workers_are_exported_from_the_package():
    assert lk.WorkerError.__mro__[1:3] == (lk.LoaderkitError, RuntimeError)
    assert_batches_equal([1], [1])


_LEAK_SCRIPT = textwrap.dedent(
    """
    import gc, json, os, time
    from loaderkit import DataLoaderBuilder

    def counts():
        return len(os.listdir("/proc/self/fd")), len(children())

    def open_files():
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                found.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:  # the listing's own fd, closed by now
                pass
        return sorted(found)

    plan = (DataLoaderBuilder().with_dataset(list(range(64))).with_batch_size(8)
            .with_workers(2, start_method="fork").compile())
    for _ in range(3):  # warm up: imports, the first pools
        loader = plan.build(); list(loader); del loader; gc.collect()
    before, files = counts(), open_files()
    for _ in range(50):
        loader = plan.build()
        for batch in loader:
            pass
        del batch  # a batch from a worker holds a shared-memory fd: the loaders must not
        del loader
        gc.collect()
    deadline = time.monotonic() + 5  # a pool shut down just now may take a moment to go
    while counts()[0] > before[0] + 2 and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    print(json.dumps([before, counts(), files, open_files()]))
    """
)


@pytest.mark.slow  # test_loader_lifecycle.py's 50 abandoned loaders cover it in the default run
def test_fifty_loaders_leave_no_fd_or_process_behind(tmp_path):
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to count file descriptors and child processes")
    script = tmp_path / "leaks.py"
    script.write_text(PROC_PROBES + _LEAK_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=200, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    before, after, files_before, files_after = json.loads(result.stdout.strip().splitlines()[-1])
    assert after[1] == before[1] == 0
    assert after[0] <= before[0] + 2, (files_before, files_after)  # no growth beyond noise


def exiting_transform(sample: int) -> int:
    if sample == 11 and torch.utils.data.get_worker_info() is not None:
        os._exit(123)
    return sample


def test_os_exit_in_a_transform_is_named():
    plan = (
        DataLoaderBuilder()
        .with_dataset(list(range(40)))
        .with_batch_size(4)
        .with_transform(exiting_transform)
        .with_workers(2, start_method="fork")
        .compile()
    )
    with plan.build() as loader, pytest.raises(WorkerError, match="exit code 123") as error:
        collect(loader)
    assert error.value.exit_code == 123


_STUCK_SCRIPT = textwrap.dedent(
    """
    import gc, json, os, time
    import torch
    from loaderkit import DataLoaderBuilder

    class Stuck(torch.utils.data.Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            if i == 20:
                time.sleep(600)  # a worker stuck for good
            return i

    loader = (DataLoaderBuilder().with_dataset(Stuck()).with_batch_size(4)
              .with_workers(2, start_method="fork").compile().build())
    iterator = iter(loader)
    first = [next(iterator).tolist() for _ in range(3)]  # batches before the stuck one
    started = time.monotonic()
    del iterator, loader
    gc.collect()
    for _ in range(100):
        if not children():
            break
        time.sleep(0.1)
    print(json.dumps([first, children(), round(time.monotonic() - started, 1)]))
    """
)


def test_deleting_a_loader_with_a_stuck_worker_does_not_hang(tmp_path):
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to list child processes")
    script = tmp_path / "stuck.py"
    script.write_text(PROC_PROBES + _STUCK_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    first, left, seconds = json.loads(result.stdout.strip().splitlines()[-1])
    assert first == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert left == []  # the stuck worker was terminated, not waited for
    assert seconds < 30
