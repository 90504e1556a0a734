"""``Loader``: what ``LoaderPlan.build()`` returns.

Each iteration is a pass over an epoch (which one follows the rule in :class:`Loader`), and
the loader knows its position, (epoch, batches delivered). The batch order is computed in the
main process, one :class:`~loaderkit.runtime.fetch.fetcher.BatchRequest` at a time, and every batch
is a
pure function of its request, so batches are identical for any number of workers and a resume
is O(1): the state is the position, and the next request is computed directly.
"""

from __future__ import annotations

import collections
import copy
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from torch.utils.data import DataLoader

from loaderkit.checks import CheckReport, batch_checker, check_loader
from loaderkit.errors import NotBuiltYetError, PlanError, ResumeError, WorkerError
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.display import loader_html
from loaderkit.plan.fingerprint import compute_elastic_fingerprint
from loaderkit.plan.sections.common import default_start_method
from loaderkit.plan.workers import ResolvedWorkers, resolve_workers
from loaderkit.runtime.cache.samples import CacheStats, open_cache
from loaderkit.runtime.explain import explain_loader
from loaderkit.runtime.fetch.callables import plan_collate
from loaderkit.runtime.fetch.fetcher import plan_fetcher
from loaderkit.runtime.passes.device import deliver, resolve_device, wants_pinning
from loaderkit.runtime.passes.epoch_sampler import EpochSampler
from loaderkit.runtime.passes.host_batches import host_batches
from loaderkit.runtime.passes.map_pass import LoaderPass
from loaderkit.runtime.passes.requests import Requests, RequestSampler
from loaderkit.runtime.passes.skips import SKIPPED_RECORDS_KEPT, SkipCounts, over_budget
from loaderkit.runtime.passes.state import (
    STATE_VERSION,
    check_epoch,
    check_state_shape,
    check_stream,
    read_pass_ended,
)
from loaderkit.runtime.passes.world import resolve_world
from loaderkit.runtime.planners import (
    ListPlanner,
    Planner,
    PlannerContext,
    select_planner,
)
from loaderkit.runtime.planners.dataset_length import LengthCheck
from loaderkit.runtime.planners.schedules import batch_sizes, max_lengths
from loaderkit.runtime.planners.split import split_part
from loaderkit.runtime.records import NO_BATCH, Fetched, Skipped
from loaderkit.runtime.workers.diagnosis import broken_pool
from loaderkit.runtime.workers.pool import shutdown_pool
from loaderkit.runtime.workers.storage import warn_copies

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "STATE_VERSION",
    "CheckReport",
    "Loader",
    "build_loader",
    "plan_bindings",
    "resolve_world",
]

_LOG = logging.getLogger("loaderkit")

_STATE_KEYS = (
    "loaderkit_state",
    "fingerprint",
    "epoch",
    "batches_delivered",
    "world_size",
    "rank",
    "plan",
)


_Pending = Literal["set", "resume", "next"]


