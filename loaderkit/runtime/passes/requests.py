"""The main process's side of a pass: one rank's batch requests, and what torch's workers index.

The requests are computed in the main process (the single source of truth for position);
torch's ``DataLoader`` reads them through :class:`RequestSampler` and hands each to a worker,
where :class:`BatchDataset` fetches and collates the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy.typing as npt
from torch.utils.data import Dataset, Sampler

from loaderkit.errors import DataError
from loaderkit.runtime.fetch.fetcher import BatchFetcher, failure_from
from loaderkit.runtime.fetch.global_rngs import WorkerSeeder
from loaderkit.runtime.planners import (
    Planner,
    PlannerContext,
    Selected,
    StepSizedPlanner,
    select_planner,
)
from loaderkit.runtime.planners.schedules import Schedule, batch_sizes, max_lengths
from loaderkit.runtime.planners.split import split_part
from loaderkit.runtime.records import BatchRequest
from loaderkit.runtime.workers.crossing import Pickled, pickled
from loaderkit.runtime.workers.pool import ShippedToWorkers

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["BatchDataset", "MapOrder", "RequestSampler", "Requests", "map_order"]


class MapOrder(NamedTuple):
    """What a map-style loader's batches are planned from, resolved at ``build()``."""

    part: npt.NDArray[Any] | None
    """The sample indices of the split's part (positions map through it), or ``None``."""
    split: str | None
    """The part of the plan's split read (``None``: the plan has no split)."""
    batch_sizes: Schedule[int]
    max_lengths: Schedule[int] | None
    selected: Selected
    """The planner, and what reading its per-sample values cost."""
    requests: Requests


def map_order(plan: LoaderPlan, data: object, split: str, world_size: int, rank: int) -> MapOrder:
    """Plan the batches of ``split`` (the part of the plan's split) on ``rank`` of ``world_size``.

    ``data`` is the bound dataset (``None`` for a mixture, which is never split).
    """
    part = split_part(data, plan.dataset, plan.split, plan.order.seed, split)
    n = plan.dataset.length if part is None else len(part)
    assert n is not None
    sizes = batch_sizes(plan)
    lengths = max_lengths(plan)
    counts = getattr(data, "shard_counts", None) if plan.dataset.sharded else None
    context = PlannerContext(plan, n, part, world_size, rank, sizes, counts)
    selected = select_planner(context)
    requests = Requests(selected.planner, part, lengths)
    return MapOrder(part, None if plan.split is None else split, sizes, lengths, selected, requests)


class Requests:
    """The requests of one rank's passes: the planner's batches as dataset indices.

    Kept apart from the :class:`~loaderkit.runtime.loader.Loader` on purpose: the torch
    iterator reads them (through :class:`RequestSampler`) and holds the generator between
    passes, so a generator bound to the loader would make a reference cycle, loader -> torch
    loader -> torch iterator -> generator -> loader. A cycle leaves the loader and its workers
    to the cyclic garbage collector, which finalizes the worker queues in any order and
    stalls ~5 s per worker.
    """

    def __init__(
        self,
        planner: Planner,
        part: npt.NDArray[Any] | None,
        max_lengths: Schedule[int] | None,
    ) -> None:
        self.planner = planner
        self.part = part
        self.max_lengths = max_lengths
        self._epoch_starts = [0]

    def planned(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The planner's requests, their positions mapped to dataset indices (with a split)."""
        part = self.part
        if part is None:
            yield from self.planner.requests(epoch, start)
            return
        for request in self.planner.requests(epoch, start):
            yield request._replace(indices=part[request.indices])

    def first_step(self, epoch: int) -> int:
        """Batches this rank delivers in the epochs before ``epoch`` (each counted once)."""
        planner = self.planner
        if isinstance(planner, StepSizedPlanner):
            return planner.first_step(epoch)
        starts = self._epoch_starts
        while len(starts) <= epoch:
            starts.append(starts[-1] + planner.num_batches(len(starts) - 1))
        return starts[epoch]

    def batch_indices(self, epoch: int, batch_index: int) -> list[int]:
        """The sample indices of batch ``batch_index`` of ``epoch`` on this rank."""
        positions = self.planner.indices(epoch, batch_index)
        part = self.part  # with a split, the planner's positions index the part
        indices: list[int] = (positions if part is None else part[positions]).tolist()
        return indices

    def __call__(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start``, with their sequence length."""
        lengths = self.max_lengths
        if lengths is None:
            yield from self.planned(epoch, start)
            return
        first = epoch if lengths.by == "epoch" else self.first_step(epoch)
        for request in self.planned(epoch, start):
            t = first if lengths.by == "epoch" else first + request.batch_index
            yield request._replace(max_length=lengths(t))


class RequestSampler(Sampler[BatchRequest]):
    """Yields the requests of one rank's pass from its first batch (main process)."""

    def __init__(self, requests: Requests) -> None:
        self.requests = requests  # holds no reference to the loader (see Requests)
        self.epoch = 0
        self.start = 0

    def __iter__(self) -> Iterator[BatchRequest]:
        return self.requests(self.epoch, self.start)

    def __len__(self) -> int:
        return self.requests.planner.num_batches(self.epoch) - self.start


class BatchDataset(ShippedToWorkers, Dataset[Any]):
    """What torch's workers index: a request in, a whole batch (or a Failure) out, pickled.

    A worker that could not unpickle it (``spawn``, ``forkserver``) raises
    :class:`~loaderkit.runtime.workers.pool.WorkerStartError` at its first request.
    """

    def __init__(self, fetcher: BatchFetcher, seeder: WorkerSeeder) -> None:
        self.fetcher = fetcher
        self.seeder = seeder

    def __getitem__(self, request: BatchRequest) -> Pickled:
        """The batch of ``request`` (or its :class:`Failure`), pickled here in the worker.

        A batch that does not pickle becomes the :class:`Failure` of a :class:`DataError`
        naming the sample (or the collator's output) and the part that cannot be sent; one
        that does not unpickle in the main process arrives there as an
        :class:`~loaderkit.runtime.workers.crossing.Unarrived` naming ``(epoch, batch index)``.
        """
        self.check_arrived()
        self.seeder(request.epoch)
        try:
            result = self.fetcher(request)
        except DataError as failed:
            result = failure_from(failed, request)
        origin = (request.epoch, request.batch_index)  # named if it cannot be unpickled
        try:
            return pickled(result, origin)
        except Exception as exc:  # noqa: BLE001 - any pickling failure: named, sent as data
            unsent = self.fetcher.unsendable(request, result, exc)
            unsent.__cause__ = exc
            return pickled(failure_from(unsent, request), origin)
