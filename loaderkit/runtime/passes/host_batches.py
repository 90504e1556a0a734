"""The host batches of a :class:`~loaderkit.runtime.loader.Loader` pass, before the device.

A pass's batch requests are fetched in the main process (``num_workers=0``), or by a torch
``DataLoader`` whose worker processes fetch the requests a
:class:`~loaderkit.runtime.passes.requests.RequestSampler` hands out (:func:`worker_loader`, kept by
the loader while its workers persist). A batch that failed under the ``raise`` policy comes as
a :class:`~loaderkit.runtime.records.Raised` in its place and the pass goes on; under the
``skip`` policy each batch's skip records are set aside, in order, for the loader to count
when the batch is delivered.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from loaderkit._text import sample_list
from loaderkit.errors import DataError, data_error
from loaderkit.runtime.fetch.global_rngs import WorkerSeeder
from loaderkit.runtime.passes.requests import BatchDataset, RequestSampler
from loaderkit.runtime.records import NO_BATCH, Failure, Fetched, Raised
from loaderkit.runtime.workers.crossing import Unarrived, unarrived_message
from loaderkit.runtime.workers.pool import shutdown_pool, worker_pool

if TYPE_CHECKING:
    from loaderkit.runtime.loader import Loader

__all__ = ["host_batches", "worker_loader"]


def host_batches(loader: Loader, epoch: int, start: int, generation: int) -> Iterator[Any]:
    """The host batches; a :class:`DataError` comes as a :class:`Raised` in its place."""
    if loader.plan.error_policy.policy != "skip":  # no Fetched records to unpack
        yield from _fetched(loader, epoch, start, generation)
        return
    unsettled = loader._unsettled = collections.deque()  # a new pass: nothing delivered yet
    for item in _fetched(loader, epoch, start, generation):
        if isinstance(item, Fetched):  # counted when delivered (_settle), not before
            unsettled.append(item._replace(batch=None))
            yield NO_BATCH if item.batch is None else item.batch
        else:
            unsettled.append(Fetched(None, (), 0))
            yield item


def _fetched(loader: Loader, epoch: int, start: int, generation: int) -> Iterator[Any]:
    """The host batches of ``epoch`` from ``start``; nothing is fetched once superseded.

    Persistent workers share one torch iterator between passes: a superseded pass must
    not take a batch of the newer pass from it, so the check comes before every read. A
    batch that failed (raise policy) comes as a :class:`Raised` and the pass goes on, as
    torch's iterator goes on after an exception. Non-persistent workers belong to their
    pass: they are shut down when it is given up (as torch's are when its iterator is
    dropped) or when the next pass starts.
    """
    workers = loader.workers.num_workers
    if workers == 0:
        fetch = loader._fetcher
        for request in loader._request_plan(epoch, start):
            loader._superseded(generation)
            try:
                batch = fetch(request)
            except DataError as error:
                batch = Raised(error)
            yield batch
        return
    loader._superseded(generation)  # before the shared sampler and torch iterator are reset
    persistent = loader.workers.persistent is not False
    torch_loader, sampler = worker_loader(loader)
    sampler.epoch, sampler.start = epoch, start
    if not persistent:
        shutdown_pool(loader._pool)  # the workers of a pass given up and not yet collected
    iterator = loader._pool = iter(torch_loader)
    try:
        while True:
            loader._superseded(generation)
            try:
                item = next(iterator)
            except StopIteration:
                return
            except Exception as exc:
                # a killed worker surfaces as torch's RuntimeError, or as a broken pipe or
                # connection reset while its result was being read: look at the workers
                worker_error = loader._broken_pool(iterator, exc, (epoch, start))
                if worker_error is None:
                    raise
                raise worker_error from exc
            if isinstance(item, Failure):
                try:
                    item.reraise()
                except DataError as error:
                    item = Raised(error)
            elif isinstance(item, Unarrived):  # it pickled in its worker, not unpickled here
                item = Raised(unarrived_error(loader, item))
            yield item
    finally:
        if not persistent and loader._pool is iterator:
            loader._pool = None
            shutdown_pool(iterator)


def unarrived_error(loader: Loader, unarrived: Unarrived) -> DataError:
    """The :class:`DataError` of a batch a worker sent that the main process cannot unpickle.

    It names the batch's epoch and index (and samples), the worker, the type and the fix.
    """
    epoch, index = unarrived.origin
    what = f"batch {index} of epoch {epoch}"
    with contextlib.suppress(Exception):  # naming the samples is a courtesy
        what += f" (samples {sample_list(loader.batch_indices(epoch, index))})"
    error = data_error(
        unarrived_message(what, unarrived),
        unarrived.error,
        worker_id=unarrived.worker,
        batch_index=index,
    )
    error.__cause__ = unarrived.error
    return error


def worker_loader(loader: Loader) -> tuple[DataLoader[Any], RequestSampler]:
    """The torch ``DataLoader`` over the loader's workers, and the sampler of its requests.

    Made on first use and kept by the loader (persistent workers live in it) until ``close()``.
    """
    if loader._torch_loader is None or loader._sampler is None:
        w = loader.workers
        sampler = RequestSampler(loader._request_plan)
        loader._sampler = sampler
        seed = loader.plan.order.seed
        loader._torch_loader = worker_pool(
            BatchDataset(loader._fetcher, WorkerSeeder(seed, loader.rank)),
            w,
            seed=seed,
            pin_memory=loader.pin_memory and loader.device.type == "cuda",
            persistent=True if w.persistent is None else w.persistent,
            sampler=sampler,
        )
    return loader._torch_loader, loader._sampler
