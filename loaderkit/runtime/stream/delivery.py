"""How a :class:`~loaderkit.runtime.stream.loader.StreamLoader` pass delivers its batches.

The producers' items are taken round-robin (after the first elements of the producers were
compared, when the loader compares streams), on the device, and each one moves the loader's
position as it is delivered: a batch that failed comes as a
:class:`~loaderkit.runtime.records.Raised` in its place, the ``skip`` policy's records are
counted, the batch finished (``on_device``) and checked (``with_checks``). What
``even_batches`` trimmed from a producer is counted and logged when that producer ends.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.errors import DataError, data_error
from loaderkit.runtime.passes import gradient_state
from loaderkit.runtime.passes.device import deliver
from loaderkit.runtime.records import NO_BATCH, Fetched, Raised
from loaderkit.runtime.stream.producer import Producer
from loaderkit.runtime.stream.read import StreamItem, same_streams
from loaderkit.runtime.stream.round_robin import (
    position_indices,
    round_robin,
    while_current,
    with_last,
)

if TYPE_CHECKING:
    from loaderkit.runtime.stream.loader import StreamLoader

__all__ = ["stream_batches"]

_LOG = logging.getLogger("loaderkit")


def stream_batches(
    loader: StreamLoader, producer: Producer, epoch: int, delivered: int, generation: int
) -> Iterator[Any]:
    """The batches of one pass: ``epoch`` after ``delivered`` batches.

    Failed batches come as :class:`Raised` values: a generator that raised is finished.
    """
    sent: collections.deque[tuple[StreamItem, bool]] = collections.deque()

    def host() -> Iterator[Any]:
        produced = _ended(loader, loader._items(producer), epoch)
        if loader.compares_streams:
            produced = same_streams(produced, loader.producers)
        items = round_robin(produced, loader.producers, loader._next_worker)
        for item, last in with_last(while_current(items, loader._superseded, generation)):
            sent.append((item, last))
            if item.error is not None:
                error = data_error(
                    item.error,
                    item.original_type,
                    sample_index=item.sample_index,
                    worker_id=item.worker if loader.num_workers else None,
                    collator=item.collator,
                )
                error.__cause__ = item.cause
                yield Raised(error)
            else:
                yield NO_BATCH if item.dropped else item.batch

    yield from _delivered_batches(loader, host(), sent, epoch, delivered, generation)
    if generation == loader._generation:
        loader._epoch_done = True
        loader._iterator = None


def _ended(loader: StreamLoader, items: Iterator[StreamItem], epoch: int) -> Iterator[StreamItem]:
    """``items``, with what is told as each producer ends.

    What ``even_batches`` trimmed is counted and logged, and a dataset that changed itself
    while read is logged (once per loader).
    """
    for item in items:
        if item.end and item.changed and not loader.stream_changed:
            loader.stream_changed = item.changed
            _LOG.warning("loaderkit: %s", changed_message(loader, item, epoch))
        if item.end and item.trimmed:
            loader.trimmed_samples += item.trimmed
            _LOG.warning(
                "loaderkit: even_batches trimmed %d stream element(s) of producer %d on rank "
                "%d of %d in epoch %d (another rank's producer %d ran out first)",
                item.trimmed,
                item.worker,
                loader.rank,
                loader.world_size,
                epoch,
                item.worker,
            )
        yield item


def changed_message(loader: StreamLoader, item: StreamItem, epoch: int) -> str:
    """What to tell of a dataset that changed itself while producer ``item.worker`` read it."""
    where = f"worker {item.worker}" if loader.num_workers else "the main process"
    kind = type(loader.data).__name__
    return (
        f"the iterable dataset {loader.plan.dataset.binding!r} ({kind}) changed itself while "
        f"epoch {epoch} was read in {where}: {'; '.join(item.changed)}. loaderkit keeps no such "
        f"change: every pass reads the dataset as it stood in the main process when the pass "
        f"started (a copy of it in each worker, and with num_workers=0), so the batches are "
        f"the same for any num_workers, with or without persistent workers, and after a "
        f"resume in a new process (torch keeps the change with num_workers=0 or persistent "
        f"workers, and loses it without). To make the stream depend on the epoch, define "
        f"set_epoch(epoch) on {kind}: loaderkit calls it in the main process before each "
        f"pass, a resumed one too; to resume inside a pass from the dataset's own position, "
        f"define state_dict() and load_state_dict(state). (Said once per loader.)"
    )


def _delivered_batches(
    loader: StreamLoader,
    host: Iterator[Any],
    sent: collections.deque[tuple[StreamItem, bool]],
    epoch: int,
    delivered: int,
    generation: int,
) -> Iterator[Any]:
    """Deliver the producers' batches, keeping the position up to date."""
    pin_here = loader.pin_memory and loader.num_workers == 0
    finish = loader._on_device
    checks = loader.batch_checks
    skipping = loader.plan.error_policy.policy == "skip"
    batches = gradient_state.stream_pass(loader, deliver(host, loader.device, pin_host=pin_here))
    for batch in batches:
        item, last = sent.popleft()
        loader._superseded(generation)
        index = loader._delivered
        if isinstance(batch, Raised):
            if item.consumed:  # its place in the shard is used up: count it as delivered
                loader._count(item, last)
            yield batch
            continue
        if skipping:  # the records are numbered by the batch they were delivered in
            records = tuple(r._replace(batch_index=index) for r in item.skipped)
            fetched = Fetched(None if item.dropped else batch, records, item.requested)
            batch = loader._account(fetched)  # raises once the budget is spent
        failed: Raised | None = None
        if batch is not NO_BATCH:
            if finish is not None:
                batch = finish(batch)
            if checks is not None and checks.due(index, first=index == delivered):
                try:
                    checks.run(batch, epoch, index, position_indices(item.positions))
                except DataError as error:
                    failed = Raised(error)
        loader._count(item, last)
        if failed is not None:
            yield failed
        elif batch is not NO_BATCH:  # else every element of the batch was skipped
            yield batch
