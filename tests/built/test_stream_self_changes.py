"""Issue 29: a stream whose ``__iter__`` changes the dataset itself.

torch keeps such a change with ``num_workers=0`` (the program's object) and with persistent
workers (each worker's copy), and loses it with workers that are not persistent; a resume in
a new process starts from the dataset as constructed. A ``StreamLoader`` reads every pass from
the dataset as it stood when the pass started (a copy, with any workers), so the batches do not
depend on the workers and a resume is exact; the change is logged once, naming the attribute
and the fix (``set_epoch``). The lockstep suite (``tests/conformance``) compares it with torch
and torchdata; these tests pin loaderkit's side: the same data for 0 and 2 workers, persistent
or not, the log, and the ``set_epoch`` fix with a resume.
"""

from __future__ import annotations

import collections
import json
import logging
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder
from loaderkit.runtime.stream.changes import Watch, pass_copy

pytestmark = pytest.mark.timeout(300)

N = 12
TAG = 100

WORKERS = [
    pytest.param(0, None, id="0 workers"),
    pytest.param(2, False, id="2 workers"),
    pytest.param(2, True, id="2 persistent workers"),
]


class CountsPasses(IterableDataset[int]):
    """Yields ``epoch x TAG + k`` for ``k < N``, then ``self.epoch += 1`` (the issue's stream)."""

    def __init__(self) -> None:
        self.epoch = 0

    def __iter__(self) -> Iterator[int]:
        for k in range(N):
            yield self.epoch * TAG + k
        self.epoch += 1


class ToldEpoch(IterableDataset[int]):
    """The fix: the epoch comes from ``set_epoch``, which the loader calls before each pass."""

    def __init__(self) -> None:
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        for k in range(N):
            yield self.epoch * TAG + k


class DrawsInIter(IterableDataset[int]):
    """Shuffles with a random generator it holds: each pass draws from it (changing it)."""

    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.seen: list[int] = []

    def __iter__(self) -> Iterator[int]:
        order = list(range(N))
        self.rng.shuffle(order)
        for k in order:
            self.seen.append(k)
            yield k


def plan_of(data: Any, workers: int, persistent: bool | None) -> Any:
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(4)
    if workers:
        builder = builder.with_workers(workers, persistent=persistent, timeout=60)
    return builder.compile()


def passes(loader: Any, count: int = 3) -> list[list[int]]:
    """The elements of ``count`` passes, each pass sorted (the order depends on the workers)."""
    return [sorted(int(x) for batch in loader for x in batch) for _ in range(count)]


def changed_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "changed itself" in r.getMessage()]


@pytest.mark.parametrize(("workers", "persistent"), WORKERS)
def test_every_pass_reads_the_dataset_as_it_stood_and_the_change_is_logged_once(
    caplog: pytest.LogCaptureFixture, workers: int, persistent: bool | None
) -> None:
    data = CountsPasses()
    with (
        caplog.at_level(logging.WARNING, logger="loaderkit"),
        plan_of(data, workers, persistent).build() as loader,
    ):
        read = passes(loader)
        assert loader.stream_changed == ("epoch: 0 -> 1",)
    assert read == [list(range(N))] * 3  # tag 0 in every pass, with any workers
    assert data.epoch == 0  # the program's object is not changed (torch's 0 workers would)
    logs = changed_logs(caplog)
    assert len(logs) == 1, logs  # once per loader
    where = "worker" if workers else "the main process"
    assert f"changed itself while epoch 0 was read in {where}" in logs[0]
    assert "epoch: 0 -> 1" in logs[0]
    assert "define set_epoch(epoch) on CountsPasses" in logs[0]


