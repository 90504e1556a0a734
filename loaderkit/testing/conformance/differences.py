"""The differences from torch's and torchdata's loaders, as data.

The situations a difference happens in, and the rows of :data:`DIFFERENCES` (data the
conformance suite checks and the docs show).
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["DIFFERENCES", "SITUATIONS", "Difference", "Gives", "Reference"]

Reference = Literal["torch", "torchdata"]
"""The loaders loaderkit is compared with: torch's ``DataLoader``, torchdata's
``StatefulDataLoader``."""

Gives = Literal[
    "batch", "stop", "RuntimeError", "DataError", "new iterator", "same iterator", "any"
]
"""What a call gives: ``next()`` a batch (or the ``DataError`` of a batch that failed to load:
it is consumed too), ``StopIteration`` or an exception of that type; ``iter()`` a new iterator
or the same iterator as another one the program holds; or anything."""

SITUATIONS: dict[str, str] = {
    "a whole stream in each worker": "the dataset is an ``IterableDataset`` that yields the "
    "whole stream in every process (it does not split itself)",
    "a stream split by worker, unsaid": "the dataset is an ``IterableDataset`` that yields "
    "another part of the stream in each worker (by ``get_worker_info()``) without saying so "
    "(no ``splits_by_worker``)",
    "a stream that changes itself": "the dataset is an ``IterableDataset`` whose ``__iter__`` "
    "changes the dataset (once it yielded its elements it counts the pass: "
    "``self.passes += 1``) and tags each element with that count",
    "state_dict()": "the call is ``state_dict()`` (the others are ``next()`` calls)",
    "iter()": "the call is ``iter(loader)`` while the program holds other iterators",
    "a new pass": "the iterator's first ``next()``",
    "after set_epoch": "``set_epoch`` was called since the last pass started",
    "since set_epoch": "``set_epoch`` was called before, in this run or the one a loaded "
    "state comes from",
    "after an error": "the last ``next()`` of the latest pass raised a ``DataError``",
    "after a load, another iterator made first": "loaders a state was loaded into: the first "
    "iterator made after the load is not the first one advanced, and this pass starts on one "
    "of the two",
    "in a pass started after an error": "the iterator's pass started right after another "
    "pass's ``DataError``",
    "after an unadvanced iter()": "another iterator was made since the last pass started (or "
    "the loader was built or loaded), and never advanced",
    "superseded by a newer pass": "a newer iterator started its pass since this one's started",
    "superseded by set_epoch": "``set_epoch`` was called since this iterator's pass started",
    "after a newer iter()": "``iter()`` was called since this iterator's pass started",
    "resumed": "loaders a state was loaded into, until their second pass starts",
    "resumed before any pass": "... a state taken before any pass",
    "resumed inside a pass": "... a state taken inside a loop (its iterator had not ended)",
    "resumed after the pass ended": "... a state taken after the loop (``StopIteration``)",
    "resumed after a break": "... a state taken after the program let go of the iterator",
    "resumed after an error": "... a state taken after a ``next()`` raised ``DataError``",
    "resumed after set_epoch": "... a state taken after ``set_epoch``, before the pass",
    "resumed with a newer iterator": "... a state taken when the newest iterator was not the "
    "one whose pass started last (e.g. between ``iter()`` and its first ``next()``)",
    "resumed with another worker count": "... a state taken from loaders with another "
    "``num_workers`` than those it was loaded into",
    "resumed after a load": "... a state taken from loaders a state was loaded into, before "
    "their second pass (right after the load, it has that state's facts too)",
}
"""The facts the suite knows about a call, by name, from the calls made before it (and the
dataset). Those of a state (``resumed ...``) hold in the loaders it was loaded into."""


@attrs.frozen
class Difference:
    """One difference: where it happens, what each loader does there, and why."""

    key: str
    """A short name, used by the suite and shown in its failures."""
    habit: str
    """What the program does (Markdown)."""
    torch: str
    """What torch's ``DataLoader`` does ("" when it cannot do that: it has no state)."""
    torchdata: str
    """What torchdata's ``StatefulDataLoader`` does."""
    loaderkit: str
    """What loaderkit's loader does."""
    why: str
    """Why loaderkit does what it does there (on purpose; see also :attr:`reference_bug`)."""
    when: tuple[str, ...]
    """The situation: names of :data:`SITUATIONS` that all hold at the call that differs."""
    loaderkit_gives: Gives
    """What loaderkit's call gives there (the suite checks it)."""
    reference_gives: Gives = "any"
    """What the reference loader's call gives there (the suite checks it)."""
    references: tuple[Reference, ...] = ("torch", "torchdata")
    """The loaders that differ from loaderkit that way."""
    kinds: tuple[Literal["map", "stream"], ...] = ("map", "stream")
    """Map-style datasets (``Loader``), streams (``StreamLoader``), or both."""
    workers: tuple[int, ...] = (0, 2)
    """The worker counts it happens with (the suite runs 0 and 2)."""
    persistent: tuple[bool, ...] = (False, True)
    """With persistent workers, without, or both (moot without workers)."""
    reference_bug: bool = False
    """Whether the reference loader misbehaves there (a bug of it, not a design), where
    loaderkit keeps what a state promises."""
    other_batches: bool = False
    """Whether the batches differ: both loaders go on delivering, and loaderkit delivers
    batches the reference would not, or not ones it would (the data a run trains on differs;
    a call that raises in one of them is loud, not this). The docs mark these rows."""
    only_epoch: bool = False
    """Whether the difference is only in the epoch: the same batch of another shuffled order
    than the suite paired with loaderkit's epoch (a difference in the batch's place is not
    this row's)."""
    renumbers: bool = False
    """Whether loaderkit chose the epoch there (``set_epoch``): an epoch that differs from the
    one the suite paired with the reference's shuffled order is paired anew, and the pass goes
    on being compared."""
    only_tags: bool = False
    """Whether the difference is only in the tags a stream that changes itself put on its
    elements: the same elements at the same place, read from the dataset in another state
    (the pass goes on being compared: its other batches may differ so too, and only so)."""


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        key="set_epoch",
        habit="`set_epoch(e)` before a pass",
        torch="no `set_epoch` (a trainer finds none on the loader or its `RandomSampler`): the "
        "pass is the next shuffled order",
        torchdata="the same as torch",
        loaderkit="the pass is epoch `e`, from its first batch, whatever came before; the "
        "passes after it are epochs `e + 1`, `e + 2`, ...",
        why="the `DistributedSampler` habit on the loader itself: an epoch names an order, the "
        "same on every rank and in every run, so a trainer that calls `set_epoch` before each "
        "pass reads the same epochs after a restart",
        when=("a new pass", "since set_epoch"),
        loaderkit_gives="batch",
        only_epoch=True,
        renumbers=True,
    ),
    Difference(
        key="set_epoch during a loop",
        habit="`set_epoch(e)` inside a loop, then `next()` on its iterator",
        torch="the running pass goes on (the loader and its `RandomSampler` have no `set_epoch`)",
        torchdata="the same as torch",
        loaderkit="`RuntimeError`: `set_epoch` moved the loader to the next pass, which "
        "supersedes the running one",
        why="the loader's position is the next pass's once `set_epoch` said which it is; "
        "reading on in the old pass would deliver batches no state records",
        when=("superseded by set_epoch",),
        loaderkit_gives="RuntimeError",
    ),
    Difference(
        key="a superseded iterator",
        habit="`it = iter(loader)`, `next(it)`, then a new loop over `loader`, then `next(it)`",
        torch="the old iterator goes on with its own pass: two passes interleave",
        torchdata="the same as torch; `state_dict()` follows the newest iterator only",
        loaderkit="`RuntimeError`: the old iterator was superseded when the newer pass started; "
        "it takes nothing from the newer pass",
        why="a loader has one position, the one `state_dict()` records; two interleaved passes "
        "cannot both be in it, so the old one stops loudly rather than read batches no state "
        "can resume",
        when=("superseded by a newer pass",),
        loaderkit_gives="RuntimeError",
        persistent=(False,),
    ),
    Difference(
        key="several iterators with persistent workers",
        habit="with persistent workers: a second `iter(loader)` while a loop runs, or `next()` "
        "on an older iterator",
        torch="every `iter()` returns the same iterator object, reset to a new pass: the running "
        "loop jumps to that pass (its own rest is not read), and `next()` on an older "
        "iterator takes the newest pass's batches from its loop",
        torchdata="the same as torch",
        loaderkit="each `iter()` is an iterator of its own: one never advanced changes nothing, "
        "the running loop goes on; an older one advanced starts its own pass, which "
        "supersedes the running one (`RuntimeError` there)",
        why="a pass belongs to the iterator that started it, with or without persistent "
        "workers: no loop reads another loop's batches or loses its own",
        when=("iter()",),
        loaderkit_gives="new iterator",
        reference_gives="same iterator",
        workers=(2,),
        persistent=(True,),
        other_batches=True,
    ),
    Difference(
        key="a loop restarted after a DataError",
        habit="a `next()` raises (a sample fails to load), the program catches it and starts a "
        "new loop over the loader",
        torch="the new loop is a new pass: the next shuffled order, from its first batch",
        torchdata="the same as torch",
        loaderkit="the new loop continues the interrupted pass after the failed batch (which "
        "counts as consumed); the loop after it is the next epoch",
        why="an error the loader raised interrupts a pass rather than ending it: restarting the "
        "loop (a retry around `for batch in loader`) reads no sample twice and skips none",
        when=("in a pass started after an error",),
        loaderkit_gives="any",
        workers=(0,),
        other_batches=True,
    ),
    Difference(
        key="a state taken after set_epoch",
        habit="`set_epoch(e)`, `state_dict()` before the pass, then a resume",
        torch="",
        torchdata="no `set_epoch`: the state is its iterator's position, which the resume "
        "continues",
        loaderkit="the state is the pass `set_epoch` announced: the resume reads epoch `e` "
        "from its first batch",
        why="a state records what the next `iter()` reads, so a checkpoint taken between "
        "`set_epoch` and the loop resumes the epoch the trainer chose",
        when=("a new pass", "resumed after set_epoch"),
        loaderkit_gives="batch",
        references=("torchdata",),
        other_batches=True,
        renumbers=True,
    ),
    Difference(
        key="set_epoch after a load",
        habit="`load_state_dict(state)`, `set_epoch(e)` with another epoch than the state's, "
        "then a pass",
        torch="",
        torchdata="no `set_epoch`: the pass resumes the state",
        loaderkit="the pass is epoch `e` from its first batch: the resume is replaced (with the "
        "state's own epoch, the resume is kept, as HF Trainer and Accelerate expect)",
        why="`set_epoch` says which epoch the next pass reads, also after a load",
        when=("a new pass", "after set_epoch", "resumed"),
        loaderkit_gives="batch",
        references=("torchdata",),
        other_batches=True,
        renumbers=True,
    ),
    Difference(
        key="a state taken before the pass's first next()",
        habit="`it = iter(loader)`, `state_dict()` before `next(it)`, then a resume",
        torch="",
        torchdata="the state is the new iterator's: its pass from the first batch (the rest of "
        "the previous pass is not read)",
        loaderkit="the state is the previous pass's position (an iterator never advanced changes "
        "nothing): the resume reads the rest of that pass, then the next epoch",
        why="a pass starts at its iterator's first `next()` (so that Lightning's "
        "iterability check costs no epoch); until then the state describes the last pass",
        when=("a new pass", "resumed with a newer iterator"),
        loaderkit_gives="any",
        references=("torchdata",),
        other_batches=True,
    ),
    Difference(
        key="an unadvanced iter() after a load",
        habit="`load_state_dict(state)`, an `iter(loader)` never advanced (Lightning checks "
        "that a loader is iterable so), then a loop",
        torch="",
        torchdata="the first `iter()` after the load takes the resume: the loop is a new pass, "
        "from the first batch of the next order, and the rest of the state's pass is read only "
        "by that first iterator, if it is ever advanced",
        loaderkit="the loop resumes the state: an iterator never advanced changes nothing",
        why="a pass starts at its iterator's first `next()`, so a check that a loader is "
        "iterable costs nothing, after a load too",
        when=("a new pass", "after a load, another iterator made first"),
        loaderkit_gives="any",
        references=("torchdata",),
        other_batches=True,
    ),
    Difference(
        key="a state loaded with another num_workers",
        habit="a state of a loader with `num_workers=0` loaded into one with `num_workers=2` "
        "(or the other way round)",
        torch="",
        torchdata="`AssertionError` from the first `iter()`: its state has another shape for "
        "each worker count",
        loaderkit="the resume reads on as with the state's worker count: workers never change "
        "a batch of a map-style dataset",
        why="a state is the position, (epoch, batches delivered), not the workers' progress",
        when=("a new pass", "resumed with another worker count"),
        loaderkit_gives="any",
        references=("torchdata",),
        kinds=("map",),
    ),
    Difference(
        key="a stream read by workers",
        habit="an `IterableDataset` that yields the whole stream, read by `num_workers=2`",
        torch="each worker yields the whole stream: every element twice (torch's documented "
        "pitfall; the dataset must split itself by `get_worker_info()`)",
        torchdata="the same as torch",
        loaderkit="each element once: element `k` goes to worker `k % num_workers`",
        why="workers must not change what an epoch holds; a dataset that splits itself says "
        "so with `splits_by_worker = True` and is read as torch reads it",
        when=("a whole stream in each worker",),
        loaderkit_gives="any",
        kinds=("stream",),
        workers=(2,),
        other_batches=True,
    ),
    Difference(
        key="a stream that splits itself unsaid",
        habit="an `IterableDataset` that yields another part in each worker "
        "(`get_worker_info()`), read by `num_workers=2`",
        torch="each worker's part, round-robin: the whole stream once",
        torchdata="the same as torch",
        loaderkit="`DataError` before the first batch (the workers' first elements differ): "
        "nothing is delivered until the dataset says `splits_by_worker = True`",
        why="loaderkit shards a stream itself, so a dataset that also splits itself would be "
        "read in part; the check refuses that instead of losing data",
        when=("a stream split by worker, unsaid",),
        loaderkit_gives="DataError",
        kinds=("stream",),
        workers=(2,),
    ),
    Difference(
        key="a stream that changes itself",
        habit="an `IterableDataset` whose `__iter__` changes the dataset (`self.epoch += 1` "
        "once it yielded its elements, which it tags with `self.epoch`), read pass after pass",
        torch="with `num_workers=0` the program's dataset object keeps the change, and with "
        "persistent workers each worker's copy does: the passes read tags 0, 1, 2, ...; "
        "without persistent workers each pass's workers copy the unchanged object: 0, 0, 0",
        torchdata="the same as torch",
        loaderkit="every pass reads the dataset as it stood in the main process when the pass "
        "started, in a copy (with any `num_workers`): tags 0, 0, 0; the change is logged once, "
        "naming the attribute (`epoch: 0 -> 1`)",
        why="the batches must not depend on `num_workers` or persistent workers, and a resume "
        "in a new process (where the dataset is as constructed) must read what the run would "
        "have read; a stream that changes per epoch defines `set_epoch(epoch)`, which loaderkit "
        "calls in the main process before each pass, a resumed one too",
        when=("a stream that changes itself",),
        loaderkit_gives="batch",
        reference_gives="batch",
        kinds=("stream",),
        persistent=(True,),
        other_batches=True,
        only_tags=True,
    ),
    Difference(
        key="a stream state taken after a resume",
        habit="a stream's state loaded, then `state_dict()` taken again in the resumed pass (or "
        "before it), then a resume from that state",
        torch="",
        torchdata="a bug in torchdata 0.11: the batches it fast-forwarded to resume (an "
        "`IterableDataset` without `state_dict`) are counted twice in the new state, so its "
        "resume skips as many batches, or `state_dict()` and `iter()` raise `StopIteration` "
        "past the end",
        loaderkit="the state is the loaded position; its resume reads on from there",
        why="a state records the batches delivered, however the pass was reached",
        when=("resumed", "resumed after a load"),
        loaderkit_gives="any",
        references=("torchdata",),
        kinds=("stream",),
        other_batches=True,
        reference_bug=True,
    ),
)
"""The differences, in the order the docs show them. The suite explains a difference by the
applicable row with the most facts in :attr:`~Difference.when` (the first of those)."""
