"""Issue 14: every iteration habit gives what torch's ``DataLoader(shuffle=True)`` gives.

Each habit (a peek, a ``break``, passes cut short, ``set_epoch`` before each pass, a resume,
a kept iterator, a superseded iterator) runs on a map-style ``Loader`` and a ``StreamLoader``
with 0 workers and with 2 workers (persistent and not), and its batches (as tuples of sample
ids) are compared with an uninterrupted run: pass ``e`` of a fresh loader after
``set_epoch(e)``. The rule is documented in docs/loader.md ("Iteration: passes and epochs").
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lk_testdata import worker_block
from torch.utils.data import Dataset, IterableDataset

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.errors import DataError, ResumeError

pytestmark = pytest.mark.timeout(300)

N = 14
BATCH = 3
PER_EPOCH = -(-N // BATCH)  # 5 batches, the last one partial


class Indices(Dataset[int]):
    """Map-style: sample ``i`` is ``i``."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        return i


class Stream(IterableDataset[int]):
    """An iterable dataset yielding 0 .. N-1 (the whole stream in every process)."""

    def __iter__(self) -> Iterator[int]:
        return iter(range(N))


CONFIGS = [
    pytest.param((kind, workers, persistent), id=f"{kind}-w{workers}{'-persistent' * persistent}")
    for kind in ("map", "stream")
    for workers, persistent in ((0, False), (2, True), (2, False))
]


def make_plan(kind: str, workers: int, persistent: bool) -> LoaderPlan:
    builder = DataLoaderBuilder().with_batch_size(BATCH).with_seed(7)
    if kind == "map":
        builder = builder.with_dataset(Indices()).with_shuffle()
    else:
        builder = builder.with_dataset(Stream()).with_shuffle(buffer_size=6)
    if workers:
        builder = builder.with_workers(workers, persistent=persistent, start_method="fork")
    return builder.compile()


Batches = list[tuple[int, ...]]


def ids(batches: Any) -> Batches:
    return [tuple(int(i) for i in batch) for batch in batches]


_REFERENCE: dict[tuple[str, int, bool], list[Batches]] = {}


def reference(kind: str, workers: int, persistent: bool, epoch: int) -> Batches:
    """Epoch ``epoch`` of an uninterrupted run: a fresh loader, ``set_epoch``, one pass."""
    key = (kind, workers, persistent)
    runs = _REFERENCE.setdefault(key, [])
    while len(runs) <= epoch:
        with make_plan(kind, workers, persistent).build() as loader:
            loader.set_epoch(len(runs))
            runs.append(ids(loader))
    return runs[epoch]


@pytest.fixture(params=CONFIGS)
def config(request: pytest.FixtureRequest) -> tuple[str, int, bool]:
    kind, workers, persistent = request.param
    return str(kind), int(workers), bool(persistent)


def test_the_reference_epochs_are_whole_and_differ(config: tuple[str, int, bool]) -> None:
    epochs = [reference(*config, e) for e in range(3)]
    for batches in epochs:
        assert sorted(i for batch in batches for i in batch) == list(range(N))
    assert len({tuple(batches) for batches in epochs}) == 3  # three different orders


def test_peek_then_loop_gives_a_full_epoch(config: tuple[str, int, bool]) -> None:
    with make_plan(*config).build() as loader:
        peeked = ids([next(iter(loader))])
        full = ids(loader)
    assert peeked == reference(*config, 0)[:1]
    assert full == reference(*config, 1)  # the next pass, whole (torch reshuffles too)


def test_break_then_iterate_again_gives_a_full_fresh_pass(config: tuple[str, int, bool]) -> None:
    with make_plan(*config).build() as loader:
        debug = []
        for batch in loader:
            debug.append(batch)
            if len(debug) == 2:
                break
        again = ids(loader)
        third = ids(loader)
    assert ids(debug) == reference(*config, 0)[:2]
    assert again == reference(*config, 1)
    assert third == reference(*config, 2)


