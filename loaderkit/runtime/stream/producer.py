"""A stream's producer: what each worker (or the main process) iterates, its shard as batches."""

from __future__ import annotations

import collections
import copy
import functools
import itertools
import traceback
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset

from loaderkit._text import sample_list
from loaderkit.collators.base import BatchContext
from loaderkit.errors import (
    DataError,
    data_error,
    portable_exception,
    portable_type,
)
from loaderkit.order.keys import derive_key
from loaderkit.runtime.fetch.global_rngs import WorkerSeeder, seed_globals
from loaderkit.runtime.fetch.sample_step import SampleStep, unsendable_batch, unsendable_sample
from loaderkit.runtime.records import Skipped
from loaderkit.runtime.stream.changes import Watch, pass_copy
from loaderkit.runtime.stream.read import (
    SHARD_HOOK,
    WORKER_SPLIT,
    EvenGate,
    StreamItem,
    StreamProbe,
    buffer_shuffle,
    is_stateful,
    seeded_elements,
)
from loaderkit.runtime.workers.crossing import pickled, unsendable_message
from loaderkit.runtime.workers.pool import ShippedToWorkers

__all__ = ["Producer"]


_PROBE = 16
"""At most this many first elements of each producer's stream are compared across workers."""


class Producer(ShippedToWorkers, IterableDataset[Any]):
    """What each producer iterates: its shard of the stream, as whole batches.

    Holds no reference to the loader (the torch loader owns this object: a cycle back would
    leave the loader and its workers to the slow cyclic garbage collector). A worker that
    could not unpickle it raises :class:`~loaderkit.runtime.workers.pool.WorkerStartError` as it
    starts iterating.
    """

    def __init__(
        self,
        data: Any,
        mode: str,
        *,
        rank: int,
        world_size: int,
        producers: int,
        epoch: int,
        batch_size: int,
        drop_last: bool,
        seed: int,
        buffer_size: int | None,
        skips: tuple[int, ...],
        states: tuple[Mapping[str, Any] | None, ...],
        stateful: bool,
        skip: bool,
        collate: Callable[..., Any],
        collator_name: str,
        transform: Callable[..., Any] | None,
        transform_rng: bool,
        probe: bool = False,
        peers: tuple[tuple[int, Any], ...] = (),
    ) -> None:
        self.data = data
        self.mode = mode
        self.peers = peers
        """``even_batches`` on several ranks: ``(rank, what that rank's producers read)`` of
        the ranks whose shards this producer's batches are gated by (see :class:`EvenGate`)."""
        self.probe = probe
        """Whether to digest the first elements of the stream (element mode, 2+ workers)."""
        self.rank = rank
        self.world_size = world_size
        self.producers = producers
        self.epoch = epoch
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.seed = seed
        self.buffer_size = buffer_size
        self.skips = skips
        self.states = states
        self.stateful = stateful
        self.skip = skip
        self.collate = collate
        self.uses_context = bool(getattr(collate, "uses_context", False))
        self.collator_name = collator_name
        self.step = (
            None
            if transform is None
            else SampleStep(
                transform,
                rng=transform_rng,
                seed=seed,
                before=functools.partial(seed_globals, seed, "stream-global-rng-transform"),
            )
        )
        """The transform of each element (keyed rng, seeding, policies), if there is one."""
        self._collated: tuple[list[int], list[Any]] | None = None
        """The positions and samples of the batch being sent (to name one that cannot be)."""

    def __iter__(self) -> Iterator[Any]:
        """The items of this producer; in a worker, each pickled there (:func:`pickled`).

        An item that does not pickle is replaced by the error item of a :class:`DataError`
        naming the element (or the collator's output) and the part that cannot be sent.
        """
        self.check_arrived()
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else int(info.id)
        if info is not None:  # the worker's global RNGs, as the map-style loader seeds them
            WorkerSeeder(self.seed, self.rank)(self.epoch)
        # a worker reads its own copy of the dataset, made for this pass; the main process
        # reads one too, so a dataset changing itself changes no other pass (stream_changes)
        data = self.data if info is not None or self.mode == "hf" else pass_copy(self.data)
        probe = StreamProbe(self._probe_size()) if self.probe else None
        first = True
        for item in self._items(worker, data, probe):
            if first and probe is not None and item.error is None:  # a failed read: no digest
                item = item._replace(digest=probe.value())
            first = False
            if info is None:
                self._collated = None
                yield item
                continue
            # what the item is, in case it cannot be unpickled in the main process (see
            # StreamLoader._unarrived): a few plain fields, not the whole header (~4 us less)
            consumed = item.consumed or item.error is None  # a read error is read again
            origin = (item.local, item.positions, item.state, item.digest, item.end, consumed)
            try:
                sent = pickled(item, origin)
            except Exception as exc:  # noqa: BLE001 - any pickling failure: named, sent as data
                error = self._unsendable(worker, item, exc)
                error.__cause__ = exc
                failed = _error_item(worker, error, consumed=True, state=item.state)
                sent = pickled(failed._replace(digest=item.digest, local=item.local))
            self._collated = None
            yield sent

    def _unsendable(self, worker: int, item: StreamItem, exc: BaseException) -> DataError:
        """The :class:`DataError` for ``item``, whose batch does not pickle.

        Names the first element of the batch that does not pickle (its samples are kept by
        :meth:`_batch` until the item is sent) and the part that cannot be sent; if every
        element pickles, the collator's output is named instead.
        """
        collated = self._collated
        shards = self.world_size * self.producers
        if collated is not None and collated[0] == list(item.positions):
            culprit = unsendable_sample(zip(*collated, strict=True))
            if culprit is not None:
                position, found = culprit
                what = f"{self._where(worker, position, position // shards)}"
                return data_error(
                    unsendable_message(what, "sample", found, exc, worker),
                    exc,
                    sample_index=position,
                    worker_id=worker,
                    collator=self.collator_name,
                )
        found = unsendable_batch(item.batch)
        what = (
            f"a batch of worker {worker} on rank {self.rank} in epoch {self.epoch} (stream "
            f"elements {sample_list(item.positions)}), as collator {self.collator_name!r} "
            f"made it,"
        )
        return data_error(
            unsendable_message(what, "batch", found, exc, worker),
            exc,
            worker_id=worker,
            collator=self.collator_name,
        )

    def _probe_size(self) -> int:
        """First elements every producer has read before it sends its first item."""
        shards = self.world_size * self.producers
        return max(1, min(_PROBE, (self.batch_size - 1) * shards + 1))

    def _items(self, worker: int, data: Any, probe: StreamProbe | None) -> Iterator[StreamItem]:
        """The items of this producer, reading ``data`` (this pass's copy of the dataset).

        The end item says how the source changed itself meanwhile (:class:`Watch`), unless it
        is an HF dataset or a stateful source (its attributes hold its position on purpose).
        """
        trimmed = 0
        watch: Watch | None = None
        try:
            source, start, resumed = self._source(worker, data)
            if self.mode != "hf" and not is_stateful(source):
                watch = Watch(source)
            trimmed = yield from self._batches(worker, source, start, resumed, probe)
        except DataError as error:  # the source (or a gated rank's) could not be read: the end
            yield _error_item(worker, error)
        changed = () if watch is None else watch.changes()
        yield StreamItem(worker, end=True, trimmed=trimmed, changed=changed)

    def _gate(self, worker: int) -> EvenGate | None:
        """The gate of this producer's batches under ``even_batches`` (``None``: ungated)."""
        if not self.peers:
            return None
        shards = self.world_size * self.producers
        world = self.world_size

        def stream(rank: int, data: Any) -> Callable[[], Iterable[Any]]:
            shard = rank * self.producers + worker
            if self.mode == "element":
                return lambda: itertools.islice(iter(data), shard, None, shards)
            if self.mode == "worker":
                return lambda: itertools.islice(iter(data), rank, None, world)
            if self.mode == "hook":
                return lambda: getattr(data, SHARD_HOOK)(shards, shard)
            return lambda: data  # HF: already that rank's split

        # the gate reads its own copy: a stateful source keeps its position (read count,
        # loaded state) for the producer's own reading and its saved state
        peers = [(rank, stream(rank, _gate_copy(data))) for rank, data in self.peers]
        return EvenGate(peers, self.batch_size, self.drop_last)

    def _where(self, worker: int, position: int, local: int) -> str:
        shards = self.world_size * self.producers
        shard = self.rank * self.producers + worker
        return (
            f"stream element {position} (element {local} of shard {shard} of {shards}: rank "
            f"{self.rank}, worker {worker})"
        )

    def _source(self, worker: int, data: Any) -> tuple[Any, int, bool]:
        """What this producer iterates, the elements of it read before, and if it resumes.

        What it iterates is ``data`` (this pass's dataset), or a copy of it; ``resumed`` is
        True when a saved source state was loaded (a resume without replay).
        """
        state = self.states[worker] if worker < len(self.states) else None
        if state is None:
            return data, 0, False
        source = data
        if self.mode == "hf" or self.peers:
            # HF keeps a loaded state for later passes, and the gate reads the source from
            # its start: load it on a copy
            source = _own_copy(source)
        source.load_state_dict(copy.deepcopy(state["source"]))
        return source, int(state["read"]), True

    def _read_error(self, exc: Exception, resumed: bool) -> str:
        """The end of the message of an element the source's own iterator failed to read."""
        text = f"{type(exc).__name__}: {exc}"
        if resumed:
            text += " (the first read after loading the source's saved state_dict)"
        if self.skip:
            text += (
                "; the skip policy cannot skip it: the source's own iterator raised, which "
                "ends it (a generator that raised is finished), so nothing after it can be "
                "read. Catch the error inside the dataset's __iter__ (skipping the record "
                "there), or fix the record"
            )
        return text

    def _elements(
        self, worker: int, source: Any, start: int, probe: StreamProbe | None = None
    ) -> Iterator[tuple[int, Any]]:
        """``(position, sample)`` of this producer's shard, in read order.

        ``source`` continues after ``start`` elements of its stream (0 unless a saved state
        was loaded into it). ``probe`` digests the first elements read (element mode).
        """
        shards = self.world_size * self.producers
        shard = self.rank * self.producers + worker
        resumed = start > 0
        if self.mode == "worker":  # the worker's own stream, split across ranks by element
            yield from self._own_elements(worker, source, start)
            return
        if self.mode == "element":
            # zip draws the element before the count: after a failure the count is its index
            counter = itertools.count(start)
            first = (shard - start) % shards
            raw = seeded_elements(lambda: source, self.seed, self.epoch, ("stream",), int, start)
            raw = raw if probe is None else probe.wrap(raw)
            picked = itertools.islice(zip(raw, counter, strict=False), first, None, shards)
            try:
                for sample, k in picked:
                    resumed = False
                    yield k, sample
            except Exception as exc:
                k = next(counter)
                owner = k % shards
                by = "" if owner == shard else f" (worker {worker} reads past it)"
                raise data_error(
                    f"stream element {k} (shard {owner} of {shards}: rank "
                    f"{owner // self.producers}, worker {owner % self.producers}) could not be "
                    f"read{by}: {self._read_error(exc, resumed)}",
                    exc,
                    sample_index=k,
                    worker_id=worker,
                ) from exc
            return
        if self.mode == "hook":
            opened: Callable[[], Iterable[Any]] = lambda: getattr(source, SHARD_HOOK)(  # noqa: E731
                shards, shard
            )
        else:  # HF: already split by node; HF splits the node's shards across workers
            opened = lambda: source  # noqa: E731
        stream = seeded_elements(
            opened, self.seed, self.epoch, ("shard", shard), lambda n: n * shards + shard, start
        )
        local = start - 1
        try:
            for local, sample in enumerate(stream, start):
                yield local * shards + shard, sample
        except Exception as exc:
            local += 1
            position = local * shards + shard
            raise data_error(
                f"{self._where(worker, position, local)} could not be read: "
                f"{self._read_error(exc, resumed and local == start)}",
                exc,
                sample_index=position,
                worker_id=worker,
            ) from exc

    def _own_elements(self, worker: int, source: Any, start: int) -> Iterator[tuple[int, Any]]:
        """``(position, sample)`` of a self-splitting source (``splits_by_worker = True``).

        Element ``j`` of this worker's own stream goes to rank ``j mod world_size``, at
        position ``(j // world_size) x shards + shard`` (unique over ranks and workers).
        """
        shards = self.world_size * self.producers
        shard = self.rank * self.producers + worker
        world = self.world_size
        counter = itertools.count(start)
        first = (self.rank - start) % world
        producers = self.producers

        def owner(j: int) -> int:  # the position its owner rank gives element j
            return (j // world) * shards + (j % world) * producers + worker

        own = seeded_elements(
            lambda: source, self.seed, self.epoch, ("worker", worker), owner, start
        )
        picked = itertools.islice(zip(own, counter, strict=False), first, None, world)
        try:
            for sample, j in picked:
                yield (j // world) * shards + shard, sample
        except Exception as exc:
            j = next(counter)
            position = (j // world) * shards + self.rank * self.producers + worker
            raise data_error(
                f"element {j} of worker {worker}'s own stream (the dataset splits itself by "
                f"worker, {WORKER_SPLIT} = True; rank {j % world} of {world} takes it) could "
                f"not be read: {self._read_error(exc, start > 0 and j == start)}",
                exc,
                sample_index=position,
                worker_id=worker,
            ) from exc

    def _read_after(self, position: int) -> int:
        """Elements the producer's iterator has yielded once the one at ``position`` was read."""
        if self.mode == "element":  # it reads the whole stream
            return position + 1
        local = position // (self.world_size * self.producers)
        if self.mode == "worker":  # it reads its own stream, every rank's elements of it
            return local * self.world_size + self.rank + 1
        return local + 1

    def _batches(
        self, worker: int, source: Any, start: int, resumed: bool, probe: StreamProbe | None
    ) -> Generator[StreamItem, None, int]:
        """Make the items of this producer; return the elements ``even_batches`` trimmed.

        ``source`` continues after ``start`` elements; ``resumed``: it loaded a saved state.
        """
        elements = self._elements(worker, source, start, None if resumed else probe)
        if self.buffer_size is not None:
            key = derive_key(self.seed, "stream-buffer", self.epoch, self.rank, worker)
            rng = np.random.Generator(np.random.PCG64(key))
            elements = buffer_shuffle(elements, self.buffer_size, rng)
        size = self.batch_size
        done = self.skips[worker] if worker < len(self.skips) else 0
        if done and not resumed:  # a replay: read the delivered samples again, no batches
            collections.deque(itertools.islice(elements, done * size), maxlen=0)
        stateful = self.stateful and self.buffer_size is None
        gate = self._gate(worker)
        while chunk := list(itertools.islice(elements, size)):
            if len(chunk) < size and self.drop_last:
                return 0
            if gate is not None and not gate.allows(done):  # another rank has no batch `done`
                return len(chunk) + sum(1 for _ in elements)
            positions = [position for position, _ in chunk]
            state = self._state(source, positions[-1]) if stateful else None
            try:
                kept, samples, skipped = self._transform_batch(worker, chunk)
                item = self._batch(worker, done, positions, kept, samples, skipped, state)
            except DataError as error:  # the source is intact: its next batch follows
                item = _error_item(worker, error, consumed=True, state=state)
            yield item._replace(local=done)
            done += 1
        return 0

    def _transform_batch(
        self, worker: int, chunk: list[tuple[int, Any]]
    ) -> tuple[list[int], list[Any], list[Skipped]]:
        """The positions kept, their transformed samples, and what the skip policy dropped."""
        positions = [p for p, _ in chunk]
        samples = [sample for _, sample in chunk]
        if self.step is None:  # nothing can fail: the batch as read
            return positions, samples, []
        failed = functools.partial(self._transform_error, worker)
        if not self.skip:
            return positions, self.step.all(self.epoch, positions, samples, failed), []
        recorded = functools.partial(self._skipped, worker)
        return self.step.skipping(self.epoch, positions, samples, failed, recorded)

    def _state(self, source: Any, position: int) -> dict[str, Any]:
        return {
            "read": self._read_after(position),
            "source": copy.deepcopy(source.state_dict()),
        }

    def _transform_error(
        self, worker: int, position: int, exc: BaseException, why: str = ""
    ) -> DataError:
        shards = self.world_size * self.producers
        return data_error(
            f"{self._where(worker, position, position // shards)} failed in the transform "
            f"in epoch {self.epoch}{f' ({why})' if why else ''}: {type(exc).__name__}: {exc}",
            exc,
            sample_index=position,
            worker_id=worker,
        )

    def _skipped(self, worker: int, position: int, exc: Exception) -> Skipped:
        """The record of an element the skip policy drops.

        Its batch index is -1 until the main process numbers the batch it is delivered in.
        """
        shards = self.world_size * self.producers
        in_worker = torch.utils.data.get_worker_info() is not None
        return Skipped(
            position,
            self.epoch,
            -1,
            worker if in_worker else None,
            type(exc).__name__,
            f"{self._where(worker, position, position // shards)} failed in the transform: "
            f"{type(exc).__name__}: {exc}",
        )

    def _batch(
        self,
        worker: int,
        local: int,
        positions: list[int],
        kept: list[int],
        samples: list[Any],
        skipped: list[Skipped],
        state: dict[str, Any] | None,
    ) -> StreamItem:
        if not samples:  # the skip policy dropped every element
            return StreamItem(
                worker,
                dropped=True,
                skipped=tuple(skipped),
                requested=len(positions),
                state=state,
            )
        # a batch id unique in the epoch: producer-local batch number x shards + shard
        shards = self.world_size * self.producers
        batch_id = local * shards + self.rank * self.producers + worker
        seed_globals(self.seed, "stream-global-rng-collate", self.epoch, batch_id)
        try:
            if self.uses_context:
                context = BatchContext(
                    self.seed, self.epoch, batch_id, np.asarray(kept, dtype=np.int64)
                )
                batch = self.collate(samples, context=context)
            else:
                batch = self.collate(samples)
            self._collated = (kept, samples)
        except Exception as exc:
            raise data_error(
                f"batch {local} of worker {worker} on rank {self.rank} in epoch {self.epoch} "
                f"(stream elements {sample_list(kept)}) could not be collated by "
                f"{self.collator_name!r}: {type(exc).__name__}: {exc}",
                exc,
                sample_index=exc.sample_index if isinstance(exc, DataError) else None,
                worker_id=worker,
                collator=self.collator_name,
            ) from exc
        return StreamItem(
            worker,
            batch,
            tuple(kept),
            skipped=tuple(skipped),
            requested=len(positions),
            state=state,
        )


def _error_item(
    worker: int, error: DataError, *, consumed: bool = False, state: dict[str, Any] | None = None
) -> StreamItem:
    """The item of a failed batch: the error as text (it crosses processes) with its cause."""
    cause = error.__cause__ or error
    text = "".join(traceback.format_exception(cause)).rstrip()
    info = torch.utils.data.get_worker_info()
    kind, original = error.original_type, None if cause is error else cause
    if info is not None:  # a worker's item is pickled to the main process
        kind, original = portable_type(kind), portable_exception(original)
    return StreamItem(
        worker,
        error=f"{error.message}\n\nOriginal traceback {_where(info)}:\n{text}",
        sample_index=error.sample_index,
        collator=error.collator,
        consumed=consumed,
        state=state,
        original_type=kind,
        cause=original,
    )


def _gate_copy(obj: Any) -> Any:
    """The gate's copy of a source (``obj`` itself when it has no attribute dict to copy)."""
    try:
        return _own_copy(obj)
    except TypeError:  # no __dict__ (slots): iterating it twice is all it offers
        return obj


def _own_copy(obj: Any) -> Any:
    """A shallow copy of ``obj`` with an attribute dict of its own.

    Not ``copy.copy``: an HF ``IterableDataset``'s ``__getstate__`` returns its very
    ``__dict__``, so its ``copy.copy`` shares the attributes (a state loaded into the copy
    would stay on the original).
    """
    clone = object.__new__(type(obj))
    clone.__dict__.update(vars(obj))
    return clone


def _where(info: object) -> str:
    return "in the main process" if info is None else f"in worker {getattr(info, 'id', '?')}"
