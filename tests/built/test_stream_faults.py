"""Iterable (streamed) sources under faults: every exit path, a killed worker, uneven shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest
import torch
from lk_testdata import PROC_PROBES
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder, WorkerError

pytestmark = pytest.mark.timeout(240)

# -- every exit path leaves no child process ------------------------------------------------------

_STREAM_EXIT_SCRIPT = textwrap.dedent(
    """
    import gc, json, sys, time
    import torch
    from loaderkit import DataLoaderBuilder

    kind, workers, persistent, how = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    BAD = 30 if how == "data-error" else -1

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            for k in range(64):
                if k == BAD:
                    raise ValueError("bad record")
                yield k

    def rows(shards):
        for s in shards:
            for k in range(16 * s, 16 * s + 16):
                if k == BAD:
                    raise ValueError("bad record")
                yield {"x": k}

    if kind == "hf":
        import datasets
        data = datasets.IterableDataset.from_generator(rows, gen_kwargs={"shards": [0, 1, 2, 3]})
    else:
        data = Stream()
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(4)
    if workers:
        builder = builder.with_workers(workers, persistent=persistent, start_method="fork")
    loader = builder.compile().build()
    outcome = "ended"
    try:
        for n, batch in enumerate(loader):
            if how == "break" and n == 3:
                outcome = "broke"
                break
            if how == "error" and n == 3:
                raise KeyError("the training step failed")
    except Exception as exc:
        outcome = type(exc).__name__
    del loader
    gc.collect()
    for _ in range(50):
        if not children():
            break
        time.sleep(0.1)
    print(json.dumps([outcome, children()]))
    """
)

_OUTCOME = {
    "normal": "ended",
    "break": "broke",
    "error": "KeyError",
    "data-error": "DataError[ValueError]",
}


def _exit_cases() -> list[Any]:
    """Every (source, workers, persistent, how); a spread of them in the default run.

    Each case is a fresh interpreter (several seconds on 2 cores): the default run keeps every
    way of leaving with persistent workers, and the other pools and sources once each; the
    whole matrix runs with ``-m slow``.
    """
    default = {
        *(("torch", 2, True, how) for how in _OUTCOME),
        ("torch", 2, False, "break"),
        ("torch", 0, False, "error"),
        ("hf", 2, False, "data-error"),
    }
    cases = []
    for kind in ("torch", "hf"):
        for workers, persistent in ((0, False), (2, False), (2, True)):
            for how in _OUTCOME:
                case = (kind, workers, persistent, how)
                marks = () if case in default else (pytest.mark.slow,)
                cases.append(pytest.param(*case, marks=marks))
    return cases


@pytest.mark.parametrize(("kind", "workers", "persistent", "how"), _exit_cases())
def test_no_child_process_outlives_a_stream_loader(
    tmp_path: Path, kind: str, workers: int, persistent: bool, how: str
) -> None:
    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to list child processes")
    script = tmp_path / "stream_exits.py"
    script.write_text(PROC_PROBES + _STREAM_EXIT_SCRIPT)
    args = [kind, str(workers), "1" if persistent else "0", how]
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    outcome, left = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome == _OUTCOME[how]
    assert left == []


# -- a worker killed while streaming ---------------------------------------------------------------


class KilledStream(IterableDataset[int]):
    """The stream 0 .. n - 1; a worker process reading element ``at`` kills itself."""

    def __init__(self, n: int, at: int) -> None:
        self.n, self.at = n, at

    def __iter__(self) -> Iterator[int]:
        for k in range(self.n):
            if k == self.at and torch.utils.data.get_worker_info() is not None:
                os.kill(os.getpid(), 9)
            yield k


def _killed_rows(shards: list[int]) -> Iterator[dict[str, int]]:
    for s in shards:
        for k in range(10 * s, 10 * s + 10):
            if k == 25 and torch.utils.data.get_worker_info() is not None:
                os.kill(os.getpid(), 9)
            yield {"x": k}


@pytest.mark.parametrize("kind", ["torch", "hf"])
def test_a_worker_killed_while_streaming_is_named_within_seconds(kind: str) -> None:
    data = (
        KilledStream(200, 41)
        if kind == "torch"
        else datasets.IterableDataset.from_generator(
            _killed_rows, gen_kwargs={"shards": [0, 1, 2, 3]}
        )
    )
    plan = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(4)
        .with_workers(2, start_method="fork")
        .compile()
    )
    started = time.monotonic()
    with plan.build() as loader, pytest.raises(WorkerError, match="killed by SIGKILL") as error:
        for _ in loader:
            pass
    assert time.monotonic() - started < 30
    assert error.value.pid is not None
    assert error.value.signal == "SIGKILL"


# -- uneven shards ---------------------------------------------------------------------------------


class UnevenShards(IterableDataset[int]):
    """Three shards of exactly 0, 4 and 20 elements (read through the sharding hook)."""

    SIZES = (0, 4, 20)

    def __iter__(self) -> Iterator[int]:
        raise AssertionError("the loader must read this dataset through shard()")

    def shard(self, num_shards: int, index: int) -> Iterator[int]:
        assert num_shards == len(self.SIZES)
        start = sum(self.SIZES[:index])
        return iter(range(start, start + self.SIZES[index]))


def _uneven(batch: int) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(UnevenShards())
        .with_batch_size(batch)
        .with_workers(3, start_method="fork")  # one producer per shard: the count is the point
    )


THREE_WORKERS = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create 3 worker processes in total:UserWarning"
)
"""torch warns when a loader has more workers than this machine's CPUs (2 where the suite
runs): the three producers of the uneven shards are what these tests are about."""


@THREE_WORKERS
@pytest.mark.parametrize("batch", [1, 3, 4])
def test_uneven_shards_deliver_every_element_once(batch: int) -> None:
    with _uneven(batch).compile().build() as loader:
        batches = [b.tolist() for b in loader]
        state = loader.state_dict()
    elements = [x for b in batches for x in b]
    assert sorted(elements) == list(range(24))  # every element exactly once
    assert all(batches)  # the empty shard made no (empty) batch
    assert (state["epoch"], state["pass_complete"]) == (0, True)  # the epoch ended cleanly,
    # the empty producer included
    # shard 1's 4 elements come first, round-robin with shard 2's, then shard 2 alone
    assert [x for b in batches for x in b if x < 4] == [0, 1, 2, 3]


@THREE_WORKERS
def test_uneven_shards_resume_after_a_producer_ran_dry() -> None:
    plan = _uneven(3).compile()
    with plan.build() as loader:
        full = [b.tolist() for b in loader]
    for cut in (1, 3, len(full) - 1):  # 3: worker 1 has delivered its last batch
        with plan.build() as loader:
            it = iter(loader)
            head = [next(it).tolist() for _ in range(cut)]
            state = json.loads(json.dumps(loader.state_dict()))
        with plan.build() as resumed:
            resumed.load_state_dict(state)
            assert head + [b.tolist() for b in resumed] == full