@pytest.mark.parametrize("limit", [None, 2])
def test_epochs_without_set_epoch_are_whole_passes_in_new_orders(
    config: tuple[str, int, bool], limit: int | None
) -> None:
    with make_plan(*config).build() as loader:
        passes = []
        for _epoch in range(3):
            passes.append(ids(itertools.islice(loader, limit)))  # Lightning's limit_*_batches
            assert loader.epoch == _epoch
    assert passes == [reference(*config, e)[:limit] for e in range(3)]


def test_set_epoch_before_each_pass_is_that_epoch(config: tuple[str, int, bool]) -> None:
    with make_plan(*config).build() as loader:
        next(iter(loader))  # whatever came before (a peek, a break) does not matter
        got = {}
        for epoch in (2, 0, 2, 1):
            loader.set_epoch(epoch)
            got.setdefault(epoch, []).append(ids(loader))
    for epoch, passes in got.items():
        assert passes == [reference(*config, epoch)] * len(passes)


def test_set_epoch_is_identical_on_every_rank() -> None:
    plan = make_plan("map", 0, False)
    seen: list[int] = []
    for rank in range(2):
        ranked = plan.to_builder().with_distributed(world_size=2, rank=rank).compile()
        first, second = ranked.build(), ranked.build()
        collect_some = list(itertools.islice(first, 1))  # a different history on one copy
        assert collect_some
        first.set_epoch(3)
        second.set_epoch(3)
        a, b = ids(first), ids(second)
        assert a == b  # the same pass in every run
        seen += [i for batch in a for i in batch]
    assert sorted(set(seen)) == list(range(N))  # the ranks together read the whole epoch


def test_a_kept_iterator_continues_its_pass(config: tuple[str, int, bool]) -> None:
    with make_plan(*config).build() as loader:
        iterator = iter(loader)
        head = ids(itertools.islice(iterator, 2))
        state = loader.state_dict()
        tail = ids(iterator)
    assert (state["epoch"], state["batches_delivered"]) == (0, 2)
    assert head + tail == reference(*config, 0)


@pytest.mark.parametrize("cut", [0, 2, -1])
def test_load_state_dict_resumes_the_next_pass_exactly(
    config: tuple[str, int, bool], cut: int
) -> None:
    cut = len(reference(*config, 0)) if cut < 0 else cut  # -1: after the last batch
    plan = make_plan(*config)
    with plan.build() as loader:
        iterator = iter(loader)
        list(itertools.islice(iterator, cut))
        state = json.loads(json.dumps(loader.state_dict()))  # taken with the pass still open
    assert (state["epoch"], state["batches_delivered"]) == (0, cut)
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        rest = ids(resumed)
        after = ids(resumed)
    assert rest == reference(*config, 0)[cut:]  # empty after the last batch (StatefulDataLoader)
    assert after == reference(*config, 1)


@pytest.mark.parametrize("cut", [2, -1])
def test_set_epoch_with_the_states_epoch_does_not_rewind_a_resume(
    config: tuple[str, int, bool], cut: int
) -> None:
    """HF Trainer and Accelerate call ``set_epoch(epoch)`` after ``load_state_dict``."""
    cut = len(reference(*config, 0)) if cut < 0 else cut  # -1: after the last batch
    plan = make_plan(*config)
    with plan.build() as loader:
        iterator = iter(loader)
        list(itertools.islice(iterator, cut))
        state = loader.state_dict()
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        resumed.set_epoch(0)  # the state's own epoch: kept
        assert ids(resumed) == reference(*config, 0)[cut:]
        resumed.set_epoch(1)
        assert ids(resumed) == reference(*config, 1)
    with plan.build() as moved:
        moved.load_state_dict(state)
        moved.set_epoch(1)  # another epoch: the resume is replaced
        assert ids(moved) == reference(*config, 1)


