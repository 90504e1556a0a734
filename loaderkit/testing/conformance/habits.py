"""The habits of training code the docs list, as data.

Each is a script the conformance suite runs on the three loaders, and the differences it must
show (keys of :data:`~loaderkit.testing.conformance.differences.DIFFERENCES`).
"""

from __future__ import annotations

import attrs

__all__ = ["HABITS", "Habit"]


@attrs.frozen
class Habit:
    """A habit of training code, run by the suite on the three loaders, and its outcome."""

    habit: str
    """What the program does (Markdown)."""
    script: tuple[str, ...]
    """The suite's steps: ``iter``; ``next`` (on the newest iterator held), ``next*`` (to the
    end of its loop), ``next@k`` (on the ``k``-th iterator made); ``break`` (let go of the
    newest iterator); ``set_epoch:e``; ``save`` (``state_dict()``); ``load`` (the latest state,
    into fresh loaders); ``corrupt:i`` (sample ``i`` fails to load from then on); ``repair``."""
    reference: str
    """What torch's ``DataLoader`` and torchdata's ``StatefulDataLoader`` do."""
    loaderkit: str
    """What loaderkit's loader does."""
    configs: tuple[str, ...]
    """The configurations it runs on (the suite's names: dataset, order, workers)."""
    differences: tuple[str, ...] = ()
    """The keys of the :data:`~loaderkit.testing.conformance.DIFFERENCES` it shows (exactly
    those); none: loaderkit does what the reference loaders do."""


_MAP = "map, 0 workers"
_SHUFFLED = "map, shuffled, 0 workers"
_STREAM = "stream, 0 workers"
_SHUFFLED_W2 = "map, shuffled, 2 workers"
_SHUFFLED_W2P = "map, shuffled, 2 workers, persistent"
_STREAM_W2 = "stream, 2 workers"
_CHANGING = "changing stream, 0 workers"
_CHANGING_W2 = "changing stream, 2 workers"
_CHANGING_W2P = "changing stream, 2 workers, persistent"
_RESUME = ("iter", "next", "next", "save", "break", "load")
"""Two batches of a pass, a state, and fresh loaders it is loaded into."""