@pytest.mark.parametrize(("workers", "persistent"), WORKERS)
def test_set_epoch_makes_the_stream_depend_on_the_epoch_with_any_workers_and_a_resume(
    caplog: pytest.LogCaptureFixture, workers: int, persistent: bool | None
) -> None:
    plan = plan_of(ToldEpoch(), workers, persistent)
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        with plan.build() as loader:
            read = passes(loader)
            assert loader.stream_changed == ()
        assert read == [[e * TAG + k for k in range(N)] for e in range(3)]
        # cut inside epoch 1; a fresh loader over a fresh dataset resumes it exactly
        with plan.build() as loader:
            whole = [[int(x) for x in b] for b in loader]
            it = iter(loader)
            head = [[int(x) for x in next(it)]]
            state = json.loads(json.dumps(loader.state_dict()))
            rest_of_epoch_1 = [[int(x) for x in b] for b in it]
        # as in a new process: the dataset as constructed, told its epoch by the loader
        with plan_of(ToldEpoch(), workers, persistent).build() as resumed:
            resumed.load_state_dict(state)
            rest = [[int(x) for x in b] for b in resumed]
    assert all(x // TAG == 0 for b in whole for x in b)
    assert all(x // TAG == 1 for b in head + rest for x in b)
    assert rest == rest_of_epoch_1
    assert changed_logs(caplog) == []


@pytest.mark.parametrize(("workers", "persistent"), WORKERS)
def test_a_generator_and_a_list_the_stream_changes_in_place_stay_in_the_pass(
    caplog: pytest.LogCaptureFixture, workers: int, persistent: bool | None
) -> None:
    data = DrawsInIter()
    state = data.rng.getstate()
    with (
        caplog.at_level(logging.WARNING, logger="loaderkit"),
        plan_of(data, workers, persistent).build() as loader,
    ):
        orders = [[int(x) for b in loader for x in b] for _ in range(2)]
        changed = loader.stream_changed
    assert orders[0] == orders[1]  # each pass shuffles from the generator as it stood
    assert data.rng.getstate() == state and data.seen == []
    assert changed[0] == "rng: the Random drew numbers"
    assert changed[1].startswith("seen: the list changed in place (0 -> ")
    assert len(changed_logs(caplog)) == 1


def test_the_same_elements_for_0_and_2_workers_pass_after_pass() -> None:
    read = {}
    for workers, persistent in [(0, None), (2, False), (2, True)]:
        with plan_of(DrawsInIter(), workers, persistent).build() as loader:
            read[workers, persistent] = passes(loader)
    assert len({json.dumps(r) for r in read.values()}) == 1, read


class Position(IterableDataset[int]):
    """A stateful stream: it keeps its position in an attribute on purpose (not logged)."""

    def __init__(self) -> None:
        self.at = 0
        self.start = 0

    def __iter__(self) -> Iterator[int]:
        self.at, self.start = self.start, 0
        while self.at < N:
            self.at += 1
            yield self.at - 1

    def state_dict(self) -> dict[str, int]:
        return {"at": self.at}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.start = state["at"]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_stream_is_not_logged(caplog: pytest.LogCaptureFixture, workers: int) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="loaderkit"),
        plan_of(Position(), workers, None).build() as loader,
    ):
        assert loader.resume_native
        assert passes(loader, 2) == [list(range(N))] * 2
        assert loader.stream_changed == ()
    assert changed_logs(caplog) == []


# -- the snapshot itself ------------------------------------------------------------------------


class Plain:
    def __init__(self) -> None:
        self.n = 1
        self.names = ["a", "b"]
        self.table = {"a": 1}
        self.gen = np.random.default_rng(0)
        self.tgen = torch.Generator().manual_seed(0)
        self.blob = bytearray(b"ab")
        self.queue: collections.deque[int] = collections.deque([1])


def test_a_watch_sees_rebinding_additions_removals_and_in_place_changes() -> None:
    obj = Plain()
    watch = Watch(obj)
    assert watch.changes() == ()
    obj.names = sorted(obj.names)  # another list, equal: no change
    obj.n = 2
    obj.table["b"] = 2
    obj.gen.random()
    del obj.blob
    obj.extra = "x"
    assert watch.changes() == (
        "n: 1 -> 2",
        "table: the dict changed in place (1 -> 2 items)",
        "gen: the Generator drew numbers",
        "blob: removed",
        "extra: added ('x')",
    )
    torch.rand(1, generator=obj.tgen)
    obj.queue.append(2)
    assert watch.changes() == (  # at most 5 described
        "n: 1 -> 2",
        "table: the dict changed in place (1 -> 2 items)",
        "gen: the Generator drew numbers",
        "tgen: the Generator drew numbers",
        "blob: removed",
        "and 2 more attributes",  # the deque and the added one
    )


def test_a_pass_copy_shares_nothing_a_pass_changes_at_the_top() -> None:
    obj = Plain()
    copy = pass_copy(obj)
    assert type(copy) is Plain and copy is not obj
    copy.names.append("c")
    copy.table["b"] = 2
    copy.gen.random()
    torch.rand(1, generator=copy.tgen)
    copy.blob += b"c"
    copy.queue.append(2)
    copy.n = 5
    assert Watch(obj).changes() == ()
    fresh = Plain()
    assert obj.names == fresh.names and obj.table == fresh.table and obj.n == 1
    assert obj.gen.random() == fresh.gen.random()
    assert torch.equal(torch.rand(1, generator=obj.tgen), torch.rand(1, generator=fresh.tgen))
    assert obj.blob == fresh.blob and obj.queue == fresh.queue


class Slotted:
    __slots__ = ("n",)


def test_an_object_without_an_attribute_dict_is_read_itself() -> None:
    obj = Slotted()
    assert pass_copy(obj) is obj
    assert Watch(obj).changes() == ()