def test_a_state_taken_after_a_loop_or_a_break(config: tuple[str, int, bool]) -> None:
    plan = make_plan(*config)
    with plan.build() as loader:
        for i, _batch in enumerate(loader):
            if i == 1:
                break
        broken = loader.state_dict()  # the last pass: epoch 0, 2 batches delivered
        ids(loader)  # epoch 1, whole
        complete = loader.state_dict()
    assert (broken["epoch"], broken["batches_delivered"]) == (0, 2)
    assert not broken["pass_ended"]  # a break is not the end of the pass
    assert (complete["epoch"], complete["batches_delivered"]) == (1, len(reference(*config, 1)))
    assert complete["pass_ended"]  # the loop ran to StopIteration
    with plan.build() as resumed:
        resumed.load_state_dict(broken)
        assert ids(resumed) == reference(*config, 0)[2:]
        resumed.load_state_dict(complete)
        assert ids(resumed) == reference(*config, 2)  # the next epoch, whole (torchdata's)
        assert ids(resumed) == reference(*config, 3)


def test_a_state_written_before_pass_ended_was_recorded_reads_as_not_ended(
    config: tuple[str, int, bool],
) -> None:
    plan = make_plan(*config)
    with plan.build() as loader:
        ids(loader)  # epoch 0, whole: the loop ended
        state = loader.state_dict()
    assert state["pass_ended"]
    older = {k: v for k, v in state.items() if k != "pass_ended"}  # as the last version wrote
    with plan.build() as resumed:
        resumed.load_state_dict(older)  # as it was read then: the empty rest of epoch 0
        assert ids(resumed) == []
        assert ids(resumed) == reference(*config, 1)
        with pytest.raises(ResumeError, match=r"state\['pass_ended'\] must be a bool"):
            resumed.load_state_dict({**state, "pass_ended": "yes"})


def test_a_superseded_iterator_takes_nothing_from_the_new_pass(
    config: tuple[str, int, bool],
) -> None:
    with make_plan(*config).build() as loader:
        old = iter(loader)
        first = ids([next(old)])
        new = iter(loader)
        second = ids([next(new)])  # the new pass starts: old is superseded
        with pytest.raises(RuntimeError, match="superseded"):
            next(old)
        with pytest.raises(StopIteration):
            next(old)  # still nothing (it raised, so it ended): no batch of the newer pass
        rest = ids(new)
        iter(loader)  # never advanced (Lightning's iterability check): no pass, no effect
        late, newest = iter(loader), iter(loader)
        third = ids([next(late)])  # a pass starts at its first next(): epoch 2
        fourth = ids(newest)  # epoch 3, whole; it supersedes late
        with pytest.raises(RuntimeError, match="superseded"):
            next(late)
    assert first == reference(*config, 0)[:1]
    assert second + rest == reference(*config, 1)
    assert third == reference(*config, 2)[:1]
    assert fourth == reference(*config, 3)


def test_set_epoch_and_load_state_dict_supersede_an_open_iterator(
    config: tuple[str, int, bool],
) -> None:
    with make_plan(*config).build() as loader:
        iterator = iter(loader)
        next(iterator)
        state = loader.state_dict()
        loader.set_epoch(4)
        with pytest.raises(RuntimeError, match="superseded"):
            next(iterator)
        loader.load_state_dict(state)
        assert ids(loader) == reference(*config, 0)[1:]


def test_an_eval_plan_after_a_peek_reads_every_sample() -> None:
    class Hundred(Dataset[int]):
        def __len__(self) -> int:
            return 100

        def __getitem__(self, i: int) -> int:
            return i

    plan = DataLoaderBuilder().with_dataset(Hundred()).with_batch_size(10).with_shuffle().compile()
    loader = plan.for_eval().build()
    next(iter(loader))  # a peek
    every = [i for batch in ids(loader) for i in batch]
    assert every == list(range(100))
    again = [i for batch in ids(loader) for i in batch]  # and every later pass too
    assert again == list(range(100))


def test_len_and_epoch_follow_the_current_or_pending_pass() -> None:
    with make_plan("map", 0, False).build() as loader:
        assert (loader.epoch, loader.batches_delivered, len(loader)) == (0, 0, PER_EPOCH)
        ids(loader)
        assert (loader.epoch, loader.batches_delivered) == (0, PER_EPOCH)
        iterator = iter(loader)  # the pass starts at its first next(), not at iter()
        assert (loader.epoch, loader.batches_delivered) == (0, PER_EPOCH)
        next(iterator)
        assert (loader.epoch, loader.batches_delivered) == (1, 1)
        loader.set_epoch(6)
        assert (loader.epoch, loader.batches_delivered) == (6, 0)
        assert loader.state_dict()["epoch"] == 6