HABITS: tuple[Habit, ...] = (
    Habit(
        habit="`next(iter(loader))` to peek, then `for batch in loader:`",
        script=("iter", "next", "break", "iter", "next*"),
        reference="the loop is a new pass, whole (a new order when shuffled)",
        loaderkit="the loop is the next epoch, whole",
        configs=(_SHUFFLED, _STREAM, _SHUFFLED_W2P),
    ),
    Habit(
        habit="`break` out of a loop, then a new loop",
        script=("iter", "next", "next", "break", "iter", "next*"),
        reference="a new pass, whole",
        loaderkit="the next epoch, whole",
        configs=(_SHUFFLED, _STREAM, _SHUFFLED_W2),
    ),
    Habit(
        habit="`for epoch in range(3): for batch in loader:`",
        script=("iter", "next*", "break") * 3,
        reference="three whole passes, in three orders",
        loaderkit="epochs 0, 1 and 2, each whole",
        configs=(_SHUFFLED, _SHUFFLED_W2P),
    ),
    Habit(
        habit="the same, each pass cut short after 2 batches (Lightning's `limit_train_batches=2`)",
        script=("iter", "next", "next", "break") * 3,
        reference="the first 2 batches of three orders",
        loaderkit="the first 2 batches of epochs 0, 1 and 2",
        configs=(_SHUFFLED, _SHUFFLED_W2P),
    ),
    Habit(
        habit="`it = iter(loader)`, `next(it)`, then `for batch in it:`",
        script=("iter", "next", "next*"),
        reference="the loop continues the pass",
        loaderkit="the loop continues the pass",
        configs=(_SHUFFLED, _STREAM),
    ),
    Habit(
        habit="`iter(loader)` never advanced (Lightning's check that a loader is iterable), "
        "then a loop",
        script=("iter", "break", "iter", "next*"),
        reference="the loop is a whole pass",
        loaderkit="the loop is epoch 0, whole: a pass starts at its iterator's first `next()`",
        configs=(_SHUFFLED, _SHUFFLED_W2P),
    ),
    Habit(
        habit="`loader.set_epoch(e)` before each pass (DDP, HF Trainer, Accelerate), with "
        "epochs 0, 1, then 0 again",
        script=(
            *("set_epoch:0", "iter", "next*", "break"),
            *("set_epoch:1", "iter", "next*", "break"),
            *("set_epoch:0", "iter", "next*", "break"),
        ),
        reference="no `set_epoch` on the loader or its `RandomSampler`: three passes, three orders",
        loaderkit="the third pass is epoch 0 again, in the order of the first",
        configs=(_SHUFFLED,),
        differences=("set_epoch",),
    ),
    Habit(
        habit="`set_epoch(e)` inside a loop, then the loop goes on",
        script=("iter", "next", "set_epoch:1", "next"),
        reference="the loop goes on",
        loaderkit="`RuntimeError`: the loop's iterator was superseded",
        configs=(_SHUFFLED, _STREAM, _SHUFFLED_W2P),
        differences=("set_epoch during a loop",),
    ),
    Habit(
        habit="`it = iter(loader)`, `next(it)`, a loop over `loader` for 2 batches, then "
        "`next(it)`",
        script=("iter", "next", "iter", "next", "next", "next@1"),
        reference="`it` goes on with its own pass; with persistent workers `it` is the loop's "
        "iterator, reset to the loop's pass, and `next(it)` takes the loop's next batch",
        loaderkit="`RuntimeError` from `next(it)`: the loop's pass superseded it",
        configs=(_SHUFFLED, _STREAM, _SHUFFLED_W2, _SHUFFLED_W2P),
        differences=("a superseded iterator", "several iterators with persistent workers"),
    ),
    Habit(
        habit="`state_dict()` inside a loop, `load_state_dict` into a fresh loader, two loops",
        script=(*_RESUME, "iter", "next*", "break", "iter", "next*"),
        reference="(torchdata) the rest of the pass, then the next epoch, whole",
        loaderkit="the rest of the pass, then the next epoch, whole",
        configs=(_SHUFFLED, _STREAM, _SHUFFLED_W2),
    ),
    Habit(
        habit="the same, with the state taken at the pass's last batch, inside the loop",
        script=("iter", *("next",) * 5, "save", "load", "iter", "next*", "break", "iter", "next*"),
        reference="(torchdata) an empty pass, then the next epoch, whole",
        loaderkit="an empty pass, then the next epoch, whole",
        configs=(_SHUFFLED, _STREAM),
    ),
    Habit(
        habit="the same, with the state taken after the loop (`StopIteration`)",
        script=("iter", "next*", "save", "break", "load", "iter", "next*"),
        reference="(torchdata) the next epoch, whole",
        loaderkit="the next epoch, whole",
        configs=(_SHUFFLED, _STREAM),
    ),
    Habit(
        habit="the same, with the state taken before the first loop",
        script=("save", "load", "iter", "next*"),
        reference="(torchdata) the first epoch, whole",
        loaderkit="epoch 0, whole",
        configs=(_SHUFFLED, _STREAM),
    ),
    Habit(
        habit="a resume, then `set_epoch` with the state's epoch before the loop (HF Trainer, "
        "Accelerate)",
        script=(*_RESUME, "set_epoch:0", "iter", "next*"),
        reference="(torchdata, which has no `set_epoch`) the rest of the state's pass",
        loaderkit="the rest of the state's pass: the resume is kept",
        configs=(_SHUFFLED, _STREAM),
    ),
    Habit(
        habit="a resume, then `set_epoch` with another epoch",
        script=(*_RESUME, "set_epoch:3", "iter", "next*"),
        reference="(torchdata) the rest of the state's pass",
        loaderkit="epoch 3 from its first batch",
        configs=(_SHUFFLED, _STREAM),
        differences=("set_epoch after a load",),
    ),
    Habit(
        habit="`set_epoch(e)` after a loop, `state_dict()`, then a resume",
        script=("iter", "next", "next", "break", "set_epoch:2", "save", "load", "iter", "next*"),
        reference="(torchdata) the rest of the broken pass",
        loaderkit="epoch 2 from its first batch",
        configs=(_SHUFFLED, _STREAM),
        differences=("a state taken after set_epoch",),
    ),
    Habit(
        habit="`break` out of a loop, `it = iter(loader)`, `state_dict()` before `next(it)`, "
        "then a resume",
        script=("iter", "next", "next", "break", "iter", "save", "load", "iter", "next*"),
        reference="(torchdata) a new pass, whole",
        loaderkit="the rest of the broken pass",
        configs=(_SHUFFLED, _STREAM),
        differences=("a state taken before the pass's first next()",),
    ),
    Habit(
        habit="a resume, an `iter(loader)` never advanced (Lightning's check), then a loop",
        script=(*_RESUME, "iter", "break", "iter", "next*"),
        reference="(torchdata) a new pass, whole: the check took the resume",
        loaderkit="the rest of the state's pass",
        configs=(_SHUFFLED, _STREAM),
        differences=("an unadvanced iter() after a load",),
    ),
    Habit(
        habit="a resume into a loader with another `num_workers` (0 and 2)",
        script=(*_RESUME[:-1], "load:2", "iter", "next*", "break", "iter", "next*"),
        reference="(torchdata) `AssertionError` from `iter()`",
        loaderkit="the rest of the pass, then the next epoch, whole",
        configs=(_SHUFFLED,),
        differences=("a state loaded with another num_workers",),
    ),
    Habit(
        habit="`next(it)` raises `DataError` (a sample fails to load), then `next(it)` again",
        script=("corrupt:7", "iter", "next", "next", "next*"),
        reference="the dataset's exception (`ValueError`); then the next batch: only the failed "
        "one is lost",
        loaderkit="`DataError`, which is also a `ValueError`; then the next batch",
        configs=(_MAP,),
    ),
    Habit(
        habit="a loop stopped by that error, then a new loop",
        script=("corrupt:7", "iter", "next", "next", "break", "repair", "iter", "next*"),
        reference="a new pass, whole",
        loaderkit="the rest of the interrupted pass, after the failed batch",
        configs=(_MAP,),
        differences=("a loop restarted after a DataError",),
    ),
    Habit(
        habit="`state_dict()` after that error, then a resume",
        script=("corrupt:7", *_RESUME[:4], "repair", *_RESUME[4:], "iter", "next*"),
        reference="(torchdata) the rest of the pass, after the failed batch",
        loaderkit="the rest of the pass, after the failed batch",
        configs=(_MAP,),
    ),
    Habit(
        habit="an `IterableDataset` that splits itself by `get_worker_info()` and says so "
        "(`splits_by_worker = True`), `num_workers=2`, two loops",
        script=("iter", "next*", "break", "iter", "next*"),
        reference="each worker's part, round-robin: the whole stream once",
        loaderkit="the same",
        configs=(_STREAM_W2,),
    ),
    Habit(
        habit="the same without `splits_by_worker`",
        script=("iter", "next*"),
        reference="the whole stream once",
        loaderkit="`DataError` before the first batch",
        configs=("unsaid split stream, 2 workers",),
        differences=("a stream that splits itself unsaid",),
    ),
    Habit(
        habit="an `IterableDataset` that yields the whole stream in every process, `num_workers=2`",
        script=("iter", "next*"),
        reference="every element twice",
        loaderkit="every element once",
        configs=("whole stream, 2 workers",),
        differences=("a stream read by workers",),
    ),
    Habit(
        habit="an `IterableDataset` whose `__iter__` changes the dataset (`self.epoch += 1` at "
        "its end, its elements tagged with it), three loops",
        script=("iter", "next*", "break") * 3,
        reference="tags 0, 1, 2 with `num_workers=0` and with persistent workers (the object, or "
        "each worker's copy, keeps the change); 0, 0, 0 with workers that are not persistent",
        loaderkit="tags 0, 0, 0 with any workers: each pass reads a copy of the dataset as it "
        "stood when the pass started (the change is logged once)",
        configs=(_CHANGING, _CHANGING_W2, _CHANGING_W2P),
        differences=("a stream that changes itself",),
    ),
    Habit(
        habit="a stream resumed, its state taken again in the resumed pass, then a resume",
        script=(*_RESUME, "iter", "next", "save", "break", "load", "iter", "next*"),
        reference="(torchdata) the last batch only: the batches before it are skipped",
        loaderkit="the rest of the stream",
        configs=(_STREAM,),
        differences=("a stream state taken after a resume",),
    ),
)
"""The habits the docs list, each checked by the suite on its configurations."""
