"""The host batches of a :class:`~loaderkit.runtime.loader.Loader` pass, before the device.

A pass's batch requests are fetched in the main process (``num_workers=0``), or by a torch
``DataLoader`` whose worker processes fetch the requests a
:class:`~loaderkit.runtime.passes.requests.RequestSampler` hands out (kept by
:class:`HostBatches` while its workers persist). A batch that failed under the ``raise``
policy comes as a :class:`~loaderkit.runtime.records.Raised` in its place and the pass goes
on; under the ``skip`` policy each batch's skip records are set aside, in order, for the
loader to count when the batch is delivered.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from loaderkit._text import sample_list
from loaderkit.errors import DataError, data_error
from loaderkit.plan.sections.common import default_start_method
from loaderkit.runtime.fetch.global_rngs import WorkerSeeder
from loaderkit.runtime.passes.requests import BatchDataset, RequestSampler
from loaderkit.runtime.records import NO_BATCH, Failure, Fetched, Raised
from loaderkit.runtime.workers.crossing import Unarrived, unarrived_message
from loaderkit.runtime.workers.diagnosis import broken_pool
from loaderkit.runtime.workers.pool import shutdown_pool, worker_pool

if TYPE_CHECKING:
    from loaderkit.errors import WorkerError
    from loaderkit.plan.workers import ResolvedWorkers
    from loaderkit.runtime.fetch.fetcher import BatchFetcher
    from loaderkit.runtime.passes.cursor import PassCursor
    from loaderkit.runtime.passes.requests import Requests
    from loaderkit.runtime.passes.skips import SkipLedger

__all__ = ["HostBatches", "main_process_reason", "unarrived_error"]


class HostBatches:
    """The host batches of a map-style loader's passes, and the workers that fetch them.

    Holds the torch ``DataLoader`` over the workers (persistent workers live in it) and the
    torch iterator of the pass in use, until :meth:`close`. ``cursor`` tells whether a pass
    is still current (nothing is fetched once it is superseded) and ``ledger`` keeps the skip
    records of each fetched batch until it is delivered. It holds no reference to the loader
    (see :class:`~loaderkit.runtime.passes.requests.Requests`: a cycle would leave the
    workers to the cyclic garbage collector).
    """

    def __init__(
        self,
        fetcher: BatchFetcher,
        requests: Requests,
        workers: ResolvedWorkers,
        *,
        places: tuple[int, int, bool],
        cursor: PassCursor,
        ledger: SkipLedger | None,
    ) -> None:
        self.fetcher = fetcher
        self.requests = requests
        self.workers = workers
        self.seed, self.rank, self.pin_memory = places
        """The plan's seed, this rank and whether the workers' batches are pinned (CUDA)."""
        self.cursor = cursor
        self.ledger = ledger
        """The skip policy's ledger (``None``: another policy, no records to set aside)."""
        self.torch_loader: DataLoader[Any] | None = None
        self.sampler: RequestSampler | None = None
        self.pool: object = None
        """The torch iterator of the workers in use (persistent or not), or ``None``."""

    def __call__(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches; a :class:`DataError` comes as a :class:`Raised` in its place."""
        ledger = self.ledger
        if ledger is None:  # no Fetched records to unpack
            yield from self._fetched(epoch, start, generation)
            return
        ledger.begin_pass()  # a new pass: nothing delivered yet
        for item in self._fetched(epoch, start, generation):
            if isinstance(item, Fetched):  # counted when delivered (settle), not before
                ledger.set_aside(item._replace(batch=None))
                yield NO_BATCH if item.batch is None else item.batch
            else:
                ledger.set_aside(Fetched(None, (), 0))
                yield item

    def _fetched(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches of ``epoch`` from ``start``; nothing is fetched once superseded.

        Persistent workers share one torch iterator between passes: a superseded pass must
        not take a batch of the newer pass from it, so the check comes before every read. A
        batch that failed (raise policy) comes as a :class:`Raised` and the pass goes on, as
        torch's iterator goes on after an exception. Non-persistent workers belong to their
        pass: they are shut down when it is given up (as torch's are when its iterator is
        dropped) or when the next pass starts.
        """
        superseded = self.cursor.superseded
        if self.workers.num_workers == 0:
            fetch = self.fetcher
            for request in self.requests(epoch, start):
                superseded(generation)
                try:
                    batch = fetch(request)
                except DataError as error:
                    batch = Raised(error)
                yield batch
            return
        superseded(generation)  # before the shared sampler and torch iterator are reset
        persistent = self.workers.persistent is not False
        torch_loader, sampler = self._worker_loader()
        sampler.epoch, sampler.start = epoch, start
        if not persistent:
            shutdown_pool(self.pool)  # the workers of a pass given up and not yet collected
        iterator = self.pool = iter(torch_loader)
        try:
            while True:
                superseded(generation)
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                except Exception as exc:
                    # a killed worker surfaces as torch's RuntimeError, or as a broken pipe or
                    # connection reset while its result was being read: look at the workers
                    worker_error = self._broken(iterator, exc, (epoch, start))
                    if worker_error is None:
                        raise
                    raise worker_error from exc
                if isinstance(item, Failure):
                    try:
                        item.reraise()
                    except DataError as error:
                        item = Raised(error)
                elif isinstance(item, Unarrived):  # it pickled in its worker, not unpickled here
                    item = Raised(unarrived_error(self.requests.batch_indices, item))
                yield item
        finally:
            if not persistent and self.pool is iterator:
                self.pool = None
                shutdown_pool(iterator)

    def _worker_loader(self) -> tuple[DataLoader[Any], RequestSampler]:
        """The torch ``DataLoader`` over the workers, and the sampler of its requests.

        Made on first use and kept (persistent workers live in it) until :meth:`close`.
        """
        if self.torch_loader is None or self.sampler is None:
            w = self.workers
            self.sampler = RequestSampler(self.requests)
            self.torch_loader = worker_pool(
                BatchDataset(self.fetcher, WorkerSeeder(self.seed, self.rank)),
                w,
                seed=self.seed,
                pin_memory=self.pin_memory,
                persistent=True if w.persistent is None else w.persistent,
                sampler=self.sampler,
            )
        return self.torch_loader, self.sampler

    def _broken(
        self, iterator: object, exc: Exception, where: tuple[int, int] | None
    ) -> WorkerError | None:
        """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

        The pool is then shut down and :meth:`close` called (the next pass starts new
        workers); ``where`` is (epoch, first batch) of the pass. See :func:`broken_pool`.
        """
        return broken_pool(
            iterator,
            exc,
            self.workers.timeout,
            where,
            self.requests.batch_indices,
            self.close,
            start_method=self.workers.start_method or default_start_method(),
        )

    def close(self) -> None:
        """Stop the worker processes now (persistent ones too); the next pass starts new ones.

        An iterator in progress is superseded.
        """
        self.cursor.supersede()
        pool, self.pool = self.pool, None
        torch_loader = self.torch_loader
        self.torch_loader = None
        self.sampler = None
        if torch_loader is not None:
            iterator = getattr(torch_loader, "_iterator", None)  # the persistent workers
            torch_loader._iterator = None
            shutdown_pool(iterator)
        shutdown_pool(pool)


def main_process_reason(fetcher: BatchFetcher, workers: ResolvedWorkers) -> str | None:
    """Why the plan's workers are not started (``Loader.workers_unused``), or ``None``.

    Workers are not started for a source whose every batch is one vectorized gather
    (``fetcher.gathers()``); nothing a dataset holds is then copied into a worker.
    """
    if workers.num_workers == 0 or not fetcher.gathers():
        return None
    # read in the main process: nothing a dataset holds is copied, nothing to say
    fetcher.storage = tuple(r for r in fetcher.storage if not r.held)
    return (
        f"{workers.num_workers} worker(s) {'chosen' if workers.auto else 'given'}"
        f", none started: every batch of this source is one vectorized gather (the "
        f"default collator, no transform), read faster in the main process than sent "
        f"from a worker; workers pay for themselves with a transform, a collator of "
        f"yours or per-sample Python code"
    )


def unarrived_error(
    batch_indices: Callable[[int, int], list[int]], unarrived: Unarrived
) -> DataError:
    """The :class:`DataError` of a batch a worker sent that the main process cannot unpickle.

    It names the batch's epoch and index (and samples, from ``batch_indices``), the worker,
    the type and the fix.
    """
    epoch, index = unarrived.origin
    what = f"batch {index} of epoch {epoch}"
    with contextlib.suppress(Exception):  # naming the samples is a courtesy
        what += f" (samples {sample_list(batch_indices(epoch, index))})"
    error = data_error(
        unarrived_message(what, unarrived),
        unarrived.error,
        worker_id=unarrived.worker,
        batch_index=index,
    )
    error.__cause__ = unarrived.error
    return error