def test_check_is_not_a_pass() -> None:
    with make_plan("map", 0, False).build() as loader:
        loader.check()
        assert ids(loader) == reference("map", 0, False, 0)
        loader.check()
        assert ids(loader) == reference("map", 0, False, 1)


# -- a random sequence of habits against a model of the rule --------------------------------


class Model:
    """The documented rule, in a few lines: what each call should do to the position."""

    def __init__(self) -> None:
        self.epoch, self.delivered, self.pending = 0, 0, "set"
        self.ended = False  # the last pass's iterator raised StopIteration (pass_ended)

    def start(self) -> tuple[int, int]:
        if self.pending == "next":
            self.epoch, self.delivered = self.epoch + 1, 0
        elif self.pending == "set":
            self.delivered = 0
        self.pending, self.ended = "next", False
        return self.epoch, self.delivered

    def set_epoch(self, epoch: int) -> None:
        if self.pending == "resume" and epoch == self.epoch:
            return
        self.epoch, self.delivered, self.pending = epoch, 0, "set"
        self.ended = False

    def load(self, epoch: int, delivered: int, ended: bool) -> None:
        """As the saving loader stood: after its loop ended the next pass is the next epoch."""
        self.epoch, self.delivered, self.ended = epoch, delivered, ended
        self.pending = "next" if ended else "resume"


OPS = st.lists(
    st.one_of(
        st.just(("iter",)),
        st.just(("probe",)),
        st.tuples(st.just("next"), st.integers(1, PER_EPOCH + 1)),
        st.tuples(st.just("set_epoch"), st.integers(0, 3)),
        st.just(("save",)),
        st.just(("load",)),
        st.just(("old",)),
    ),
    max_size=14,
)


@given(OPS)
def test_any_sequence_of_habits_follows_the_rule(ops: list[tuple[Any, ...]]) -> None:
    """Every batch delivered is the model's next batch; superseded iterators deliver none.

    ``iter`` makes an iterator whose pass starts at its first ``next``; ``probe`` makes one
    that is dropped unused (it must change nothing).
    """
    plan = make_plan("map", 0, False)
    loader = plan.build()
    model = Model()
    current: Iterator[Any] | None = None  # the newest iterator
    started = False  # whether its pass started
    old: list[Iterator[Any]] = []
    saved: dict[str, Any] | None = None

    waiting: list[Iterator[Any]] = []  # started iterators a newer, unstarted one will supersede

    def supersede() -> None:
        nonlocal current
        old.extend(waiting)
        waiting.clear()
        if current is not None and started:
            old.append(current)
            current = None

    for op in ops:
        if op[0] == "iter":  # the running pass goes on until the new iterator's first next()
            if current is not None and started:
                waiting.append(current)
            current, started = iter(loader), False
        elif op[0] == "probe":
            iter(loader)
        elif op[0] == "next" and current is not None:
            if not started:  # its pass starts now: the passes still running are superseded
                old.extend(waiting)
                waiting.clear()
                model.start()
                started = True
            for _ in range(op[1]):
                batch = next(current, None)
                if model.delivered >= PER_EPOCH:
                    assert batch is None  # the pass ended
                    model.ended = True
                    break
                assert batch is not None
                want = reference("map", 0, False, model.epoch)[model.delivered]
                assert tuple(int(i) for i in batch) == want
                model.delivered += 1
        elif op[0] == "set_epoch":
            if not (model.pending == "resume" and op[1] == model.epoch):
                supersede()
            loader.set_epoch(op[1])
            model.set_epoch(op[1])
        elif op[0] == "save":
            saved = loader.state_dict()
            assert (saved["epoch"], saved["batches_delivered"]) == (model.epoch, model.delivered)
            assert saved["pass_ended"] == model.ended
        elif op[0] == "load" and saved is not None:
            supersede()
            loader.load_state_dict(saved)
            model.load(saved["epoch"], saved["batches_delivered"], saved["pass_ended"])
        elif op[0] == "old" and old:
            with pytest.raises((RuntimeError, StopIteration)):
                next(old[-1])  # a superseded iterator never delivers a batch
        assert (loader.epoch, loader.batches_delivered) == (model.epoch, model.delivered)
    loader.close()


