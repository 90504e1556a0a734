"""One pass of a :class:`~loaderkit.runtime.loader.Loader`: what ``iter(loader)`` returns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from loaderkit.errors import DataError, WorkerError
from loaderkit.runtime.records import NO_BATCH, Raised

if TYPE_CHECKING:
    from loaderkit.checks import BatchChecker
    from loaderkit.runtime.passes.cursor import PassCursor, PassStart
    from loaderkit.runtime.passes.skips import SkipLedger

__all__ = ["LoaderPass", "MapPassParts"]


class MapPassParts(NamedTuple):
    """What a map-style pass works with, handed over by its loader."""

    cursor: PassCursor
    ledger: SkipLedger
    begin: Callable[[], tuple[PassStart, Iterator[Any]]]
    """Start the loader's pending pass: where it starts, and its batches on the device."""
    finish: Callable[[Any], Any] | None
    """The collator's ``on_device`` step, or ``None``."""
    checks: BatchChecker | None
    batch_indices: Callable[[int, int], list[int]]


class LoaderPass:
    """What ``iter(loader)`` returns: one pass of a ``Loader``, started by its first next.

    An iterator object rather than a generator, so that a :class:`DataError` (raise policy)
    can leave ``next()`` while the pass goes on: the next ``next()`` delivers the batch after
    the failed one, as a torch ``DataLoader`` iterator does, and the failed batch counts as
    consumed in the loader's position. A :class:`WorkerError` (the pool is broken) or any
    other exception ends the pass. A superseded pass raises ``RuntimeError`` once, and ends.
    """

    def __init__(self, parts: MapPassParts) -> None:
        self._parts: MapPassParts | None = parts  # let go when the pass ends, as a generator
        self._batches: Iterator[Any] | None = None  # made by the first next()
        self._start: PassStart | None = None
        self._failed = False  # the last next() raised a DataError

    def __iter__(self) -> LoaderPass:
        return self

    def __next__(self) -> Any:
        parts = self._parts
        if parts is None:
            raise StopIteration
        if self._batches is None or self._start is None:
            self._start, self._batches = parts.begin()
        try:
            parts.cursor.superseded(self._start.generation)
        except RuntimeError:
            self.close()  # it raised, so it ended: it takes nothing from the newer pass
            raise
        if self._failed:  # the caller goes on after the error: the pass is no longer to resume
            self._failed = False
            parts.cursor.went_on(self._start.moves)
        return self._next_batch(parts, self._start, self._batches)

    def _next_batch(self, parts: MapPassParts, start: PassStart, batches: Iterator[Any]) -> Any:
        cursor, finish, checks = parts.cursor, parts.finish, parts.checks
        while True:
            try:
                batch = next(batches)
            except WorkerError:
                self.close()
                cursor.interrupted(start.moves)
                raise
            except StopIteration:  # the pass is over: a state taken now resumes the next epoch
                self.close()
                cursor.end(start.moves)
                raise
            except BaseException:
                self.close()
                raise
            try:  # the skip policy's counts, as the batch is delivered
                batch = parts.ledger.settle(batch, cursor.epoch, cursor.delivered == 0)
            except DataError:  # its budget is spent: this batch is neither delivered nor counted
                self.close()
                cursor.interrupted(start.moves)
                raise
            index = cursor.deliver()  # a failed batch counts as consumed, as in torch
            if isinstance(batch, Raised):
                self._fail(cursor, start)
                raise batch.error
            if batch is NO_BATCH:  # every sample of this batch was skipped
                continue
            try:
                if finish is not None:
                    batch = finish(batch)
                if checks is not None and checks.due(index, first=index == start.start):
                    checks.run(batch, start.epoch, index, parts.batch_indices)
            except DataError:
                self._fail(cursor, start)
                raise
            except BaseException:
                cursor.take_back(index)  # not delivered; the pass ends here, as before
                self.close()
                raise
            return batch

    def _fail(self, cursor: PassCursor, start: PassStart) -> None:
        """The batch delivered last failed (and is consumed): a new pass goes on after it."""
        self._failed = True
        cursor.interrupted(start.moves)

    def _release(self) -> None:
        batches, self._batches = self._batches, None
        close = getattr(batches, "close", None)
        if close is not None:
            close()  # non-persistent workers of this pass go with it

    def close(self) -> None:
        """End the pass: ``next()`` raises ``StopIteration`` from now on.

        The loader's position stays where the pass was; with non-persistent workers, the
        pass's workers are shut down (persistent ones live as long as the loader).
        """
        self._parts = None
        if self._batches is not None:
            self._release()
