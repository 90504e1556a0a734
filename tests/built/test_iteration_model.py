"""Issue 15: random interleavings of the iteration surface against a model of the cursor.

A hypothesis state machine drives a ``Loader`` (map-style) and a ``StreamLoader`` with 0
and 2 workers through any interleaving of ``iter(loader)``, ``next(it)`` on any iterator
still held, abandoning an iterator (``break``), ``state_dict()``, ``load_state_dict(saved)``
of any state saved before, ``set_epoch(e)``, ``close()`` (then iterating again) and (map-style,
without workers) samples that start or stop failing to load. A pure model written from the rule in
docs/loader.md ("Iteration: passes and epochs") and its "Dying workers and timeouts" says
what each call must do:

- a pass starts at an iterator's first ``next()``: after ``load_state_dict(s)``, at the
  state's position (``set_epoch`` with the state's own epoch keeps it), or, for a state taken
  after its pass's iterator raised ``StopIteration`` (``pass_ended``), the next epoch from its
  first batch, as after the saving loader's own loop; else after
  ``set_epoch(e)``, epoch ``e`` from its first batch; else the epoch after the last pass
  started, from its first batch; each of them for one pass;
- the pass then delivers its epoch's batches from there, then ``StopIteration``; a batch
  holding a sample that fails raises ``DataError`` (the error policy is "raise") and ends
  the pass, which the next pass resumes at that batch (like a pending ``load_state_dict``:
  ``set_epoch`` with its own epoch keeps it);
- starting a pass, ``set_epoch``, ``load_state_dict`` and ``close`` supersede the iterator
  of the open pass (``close`` moves nothing else: like a ``break``): its next ``next()``
  raises ``RuntimeError`` and takes nothing; an iterator never advanced is not a pass and is
  superseded by nothing; an iterator whose pass ended, or that raised that ``RuntimeError``
  once, is finished (``StopIteration``); a superseded pass that had delivered its last batch
  may also just end;
- ``epoch`` / ``batches_delivered`` and ``state_dict()`` report the current (or last) pass,
  or after ``set_epoch`` / ``load_state_dict`` the one the next pass starts from.

The expected batches come from an uninterrupted reference, never from the loader under test:
a fresh loader per epoch, ``set_epoch(e)`` and one whole pass (0 workers for the map order,
which does not depend on the workers; the same worker count for a stream, whose shards do).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from torch.utils.data import Dataset, IterableDataset

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan

pytestmark = pytest.mark.timeout(300)

N = 14
BATCH = 3
EPOCHS = 4  # set_epoch draws 0 .. EPOCHS - 1; passes by rule 3 may go further
MAX_ITERATORS = 4
MAX_SAVED = 4

Batch = tuple[int, ...]


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


BAD: set[int] = set()
"""Samples that fail to load now (the main process only: the machines with workers keep it
empty, their workers could not see it change)."""


def guarded(sample: int) -> int:
    """The transform: a sample in :data:`BAD` fails, as a corrupt record would."""
    if sample in BAD:
        raise ValueError(f"corrupt record {sample}")
    return sample


def make_plan(kind: str, workers: int) -> LoaderPlan:
    builder = DataLoaderBuilder().with_batch_size(BATCH).with_seed(5).with_transform(guarded)
    if kind == "map":
        builder = builder.with_dataset(Indices()).with_shuffle()
    else:
        builder = builder.with_dataset(Stream()).with_shuffle(buffer_size=5)
    if workers:
        builder = builder.with_workers(workers, start_method="fork")
    return builder.compile()


_REFERENCE: dict[tuple[str, int], list[list[Batch]]] = {}


def reference(kind: str, workers: int, epoch: int) -> list[Batch]:
    """Epoch ``epoch`` read whole by a fresh loader: the uninterrupted run."""
    workers = workers if kind == "stream" else 0  # the map order is worker-invariant
    epochs = _REFERENCE.setdefault((kind, workers), [])
    bad = set(BAD)
    BAD.clear()  # the uninterrupted run reads every sample
    try:
        while len(epochs) <= epoch:
            with make_plan(kind, workers).build() as loader:
                loader.set_epoch(len(epochs))
                epochs.append([tuple(int(i) for i in batch) for batch in loader])
    finally:
        BAD.update(bad)
    return epochs[epoch]


# -- the model ---------------------------------------------------------------------------------


@dataclass
class Handle:
    """An iterator the test holds, and what the model says it is."""

    iterator: Iterator[Any]
    # "unstarted", "open" (the current pass), "ended", "superseded", "superseded-complete"
    status: str = "unstarted"


class Cursor:
    """The documented rule as a pure model: no loader, only the reference batches."""

    def __init__(self, kind: str, workers: int) -> None:
        self.kind, self.workers = kind, workers
        self.epoch, self.delivered = 0, 0
        self.pending = "set"  # how the next pass starts: "set" (epoch 0 first), "next", "resume"
        self.ended = False  # the last pass's iterator raised StopIteration (state: pass_ended)
        self.open: Handle | None = None  # the iterator of the open pass

    def batches(self, epoch: int) -> list[Batch]:
        return reference(self.kind, self.workers, epoch)

    def supersede(self) -> None:
        if self.open is not None:
            complete = self.delivered >= len(self.batches(self.epoch))
            # a pass that delivered its last batch has nothing left to interleave: its
            # iterator may end (StopIteration) or raise like any superseded one
            self.open.status = "superseded-complete" if complete else "superseded"
            self.open = None

    def start(self, handle: Handle) -> None:
        """``handle``'s first ``next()``: a new pass by the rule."""
        self.supersede()
        if self.pending == "next":
            self.epoch, self.delivered = self.epoch + 1, 0
        elif self.pending == "set":
            self.delivered = 0
        self.pending = "next"
        self.ended = False
        handle.status, self.open = "open", handle

    def take(self, handle: Handle) -> Batch | None:
        """The batch ``next()`` on the open pass delivers (``None``: the pass ends)."""
        assert handle is self.open
        if self.pending == "resume":  # the caller goes on after a failed batch
            self.pending = "next"
        batches = self.batches(self.epoch)
        if self.delivered >= len(batches):
            handle.status, self.open = "ended", None
            self.ended = True  # a state taken now resumes with the next epoch, whole
            return None
        self.delivered += 1
        return batches[self.delivered - 1]

    def fail(self, handle: Handle) -> None:
        """The open pass's next batch failed: it is consumed (as in torch) and the pass goes on.

        ``next()`` on the same iterator delivers the batch after it; a new pass (``iter()``)
        resumes the interrupted one after it too.
        """
        assert handle is self.open
        self.delivered += 1
        self.pending = "resume"

    def set_epoch(self, epoch: int) -> None:
        if self.pending == "resume" and epoch == self.epoch:
            return  # the HF Trainer habit: the resume is kept
        self.supersede()
        self.epoch, self.delivered, self.pending = epoch, 0, "set"
        self.ended = False

    def load(self, epoch: int, delivered: int, ended: bool) -> None:
        """As the saving loader stood: after its loop ended the next pass is the next epoch."""
        self.supersede()
        self.epoch, self.delivered = epoch, delivered
        self.pending, self.ended = ("next" if ended else "resume"), ended


