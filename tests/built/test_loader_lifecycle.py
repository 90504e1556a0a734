"""The map-style loader's life cycle under faults (issue 15).

Dropping or closing a loader at any point is quick and leaves nothing behind; a worker timeout
fires on time and names the batch and the worker; non-persistent workers go after a timeout;
superseded and interleaved passes are exact; a raise-policy error does not end the pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from lk_testdata import PROC_PROBES
from torch.utils.data import Dataset

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, WorkerError
from loaderkit.testing import collect

N, BATCH = 36, 4  # 9 batches

needs_proc = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task"), reason="needs /proc to list children, threads, fds"
)


def run_script(tmp_path: Path, body: str, timeout: float) -> tuple[Any, str]:
    """Run ``PROC_PROBES + body`` in a fresh interpreter: (its last stdout line as JSON, stderr)."""
    script = tmp_path / "script.py"
    script.write_text(PROC_PROBES + textwrap.dedent(body))
    result = subprocess.run(
        [sys.executable, "-W", "ignore::UserWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


# -- 1. dropping or closing a loader at any point ------------------------------------------------

_DROP_SCRIPT = """
import gc, json, statistics, time
from loaderkit import DataLoaderBuilder

base = DataLoaderBuilder().with_dataset(list(range(64))).with_batch_size(4).with_shuffle()
fork = dict(start_method="fork")  # one worker each: 50 loaders fit the test's time budget
plans = {p: base.with_workers(1, persistent=p, **fork).compile() for p in (True, False)}
WAYS = ("close the iterator", "delete both", "close the loader", "drop the loader first")