def test_the_resume_of_an_interrupted_pass_after_a_loader_error() -> None:
    """A pass a DataError interrupted goes on at the next ``iter()``, after the failed batch."""

    class Flaky(Dataset[int]):
        bad = 7

        def __len__(self) -> int:
            return N

        def __getitem__(self, i: int) -> int:
            if i == self.bad:
                raise ValueError("corrupt")
            return i

    data = Flaky()
    loader = DataLoaderBuilder().with_dataset(data).with_batch_size(BATCH).compile().build()
    got: list[int] = []

    def read() -> None:
        for batch in loader:
            got.extend(batch.tolist())

    with pytest.raises(DataError, match="corrupt"):
        read()
    data.bad = -1
    read()  # continues the interrupted pass after the failed batch (consumed, as in torch)
    failed = 7 // BATCH
    assert got == [i for i in range(N) if i // BATCH != failed]
    assert torch.equal(next(iter(loader)), torch.arange(BATCH))  # then epoch 1


# -- forgetting with_distributed() under torchrun --------------------------------------------


@pytest.mark.parametrize("kind", ["map", "stream"])
def test_an_unsharded_plan_on_one_of_several_ranks_is_refused(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    plan = make_plan(kind, 0, False)
    with pytest.raises(PlanError) as error:
        plan.build()
    problem = error.value.problems[0]
    assert problem.path == "distributed"
    assert "one of 2 ranks (WORLD_SIZE=2" in problem.message
    assert ".with_distributed()" in problem.message
    assert ".with_distributed(world_size=1, rank=0)" in problem.message
    sharded = plan.to_builder().with_distributed().compile().build()
    assert (sharded.rank, sharded.world_size) == (1, 2)
    assert "RANK/WORLD_SIZE environment" in sharded.explain()
    whole = plan.to_builder().with_distributed(world_size=1, rank=0).compile().build()
    assert sorted(i for batch in ids(whole) for i in batch) == list(range(N))  # on purpose
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert sorted(i for batch in ids(plan.build()) for i in batch) == list(range(N))


# -- an IterableDataset that splits itself by get_worker_info() --------------------------------


class SelfSplit(IterableDataset[int]):
    """torch's documented pattern: each worker yields its contiguous block of 0 .. n-1."""

    def __init__(self, n: int, flag: bool | None = None) -> None:
        self.n = n
        if flag is not None:
            self.splits_by_worker = flag

    def __iter__(self) -> Iterator[int]:
        return worker_block(self.n)


def split_plan(data: IterableDataset[int], workers: int, **distributed: int) -> LoaderPlan:
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(3)
    if workers:
        builder = builder.with_workers(workers, start_method="fork")
    if distributed:
        builder = builder.with_distributed(**distributed)
    return builder.compile()


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_a_self_splitting_stream_is_never_half_read(workers: int) -> None:
    with split_plan(SelfSplit(20), workers).build() as loader:
        if workers < 2:  # one stream per process: the whole stream, read by element
            assert sorted(i for batch in ids(loader) for i in batch) == list(range(20))
            return
        iterator = iter(loader)
        with pytest.raises(DataError, match="different stream in each worker") as error:
            next(iterator)  # refused before the first batch: nothing partial was delivered
        assert loader.batches_delivered == 0
    message = str(error.value)
    assert "splits_by_worker = True" in message
    assert "get_worker_info" in message


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_splits_by_worker_takes_each_workers_stream_whole(workers: int) -> None:
    plan = split_plan(SelfSplit(20, flag=True), workers)
    with plan.build() as loader:
        assert "splits_by_worker = True" in loader.explain()
        epoch = ids(loader)
        again = ids(loader)
    assert sorted(i for batch in epoch for i in batch) == list(range(20))  # each element once
    assert again == epoch  # no shuffle: every pass the same
    cut = 3
    with plan.build() as loader:
        iterator = iter(loader)
        head = ids(itertools.islice(iterator, cut))
        state = json.loads(json.dumps(loader.state_dict()))
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        assert head + ids(resumed) == epoch  # a resume replays each worker's own stream


@pytest.mark.parametrize("workers", [0, 2])
def test_splits_by_worker_across_ranks_reads_each_element_once(workers: int) -> None:
    seen: list[int] = []
    for rank in range(2):
        plan = split_plan(SelfSplit(21, flag=True), workers, world_size=2, rank=rank)
        with plan.build() as loader:
            seen += [i for batch in ids(loader) for i in batch]
    assert sorted(seen) == list(range(21))


def test_splits_by_worker_must_be_a_bool_and_false_skips_the_check() -> None:
    with pytest.raises(PlanError, match="splits_by_worker must be True"):
        split_plan(SelfSplit(20, flag="yes"), 2).build()  # type: ignore[arg-type]
    whole = Stream()
    whole.splits_by_worker = False  # type: ignore[attr-defined]
    with split_plan(whole, 2).build() as loader:
        assert not loader.compares_streams
        assert sorted(i for batch in ids(loader) for i in batch) == list(range(N))
    with split_plan(Stream(), 2).build() as loader:
        assert loader.compares_streams  # a whole stream passes the check
        assert sorted(i for batch in ids(loader) for i in batch) == list(range(N))


# -- states written by the previous version (same STATE_VERSION, read compatibly) ---------------


def test_a_previous_versions_end_of_epoch_state_starts_the_next_epoch(
    config: tuple[str, int, bool],
) -> None:
    """Before issue 14 a complete epoch was saved as (epoch + 1, 0), without pass_complete."""
    plan = make_plan(*config)
    with plan.build() as loader:
        state = loader.state_dict()  # a fresh loader: (0, 0), the format's every key
    old = dict(state, epoch=1, batches_delivered=0)
    if "worker_batches" in old:  # a StreamLoader's state, as the previous version wrote it
        old.pop("pass_complete")
        old.update(worker_batches=[0] * len(old["worker_batches"]), next_worker=0)
        old["worker_states"] = [None] * len(old["worker_batches"])
    with plan.build() as resumed:
        resumed.load_state_dict(old)
        assert ids(resumed) == reference(*config, 1)  # the whole next epoch, as before
        assert ids(resumed) == reference(*config, 2)


class StatefulSplit(SelfSplit):
    """A self-splitting stream with HF's state contract (the position in this process)."""

    def __init__(self, n: int) -> None:
        super().__init__(n, flag=True)
        self.read = 0
        self.start = 0

    def __iter__(self) -> Iterator[int]:
        block = list(super().__iter__())
        start, self.start = self.start, 0
        self.read = start
        for x in block[start:]:
            self.read += 1
            yield x

    def state_dict(self) -> dict[str, int]:
        return {"read": self.read}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.start = state["read"]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("world", [1, 2])
def test_a_stateful_self_splitting_stream_resumes_from_its_own_state(
    workers: int, world: int
) -> None:
    for rank in range(world):
        ranked = {"world_size": world, "rank": rank} if world > 1 else {}
        plan = split_plan(StatefulSplit(23), workers, **ranked)
        with plan.build() as loader:
            assert loader.resume_native
            whole = ids(loader)
        for cut in range(1, len(whole)):
            with plan.build() as loader:
                iterator = iter(loader)
                head = ids(itertools.islice(iterator, cut))
                state = json.loads(json.dumps(loader.state_dict()))
            assert any(s is not None for s in state["worker_states"])
            with plan.build() as resumed:
                resumed.load_state_dict(state)
                assert head + ids(resumed) == whole, (rank, cut)