# -- the machine -------------------------------------------------------------------------------


class IterationMachine(RuleBasedStateMachine):
    kind = "map"
    workers = 0

    def __init__(self) -> None:
        super().__init__()
        BAD.clear()
        self.loader = make_plan(self.kind, self.workers).build()
        self.model = Cursor(self.kind, self.workers)
        self.handles: list[Handle] = []
        self.saved: list[dict[str, Any]] = []

    @precondition(lambda self: len(self.handles) < MAX_ITERATORS)
    @rule()
    def new_iterator(self) -> None:
        self.handles.append(Handle(iter(self.loader)))

    @rule(which=st.integers(0, MAX_ITERATORS), steps=st.integers(1, 3))
    def advance(self, which: int, steps: int) -> None:
        """``next()`` ``steps`` times on a held iterator, or on a new one (``for b in loader``).

        (No precondition: hypothesis' swarm testing often disables ``new_iterator``, and the
        passes must still start often.)
        """
        if which == MAX_ITERATORS or not self.handles:
            if len(self.handles) == MAX_ITERATORS:
                self.handles.pop(0)
            self.handles.append(Handle(iter(self.loader)))
            which = len(self.handles) - 1
        handle = self.handles[which % len(self.handles)]
        for _ in range(steps):
            if handle.status == "superseded":
                with pytest.raises(RuntimeError, match="superseded"):
                    next(handle.iterator)
                # it took nothing (the invariant checks the position), and like any iterator
                # that raised it is finished: the next use ends it (StopIteration)
                handle.status = "ended"
                return
            if handle.status == "superseded-complete":
                with pytest.raises((StopIteration, RuntimeError)):
                    next(handle.iterator)
                handle.status = "ended"
                return
            if handle.status == "ended":
                with pytest.raises(StopIteration):
                    next(handle.iterator)
                return
            if handle.status == "unstarted":
                self.model.start(handle)
            batches = self.model.batches(self.model.epoch)
            if self.model.delivered < len(batches) and BAD & set(batches[self.model.delivered]):
                with pytest.raises(DataError, match="corrupt record"):
                    next(handle.iterator)
                self.model.fail(handle)
                return
            want = self.model.take(handle)
            got = next(handle.iterator, None)
            if want is None:
                assert got is None, f"the pass of epoch {self.model.epoch} should have ended"
                return
            assert got is not None, f"epoch {self.model.epoch} ended early"
            assert tuple(int(i) for i in got) == want, (
                f"batch {self.model.delivered - 1} of epoch {self.model.epoch}"
            )

    @precondition(lambda self: bool(self.handles))
    @rule(which=st.integers(0, MAX_ITERATORS - 1))
    def abandon(self, which: int) -> None:
        """``break`` out of a loop and drop the iterator: the position stays."""
        handle = self.handles.pop(which % len(self.handles))
        if handle is self.model.open:
            self.model.open = None  # the pass stays the last one; nothing reads it any more
        del handle
        gc.collect()  # finalize it now, so that nothing it does lands in a later step

    @rule()
    def save(self) -> None:
        state = json.loads(json.dumps(self.loader.state_dict()))
        position = (state["epoch"], state["batches_delivered"])
        assert position == (self.model.epoch, self.model.delivered)
        assert state["pass_ended"] == self.model.ended
        if self.kind == "stream" and self.model.pending == "set":
            assert not state["pass_complete"]  # no pass of that position ran yet
        if len(self.saved) < MAX_SAVED:
            self.saved.append(state)

    @precondition(lambda self: bool(self.saved))
    @rule(which=st.integers(0, MAX_SAVED - 1))
    def load(self, which: int) -> None:
        state = self.saved[which % len(self.saved)]
        self.loader.load_state_dict(state)
        self.model.load(state["epoch"], state["batches_delivered"], state["pass_ended"])
        assert self.loader.state_dict() == state  # load, then save, gives the state back

    @rule(epoch=st.integers(0, EPOCHS - 1))
    def set_epoch(self, epoch: int) -> None:
        self.loader.set_epoch(epoch)
        self.model.set_epoch(epoch)

    @precondition(lambda self: self.workers == 0 and self.kind == "map")
    @rule(sample=st.integers(0, N - 1))
    def corrupt(self, sample: int) -> None:
        """Sample ``sample`` fails to load from now on (until ``repair``).

        Map-style only: a stream reads (and transforms) elements ahead into its shuffle
        buffer, so the batch where a failure surfaces is not the one that holds the sample.
        """
        BAD.add(sample)

    @precondition(lambda self: bool(BAD))
    @rule()
    def repair(self) -> None:
        BAD.clear()

    @rule()
    def close(self) -> None:
        """Workers stop; like a ``break``: the position stays, the open pass is superseded."""
        self.loader.close()
        self.model.supersede()

    @invariant()
    def the_position_is_the_models(self) -> None:
        got = (self.loader.epoch, self.loader.batches_delivered)
        assert got == (self.model.epoch, self.model.delivered)

    def teardown(self) -> None:
        BAD.clear()
        self.handles.clear()
        self.loader.close()


def machine(kind: str, workers: int, share: int, steps: int) -> Any:
    """The machine for one configuration, as a unittest ``TestCase`` pytest collects.

    It runs ``1 / share`` of the profile's examples (ci: 40, bounded for 2 cores; the
    ``thorough`` profile of ``nox -s slow``: 1000), of at most ``steps`` steps each.
    """
    cls = type(f"Iteration_{kind}_w{workers}", (IterationMachine,), {})
    cls.kind, cls.workers = kind, workers
    case = cls.TestCase
    case.settings = settings(
        settings.default,
        max_examples=max(settings.default.max_examples // share, 1),
        stateful_step_count=steps,
    )
    return case


TestMapNoWorkers = machine("map", 0, share=1, steps=30)
TestStreamNoWorkers = machine("stream", 0, share=1, steps=30)
TestMapTwoWorkers = machine("map", 2, share=3, steps=25)
TestStreamTwoWorkers = machine("stream", 2, share=3, steps=25)
