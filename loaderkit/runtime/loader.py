"""``Loader``: what ``LoaderPlan.build()`` returns.

Each iteration is a pass over an epoch (which one follows the rule in :class:`Loader`), and
the loader knows its position, (epoch, batches delivered). The batch order is computed in the
main process, one :class:`~loaderkit.runtime.records.BatchRequest` at a time, and every batch is
a pure function of its request, so batches are identical for any number of workers and a
resume is O(1): the state is the position, and the next request is computed directly.

The loader is a facade over what it composes: a pass cursor
(:mod:`~loaderkit.runtime.passes.cursor`: the position and the iteration rule, shared with
the :class:`~loaderkit.runtime.stream.loader.StreamLoader`), a skip ledger, a planner and the
requests of its batches, a fetcher and the workers that run it
(:class:`~loaderkit.runtime.passes.host_batches.HostBatches`), and the state format both
loaders write (:mod:`~loaderkit.runtime.passes.state`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from loaderkit.checks import CheckReport, batch_checker, check_loader
from loaderkit.errors import NotBuiltYetError
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.display import loader_html
from loaderkit.plan.fingerprint import compute_elastic_fingerprint
from loaderkit.plan.workers import ResolvedWorkers, resolve_workers
from loaderkit.runtime.cache.samples import CacheStats, open_cache
from loaderkit.runtime.explain import explain_loader
from loaderkit.runtime.fetch.callables import plan_collate
from loaderkit.runtime.fetch.fetcher import plan_fetcher
from loaderkit.runtime.passes.cursor import PassCursor, PassStart
from loaderkit.runtime.passes.device import deliver, resolve_device, wants_pinning
from loaderkit.runtime.passes.epoch_sampler import EpochSampler
from loaderkit.runtime.passes.hooks import PassInfo, hooked
from loaderkit.runtime.passes.host_batches import HostBatches, main_process_reason
from loaderkit.runtime.passes.map_pass import LoaderPass, MapPassParts
from loaderkit.runtime.passes.requests import map_order
from loaderkit.runtime.passes.skips import SkipCounts, SkipLedger
from loaderkit.runtime.passes.state import (
    STATE_VERSION,
    check_map_state,
    load_position,
    write_state,
)
from loaderkit.runtime.passes.surface import NO_DATASET, LoaderSurface, plan_bindings
from loaderkit.runtime.passes.world import resolve_world
from loaderkit.runtime.planners import ListPlanner, Planner
from loaderkit.runtime.planners.dataset_length import LengthCheck
from loaderkit.runtime.records import Skipped
from loaderkit.runtime.workers.storage import warn_copies

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "STATE_VERSION",
    "CheckReport",
    "Loader",
    "plan_bindings",
    "resolve_world",
]


class Loader(LoaderSurface):
    """An iterable of batches that knows its position and can resume from it exactly.

    - ``len(loader)``: batches per epoch on this rank.
    - ``iter(loader)`` starts a new *pass*, as torch's ``DataLoader`` does: the epoch after the
      last pass started (epoch 0 first), from batch 0. So a peek (``next(iter(loader))``) or
      a ``break`` never costs the next loop a batch, and passes without ``set_epoch`` read
      epochs 0, 1, 2, ... in different orders. Two things replace that pass, once:
    - ``set_epoch(e)`` before ``iter()``: the pass is epoch ``e`` from batch 0 (the
      ``DistributedSampler`` habit);
    - ``load_state_dict(state)`` before ``iter()``: the pass resumes exactly where ``state``
      was taken. A state taken inside the loop at the epoch's last batch resumes as an empty
      pass (the rest of that epoch), then the next epoch; a state taken after the pass
      *ended* (its iterator raised ``StopIteration``: after the ``for`` loop) resumes with
      the next epoch, whole, as torchdata's ``StatefulDataLoader`` does. ``set_epoch`` with
      the state's own epoch does not undo a resume. A pass that the loader itself ended with
      :class:`~loaderkit.DataError` or :class:`~loaderkit.WorkerError` is resumed the same way.
    - A pass starts at its iterator's first ``next()``: an iterator never advanced has no
      effect. Keeping an iterator continues its pass; an iterator superseded by a newer
      pass, ``set_epoch``, ``load_state_dict``, ``check`` or ``close`` raises
      ``RuntimeError`` (it takes nothing from the newer pass).
    - ``state_dict()`` / ``load_state_dict()``: a small JSON-serializable position (the
      current or last pass's epoch, batches *delivered to the caller*, not merely
      prefetched, and whether that pass ended) tied to the plan's fingerprint.

    Every loaderkit loader is a ``Loader`` for ``isinstance`` (a
    :class:`~loaderkit.runtime.stream.loader.StreamLoader` too: both implement
    :class:`~loaderkit.runtime.passes.surface.LoaderSurface`, which this class recognises).
    """

    @classmethod
    def __subclasshook__(cls, other: type) -> bool:
        """Any :class:`LoaderSurface` is a ``Loader`` (the stream loader composes, not inherits)."""
        # by the MRO: issubclass(other, LoaderSurface) would ask Loader again (ABC recursion)
        if cls is Loader and LoaderSurface in other.__mro__:
            return True
        return NotImplemented  # type: ignore[no-any-return]  # typeshed: Any

    batch_sampler: None = None
    """Always ``None``: the loader plans its batches itself. Named like torch's ``DataLoader``
    attribute, which tools that inspect data loaders (Lightning) read; see :attr:`sampler`."""

    def __init__(self, plan: LoaderPlan, *, split: str = "train") -> None:
        bindings = plan_bindings(plan)
        if plan.dataset.iterable:
            raise NotBuiltYetError(
                f"dataset {plan.dataset.binding!r} is an iterable (streaming) source; loaders "
                f"over iterable sources arrive with streaming support. Pass a map-style dataset"
            )
        self._lengths = LengthCheck(plan)
        """The planned dataset lengths, checked here and at the start of every pass."""
        self._lengths("at build()")
        self.plan = plan
        self.device = resolve_device(plan.device)
        self.world_size, self.rank, self.distributed_source = resolve_world(plan.distributed)
        self.global_fingerprint = compute_elastic_fingerprint(plan, self.world_size)
        """The fingerprint of the global stream (see ``load_state_dict``)."""
        # None for a mixture (never split)
        order = map_order(
            plan, bindings.get(plan.dataset.binding), split, self.world_size, self.rank
        )
        self._part = order.part
        """The sample indices of the split's part (positions map through it), or ``None``."""
        self.split = order.split
        """The part of the plan's split this loader reads (``None``: the plan has no split)."""
        self.batch_sizes = order.batch_sizes
        self._planner: Planner = order.selected.planner
        self.lengths_cost = order.selected.cost
        """What reading the planner's per-sample values (lengths, weights) cost."""
        self.sampler_planner: ListPlanner | None = order.selected.sampler
        """With bucketing combined with another sampler: that sampler's planner (else ``None``;
        ``explain()`` reports what it chose)."""
        self.sampler_cost = order.selected.sampler_cost
        self.workers = resolve_workers(plan.workers)
        """The worker settings this loader runs with (``"auto"`` resolved on this machine)."""
        self.pin_memory = wants_pinning(plan.workers.pin_memory, self.device)
        collate = plan_collate(plan, self.device)
        self._on_device: Callable[[Any], Any] | None = getattr(collate, "on_device", None)
        self.batch_checks = batch_checker(plan)
        """The plan's batch contract (``with_checks``), run on delivered batches."""
        self._cache = None if plan.cache is None else open_cache(plan, self.workers.num_workers + 1)
        transform = (
            None if plan.transform is None else resolve_callable(plan, plan.transform, "transform")
        )
        self._fetcher = plan_fetcher(
            plan, collate, transform, self._cache, self.workers.num_workers
        )
        self.workers_unused = main_process_reason(self._fetcher, self.workers)
        """Why the plan's workers are not started (``None``: they are, or there are none).

        A source whose every batch is one vectorized gather running none of the user's code
        (tensors, arrays, an HF dataset read by its Arrow table, with the ``default``
        collator and no transform) is read faster in the main process than through workers,
        which add a pickle, a pipe and an unpickle per batch (2 workers read 0.5x the rows
        of none, measured in ``bench_loader``): the loader reads it there. The batches, the
        states and the fingerprints are the same with any worker count.
        """
        if self.workers_unused is not None:
            self.workers = ResolvedWorkers(
                0, pin_memory=self.workers.pin_memory, auto=self.workers.auto
            )
        warn_copies(self._fetcher.storage, self.workers.num_workers)
        self._cursor = PassCursor()
        """The position, the pending pass and the bookkeeping of the passes' iterators."""
        self._skips = SkipLedger(plan.error_policy)
        """What the ``skip`` policy dropped (:attr:`skipped`, :attr:`skip_counts`)."""
        self._host = HostBatches(
            self._fetcher,
            order.requests,
            self.workers,
            places=(plan.order.seed, self.rank, self.pin_memory and self.device.type == "cuda"),
            cursor=self._cursor,
            ledger=self._skips if plan.error_policy.policy == "skip" else None,
        )
        """The host batches of the passes, and the workers that fetch them."""

    @property
    def skipped(self) -> list[Skipped]:
        """The last samples the ``skip`` policy dropped, in order (up to SKIPPED_RECORDS_KEPT).

        The last :data:`~loaderkit.runtime.passes.skips.SKIPPED_RECORDS_KEPT` records (index,
        epoch, batch, worker, exception type, message); :attr:`skip_counts` has the exact
        totals.
        """
        return self._skips.records

    @property
    def _torch_loader(self) -> DataLoader[Any] | None:
        """The torch ``DataLoader`` over the workers while they persist (tests look at it)."""
        return self._host.torch_loader

    @property
    def sampler(self) -> EpochSampler:
        """Where trainers tell the loader its epoch: ``sampler.set_epoch(e)`` is :meth:`set_epoch`.

        Named like a torch ``DataLoader``'s sampler, on which DDP scripts call ``set_epoch``
        and Lightning calls it before every epoch, with the epoch it counts (after a restart
        too: ``set_epoch``'s rule keeps a loaded resume of that very epoch). Not a torch
        sampler: it yields no indices (see
        :class:`~loaderkit.runtime.passes.epoch_sampler.EpochSampler`).
        """
        return EpochSampler(self)

    @property
    def cache_stats(self) -> CacheStats | None:
        """What the sample cache (``with_cache``) did so far, over every fetching process.

        Hits, misses, samples not stored (the cache was full) and the hit rate; ``None``
        without a cache. A worker's counts are seen as soon as it has fetched a batch.
        """
        return None if self._cache is None else self._cache.stats()

    @property
    def dataset(self) -> Any:
        """Not available: raises ``AttributeError`` that names what to use instead.

        Accelerate's ``skip_first_batches`` reads ``.dataset`` to rebuild a torch
        ``DataLoader``, which would lose the plan's order, sharding and collation.
        """
        raise AttributeError(NO_DATASET)

    # -- position ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch on this rank: those of :attr:`epoch`.

        Fixed, unless batches follow a token budget, weights or a batch-size schedule: then
        each epoch can differ, and this is the count of the current (or last) pass's epoch,
        or of the pass a pending ``set_epoch`` / ``load_state_dict`` will start.
        """
        return self._planner.num_batches(self._cursor.epoch)

    @property
    def epoch(self) -> int:
        """The epoch of the current (or last) pass.

        After ``set_epoch(e)`` or ``load_state_dict(state)``: the epoch the next pass will
        read, except for a state taken after its loop ended (``pass_ended``), which leaves
        the loader as the saving one stood: at that epoch, the next pass reading the one
        after it (:attr:`next_pass`). 0 before any pass.
        """
        return self._cursor.epoch

    @property
    def errors(self) -> list[Skipped]:
        """The errors the policy handled: with ``"skip"``, :attr:`skipped` (else empty)."""
        return self.skipped

    @property
    def skip_counts(self) -> SkipCounts:
        """Exact totals of the ``skip`` policy, per run and for the current epoch.

        Counted over the delivered batches, resumes included (they travel in
        ``state_dict()``), even when :attr:`skipped` no longer holds every record.
        """
        return self._skips.counts

    @property
    def repeated_samples(self) -> int:
        """Samples all ranks together deliver twice in the current epoch to even them out.

        With several ranks, ``even_batches`` and ``drop_last=False``, the last global batch is
        completed by wrapping around to the start of the epoch; this counts those samples (0
        otherwise). ``explain()`` shows it too.
        """
        return self._planner.repeated(self._cursor.epoch)

    @property
    def batches_delivered(self) -> int:
        """Batches of :attr:`epoch` handed to the caller in the current (or last) pass.

        ``len(loader)`` once that pass was delivered completely; after ``load_state_dict``,
        the position the next pass resumes from.
        """
        return self._cursor.delivered

    @property
    def next_pass(self) -> tuple[int, int]:
        """(epoch, first batch) of the pass the next ``iter()`` reads; nothing is started.

        The iteration rule of the class docstring: a pending ``load_state_dict`` resumes, a
        pending ``set_epoch(e)`` is ``(e, 0)``, otherwise the epoch after the last pass, from
        0. ``skip_first_batches`` (loaderkit.integrations) positions a pass with it.
        """
        return self._cursor.next_pass

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass (the next ``iter()``) epoch ``epoch`` (an int >= 0), from batch 0.

        The ``DistributedSampler.set_epoch`` habit: called before each pass, the pass is that
        epoch on every rank and in every run. Right after ``load_state_dict(state)`` (before
        the resumed pass started), ``set_epoch`` with the state's own epoch keeps the resume
        (trainers call it with the epoch they resume); another epoch replaces it. An iterator
        still open is superseded.
        """
        self._cursor.set_epoch(epoch)

    def batch_indices(self, epoch: int, batch_index: int) -> list[int]:
        """The sample indices of batch ``batch_index`` of ``epoch`` on this rank."""
        return self._host.requests.batch_indices(epoch, batch_index)

    # -- iteration --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        """A new pass (see the class docstring for which one), started by its first ``next()``.

        An iterator that is never advanced has no effect (Lightning calls ``iter()`` once
        only to check that a loader is iterable); once started, the pass supersedes any
        iterator still open. A :class:`~loaderkit.DataError` raised by ``next()`` does not
        end the pass: the next ``next()`` delivers the batch after the failed one.
        """
        parts = MapPassParts(
            self._cursor,
            self._skips,
            self._begin,
            self._on_device,
            self.batch_checks,
            self.batch_indices,
        )
        return LoaderPass(parts)

    def _begin(self) -> tuple[PassStart, Iterator[Any]]:
        """Start the pass the iteration rule says: where it starts, and its batches.

        A pending ``load_state_dict`` (or a pass a loader error interrupted) resumes; a pending
        ``set_epoch(e)`` starts epoch ``e`` at batch 0; otherwise the epoch after the last
        pass started. O(1), the dataset lengths checked included (a dataset whose length
        changed since ``compile()`` raises :class:`~loaderkit.PlanError`; nothing moves).
        """
        self._lengths(f"at the start of a pass (epoch {self._cursor.next_pass[0]})")
        start = self._cursor.start()
        host = self._host(start.epoch, start.start, start.generation)
        pin_here = self.pin_memory and self.workers.num_workers == 0
        batches = deliver(host, self.device, pin_host=pin_here)
        skipping = self.plan.error_policy.policy == "skip"
        info = PassInfo(self, start.epoch, start.start, self._planner, skipping)
        return start, hooked(info, batches)

    def check(self) -> CheckReport:
        """Run the plan's batch checks (``with_checks``) on the first batch of :attr:`epoch`.

        Returns a :class:`~loaderkit.checks.CheckReport` of what was checked (and the batch's
        keys, dtypes and shapes; without checks only those), or raises
        :class:`~loaderkit.DataError` at the first violation. The position and what the next
        ``iter()`` starts are put back as they were (checking does not count as a pass); an
        iterator in progress is superseded.
        """
        kept = self._cursor.snapshot()
        try:
            return check_loader(self)
        finally:
            self._cursor.restore(kept)

    def close(self) -> None:
        """Stop the worker processes now.

        Persistent workers otherwise live as long as the loader. The loader stays usable: the
        next iteration starts new workers.
        """
        self._host.close()

    def __del__(self) -> None:
        # shut the workers down explicitly, within about a second (torch's own shutdown joins
        # each worker for up to 5 s)
        # not contextlib.suppress: at interpreter exit module globals may already be None
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report at garbage collection
            return

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The position as a small JSON-serializable dict; a fresh copy every call.

        ``epoch`` and ``batches_delivered`` are those of the current (or last) pass, or of
        the pending one after ``set_epoch`` / ``load_state_dict``; after a complete pass
        ``batches_delivered`` is that epoch's batch count. ``pass_ended`` is true once that
        pass's iterator raised ``StopIteration`` (the ``for`` loop is over): such a state
        resumes with the next epoch, whole, while one taken at the last batch inside the loop
        resumes as the empty rest of the epoch (see :meth:`load_state_dict`).
        """
        place: dict[str, Any] = {
            "world_size": self.world_size,
            "rank": self.rank,
            "global_batch_size": self.plan.batch.batch_size * self.world_size,
            "global_fingerprint": self.global_fingerprint,
        }
        split = None if self.split is None else {"split": self.split}  # the part read
        return write_state(self.plan, self._cursor, self._skips, place, tail=split)

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Make the next pass continue exactly where ``state`` was taken: O(1), no replay.

        The next ``iter()`` resumes batch ``batches_delivered`` of the state's epoch. As
        torchdata's ``StatefulDataLoader`` does, a state taken at the last batch of an epoch
        *inside* the loop gives an empty pass (the rest of that epoch) and the pass after it
        is the next epoch, while a state taken after the pass ended (``pass_ended``: its
        iterator raised ``StopIteration``) makes the next pass the next epoch, whole. A
        state without ``pass_ended`` (written by loaderkit before it was recorded) is read as
        not ended. A ``set_epoch`` with the state's own epoch before the resumed pass keeps
        the resume; another epoch replaces it.

        The state must come from a loader of a plan with the same fingerprint, or from one
        whose *global* stream is the same (an elastic resume: another world size with the
        same global batch size, ``batch_size x world_size``, or another rank): the next global
        batch is then the one after the last delivered. Otherwise
        :class:`~loaderkit.ResumeError` says why and shows the differences (``strict=False``
        accepts it and only checks that the position fits this loader).
        """
        place = (self.world_size, self.rank, self.split, self.global_fingerprint)
        check_map_state(state, self.plan, place, self._planner.num_batches, strict=strict)
        load_position(state, self._cursor, self._skips)

    # -- display ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        epoch, delivered = self._cursor.position
        return (
            f"Loader(plan={self.plan.fingerprint[:12]}, epoch={epoch}, "
            f"batch={delivered}/{len(self)}, rank={self.rank}/{self.world_size}, "
            f"device={self.device})"
        )

    def explain(self) -> str:
        """The plan's report plus what was resolved on this machine.

        Where rank and world size came from, the device, and for bucketed plans what measuring
        the lengths cost and the padding of the current epoch on this rank (for bucketing
        combined with weights, a curriculum or a mixture: how many samples that sampler chose
        for the epoch on this rank, and what reading its values cost).
        """
        return explain_loader(self, self._planner, self._part, self._fetcher, self._cursor)

    def _repr_html_(self) -> str:
        return loader_html(self)