def one(i):
    persistent, way = i % 2 == 0, WAYS[i // 2 % len(WAYS)]
    loader = plans[persistent].build()
    iterator = iter(loader)
    next(iterator), next(iterator)  # abandoned mid-pass, batches prefetched and in flight
    started = time.monotonic()
    if way == "close the iterator":
        iterator.close()
        del loader  # the closed iterator lets go of its loader, as a closed generator does
    elif way == "delete both":
        del iterator, loader
    elif way == "close the loader":
        loader.close()
        del iterator, loader
    else:
        del loader  # the iterator keeps it alive: it goes with the iterator
        del iterator
    gc.collect()
    return time.monotonic() - started


for i in range(2):  # warm up: imports, torch's first threads
    one(i)
before = [children(), threads(), fds()]
started = time.monotonic()
drops = [one(i) for i in range(50)]
total = time.monotonic() - started
deadline = time.monotonic() + 3  # a queue's feeder thread may take a moment to end
while (threads() > before[1] or fds() > before[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
after = [children(), threads(), fds()]
print(json.dumps({"before": before, "after": after, "drops": drops, "total": total}))
"""


@needs_proc
@pytest.mark.timeout(150)
def test_fifty_abandoned_loaders_drop_fast_and_leave_nothing(tmp_path: Path) -> None:
    """Closing or dropping a loader mid-pass, each way, persistent or not: quick and clean."""
    got, _ = run_script(tmp_path, _DROP_SCRIPT, timeout=140)
    (children, threads, fds), after = got["before"], got["after"]
    assert children == after[0] == []  # no worker outlives its loader
    assert after[1] <= threads  # no thread left behind (queue feeders, pin threads)
    assert after[2] <= fds + 2  # no fd left behind, beyond noise
    drops = sorted(got["drops"])
    assert len(drops) == 50
    # each drop used to wait ~5 s per persistent worker (torch joins each for 5 s)
    assert drops[25] < 1.5, drops
    assert drops[-1] < 5, drops
    assert sum(drops) < 50, drops
    assert got["total"] < 100


# -- 2. a timeout fires on time and names the batch and the worker -------------------------------


class Hanging(Dataset[int]):
    """``n`` samples; sample ``at`` hangs while ``hang`` is set, recording who holds it."""

    def __init__(self, n: int, at: int, record: Path | None = None) -> None:
        self.n, self.at, self.record = n, at, record
        self.hang = True

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        info = torch.utils.data.get_worker_info()
        if i == self.at and self.hang and info is not None:
            if self.record is not None:
                self.record.write_text(json.dumps([info.id, os.getpid()]))
            time.sleep(600)
        return i


@pytest.mark.timeout(60)
@pytest.mark.parametrize("persistent", [True, False])
def test_a_timeout_fires_on_time_names_batch_and_worker_and_the_loader_goes_on(
    tmp_path: Path, persistent: bool
) -> None:
    record = tmp_path / "holder.json"
    data = Hanging(64, at=21, record=record)  # in batch 5 (samples 20-23)
    timeout = 2
    loader = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(4)
        .with_workers(2, timeout=timeout, persistent=persistent, start_method="fork")
        .compile()
        .build()
    )
    iterator = iter(loader)
    got = [int(i) for _ in range(5) for i in next(iterator)]
    started = time.monotonic()
    with pytest.raises(WorkerError) as error:
        next(iterator)
    waited = time.monotonic() - started
    assert got == list(range(20))
    assert waited < timeout + 1, waited  # torch gives up after `timeout`; the rest is cleanup
    holder, pid = json.loads(record.read_text())  # the worker that really held the batch
    assert (error.value.batch_index, error.value.worker_id, error.value.pid) == (5, holder, pid)
    assert error.value.timeout == timeout
    message = str(error.value)
    assert f"timed out after {timeout} s" in message
    assert f"batch 5 of epoch 0 (samples 20, 21, 22, 23) was held by worker {holder}" in message
    assert "raise the timeout" in message
    assert "stays usable" in message
    with pytest.raises(StopIteration):  # a broken pool ends the pass
        next(iterator)
    assert loader.state_dict()["batches_delivered"] == 5
    data.hang = False
    got.extend(int(i) for batch in loader for i in batch)  # resumes at batch 5
    assert got == list(range(64))
    loader.close()


# -- 3. non-persistent workers go after a timeout, retries and close() ---------------------------

_RETRY_SCRIPT = """
import json, time, torch
from loaderkit import DataLoaderBuilder, WorkerError

class Stuck(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 2:
            time.sleep(600)
        return i

loader = (DataLoaderBuilder().with_dataset(Stuck()).with_batch_size(4)
          .with_workers(2, timeout=1, persistent=False, start_method="fork").compile().build())
attempts = []
for _ in range(5):
    started = time.monotonic()
    try:
        for batch in loader:
            pass
        attempts.append(["no error"])
    except WorkerError as error:
        attempts.append([error.batch_index, round(time.monotonic() - started, 2), children()])
loader.close()
print(json.dumps({"attempts": attempts, "after": children()}))
"""


@needs_proc
@pytest.mark.timeout(90)
def test_non_persistent_workers_are_gone_after_timeouts_retries_and_close(
    tmp_path: Path,
) -> None:
    got, stderr = run_script(tmp_path, _RETRY_SCRIPT, timeout=80)
    attempts = got["attempts"]
    assert len(attempts) == 5
    assert [a[0] for a in attempts] == [0] * 5  # each retry resumes at the stuck batch
    assert [a[2] for a in attempts] == [[]] * 5  # the stuck pool is gone after each error
    assert got["after"] == []
    assert "can only test a child process" not in stderr  # torch's __del__ in a forked copy
    assert "Exception ignored" not in stderr, stderr[-3000:]


# -- 4. superseded, abandoned and interleaved passes ---------------------------------------------

WORKERS = [
    pytest.param(0, None, id="0-workers"),
    pytest.param(2, True, id="persistent"),
    pytest.param(2, False, id="non-persistent"),
]


def shuffled_plan(workers: int, persistent: bool | None) -> LoaderPlan:
    builder = DataLoaderBuilder().with_dataset(list(range(N))).with_batch_size(BATCH)
    builder = builder.with_shuffle().with_seed(7)
    if workers:
        builder = builder.with_workers(workers, persistent=persistent, start_method="fork")
    return builder.compile()


def reference_epochs(count: int) -> list[list[int]]:
    """Epochs 0.. of the plan read by a fresh loader in the main process (worker-invariant)."""
    loader = shuffled_plan(0, None).build()
    return [[int(i) for b in collect(loader) for i in b] for _ in range(count)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("workers", "persistent"), WORKERS)
def test_a_newer_pass_is_whole_and_the_superseded_one_refuses(
    workers: int, persistent: bool | None
) -> None:
    epochs = reference_epochs(2)
    loader = shuffled_plan(workers, persistent).build()
    first = iter(loader)
    head = [int(i) for _ in range(3) for i in next(first)]
    assert head == epochs[0][:12]
    second = iter(loader)
    batches = list(second)
    assert len(batches) == 9  # all 9 of 9, none lost to the first pass's prefetch
    assert [int(i) for b in batches for i in b] == epochs[1]
    with pytest.raises(RuntimeError, match="superseded"):
        next(first)
    with pytest.raises(StopIteration):  # it raised, so it ended: nothing of the newer pass
        next(first)
    assert (loader.epoch, loader.batches_delivered) == (1, 9)
    loader.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("workers", "persistent"), WORKERS)
def test_an_abandoned_pass_then_two_whole_passes(workers: int, persistent: bool | None) -> None:
    epochs = reference_epochs(5)
    loader = shuffled_plan(workers, persistent).build()
    abandoned = iter(loader)
    next(abandoned), next(abandoned), next(abandoned)
    del abandoned  # never closed
    assert [[int(i) for b in loader for i in b] for _ in range(2)] == epochs[1:3]
    kept = iter(loader)  # interleaved: a pass kept open while a peek starts another
    assert [int(i) for i in next(kept)] == epochs[3][:BATCH]
    assert [int(i) for i in next(iter(loader))] == epochs[4][:BATCH]
    with pytest.raises(RuntimeError, match="superseded"):
        next(kept)
    loader.close()


# -- 5. under the raise policy the pass goes on after an error -----------------------------------


class Bad(Dataset[int]):
    """Samples 0..n-1; those in ``bad`` raise."""

    def __init__(self, n: int, bad: set[int]) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i in self.bad:
            raise ValueError(f"corrupt record {i}")
        return i


def bad_plan(workers: int, bad: set[int]) -> LoaderPlan:
    builder = DataLoaderBuilder().with_dataset(Bad(40, bad)).with_batch_size(4)
    if workers:
        builder = builder.with_workers(workers, start_method="fork")
    return builder.compile()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_failed_batch_raises_and_the_next_next_continues(workers: int) -> None:
    loader = bad_plan(workers, {13, 30}).build()  # batches 3 and 7 fail
    iterator = iter(loader)
    got: list[int] = []
    failed: list[tuple[int | None, int]] = []
    while True:
        try:
            got.extend(next(iterator).tolist())
        except DataError as error:
            failed.append((error.sample_index, loader.state_dict()["batches_delivered"]))
        except StopIteration:
            break
    # as with torch, a try/except around each next() loses only the failing batches
    assert got == [i for i in range(40) if i // 4 not in (3, 7)]
    # the failed batch counts as consumed: a state taken after it resumes after it
    assert failed == [(13, 4), (30, 8)]
    assert (loader.epoch, loader.batches_delivered) == (0, 10)
    assert next(iter(loader)).tolist() == list(range(4))  # the next pass is epoch 1, not a resume
    loader.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_taken_after_a_failed_batch_resumes_after_it(workers: int) -> None:
    plan = bad_plan(workers, {13})
    loader = plan.build()
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    with pytest.raises(DataError, match="corrupt record 13"):
        next(iterator)
    state = loader.state_dict()
    assert state["batches_delivered"] == 4
    again = plan.build()
    again.load_state_dict(state)
    assert [int(i) for b in again for i in b] == list(range(16, 40))
    # a new iter() of the same loader goes on after it too: one position, as in torch
    assert loader.next_pass == (0, 4)
    assert [int(i) for b in loader for i in b] == list(range(16, 40))
    loader.close()
    again.close()


@pytest.mark.timeout(60)
def test_a_closed_iterator_ends_and_lets_go_of_its_loader() -> None:
    loader = bad_plan(0, set()).build()
    iterator = iter(loader)
    next(iterator)
    iterator.close()  # type: ignore[attr-defined]
    with pytest.raises(StopIteration):
        next(iterator)
    assert loader.batches_delivered == 1
    assert [int(i) for b in loader for i in b] == list(range(40))  # the next pass: epoch 1
