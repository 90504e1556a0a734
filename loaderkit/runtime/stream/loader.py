"""``StreamLoader``: the loader of an iterable (streamed) source.

A stream has no length and no random access, so its batches cannot be planned in the main
process the way :class:`~loaderkit.runtime.loader.Loader` plans them. Instead every producer (a
worker process, or the main process with ``num_workers=0``) reads its own *shard* of the
stream, shuffles it through a keyed buffer when asked, and makes whole batches; the main
process delivers the producers' batches round-robin (worker 0, 1, ..., skipping producers that
ran dry), the order torch itself uses.

Shards: with ``W = max(num_workers, 1)`` producers per rank and ``world_size`` ranks there are
``world_size x W`` shards, and the producer ``worker_id`` of rank ``rank`` reads shard
``rank x W + worker_id``:

- a torch ``IterableDataset`` defining ``shard(num_shards, index)`` (returning an iterable of
  that shard's elements) is read through it;
- a torch ``IterableDataset`` that splits itself by ``get_worker_info()`` and says so
  (``splits_by_worker = True``, see :data:`WORKER_SPLIT`) is read whole in each worker, its
  element ``j`` going to rank ``j mod world_size``;
- any other torch ``IterableDataset`` gives element ``k`` of its stream to shard
  ``k mod (world_size x W)`` (each producer reads the whole stream and skips the others'
  elements, so the dataset must yield the *whole* stream in every process). With 2 or more
  workers the producers digest their first elements and the main process compares them
  before delivering anything: a dataset that yields another stream in each worker (one that
  splits itself without saying so) stops the pass with a ``DataError`` instead of delivering
  part of the data;
- an HF ``datasets.IterableDataset`` is split across ranks with
  ``datasets.distributed.split_dataset_by_node`` (by shards when its ``num_shards`` is a
  multiple of the world size, else by example) and across workers by HF itself (by shards:
  workers beyond its ``num_shards`` get nothing).

So the order depends on ``num_workers`` and the world size (both are in the fingerprint).

Passes: every pass reads the dataset as it stands in the main process when the pass starts,
after ``dataset.set_epoch(epoch)`` (when it defines one): each worker reads a copy made for the
pass (workers are started per pass), and the main process (``num_workers=0``) reads one too
(:mod:`~loaderkit.runtime.stream.changes`), so what a dataset's ``__iter__`` changes in itself
reaches no other pass, whatever the workers, and a resume in a new process reads the same.
Such a change is logged once (:attr:`StreamLoader.stream_changed`).

Positions: element ``k`` of a stream read by element has position ``k``; element ``j`` of
shard ``s`` read through the hook or by HF has position ``j x (world_size x W) + s``. Unique in
an epoch over all ranks and workers, they stand for sample indices in errors, skip records,
batch checks and the per-sample random streams (transforms, collator contexts).

State: ``(epoch, batches delivered, batches delivered per producer, next producer)`` and, per
producer, the source's own state right after the last element of its last delivered batch was
read. A resume is O(1) when the source is *stateful* and nothing reads ahead of the delivered
batches: an HF ``IterableDataset`` (without its own shuffle buffer) or a torch
``IterableDataset`` defining ``state_dict()`` / ``load_state_dict()``, and no buffer shuffle;
each producer then loads its saved state and reads on. Otherwise it replays: each producer
reads its shard again and skips the batches it had delivered, reading (and shuffling) those
samples again but neither transforming nor collating them: O(samples delivered).

Skip policy: an element failing in the transform is dropped from its batch (a batch is still
the next ``batch_size`` elements of the producer's shard, so it is delivered smaller) and
recorded by position through the same accounting as :class:`~loaderkit.runtime.loader.Loader`
(``Fetched`` records, ``skipped``, the error budget). An error raised by the source's own
iterator ends it and cannot be skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loaderkit._text import sample_list
from loaderkit.checks import CheckReport, batch_checker
from loaderkit.errors import NotBuiltYetError, WorkerError
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.display import loader_html
from loaderkit.plan.sections.common import default_start_method
from loaderkit.plan.workers import resolve_workers
from loaderkit.runtime.fetch.callables import plan_collate
from loaderkit.runtime.fetch.rng_states import restore_rngs, user_rngs
from loaderkit.runtime.passes.cursor import PassCursor, PassStart
from loaderkit.runtime.passes.device import resolve_device, wants_pinning
from loaderkit.runtime.passes.epoch_sampler import EpochSampler
from loaderkit.runtime.passes.skips import SkipCounts, SkipLedger
from loaderkit.runtime.passes.state import check_stream_state, load_position, write_state
from loaderkit.runtime.passes.surface import NO_DATASET, LoaderSurface, plan_bindings
from loaderkit.runtime.passes.world import resolve_world
from loaderkit.runtime.planners.schedules import batch_sizes, max_lengths
from loaderkit.runtime.records import Skipped
from loaderkit.runtime.stream.delivery import StreamParts, stream_batches, uneven_because
from loaderkit.runtime.stream.explain import explain_stream
from loaderkit.runtime.stream.position import ProducerPositions
from loaderkit.runtime.stream.producer import Producer
from loaderkit.runtime.stream.read import (
    SHARD_HOOK,
    WORKER_SPLIT,
    StreamItem,
    refuse_unsupported,
    resume_mode,
    sharding_of,
    stream_length,
)
from loaderkit.runtime.stream.round_robin import StreamPass
from loaderkit.runtime.workers.crossing import Unarrived, unarrived_message
from loaderkit.runtime.workers.diagnosis import broken_pool
from loaderkit.runtime.workers.pool import shutdown_pool, worker_pool
from loaderkit.runtime.workers.storage import StorageReport, held_report, warn_copies

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["SHARD_HOOK", "WORKER_SPLIT", "StreamLoader"]


class StreamLoader(LoaderSurface):
    """The loader of an iterable source: an iterable of batches that knows its position.

    The same surface as :class:`~loaderkit.runtime.loader.Loader` where a stream allows it:
    the same iteration rule (each ``iter()`` a new pass, the next epoch unless ``set_epoch`` or
    ``load_state_dict`` said otherwise), ``set_epoch``, ``state_dict`` /
    ``load_state_dict`` (O(1) for a stateful source read without a buffer shuffle, else a
    replay of the stream: see :attr:`resume_native`), the ``skip`` error policy
    (``skipped`` / ``errors``), ``explain``, ``close`` and the context manager. ``len()``
    is the exact number of batches per epoch on this rank when the dataset's ``__len__``
    fixes it (see :meth:`__len__`), else raises ``TypeError``. A stream has no sample
    indices (``batch_indices`` raises ``TypeError``).

    It composes what it shares with ``Loader`` (the pass cursor, the skip ledger, the state
    format) rather than inheriting it; ``isinstance(stream_loader, Loader)`` is true all the
    same (both implement :class:`~loaderkit.runtime.passes.surface.LoaderSurface`, which
    ``Loader`` recognises: code that accepts "a loaderkit loader" checks ``Loader``).
    """

    batch_sampler: None = None
    """Always ``None`` (see ``Loader.batch_sampler``)."""
    split: None = None
    """Always ``None``: a stream is never split."""
    sampler_planner: None = None
    """Always ``None``: a stream has no planner."""
    lengths_cost = sampler_cost = ""
    cache_stats: None = None
    """Always ``None``: a stream has no sample cache."""
    workers_unused: None = None
    """Always ``None``: a stream's workers shard it (its order depends on them), so they
    are started as the plan says (see ``Loader.workers_unused``)."""

    def __init__(self, plan: LoaderPlan) -> None:
        bindings = plan_bindings(plan)
        assert plan.dataset.iterable
        refuse_unsupported(plan)
        self.plan = plan
        self.device = resolve_device(plan.device)
        self.world_size, self.rank, self.distributed_source = resolve_world(plan.distributed)
        self._skips = SkipLedger(plan.error_policy)
        """What the ``skip`` policy dropped (:attr:`skipped`, :attr:`skip_counts`)."""
        self.batch_sizes = batch_sizes(plan)
        self._max_lengths = max_lengths(plan)
        self.pin_memory = wants_pinning(plan.workers.pin_memory, self.device)
        self.workers = resolve_workers(plan.workers)  # never "auto": compile() refuses it here
        """The worker settings this loader runs with."""
        self.num_workers = self.workers.num_workers
        self.producers = max(self.num_workers, 1)
        data = bindings[plan.dataset.binding]
        # how the stream is split into shards ("hf", "hook", "worker" or "element")
        self.sharding, data = sharding_of(plan, data, self.world_size, self.rank)
        self.compares_streams = (
            self.sharding == "element"
            and self.producers > 1
            and getattr(data, WORKER_SPLIT, None) is None
        )
        """Whether the producers' first elements are compared (see :data:`WORKER_SPLIT`)."""
        self.data = data
        """What the producers read: the bound dataset (HF: this rank's split of it)."""
        held = held_report(bindings[plan.dataset.binding], plan.dataset, self.num_workers)
        self.storage: tuple[StorageReport, ...] = () if held is None else (held,)
        """The large Python containers the dataset holds, which each worker copies."""
        warn_copies(self.storage, self.num_workers)
        d = plan.distributed
        self.even_batches = d.enabled and d.even_batches and self.world_size > 1
        """Whether every rank's producer ``w`` stops at the shortest rank's one (trim)."""
        self._peers = self._even_peers(data)
        self.uneven_because = uneven_because(self.even_batches, self.sharding)
        """Why ``even_batches`` is not enforced for this stream ("" when it is, or moot)."""
        self.trimmed_samples = 0
        """The stream elements ``even_batches`` left out on this rank in the current (or
        last) pass: its producers ran longer than another rank's (also logged)."""
        self.stream_changed: tuple[str, ...] = ()
        """How the dataset changed itself while a pass read it, the first time it did
        (``("epoch: 0 -> 1",)``; logged once): no pass keeps such a change (see
        :mod:`~loaderkit.runtime.stream.changes`). ``()``: none seen."""
        self.resume_native, self.resume_replays_because = resume_mode(plan, data, self.sharding)
        """Whether a resume loads each producer's saved source state (O(1)) instead of
        replaying the stream, and if not, why not."""
        self._collate = plan_collate(plan, self.device)
        self._on_device: Callable[[Any], Any] | None = getattr(self._collate, "on_device", None)
        self._transform = (
            None if plan.transform is None else resolve_callable(plan, plan.transform, "transform")
        )
        self.batch_checks = batch_checker(plan)
        self._cursor = PassCursor()
        """The position, the pending pass and the bookkeeping of the passes' iterators."""
        self._positions = ProducerPositions(self.producers)
        """Where each producer stands in the current (or last) pass."""
        self._iterator: Any = None
        """The torch iterator of the pass's workers, or ``None``."""

    def _even_peers(self, data: Any) -> tuple[tuple[int, Any], ...]:
        """``(rank, what it reads)`` of the ranks this rank's batches are gated by.

        Read by element (or by worker), rank ``world_size - 1``'s shard of each worker id is
        the shortest, so only it gates the others (and reads nothing extra). Through the
        sharding hook or HF, any rank's shard can be the shortest, and only reading every
        other rank's shards would tell: not done (see :attr:`uneven_because`).
        """
        if not self.even_batches or self.sharding not in ("element", "worker"):
            return ()
        last = self.world_size - 1
        return ((last, data),) if self.rank < last else ()

    def _broken_pool(self, iterator: object, exc: Exception) -> WorkerError | None:
        """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

        The pool is then shut down and the loader closed (see ``broken_pool``).
        """
        return broken_pool(
            iterator,
            exc,
            self.workers.timeout,
            None,
            self.batch_indices,
            self.close,
            start_method=self.workers.start_method or default_start_method(),
        )

    # -- position ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch on this rank, when the dataset's ``__len__`` tells them exactly.

        Known for a torch ``IterableDataset`` defining ``__len__`` that is read by element
        (or splits itself by worker, with ``num_workers=0``): element ``k`` goes to shard
        ``k mod (world_size x producers)``, each producer batches its shard (``drop_last``
        drops its partial batch) and ``even_batches`` stops each producer at the batch count
        of the last rank's producer of its worker id. So this is the exact count of a pass,
        which differs from torch's ``len(DataLoader(iterable))`` (``ceil(len / batch_size)``,
        blind to workers and ranks). Of the epoch of :attr:`epoch` when batch sizes follow a
        schedule. A batch whose every element the ``skip`` policy dropped is counted but not
        delivered.

        Otherwise raises ``TypeError`` saying why the count is unknown (no ``__len__``; shards
        made by the ``shard`` hook, by HF or by the dataset itself across workers).
        """
        n = stream_length(self.data, self.plan.dataset.binding, self.sharding, self.producers)
        shards = self.world_size * self.producers
        size = self.batch_sizes(self._cursor.epoch)
        drop_last = self.plan.batch.drop_last

        def batches(shard: int) -> int:
            elements = max(0, -(-(n - shard) // shards))
            return elements // size if drop_last else -(-elements // size)

        total = 0
        for worker in range(self.producers):
            own = batches(self.rank * self.producers + worker)
            if self._peers:  # even_batches: as many as the last rank's producer of this id
                own = min(own, batches((self.world_size - 1) * self.producers + worker))
            total += own
        return total

    @property
    def repeated_samples(self) -> int:
        """Always 0: a stream never repeats samples to even out ranks."""
        return 0

    @property
    def sampler(self) -> EpochSampler:
        """Where trainers tell the loader its epoch (see ``Loader.sampler``)."""
        return EpochSampler(self)

    @property
    def dataset(self) -> Any:
        """Not available: raises ``AttributeError`` (see ``Loader.dataset``)."""
        raise AttributeError(NO_DATASET)

    @property
    def epoch(self) -> int:
        """The epoch of the current (or last) pass (see ``Loader.epoch``)."""
        return self._cursor.epoch

    @property
    def batches_delivered(self) -> int:
        """Batches of :attr:`epoch` handed to the caller in the current (or last) pass."""
        return self._cursor.delivered

    @property
    def next_pass(self) -> tuple[int, int]:
        """(epoch, first batch) of the pass the next ``iter()`` reads; nothing is started."""
        return self._cursor.next_pass

    @property
    def skipped(self) -> list[Skipped]:
        """The last elements the ``skip`` policy dropped, in order (up to SKIPPED_RECORDS_KEPT).

        The last :data:`~loaderkit.runtime.passes.skips.SKIPPED_RECORDS_KEPT` records (stream
        position, epoch, batch, worker, exception type, message); :attr:`skip_counts` has the
        exact totals.
        """
        return self._skips.records

    @property
    def errors(self) -> list[Skipped]:
        """The errors the policy handled: with ``"skip"``, :attr:`skipped` (else empty)."""
        return self.skipped

    @property
    def skip_counts(self) -> SkipCounts:
        """Exact totals of the ``skip`` policy, per run and for the current epoch."""
        return self._skips.counts

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass epoch ``epoch`` (an int >= 0), from its first batch.

        The rule of :meth:`Loader.set_epoch <loaderkit.runtime.loader.Loader.set_epoch>`: a
        loaded, not yet started resume of this very epoch is kept. The dataset hears of the
        epoch (``dataset.set_epoch(epoch)``, when it defines one: an HF ``IterableDataset``
        reshuffles its shards) before the epoch's first sample is read, and the buffer shuffle
        is keyed by the epoch.
        """
        if self._cursor.set_epoch(epoch):
            self._positions.reset()

    def batch_indices(self, epoch: int, batch_index: int) -> list[int]:
        """Not available: a stream has no sample indices (raises ``TypeError``)."""
        raise TypeError(
            "a StreamLoader has no batch_indices(): a streamed dataset has no random access, "
            "so batches are not planned as indices; errors and checks name stream positions"
        )

    def check(self) -> CheckReport:
        """Not available for streams yet (raises ``NotBuiltYetError``): iterate instead.

        The plan's batch checks (``with_checks``) do run on the delivered batches.
        """
        raise NotBuiltYetError(
            "StreamLoader.check() is not available yet; with_checks(...) runs on the batches "
            "as they are delivered"
        )

    # -- iteration --------------------------------------------------------------------------

    def _producer(
        self,
        epoch: int,
        skips: tuple[int, ...],
        states: tuple[dict[str, Any] | None, ...],
    ) -> Producer:
        plan = self.plan
        collate = self._collate
        lengths = self._max_lengths
        if lengths is not None:
            collate = collate.with_max_length(lengths(epoch))  # type: ignore[attr-defined]
        buffer = plan.order.buffer_size if plan.order.shuffle else None
        return Producer(
            self.data,
            self.sharding,
            rank=self.rank,
            world_size=self.world_size,
            producers=self.producers,
            epoch=epoch,
            batch_size=self.batch_sizes(epoch),
            drop_last=plan.batch.drop_last,
            seed=plan.order.seed,
            buffer_size=buffer,
            skips=skips,
            states=states if self.resume_native else (None,) * self.producers,
            stateful=self.resume_native,
            skip=plan.error_policy.policy == "skip",
            collate=collate,
            collator_name=plan.collator.describe(),
            transform=self._transform,
            transform_rng=plan.transform is not None and plan.transform.accepts_rng,
            probe=self.compares_streams,
            peers=self._peers,
        )

    def _tell_epoch(self, epoch: int) -> None:
        hook = getattr(self.data, "set_epoch", None)
        if callable(hook):
            hook(epoch)

    def _items(self, producer: Producer) -> Iterator[StreamItem]:
        """The producers' items as torch (or the main process) delivers them."""
        if self.num_workers == 0:  # the user's global RNG states are put back after each item
            it = iter(producer)
            while True:
                states = user_rngs()
                try:
                    item = next(it, None)
                finally:
                    restore_rngs(states)
                if item is None:
                    return
                yield item
        torch_loader = worker_pool(
            producer,
            self.workers,
            seed=self.plan.order.seed,
            pin_memory=self.pin_memory and self.device.type == "cuda",
            persistent=False,  # the producers are made per pass (epoch, skips)
        )
        iterator = self._iterator = iter(torch_loader)
        del torch_loader
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return
            except Exception as exc:
                worker_error = self._broken_pool(iterator, exc)  # closes the pool if broken
                if worker_error is None:
                    self.close()
                    raise
                raise worker_error from exc
            if isinstance(item, Unarrived):  # it pickled in its worker, not unpickled here
                item = self._unarrived(item)
            yield item

    def _unarrived(self, unarrived: Unarrived) -> StreamItem:
        """The failed (consumed) item of a batch a worker sent that could not be unpickled.

        Its origin (see ``Producer.__iter__``) is ``(local, positions, state, digest, end,
        consumed)``.
        """
        local, positions, state, digest, end, consumed = unarrived.origin
        worker = unarrived.worker or 0
        if end:  # a producer's end (only its text could fail): it ended all the same
            return StreamItem(worker, end=True)
        what = (
            f"batch {local} of worker {worker} on rank {self.rank} in epoch {self._cursor.epoch} "
            f"(stream elements {sample_list(positions)})"
        )
        exc = unarrived.error
        return StreamItem(
            worker,
            positions=positions,
            error=unarrived_message(what, unarrived),
            consumed=consumed,  # a batch's place in the shard is used up: the producer went on
            digest=digest,
            state=state,
            original_type=type(exc),
            cause=exc,
            local=local,
        )

    def __iter__(self) -> Iterator[Any]:
        """A new pass (the rule of :class:`~loaderkit.runtime.loader.Loader`).

        It starts at its first ``next()``: an iterator never advanced has no effect. A resumed
        pass whose state was taken after the epoch's last batch delivers nothing. A batch that
        fails (``DataError`` from the transform, the collator or a batch check) raises from
        its ``next()``, and the next ``next()`` goes on with the following batch, as torch's
        iterator does; a source whose own iterator raised delivers nothing more (its other
        producers go on). Dropping the iterator mid-pass stops its workers.
        """
        return StreamPass(self._cursor, self._begin, self.close)

    def _begin(self) -> tuple[Iterator[Any] | None, PassStart]:
        """Start the pass the iteration rule says: its batches, and where it starts.

        The batches are ``None`` for a resumed complete pass (its rest is empty).
        """
        if not self._cursor.resuming:
            self._positions.reset()
        self.close()  # a previous pass's workers (and its iterator: superseded)
        start = self._cursor.start()
        self.trimmed_samples = 0
        if self._positions.done:  # a resumed complete pass: its rest is empty
            return None, start
        self._tell_epoch(start.epoch)
        positions = self._positions
        producer = self._producer(
            start.epoch,
            tuple(positions.worker_batches),
            tuple(copy.deepcopy(positions.worker_states)),
        )
        parts = StreamParts(self._cursor, positions, self._skips, self._on_device, self._release)
        return stream_batches(self, parts, self._items(producer), start), start

    def _release(self) -> None:
        """The pass ran to its end: its workers' iterator is done with."""
        self._iterator = None

    def close(self) -> None:
        """Stop the worker processes now (the next iteration starts new ones).

        An iterator in progress is superseded: it raises instead of ending the epoch early.
        """
        self._cursor.supersede()
        iterator = self._iterator
        self._iterator = None
        shutdown_pool(iterator)  # within about a second, stuck workers terminated

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The position as a small JSON-serializable dict; a fresh copy every call.

        The current (or last, or pending) pass's epoch and batches delivered, and
        ``pass_complete``: whether that pass delivered its last batch (a resume of it is then
        an empty pass, and the pass after it the next epoch), and ``pass_ended``: whether its
        iterator raised ``StopIteration`` (the ``for`` loop is over; a resume of it starts
        the next epoch, whole, as torchdata's ``StatefulDataLoader`` does). Besides, it records, per
        producer, the batches it delivered and which producer is next (a resume needs them),
        and the world size, rank and ``num_workers`` the order depends on.
        ``worker_states`` holds, per producer, the source's own state right after the last
        element of its last *delivered* batch was read (``{"read": elements its iterator had
        yielded, "source": state_dict()}``), or ``None``: filled only when
        :attr:`resume_native` (the source state must then be JSON-serializable for the whole
        state to be; an HF dataset's is).
        """
        place = {
            "world_size": self.world_size,
            "rank": self.rank,
            "num_workers": self.num_workers,
            **self._positions.to_state(),
        }
        complete = {"pass_complete": self._positions.done}
        return write_state(self.plan, self._cursor, self._skips, place, stream=complete)

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Make the next pass continue exactly where ``state`` was taken.

        The rule of :meth:`Loader.load_state_dict
        <loaderkit.runtime.loader.Loader.load_state_dict>`: the next ``iter()`` resumes (an
        empty pass for a state taken at the epoch's last batch inside the loop,
        ``pass_complete``; a state without that key, from an earlier loaderkit, is read as not
        complete: its ``(epoch + 1, 0)`` end-of-epoch states start the next epoch, as they
        did). A state taken after the pass ended (``pass_ended``; absent: not ended) makes the
        next pass the next epoch, whole.

        When :attr:`resume_native` (a stateful source, no buffer shuffle) each producer loads
        its source's saved state and reads on from the element after its last delivered batch:
        O(1), nothing is read twice. Otherwise (or for a producer without a saved state) it
        *replays*: it reads its shard again and skips the batches it had delivered (those
        samples are read, and shuffled, again but not transformed or collated): O(samples
        already delivered). The state must come from a stream loader of a plan with
        the same fingerprint, on the same rank and world size, else
        :class:`~loaderkit.ResumeError` says why with the differences (``strict=False`` skips
        the fingerprint check; the layout must still fit).
        """
        per_worker, states, complete = check_stream_state(
            state, self.plan, (self.world_size, self.rank, self.num_workers), strict=strict
        )
        load_position(state, self._cursor, self._skips)
        self._positions.load(list(per_worker), state["next_worker"], states, done=complete)

    def __enter__(self) -> StreamLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # shut the workers down explicitly (see Loader.__del__)
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report at garbage collection
            return

    # -- display ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        epoch, delivered = self._cursor.position
        return (
            f"StreamLoader(plan={self.plan.fingerprint[:12]}, epoch={epoch}, "
            f"batch={delivered}, rank={self.rank}/{self.world_size}, "
            f"workers={self.num_workers}, device={self.device})"
        )

    def explain(self) -> str:
        """The plan's report plus how the stream is read on this machine.

        The sharding used, that the order depends on ``num_workers`` and the world size, the
        shuffle buffer, what a resume costs (and why, when it replays) and, under the ``skip``
        policy, what a stream can skip.
        """
        return explain_stream(self, self._collate)

    def _repr_html_(self) -> str:
        return loader_html(self)