class Loader:
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
    """

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
        n = plan.dataset.length
        assert n is not None
        data = bindings.get(plan.dataset.binding)  # None for a mixture (never split)
        self._part = split_part(data, plan.dataset, plan.split, plan.order.seed, split)
        """The sample indices of the split's part (positions map through it), or ``None``."""
        self.split = None if plan.split is None else split
        """The part of the plan's split this loader reads (``None``: the plan has no split)."""
        if self._part is not None:
            n = len(self._part)
        self.batch_sizes = batch_sizes(plan)
        self._max_lengths = max_lengths(plan)
        context = PlannerContext(plan, n, self._part, self.world_size, self.rank, self.batch_sizes)
        selected = select_planner(context)
        self._planner: Planner = selected.planner
        self.lengths_cost = selected.cost
        """What reading the planner's per-sample values (lengths, weights) cost."""
        self.sampler_planner: ListPlanner | None = selected.sampler
        """With bucketing combined with another sampler: that sampler's planner (else ``None``;
        ``explain()`` reports what it chose)."""
        self.sampler_cost = selected.sampler_cost
        self._request_plan = Requests(self._planner, self._part, self._max_lengths)
        self.workers = resolve_workers(plan.workers)
        """The worker settings this loader runs with (``"auto"`` resolved on this machine)."""
        self.pin_memory = wants_pinning(plan.workers.pin_memory, self.device)
        collate = plan_collate(plan, self.device)
        self._on_device: Callable[[Any], Any] | None = getattr(collate, "on_device", None)
        self.batch_checks = batch_checker(plan)
        """The plan's batch contract (``with_checks``), run on delivered batches."""
        transform = (
            None if plan.transform is None else resolve_callable(plan, plan.transform, "transform")
        )
        self._cache = None if plan.cache is None else open_cache(plan, self.workers.num_workers + 1)
        self._fetcher = plan_fetcher(
            plan, collate, transform, self._cache, self.workers.num_workers
        )
        self.workers_unused: str | None = None
        """Why the plan's workers are not started (``None``: they are, or there are none).

        A source whose every batch is one vectorized gather running none of the user's code
        (tensors, arrays, an HF dataset read by its Arrow table, with the ``default``
        collator and no transform) is read faster in the main process than through workers,
        which add a pickle, a pipe and an unpickle per batch (2 workers read 0.5x the rows
        of none, measured in ``bench_loader``): the loader reads it there. The batches, the
        states and the fingerprints are the same with any worker count.
        """
        if self.workers.num_workers > 0 and self._fetcher.gathers():
            self.workers_unused = (
                f"{self.workers.num_workers} worker(s) {'chosen' if self.workers.auto else 'given'}"
                f", none started: every batch of this source is one vectorized gather (the "
                f"default collator, no transform), read faster in the main process than sent "
                f"from a worker; workers pay for themselves with a transform, a collator of "
                f"yours or per-sample Python code"
            )
            self.workers = ResolvedWorkers(
                0, pin_memory=self.workers.pin_memory, auto=self.workers.auto
            )
            # read in the main process: nothing a dataset holds is copied, nothing to say
            self._fetcher.storage = tuple(r for r in self._fetcher.storage if not r.held)
        warn_copies(self._fetcher.storage, self.workers.num_workers)
        self.skipped: list[Skipped] = []
        """The last :data:`~loaderkit.runtime.passes.skips.SKIPPED_RECORDS_KEPT` samples the
        ``skip`` policy dropped, in order (index, epoch, batch, worker, exception type, message);
        :attr:`skip_counts` has the exact totals."""
        self._skip_counts = SkipCounts()
        self._unsettled: collections.deque[Fetched] = collections.deque()
        """The skip records of the host batches fetched but not yet delivered (in order)."""
        self._epoch = 0
        self._delivered = 0
        self._generation = 0
        self._moves = 0
        """Counts the moves of the position (passes started, set_epoch, load_state_dict)."""
        self._pending: _Pending = "set"
        """What the next ``iter()`` starts: ``"set"`` epoch ``_epoch`` at batch 0, ``"resume"``
        ``_epoch`` at batch ``_delivered``, ``"next"`` the epoch after ``_epoch``."""
        self._pass_ended = False
        """Whether the pass at ``_epoch`` ended (its iterator raised ``StopIteration``)."""
        self._torch_loader: DataLoader[Any] | None = None
        self._sampler: RequestSampler | None = None
        self._pool: object = None
        """The torch iterator of the workers in use (persistent or not), or ``None``."""

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
        raise AttributeError(
            "a loaderkit loader has no .dataset for Accelerate's skip_first_batches() to rebuild "
            "a DataLoader from (that would lose the plan's order, sharding and collation); use "
            "loaderkit.integrations.accelerate.skip_first_batches(loader, n), or resume with "
            "loader.load_state_dict(state)"
        )

    # -- position ---------------------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch on this rank: those of :attr:`epoch`.

        Fixed, unless batches follow a token budget, weights or a batch-size schedule: then
        each epoch can differ, and this is the count of the current (or last) pass's epoch,
        or of the pass a pending ``set_epoch`` / ``load_state_dict`` will start.
        """
        return self._planner.num_batches(self._cursor()[0])

    @property
    def epoch(self) -> int:
        """The epoch of the current (or last) pass.

        After ``set_epoch(e)`` or ``load_state_dict(state)``: the epoch the next pass will
        read, except for a state taken after its loop ended (``pass_ended``), which leaves
        the loader as the saving one stood: at that epoch, the next pass reading the one
        after it (:attr:`next_pass`). 0 before any pass.
        """
        return self._cursor()[0]

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
        return self._skip_counts

    @property
    def repeated_samples(self) -> int:
        """Samples all ranks together deliver twice in the current epoch to even them out.

        With several ranks, ``even_batches`` and ``drop_last=False``, the last global batch is
        completed by wrapping around to the start of the epoch; this counts those samples (0
        otherwise). ``explain()`` shows it too.
        """
        return self._planner.repeated(self._cursor()[0])

    @property
    def batches_delivered(self) -> int:
        """Batches of :attr:`epoch` handed to the caller in the current (or last) pass.

        ``len(loader)`` once that pass was delivered completely; after ``load_state_dict``,
        the position the next pass resumes from.
        """
        return self._cursor()[1]

    @property
    def next_pass(self) -> tuple[int, int]:
        """(epoch, first batch) of the pass the next ``iter()`` reads; nothing is started.

        The iteration rule of the class docstring, as ``_start_pass`` applies it: a pending
        ``load_state_dict`` resumes, a pending ``set_epoch(e)`` is ``(e, 0)``, otherwise the
        epoch after the last pass, from 0. ``skip_first_batches`` (loaderkit.integrations)
        positions a pass with it.
        """
        if self._pending == "next":
            return self._epoch + 1, 0
        if self._pending == "set":
            return self._epoch, 0
        return self._epoch, self._delivered

    def _cursor(self) -> tuple[int, int]:
        """(epoch, batches delivered) of the current or last pass, or of the pending one."""
        return self._epoch, self._delivered

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass (the next ``iter()``) epoch ``epoch`` (an int >= 0), from batch 0.

        The ``DistributedSampler.set_epoch`` habit: called before each pass, the pass is that
        epoch on every rank and in every run. Right after ``load_state_dict(state)`` (before
        the resumed pass started), ``set_epoch`` with the state's own epoch keeps the resume
        (trainers call it with the epoch they resume); another epoch replaces it. An iterator
        still open is superseded.
        """
        epoch = check_epoch(epoch)
        if self._pending == "resume" and epoch == self._epoch:
            return  # keep the loaded (or interrupted) position of this very epoch
        self._set_pending(epoch)
        self._generation += 1
        self._moves += 1

    def _set_pending(self, epoch: int) -> None:
        """Make the next pass epoch ``epoch`` from batch 0 (the position is reset)."""
        self._epoch, self._delivered = epoch, 0
        self._pending = "set"
        self._pass_ended = False

    def batch_indices(self, epoch: int, batch_index: int) -> list[int]:
        """The sample indices of batch ``batch_index`` of ``epoch`` on this rank."""
        positions = self._planner.indices(epoch, batch_index)
        part = self._part  # with a split, the planner's positions index the part
        indices: list[int] = (positions if part is None else part[positions]).tolist()
        return indices

    # -- iteration --------------------------------------------------------------------------

    def _broken_pool(
        self, iterator: object, exc: Exception, where: tuple[int, int] | None = None
    ) -> WorkerError | None:
        """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

        The pool is then shut down and the loader closed (the next iteration starts new
        workers); ``where`` is (epoch, first batch) of the pass. See :func:`broken_pool`.
        """
        return broken_pool(
            iterator,
            exc,
            self.workers.timeout,
            where,
            self.batch_indices,
            self.close,
            start_method=self.workers.start_method or default_start_method(),
        )

    def _settle(self, batch: Any) -> Any:
        """Count the skip records of ``batch``, the host batch being delivered now."""
        if not self._unsettled:  # not the skip policy
            return batch
        fetched = self._unsettled.popleft()
        return self._account(fetched._replace(batch=None if batch is NO_BATCH else batch))

    def _account(self, fetched: Fetched) -> Any:
        """Count and record what the skip policy dropped from the batch delivered now.

        Raises once the budget is spent (that batch is then neither delivered nor counted).
        """
        records = fetched.skipped
        for record in records:
            _LOG.warning("loaderkit skipped %s", record.message)
        if records:
            self.skipped.extend(records)
            if len(self.skipped) > SKIPPED_RECORDS_KEPT:
                del self.skipped[: len(self.skipped) - SKIPPED_RECORDS_KEPT]
        counts = self._skip_counts.add(
            self._epoch, self._delivered == 0, fetched.requested, records
        )
        if records:
            error = over_budget(self.plan.error_policy, counts, records[-1])
            if error is not None:
                raise error
        self._skip_counts = counts
        return NO_BATCH if fetched.batch is None else fetched.batch

    def __iter__(self) -> Iterator[Any]:
        """A new pass (see the class docstring for which one), started by its first ``next()``.

        An iterator that is never advanced has no effect (Lightning calls ``iter()`` once
        only to check that a loader is iterable); once started, the pass supersedes any
        iterator still open. A :class:`~loaderkit.DataError` raised by ``next()`` does not
        end the pass: the next ``next()`` delivers the batch after the failed one.
        """
        return LoaderPass(self)

    def _start_pass(self) -> tuple[int, int]:
        """Apply the iteration rule: the (epoch, first batch) of the pass starting now.

        A pending ``load_state_dict`` (or a pass a loader error interrupted) resumes; a pending
        ``set_epoch(e)`` starts epoch ``e`` at batch 0; otherwise the epoch after the last
        pass started. O(1), the dataset lengths checked included (a dataset whose length
        changed since ``compile()`` raises :class:`~loaderkit.PlanError`; nothing moves).
        """
        epoch, start = self.next_pass
        self._lengths(f"at the start of a pass (epoch {epoch})")
        self._epoch, self._delivered = epoch, start
        self._pending = "next"
        self._pass_ended = False
        self._generation += 1
        self._moves += 1
        return self._epoch, self._delivered

    def _superseded(self, generation: int) -> None:
        """Raise if the pass of ``generation`` is no longer the loader's current one."""
        if generation != self._generation:
            raise RuntimeError(
                "this iterator was superseded: iter(), set_epoch(), load_state_dict(), check() "
                "or close() was called on the loader since it started; its pass ended there "
                "and it delivers nothing more (no batch of the newer pass is taken from it); "
                "iterate the newest one"
            )

    def _interrupted(self, moves: int) -> None:
        """After a loader error in a pass: the next ``iter()`` resumes it where it stopped.

        ``moves`` is :attr:`_moves` when the pass started; if the position was moved since
        (``set_epoch``, ``load_state_dict``, a newer pass), that move stands. A broken pool's
        ``close()`` does not move the position. After a raise-policy ``DataError`` the failed
        batch is already consumed (as in torch): the resumed pass goes on after it.
        """
        if moves == self._moves:
            self._pending = "resume"

    def _ended(self, moves: int) -> None:
        """The pass of ``moves`` ended (its iterator raised ``StopIteration``).

        A state taken from now on (until the position moves) says so, and resumes with the
        next epoch, whole; one taken at the last batch, inside the loop, resumes as the
        empty rest of this epoch.
        """
        if moves == self._moves:
            self._pass_ended = True

    def _resumed(self, moves: int) -> None:
        """The pass a loader error interrupted goes on: it is no longer to be resumed."""
        if moves == self._moves and self._pending == "resume":
            self._pending = "next"

    def _deliverable(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches of a pass, on the device (not yet finished or checked)."""
        host = host_batches(self, epoch, start, generation)
        pin_here = self.pin_memory and self.workers.num_workers == 0
        return deliver(host, self.device, pin_host=pin_here)

    def check(self) -> CheckReport:
        """Run the plan's batch checks (``with_checks``) on the first batch of :attr:`epoch`.

        Returns a :class:`~loaderkit.checks.CheckReport` of what was checked (and the batch's
        keys, dtypes and shapes; without checks only those), or raises
        :class:`~loaderkit.DataError` at the first violation. The position and what the next
        ``iter()`` starts are put back as they were (checking does not count as a pass); an
        iterator in progress is superseded.
        """
        kept = self._epoch, self._delivered, self._pending, self._pass_ended
        try:
            return check_loader(self)
        finally:
            self._epoch, self._delivered, self._pending, self._pass_ended = kept
            self._generation += 1
            self._moves += 1

    def close(self) -> None:
        """Stop the worker processes now.

        Persistent workers otherwise live as long as the loader. The loader stays usable: the
        next iteration starts new workers.
        """
        self._generation += 1
        pool, self._pool = self._pool, None
        torch_loader = self._torch_loader
        self._torch_loader = None
        self._sampler = None
        if torch_loader is not None:
            iterator = getattr(torch_loader, "_iterator", None)  # the persistent workers
            torch_loader._iterator = None
            shutdown_pool(iterator)
        shutdown_pool(pool)

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
        epoch, delivered = self._cursor()
        state: dict[str, Any] = {
            "loaderkit_state": STATE_VERSION,
            "fingerprint": self.plan.fingerprint,
            "epoch": epoch,
            "batches_delivered": delivered,
            "pass_ended": self._pass_ended,
            "world_size": self.world_size,
            "rank": self.rank,
            "global_batch_size": self.plan.batch.batch_size * self.world_size,
            "global_fingerprint": self.global_fingerprint,
            "plan": copy.deepcopy(self.plan.to_dict()),
        }
        if self.split is not None:  # the part of the split this loader reads
            state["split"] = self.split
        if self.plan.error_policy.policy == "skip":  # the counts the budget goes on from
            state["skips"] = self._skip_counts.to_state()
        return state

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
        check_state_shape(state, _STATE_KEYS, "loader", "Loader")
        if strict and state.get("split") != self.split:
            raise ResumeError(
                f"the state was saved by a loader of the {state.get('split')!r} part of the "
                f"split, this loader reads the {self.split!r} part: another part is another "
                f"stream; load it into plan.build(split={state.get('split')!r}), or pass "
                f"strict=False to take the position anyway"
            )
        if strict:
            check_stream(state, self.plan, self.world_size, self.rank, self.global_fingerprint)
        epoch, delivered = state["epoch"], state["batches_delivered"]
        if delivered and delivered > self._planner.num_batches(epoch):
            raise ResumeError(
                f"the state has {delivered} batches of epoch {epoch} delivered but that epoch "
                f"of this loader has {self._planner.num_batches(epoch)}"
            )
        ended = read_pass_ended(state)
        counts = SkipCounts.from_state(state.get("skips"))
        self._skip_counts = counts
        self._epoch, self._delivered = epoch, delivered
        # as the saving loader stood: after its loop ended the next pass is the next epoch,
        # whole; otherwise the pass resumes where the state was taken
        self._pending = "next" if ended else "resume"
        self._pass_ended = ended
        self._generation += 1
        self._moves += 1

    # -- display ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        epoch, delivered = self._cursor()
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
        return explain_loader(self, self._planner, self._part)

    def _repr_html_(self) -> str:
        return loader_html(self)


def plan_bindings(plan: LoaderPlan) -> Mapping[str, object]:
    """The live objects ``plan`` is built with; :class:`PlanError` for a plan without them."""
    if plan.bindings is None:
        raise PlanError.single(
            "bindings",
            "this plan was loaded without its live objects (require_bindings=False); load "
            "it again with bindings={...} to build it",
        )
    return plan.bindings


def build_loader(plan: LoaderPlan, *, split: str = "train") -> Loader:
    """Make the :class:`Loader` for ``plan`` (for ``split``, the part of its split).

    An iterable (streamed) dataset gets a :class:`~loaderkit.runtime.stream.loader.StreamLoader`.
    """
    if plan.dataset.iterable and plan.bindings is not None:
        from loaderkit.runtime.stream.loader import StreamLoader  # it builds on this module

        return StreamLoader(plan)
    return Loader(plan, split=split)
