"""Streams whose elements draw from the global RNGs; a stream pass under faults."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from lk_testdata import PROC_PROBES
from torch.utils.data import IterableDataset

from loaderkit import DataError, DataLoaderBuilder

pytestmark = pytest.mark.timeout(120)


class Noisy(IterableDataset[dict[str, Any]]):
    """Element k carries draws from python's, numpy's and torch's global RNGs."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for k in range(self.n):
            draws = [random.random(), float(np.random.rand()), float(torch.rand(()))]
            yield {"k": k, "v": torch.tensor(draws, dtype=torch.float64)}


def jitter(sample: dict[str, Any]) -> dict[str, Any]:
    """A per-sample transform that draws from the global RNGs too."""
    return {**sample, "t": torch.tensor([random.random(), float(torch.rand(()))])}


def _plan(workers: int, n: int = 23) -> Any:
    b = DataLoaderBuilder().with_dataset(Noisy(n)).with_batch_size(3).with_transform(jitter)
    if workers:
        b = b.with_workers(workers, start_method="fork")
    return b.with_seed(5).compile()


def _by_position(batches: list[dict[str, Any]]) -> dict[int, tuple[float, ...]]:
    out = {}
    for batch in batches:
        for k, v, t in zip(batch["k"].tolist(), batch["v"], batch["t"], strict=True):
            out[k] = (*v.tolist(), *t.tolist())
    return out


def test_global_rng_draws_are_the_same_with_0_and_2_workers_and_repeat() -> None:
    runs = {}
    for workers in (0, 2, 0):
        with _plan(workers).build() as loader:
            runs.setdefault(workers, []).append(_by_position(list(loader)))
    zero, two = runs[0], runs[2]
    assert sorted(zero[0]) == list(range(23))
    assert zero[0] == zero[1]  # repeatable with 0 workers
    assert zero[0] == two[0]  # and each element draws the same with 2 workers
    values = [v for row in zero[0].values() for v in row]
    assert len(set(values)) == len(values)  # every element and RNG draws its own numbers


def test_the_main_process_rng_is_left_as_it_was() -> None:
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    with _plan(0).build() as loader:
        for _ in loader:
            got = (random.random(), float(np.random.rand()), float(torch.rand(())))
            assert got == expected  # the user's draws between batches are their own
            random.seed(1)
            np.random.seed(1)
            torch.manual_seed(1)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resume_mid_epoch_draws_the_same(workers: int) -> None:
    plan = _plan(workers)
    with plan.build() as loader:
        full = list(loader)
    with plan.build() as loader:
        it = iter(loader)
        head = [next(it) for _ in range(3)]
        state = json.loads(json.dumps(loader.state_dict()))
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        rest = list(resumed)
    assert _by_position(head + rest) == _by_position(full)
    assert [b["k"].tolist() for b in head + rest] == [b["k"].tolist() for b in full]


# -- a failed batch does not end the pass ---------------------------------------------------------


def fails_on_7(x: int) -> int:
    if x == 7:
        raise ValueError("seven")
    return x


@pytest.mark.parametrize("workers", [0, 2])
def test_next_goes_on_after_a_batch_failed_in_the_transform(workers: int) -> None:
    b = DataLoaderBuilder().with_dataset(Numbers(12)).with_batch_size(2).with_transform(fails_on_7)
    if workers:
        b = b.with_workers(workers, start_method="fork")
    with b.compile().build() as loader:
        expected = [[0, 1], [2, 3], [4, 5], [8, 9], [10, 11]]
        if workers:  # round-robin over the shards k mod 2
            expected = [[0, 2], [1, 3], [4, 6], [8, 10], [9, 11]]
        it = iter(loader)
        got, errors = [], []
        while True:
            try:
                got.append(next(it).tolist())
            except StopIteration:
                break
            except DataError as error:
                errors.append(error.sample_index)
        assert got == expected
        assert errors == [7]
        state = loader.state_dict()
        assert state["pass_complete"]  # the failed batch counted: the epoch ended
        assert state["batches_delivered"] == 6
        assert next(iter(loader)).tolist() == expected[0]  # the next iter(): the next epoch
        assert loader.state_dict()["epoch"] == 1


class Numbers(IterableDataset[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


# -- dropping a stream loader mid-pass -----------------------------------------------------------

_DROP_SCRIPT = textwrap.dedent(
    """
    import gc, json, sys, time
    import torch
    from loaderkit import DataLoaderBuilder

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10_000))

    how = sys.argv[1]
    loader = (DataLoaderBuilder().with_dataset(Stream()).with_batch_size(4)
              .with_workers(2, start_method="fork").compile().build())
    it = iter(loader)
    next(it)
    before = len(children())
    started = time.monotonic()
    if how == "close":
        loader.close()
    elif how == "drop-iterator":
        del it
    else:
        del it, loader
        gc.collect()
    took = time.monotonic() - started
    print(json.dumps([before, took, children()]))
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to list child processes")
@pytest.mark.parametrize("how", ["close", "drop-iterator", "drop-all"])
def test_dropping_a_stream_mid_pass_stops_its_workers_at_once(tmp_path: Path, how: str) -> None:
    script = tmp_path / "drop.py"
    script.write_text(PROC_PROBES + _DROP_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    before, took, left = json.loads(result.stdout.strip().splitlines()[-1])
    assert before == 2  # the two workers ran
    assert took < 1.0
    assert left == []
