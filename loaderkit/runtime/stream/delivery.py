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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from loaderkit.errors import DataError, data_error
from loaderkit.runtime.passes.device import deliver
from loaderkit.runtime.passes.hooks import PassInfo, hooked
from loaderkit.runtime.records import NO_BATCH, Fetched, Raised
from loaderkit.runtime.stream.read import StreamItem, same_streams
from loaderkit.runtime.stream.round_robin import (
    position_indices,
    round_robin,
    while_current,
    with_last,
)

if TYPE_CHECKING:
    from loaderkit.runtime.passes.cursor import PassCursor, PassStart
    from loaderkit.runtime.passes.skips import SkipLedger
    from loaderkit.runtime.stream.loader import StreamLoader
    from loaderkit.runtime.stream.position import ProducerPositions

__all__ = ["StreamParts", "stream_batches", "uneven_because"]

_LOG = logging.getLogger("loaderkit")


class StreamParts(NamedTuple):
    """What a stream's pass moves as it delivers, handed over by its loader."""

    cursor: PassCursor
    positions: ProducerPositions
    ledger: SkipLedger
    finish: Callable[[Any], Any] | None
    """The collator's ``on_device`` step, or ``None``."""
    released: Callable[[], None]
    """Called when the pass ran to its end while current: its workers' iterator is done."""


def stream_batches(
    loader: StreamLoader,
    parts: StreamParts,
    items: Iterator[StreamItem],
    start: PassStart,
) -> Iterator[Any]:
    """The batches of one pass from ``start``: the producers' ``items``, round-robin.

    Failed batches come as :class:`Raised` values: a generator that raised is finished.
    """
    sent: collections.deque[tuple[StreamItem, bool]] = collections.deque()
    cursor = parts.cursor

    def host() -> Iterator[Any]:
        produced = _ended(loader, items, start.epoch)
        if loader.compares_streams:
            produced = same_streams(produced, loader.producers)
        ordered = round_robin(produced, loader.producers, parts.positions.next_worker)
        for item, last in with_last(while_current(ordered, cursor.superseded, start.generation)):
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

    yield from _delivered_batches(loader, parts, host(), sent, start)
    if cursor.current(start.generation):
        parts.positions.done = True
        parts.released()


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
    parts: StreamParts,
    host: Iterator[Any],
    sent: collections.deque[tuple[StreamItem, bool]],
    start: PassStart,
) -> Iterator[Any]:
    """Deliver the producers' batches, keeping the position up to date."""
    pin_here = loader.pin_memory and loader.num_workers == 0
    cursor, finish = parts.cursor, parts.finish
    checks = loader.batch_checks
    skipping = loader.plan.error_policy.policy == "skip"
    info = PassInfo(loader, start.epoch, start.start, None, skipping)
    for batch in hooked(info, deliver(host, loader.device, pin_host=pin_here)):
        item, last = sent.popleft()
        cursor.superseded(start.generation)
        index = cursor.delivered
        if isinstance(batch, Raised):
            if item.consumed:  # its place in the shard is used up: count it as delivered
                _count(parts, item, last)
            yield batch
            continue
        if skipping:  # the records are numbered by the batch they were delivered in
            records = tuple(r._replace(batch_index=index) for r in item.skipped)
            fetched = Fetched(None if item.dropped else batch, records, item.requested)
            batch = parts.ledger.account(fetched, cursor.epoch, index == 0)  # raises when spent
        failed: Raised | None = None
        if batch is not NO_BATCH:
            if finish is not None:
                batch = finish(batch)
            if checks is not None and checks.due(index, first=index == start.start):
                try:
                    checks.run(batch, start.epoch, index, position_indices(item.positions))
                except DataError as error:
                    failed = Raised(error)
        _count(parts, item, last)
        if failed is not None:
            yield failed
        elif batch is not NO_BATCH:  # else every element of the batch was skipped
            yield batch


def _count(parts: StreamParts, item: StreamItem, last: bool) -> None:
    """Move the position past ``item``'s batch (delivered, skipped whole, or failed)."""
    parts.cursor.deliver()
    parts.positions.count(item, last)


def uneven_because(even_batches: bool, sharding: str) -> str:
    """Why ``even_batches`` is not enforced for a stream sharded so ("" when it is, or moot)."""
    if not even_batches or sharding not in ("hook", "hf"):
        return ""
    return (
        f"its shards (read {'by the sharding hook' if sharding == 'hook' else 'by HF'}) "
        f"have lengths no rank knows without reading every other rank's: every rank "
        f"gets the same number of batches only if the shards do"
    )
