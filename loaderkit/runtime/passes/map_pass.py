"""One pass of a :class:`~loaderkit.runtime.loader.Loader`: what ``iter(loader)`` returns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.errors import DataError, WorkerError
from loaderkit.runtime.passes import gradient_state
from loaderkit.runtime.records import NO_BATCH, Raised

if TYPE_CHECKING:
    from loaderkit.runtime.loader import Loader

__all__ = ["LoaderPass"]


class LoaderPass:
    """What ``iter(loader)`` returns: one pass of a ``Loader``, started by its first next.

    An iterator object rather than a generator, so that a :class:`DataError` (raise policy)
    can leave ``next()`` while the pass goes on: the next ``next()`` delivers the batch after
    the failed one, as a torch ``DataLoader`` iterator does, and the failed batch counts as
    consumed in the loader's position. A :class:`WorkerError` (the pool is broken) or any
    other exception ends the pass. A superseded pass raises ``RuntimeError`` once, and ends.
    """

    def __init__(self, loader: Loader) -> None:
        self._loader: Loader | None = loader  # let go when the pass ends, as a generator does
        self._batches: Iterator[Any] | None = None  # made by the first next()
        self._epoch = 0
        self._start = 0
        self._generation = 0
        self._moves = 0
        self._failed = False  # the last next() raised a DataError

    def __iter__(self) -> LoaderPass:
        return self

    def __next__(self) -> Any:
        loader = self._loader
        if loader is None:
            raise StopIteration
        if self._batches is None:
            self._epoch, self._start = loader._start_pass()
            self._generation, self._moves = loader._generation, loader._moves
            batches = loader._deliverable(self._epoch, self._start, self._generation)
            self._batches = gradient_state.map_pass(loader, batches, self._epoch, self._start)
        try:
            loader._superseded(self._generation)
        except RuntimeError:
            self.close()  # it raised, so it ended: it takes nothing from the newer pass
            raise
        if self._failed:  # the caller goes on after the error: the pass is no longer to resume
            self._failed = False
            loader._resumed(self._moves)
        return self._next_batch(loader, self._batches)

    def _next_batch(self, loader: Loader, batches: Iterator[Any]) -> Any:
        finish, checks = loader._on_device, loader.batch_checks
        while True:
            try:
                batch = next(batches)
            except WorkerError:
                self.close()
                loader._interrupted(self._moves)
                raise
            except StopIteration:  # the pass is over: a state taken now resumes the next epoch
                self.close()
                loader._ended(self._moves)
                raise
            except BaseException:
                self.close()
                raise
            try:  # the skip policy's counts, as the batch is delivered
                batch = loader._settle(batch)
            except DataError:  # its budget is spent: this batch is neither delivered nor counted
                self.close()
                loader._interrupted(self._moves)
                raise
            index = loader._delivered
            loader._delivered += 1  # a failed batch counts as consumed, as in torch
            if isinstance(batch, Raised):
                self._fail(loader, index)
                raise batch.error
            if batch is NO_BATCH:  # every sample of this batch was skipped
                continue
            try:
                if finish is not None:
                    batch = finish(batch)
                if checks is not None and checks.due(index, first=index == self._start):
                    checks.run(batch, self._epoch, index, loader.batch_indices)
            except DataError:
                self._fail(loader, index)
                raise
            except BaseException:
                loader._delivered = index  # not delivered; the pass ends here, as before
                self.close()
                raise
            return batch

    def _fail(self, loader: Loader, index: int) -> None:
        """Batch ``index`` failed (and is consumed): a new pass goes on after it."""
        self._failed = True
        loader._interrupted(self._moves)

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
        self._loader = None
        if self._batches is not None:
            self._release()
