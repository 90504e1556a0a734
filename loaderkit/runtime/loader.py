"""``Loader``: what ``LoaderPlan.build()`` returns.

Each iteration is a pass over an epoch (which one follows the rule in :class:`Loader`), and
the loader knows its position, (epoch, batches delivered). The batch order is computed in the
main process, one :class:`~loaderkit.runtime.fetch.BatchRequest` at a time, and every batch is a
pure function of its request, so batches are identical for any number of workers and a resume
is O(1): the state is the position, and the next request is computed directly.
"""

from __future__ import annotations

import collections
import copy
import functools
import logging
import os
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data._utils import signal_handling

from loaderkit.checks import CheckReport, batch_checker, check_loader
from loaderkit.collators import collators
from loaderkit.errors import DataError, NotBuiltYetError, PlanError, ResumeError, WorkerError
from loaderkit.order.batches import EpochBatches
from loaderkit.order.bucketing import (
    bucket_ids,
    bucketed_batches,
    bucketed_sequence_batches,
    oversize_message,
    oversize_sample,
    padding_stats,
)
from loaderkit.order.curriculum import (
    competence,
    curriculum_epoch_batches,
    curriculum_step_batches,
    difficulty_order,
    eligible_count,
)
from loaderkit.order.epoch import EpochOrder
from loaderkit.order.keys import derive_key
from loaderkit.order.mixture import mixture_batches, mixture_num_batches, source_of
from loaderkit.order.padding import BatchPadding
from loaderkit.order.shard import ShardLayout
from loaderkit.order.weighted import weighted_batches
from loaderkit.plan.display import bucket_plan, budget_split, diff_dicts, loader_html
from loaderkit.plan.fields import batch_size_value
from loaderkit.plan.fingerprint import compute_elastic_fingerprint
from loaderkit.plan.padding_rule import bucket_padding
from loaderkit.plan.sections.max_length import max_length_value
from loaderkit.plan.sections.mixture import source_weights
from loaderkit.plan.workers import resolve_workers
from loaderkit.runtime.cache import CachedSource, CacheStats, open_cache
from loaderkit.runtime.dataset_length import LengthCheck
from loaderkit.runtime.device import deliver, resolve_device, wants_pinning
from loaderkit.runtime.fetch import (
    BatchFetcher,
    BatchRequest,
    Failure,
    Fetched,
    Skipped,
    WorkerSeeder,
    failure_from,
)
from loaderkit.runtime.lengths import mixture_lengths, sample_lengths, sample_weights
from loaderkit.runtime.schedules import Schedule
from loaderkit.runtime.skips import SKIPPED_RECORDS_KEPT, SkipCounts, over_budget
from loaderkit.runtime.sources import MixtureSource, Source, make_source
from loaderkit.runtime.split import split_part
from loaderkit.transforms import transforms

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import (
        BatchSpec,
        BucketingSpec,
        CallableSpec,
        CurriculumSpec,
        DistributedSpec,
        MixtureSpec,
        WeightsSpec,
    )

__all__ = ["STATE_VERSION", "CheckReport", "Loader", "build_loader", "resolve_world"]

STATE_VERSION = 1
"""The version of the ``state_dict()`` format."""

_STATE_KEYS = (
    "loaderkit_state",
    "fingerprint",
    "epoch",
    "batches_delivered",
    "world_size",
    "rank",
    "plan",
)


def resolve_world(spec: DistributedSpec) -> tuple[int, int, str]:
    """(world size, rank, where they came from) for this process.

    Raises:
        PlanError: at path ``distributed``, when the plan does not shard
            (no ``with_distributed()``) but this process is one of several ranks (an
            initialized ``torch.distributed`` group of more than one process, or
            ``WORLD_SIZE`` > 1 in the environment, as torchrun sets): every rank would read
            the whole dataset. The message names the fix and the explicit opt-out
            (``with_distributed(world_size=1, rank=0)``).

    """
    if not spec.enabled:
        _refuse_unsharded_ranks()
        return 1, 0, "single process"
    if spec.world_size is not None and spec.rank is not None:
        return spec.world_size, spec.rank, "given explicitly"
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank(), "torch.distributed process group"
    env_world, env_rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if env_world is not None or env_rank is not None:
        try:
            world, rank = int(env_world or ""), int(env_rank or "")
        except ValueError:
            raise PlanError.single(
                "distributed",
                f"RANK={env_rank!r} and WORLD_SIZE={env_world!r} in the environment are not "
                f"both integers; launch with torchrun or pass with_distributed(world_size=..., "
                f"rank=...)",
            ) from None
        if world < 1 or not 0 <= rank < world:
            raise PlanError.single(
                "distributed",
                f"RANK={rank} is outside [0, WORLD_SIZE={world}) in the environment",
            )
        return world, rank, "RANK/WORLD_SIZE environment (torchrun)"
    return 1, 0, "single process (no process group, no RANK/WORLD_SIZE set)"


def _unsharded_world() -> tuple[int, str] | None:
    """(world size, where it was seen) when this process is one of several ranks, else None."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_world_size(), "an initialized torch.distributed process group"
    text = os.environ.get("WORLD_SIZE", "").strip()
    try:
        world = int(text)
    except ValueError:
        return None  # not a launcher's value: nothing to say about ranks
    return (world, f"WORLD_SIZE={world} in the environment (torchrun)") if world > 1 else None


def _refuse_unsharded_ranks() -> None:
    """Raise :class:`PlanError` if a plan without sharding is built on one of several ranks."""
    found = _unsharded_world()
    if found is None:
        return
    world, where = found
    raise PlanError.single(
        "distributed",
        f"this process is one of {world} ranks ({where}) but the plan does not shard: every "
        f"rank would read the whole dataset, each epoch {world} times over. Add "
        f".with_distributed() to give each rank its part (rank and world size are detected "
        f"at build), or .with_distributed(world_size=1, rank=0) if every rank should read "
        f"everything on purpose (e.g. an evaluation repeated on each rank)",
    )


def _check_state_shape(
    state: object,
    keys: Sequence[str],
    kind: str,
    maker: str,
    counts: Sequence[str] = ("epoch", "batches_delivered", "world_size", "rank"),
) -> None:
    """Raise :class:`ResumeError` unless ``state`` is a dict of this format with ``keys``.

    ``kind`` and ``maker`` name the state and the class whose ``state_dict()`` makes it;
    each of ``counts`` must be an int >= 0.
    """
    if not isinstance(state, Mapping):
        raise ResumeError(f"a loader state is a dict (got {type(state).__name__})")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ResumeError(
            f"not a loaderkit {kind} state: missing {', '.join(missing)}; pass what "
            f"{maker}.state_dict() returned"
        )
    if state["loaderkit_state"] != STATE_VERSION:
        raise ResumeError(
            f"state format {state['loaderkit_state']!r} is not the one this loaderkit "
            f"reads ({STATE_VERSION})"
        )
    for key in counts:
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ResumeError(f"state[{key!r}] must be an int >= 0 (got {value!r})")


def _batch_sizes(plan: LoaderPlan) -> Schedule[int]:
    """The batch size as a function of the epoch or step."""
    b = plan.batch
    fn = None if b.fn is None else _resolve_callable(plan, b.fn, "batch.batch_size")
    return Schedule(
        "batch.batch_size",
        b.by,
        fixed=b.batch_size,
        table=b.schedule,
        fn=fn,
        check=batch_size_value,
    )


def _max_lengths(plan: LoaderPlan) -> Schedule[int] | None:
    """The sequence length of ``with_max_length`` as a function of the epoch or step."""
    m = plan.max_length
    if m is None:
        return None
    fn = None if m.fn is None else _resolve_callable(plan, m.fn, "max_length")
    return Schedule(
        "max_length", m.by, fixed=m.value, table=m.schedule, fn=fn, check=max_length_value
    )


def _resolve_callable(plan: LoaderPlan, spec: CallableSpec, kind: str) -> Callable[..., Any]:
    if spec.source == "registry":
        if kind == "collator":
            collate: Callable[..., Any] = collators.get(spec.name).factory(**dict(spec.options))
            return collate
        return transforms.get(spec.name).factory
    assert plan.bindings is not None
    obj = plan.bindings[spec.name]
    if not callable(obj):
        raise PlanError.single(kind, f"the object bound to {spec.name!r} is not callable ({obj!r})")
    return obj


class _Planner:
    """Fixed-size batches of one rank: requests computed directly from (epoch, batch).

    The batch size may follow a per-epoch schedule: each epoch has its own layout.
    """

    def __init__(
        self,
        n: int,
        seed: int,
        shuffle: bool,
        layout: Callable[[int], ShardLayout],
    ) -> None:
        self.n = n
        self.seed = seed
        self.shuffle = shuffle
        self.layout_for = layout
        self._layout: tuple[int, ShardLayout] | None = None
        self._order: EpochOrder | None = None

    def layout(self, epoch: int) -> ShardLayout:
        cached = self._layout
        if cached is None or cached[0] != epoch:
            cached = self._layout = (epoch, self.layout_for(epoch))
        return cached[1]

    def order(self, epoch: int) -> EpochOrder:
        order = self._order
        if order is None or order.epoch != epoch:  # keep one: epochs are visited in turn
            order = self._order = EpochOrder(self.n, self.seed, epoch, self.shuffle)
        return order

    def num_batches(self, epoch: int) -> int:
        return len(self.layout(epoch))

    def repeated(self, epoch: int) -> int:
        """Samples all ranks deliver a second time in ``epoch`` to even out the ranks."""
        return self.layout(epoch).repeated

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        cached = self._order
        order = cached if cached is not None and cached.epoch == epoch else None
        if order is None:  # another epoch: do not evict the order iteration is using
            order = EpochOrder(self.n, self.seed, epoch, self.shuffle)
        return self.layout(epoch).indices(order, batch_index)

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        order = self.order(epoch)
        layout = self.layout(epoch)
        for b in range(start, len(layout)):
            yield BatchRequest(epoch, b, layout.indices(order, b))


class _StepSizedPlanner:
    """Batches whose size follows a per-step schedule, over the plain epoch order.

    Step ``t`` counts the batches a rank delivered since training started (epochs before
    included). The global batch of step ``t`` holds ``size(t) x world_size`` consecutive
    positions of the epoch order, rank ``r`` taking the ``r``-th slice of ``size(t)``; the
    tail follows the fixed-size rules (dropped with ``drop_last``; with even batches,
    completed by wrapping around to the start of the epoch order; else ranks past the end get
    nothing).
    """

    def __init__(
        self,
        n: int,
        seed: int,
        shuffle: bool,
        sizes: Schedule[int],
        world_size: int,
        rank: int,
        drop_last: bool,
        even: bool,
    ) -> None:
        self.n = n
        self.seed = seed
        self.shuffle = shuffle
        self.sizes = sizes
        self.world_size = world_size
        self.rank = rank
        self.drop_last = drop_last
        self.even = even
        self._starts: list[int] = [0]  # first step of each epoch walked so far
        self._epoch: tuple[int, EpochBatches] | None = None

    def _walk(self, epoch: int) -> list[tuple[int, int]]:
        """(start position, size) of this rank's batches in ``epoch`` (before wrapping)."""
        t = self.first_step(epoch)
        n, world, rank = self.n, self.world_size, self.rank
        out: list[tuple[int, int]] = []
        used = 0
        while used < n:
            size = self.sizes(t)
            whole = size * world
            if used + whole > n:  # the tail
                if self.drop_last:
                    break
                if self.even and world > 1:
                    out.append((used + rank * size, size))
                else:
                    start = used + rank * size
                    if start < n:
                        out.append((start, min(size, n - start)))
                break
            out.append((used + rank * size, size))
            used += whole
            t += 1
        return out

    def _steps(self, epoch: int) -> int:
        """Steps of ``epoch`` (the same on every rank, as rank 0 counts them)."""
        n, world = self.n, self.world_size
        t = self._starts[epoch]
        steps, used = 0, 0
        while used < n:
            whole = self.sizes(t + steps) * world
            if used + whole > n and self.drop_last:
                break
            steps += 1
            used += whole
        return steps

    def first_step(self, epoch: int) -> int:
        """Batches delivered per rank before ``epoch`` (each epoch walked once, cached)."""
        starts = self._starts
        while len(starts) <= epoch:
            starts.append(starts[-1] + self._steps(len(starts) - 1))
        return starts[epoch]

    def batches(self, epoch: int) -> EpochBatches:
        cached = self._epoch
        if cached is None or cached[0] != epoch:
            plan = self._walk(epoch)
            order = EpochOrder(self.n, self.seed, epoch, self.shuffle)
            sizes = np.asarray([size for _, size in plan], dtype=np.int64)
            offsets = np.zeros(len(plan) + 1, dtype=np.int64)
            np.cumsum(sizes, out=offsets[1:])
            positions = np.concatenate(
                [np.arange(a, a + k, dtype=np.int64) for a, k in plan]
                or [np.empty(0, dtype=np.int64)]
            )
            indices = order.at(positions % max(self.n, 1)) if positions.size else positions
            cached = self._epoch = (epoch, EpochBatches(indices.astype(np.int64), offsets))
        return cached[1]

    def num_batches(self, epoch: int) -> int:
        return len(self.batches(epoch))

    def repeated(self, epoch: int) -> int:
        """Samples all ranks deliver a second time in ``epoch`` (the wrapped tail)."""
        if not self.even or self.drop_last or self.world_size == 1:
            return 0
        plan = self._walk(epoch)
        if not plan:
            return 0
        start, size = plan[-1]
        tail_start = start - self.rank * size  # the last global batch's first position
        return max(tail_start + size * self.world_size - self.n, 0)

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        return self.batches(epoch).batch(batch_index)

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        batches = self.batches(epoch)
        for b in range(start, len(batches)):
            yield BatchRequest(epoch, b, batches.batch(b))


class _ListPlanner:
    """Epochs made as a list of *global* batches (bucketing, weights, curricula, mixtures).

    The epoch's global batches (``world_size x`` the per-rank size, see :meth:`global_size`)
    are computed once per epoch (O(n), vectorized) and kept; this rank holds its slice of
    each (:meth:`EpochBatches.split`), so the ranks' ``s``-th batches make global batch
    ``s`` whatever the world size. Planners whose global batches have no fixed size (token
    budgets) deal whole batches to ranks round-robin instead (``elastic = False``).
    """

    elastic = True

    def __init__(
        self,
        seed: int,
        world_size: int,
        rank: int,
        even: bool,
        sizes: Schedule[int],
        drop_last: bool = False,
    ) -> None:
        self.seed = seed
        self.world_size = world_size
        self.rank = rank
        self.even = even
        self.sizes = sizes
        self.drop_last = drop_last
        self._epoch: tuple[int, EpochBatches] | None = None

    def global_size(self, epoch: int) -> int:
        """Samples in a global batch of ``epoch``: the per-rank size times the world size."""
        return self.sizes(epoch) * self.world_size

    def global_batches(self, epoch: int) -> EpochBatches:
        raise NotImplementedError

    def segments(self, epoch: int, batches: EpochBatches) -> npt.NDArray[np.int64] | None:
        """Where a partial global batch is completed from (``None``: the epoch's start)."""
        return None

    def split_drop_last(self) -> bool:
        """Whether :meth:`EpochBatches.split` drops partial global batches."""
        return self.drop_last

    def batches(self, epoch: int) -> EpochBatches:
        cached = self._epoch
        if cached is None or cached[0] != epoch:
            mine = self.global_batches(epoch)
            if self.world_size > 1 and self.elastic:
                mine = mine.split(
                    self.world_size,
                    self.rank,
                    self.sizes(epoch),
                    even=self.even,
                    drop_last=self.split_drop_last(),
                    segment_starts=self.segments(epoch, mine),
                )
            elif self.world_size > 1:
                mine = mine.shard(
                    self.world_size, self.rank, even=self.even, wrap=not self.drop_last
                )
            cached = self._epoch = (epoch, mine)
        return cached[1]

    def repeated(self, epoch: int) -> int:
        """Samples all ranks deliver a second time in ``epoch`` to even out the ranks."""
        return self.batches(epoch).repeated_samples

    def num_batches(self, epoch: int) -> int:
        return len(self.batches(epoch))

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        return self.batches(epoch).batch(batch_index)

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        batches = self.batches(epoch)
        for b in range(start, len(batches)):
            yield BatchRequest(epoch, b, batches.batch(b))


class _BucketPlanner(_ListPlanner):
    """Length-bucketed batches of one rank.

    Alone, an epoch is every sample once (:func:`bucketed_batches`). With a ``source`` (a
    weighted, curriculum or mixture planner) the epoch is that planner's sequence of samples
    grouped into buckets (:func:`bucketed_sequence_batches`).
    """

    def __init__(
        self,
        lengths: npt.NDArray[np.int64],
        spec: BucketingSpec,
        batch: BatchSpec,
        seed: int,
        world_size: int,
        rank: int,
        even: bool,
        sizes: Schedule[int],
        source: _SequencePlanner | None = None,
        padding: BatchPadding | None = None,
    ) -> None:
        super().__init__(seed, world_size, rank, even, sizes, batch.drop_last)
        self.lengths = lengths
        self.spec = spec
        self.source = source
        self.padding = padding
        """How the collator pads a batch: a token budget bounds the padded tensor."""
        self.elastic = spec.max_tokens is None  # budgets are per rank: deal whole batches
        n = len(lengths)
        self.num_buckets, size = bucket_plan(spec, batch, n, world_size)
        found = None
        if spec.max_tokens is not None:
            # samples no epoch can draw (weight 0) may exceed the budget: they are never batched
            reachable = None if source is None else source.reachable()
            checked = lengths if reachable is None else np.where(reachable, lengths, 0)
            found = oversize_sample(checked, spec.max_tokens, spec.cost, padding)
        if found is not None:  # fail at build, naming the sample, not at some epoch's first batch
            bad, limit = found
            raise DataError(
                oversize_message(
                    bad, int(lengths[bad]), spec.max_tokens or 0, spec.cost, padding, limit
                ),
                sample_index=bad,
            )
        self.bucket_ids = bucket_ids(lengths, self.num_buckets)
        self.batch_size = size

    def global_batches(self, epoch: int) -> EpochBatches:
        size = self.batch_size
        if self.elastic and size is not None:
            size *= self.world_size
        if self.source is None:
            return bucketed_batches(
                self.lengths,
                bucket_ids=self.bucket_ids,
                seed=self.seed,
                epoch=epoch,
                batch_size=size,
                max_tokens=self.spec.max_tokens,
                cost=self.spec.cost,
                drop_last=self.drop_last,
                padding=self.padding,
            )
        return bucketed_sequence_batches(
            self.source.sequence(epoch),
            self.lengths,
            bucket_ids=self.bucket_ids,
            seed=self.seed,
            epoch=epoch,
            batch_size=size,
            max_tokens=self.spec.max_tokens,
            cost=self.spec.cost,
            drop_last=self.drop_last,
            padding=self.padding,
        )


class _WeightedPlanner(_ListPlanner):
    """Batches of weighted draws (with or without replacement), keyed by (seed, epoch)."""

    def __init__(
        self,
        weights: npt.NDArray[np.float64],
        spec: WeightsSpec,
        batch: BatchSpec,
        seed: int,
        world_size: int,
        rank: int,
        even: bool,
        sizes: Schedule[int],
    ) -> None:
        super().__init__(seed, world_size, rank, even, sizes, batch.drop_last)
        self.weights = weights
        self.spec = spec
        self.batch = batch

    def _batches(self, epoch: int, batch_size: int, drop_last: bool) -> EpochBatches:
        try:
            return weighted_batches(
                self.weights,
                seed=self.seed,
                epoch=epoch,
                batch_size=batch_size,
                num_samples=self.spec.num_samples,
                replacement=self.spec.replacement,
                drop_last=drop_last,
            )
        except (TypeError, ValueError) as exc:
            raise PlanError.single("sampling_weights", str(exc)) from exc

    def global_batches(self, epoch: int) -> EpochBatches:
        return self._batches(epoch, self.global_size(epoch), self.batch.drop_last)

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's draws in order, before batching (the batch size does not change them)."""
        whole = max(self.spec.num_samples or 0, len(self.weights), 1)  # one batch of all
        return self._batches(epoch, whole, False).indices

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """The samples an epoch can draw: those of positive weight."""
        positive: npt.NDArray[np.bool_] = self.weights > 0
        return positive


class _CurriculumPlanner(_ListPlanner):
    """Easiest-first batches: the eligible set follows the competence of the epoch or step."""

    def __init__(
        self,
        difficulty: npt.NDArray[np.float64],
        spec: CurriculumSpec,
        schedule: Callable[[int], Any] | None,
        batch: BatchSpec,
        seed: int,
        world_size: int,
        rank: int,
        even: bool,
        sizes: Schedule[int],
    ) -> None:
        super().__init__(seed, world_size, rank, even, sizes, batch.drop_last)
        self.order = difficulty_order(difficulty)
        self.spec = spec
        self.schedule = schedule
        self.batch = batch
        n = len(difficulty)
        g = batch.batch_size * world_size  # a step is a global batch
        self.steps_per_epoch = n // g if batch.drop_last else -(-n // g)

    def competence(self, t: int) -> float:
        spec = self.spec
        if self.schedule is not None:
            value = self.schedule(t)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
                raise PlanError.single(
                    "curriculum.schedule",
                    f"the schedule returned {value!r} for {spec.by} {t}; it must return a "
                    f"competence in (0, 1]",
                )
            return float(value)
        return competence(
            spec.schedule,
            t,
            horizon=spec.horizon or 1.0,
            start=spec.start,
            degree=spec.degree,
            steps=spec.steps,
        )

    def global_batches(self, epoch: int) -> EpochBatches:
        b = self.global_size(epoch)
        if self.spec.by == "epoch":
            return curriculum_epoch_batches(
                self.order,
                self.competence(epoch),
                seed=self.seed,
                epoch=epoch,
                batch_size=b,
                drop_last=self.batch.drop_last,
            )
        first = epoch * self.steps_per_epoch
        levels = [self.competence(first + s) for s in range(self.steps_per_epoch)]
        return curriculum_step_batches(
            self.order, levels, seed=self.seed, first_step=first, batch_size=b
        )

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's eligible samples in their shuffled order (a per-epoch curriculum)."""
        assert self.spec.by == "epoch"
        return curriculum_epoch_batches(
            self.order,
            self.competence(epoch),
            seed=self.seed,
            epoch=epoch,
            batch_size=max(len(self.order), 1),  # one batch: the sequence is the same
            drop_last=False,
        ).indices

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """Every sample may become eligible."""
        return None

    def segments(self, epoch: int, batches: EpochBatches) -> npt.NDArray[np.int64] | None:
        """By step, each step's batch is its own segment.

        A step's batch is smaller than a global batch while few samples are eligible; it is
        completed from its own samples.
        """
        if self.spec.by == "step":
            return np.arange(len(batches), dtype=np.int64)
        return None

    def split_drop_last(self) -> bool:
        """By step, batches are short only while few samples are eligible: never dropped."""
        return self.drop_last and self.spec.by == "epoch"

    def eligible(self, epoch: int) -> int:
        """How many samples are eligible at the start of ``epoch``."""
        t = epoch if self.spec.by == "epoch" else epoch * self.steps_per_epoch
        return eligible_count(len(self.order), self.competence(t))


class _MixturePlanner(_ListPlanner):
    """Batches drawn from several sources; weights may follow a schedule of epoch or step."""

    def __init__(
        self,
        spec: MixtureSpec,
        weights_fn: Callable[[int], Any] | None,
        batch: BatchSpec,
        shuffle: bool,
        seed: int,
        world_size: int,
        rank: int,
        even: bool,
        sizes: Schedule[int],
    ) -> None:
        super().__init__(seed, world_size, rank, even, sizes, batch.drop_last)
        self.spec = spec
        self.weights_fn = weights_fn
        self.batch = batch
        self.shuffle = shuffle
        self._starts = [0]  # first step of each epoch counted so far

    def per_epoch(self, epoch: int) -> int:
        """Batches in ``epoch`` before sharding (they follow the epoch's batch size)."""
        spec = self.spec
        return mixture_num_batches(
            spec.sizes,
            mode=spec.mode,
            batch_size=self.global_size(epoch),
            num_samples=spec.num_samples,
            drop_last=self.batch.drop_last,
        )

    def first_step(self, epoch: int) -> int:
        """Global batches of the epochs before ``epoch``: the step the weights see first."""
        starts = self._starts
        while len(starts) <= epoch:
            starts.append(starts[-1] + self.per_epoch(len(starts) - 1))
        return starts[epoch]

    def weights_at(self, t: int) -> tuple[float, ...] | None:
        """The source weights at epoch or step ``t`` (``None``: proportional to sizes)."""
        spec = self.spec
        if self.weights_fn is not None:
            value = self.weights_fn(t)
            try:
                return source_weights("mixture.weights", value, spec.names)
            except PlanError as exc:
                raise PlanError.single(
                    "mixture.weights",
                    f"the weight function returned {value!r} for {spec.by} {t}: "
                    f"{exc.problems[0].message}",
                ) from None
        for until, weights in spec.schedule:
            if t < until:
                return weights
        if spec.schedule:
            return spec.schedule[-1][1]
        return spec.weights

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's global indices in order, before batching.

        For the modes bucketing accepts (weighted with weights fixed for the epoch and not
        stratified, round_robin, max_size_cycle, min_size) the batch size does not change
        them: one batch of all positions gives the sequence.
        """
        spec = self.spec
        assert spec.mode != "sequential"
        assert not spec.stratified
        weights = None
        if spec.mode == "weighted":
            assert spec.by == "epoch" or (spec.fn is None and not spec.schedule)
            weights = self.weights_at(epoch)
        whole = max(len(spec.sizes) * max(spec.sizes), spec.num_samples or 0, 1)
        return mixture_batches(
            spec.sizes,
            names=spec.names,
            mode=spec.mode,
            seed=self.seed,
            epoch=epoch,
            batch_size=whole,
            shuffle=self.shuffle,
            weights=weights,
            num_samples=spec.num_samples if spec.mode == "weighted" else None,
            drop_last=False,
        ).indices

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """Every sample of every source may be used."""
        return None

    def segments(self, epoch: int, batches: EpochBatches) -> npt.NDArray[np.int64] | None:
        """Sequentially, a source's partial last batch is completed from that source."""
        if self.spec.mode != "sequential" or len(batches) == 0:
            return None
        firsts = batches.indices[batches.offsets[:-1]]
        source = source_of(firsts, self.spec.sizes)
        return np.flatnonzero(np.diff(source, prepend=-1) != 0).astype(np.int64)

    def global_batches(self, epoch: int) -> EpochBatches:
        spec = self.spec
        weights: Any = None
        if spec.mode == "weighted":
            if spec.by == "step" and (spec.fn is not None or spec.schedule):
                first, count = self.first_step(epoch), self.per_epoch(epoch)
                weights = np.array(
                    [self.weights_at(first + j) for j in range(count)], dtype=np.float64
                ).reshape(count, len(spec.sources))
            else:
                weights = self.weights_at(epoch)
        return mixture_batches(
            spec.sizes,
            names=spec.names,
            mode=spec.mode,
            seed=self.seed,
            epoch=epoch,
            batch_size=self.global_size(epoch),
            shuffle=self.shuffle,
            weights=weights,
            num_samples=spec.num_samples if spec.mode == "weighted" else None,
            stratified=spec.stratified,
            drop_last=self.batch.drop_last,
        )


_AnyPlanner = _Planner | _StepSizedPlanner | _ListPlanner
_Pending = Literal["set", "resume", "next"]
_SequencePlanner = _WeightedPlanner | _CurriculumPlanner | _MixturePlanner


class _Requests:
    """The requests of one rank's passes: the planner's batches as dataset indices.

    Kept apart from the :class:`Loader` on purpose: the torch iterator reads them (through
    :class:`_RequestSampler`) and holds the generator between passes, so a generator bound
    to the loader would make a reference cycle, loader -> torch loader -> torch iterator ->
    generator -> loader. A cycle leaves the loader and its workers to the cyclic garbage
    collector, which finalizes the worker queues in any order and stalls ~5 s per worker.
    """

    def __init__(
        self,
        planner: _AnyPlanner,
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
        if isinstance(planner, _StepSizedPlanner):
            return planner.first_step(epoch)
        starts = self._epoch_starts
        while len(starts) <= epoch:
            starts.append(starts[-1] + planner.num_batches(len(starts) - 1))
        return starts[epoch]

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


class _RequestSampler(Sampler[BatchRequest]):
    """Yields the requests of one rank's pass from its first batch (main process)."""

    def __init__(self, requests: _Requests) -> None:
        self.requests = requests  # holds no reference to the loader (see _Requests)
        self.epoch = 0
        self.start = 0

    def __iter__(self) -> Iterator[BatchRequest]:
        return self.requests(self.epoch, self.start)

    def __len__(self) -> int:
        return self.requests.planner.num_batches(self.epoch) - self.start


class _BatchDataset(Dataset[Any]):
    """What torch's workers index: a request in, a whole batch (or a Failure) out."""

    def __init__(self, fetcher: BatchFetcher, seeder: WorkerSeeder) -> None:
        self.fetcher = fetcher
        self.seeder = seeder

    def __getitem__(self, request: BatchRequest) -> Any:
        self.seeder(request.epoch)
        try:
            return self.fetcher(request)
        except DataError as error:
            return failure_from(error, request)


def _identity(batch: Any) -> Any:
    return batch


def _base_seed_generator(seed: int) -> torch.Generator:
    """The generator torch draws its workers' base seed from, keyed by the plan's seed.

    So starting workers neither reads nor moves the caller's global torch RNG.
    """
    generator = torch.Generator()
    generator.manual_seed(derive_key(seed, "torch-base-seed") % 2**63)
    return generator


class _NoBatchType:
    """Stands for a batch whose every sample the skip policy dropped."""

    def __repr__(self) -> str:
        return "<no batch: every sample was skipped>"


_NO_BATCH = _NoBatchType()

_LOG = logging.getLogger("loaderkit")


_WORKER_KILLED = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) "
    r"(?:is killed by signal: ([^.]+)|exited unexpectedly(?: with exit code (-?\d+))?)"
)
_TIMEOUT = re.compile(r"DataLoader timed out after (\d+(?:\.\d+)?) seconds")


_SHUTDOWN_GRACE = 0.5
"""Seconds a pool's workers get to exit on their own at shutdown before they are terminated."""

_REMOVE_WORKER_PIDS: Callable[[int], None] = signal_handling._remove_worker_pids  # type: ignore[attr-defined]
"""Unregisters a pool's pids from torch's SIGCHLD handler (what its shutdown does)."""

_BROKEN_GRACE = 0.2
"""The same for a broken pool (a worker died or timed out): its results are discarded."""


def _shutdown_pool(iterator: object, grace: float = _SHUTDOWN_GRACE) -> None:
    """Shut a torch multi-process iterator's workers down within about ``grace`` seconds.

    torch's own ``_shutdown_workers`` joins each worker with a 5 s timeout in turn, so a
    stuck worker (or one whose index queue was already finalized by the garbage collector)
    costs 5 s, per worker. Here the workers are told to stop (done event, then ``None`` on
    each index queue), joined against one shared deadline, and those still alive are
    terminated, then killed. The pids are unregistered from torch's SIGCHLD handler first, so
    a terminated worker raises nothing in the main thread. The iterator is marked shut down,
    so torch's ``__del__`` does nothing more (also in a process forked later, which inherits
    a copy of it). Every step is guarded: this also runs from ``__del__``.
    """
    if getattr(iterator, "_shutdown", True):
        return  # not a multi-process iterator, or shut down already
    pool: Any = iterator  # torch's _MultiProcessingDataLoaderIter, read by its private names
    workers: list[Any] = list(getattr(iterator, "_workers", ()))
    if any(getattr(w, "_parent_pid", None) != os.getpid() for w in workers):
        return  # a copy inherited by a forked process: the workers are not ours
    pool._shutdown = True
    steps: list[Callable[[], object]] = []
    done = getattr(iterator, "_pin_memory_thread_done_event", None)
    thread = getattr(iterator, "_pin_memory_thread", None)
    results = getattr(iterator, "_worker_result_queue", None)
    if done is not None and thread is not None and results is not None:
        steps += [done.set, lambda: results.put((None, None)), lambda: thread.join(grace)]
    steps.append(pool._workers_done_event.set)
    persistent = getattr(iterator, "_persistent_workers", False)
    status: list[bool] = list(getattr(iterator, "_workers_status", ()))
    for worker_id in range(len(workers)):
        if persistent or (worker_id < len(status) and status[worker_id]):
            steps.append(
                functools.partial(pool._mark_worker_as_unavailable, worker_id, shutdown=True)
            )
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - a queue finalized already: terminate below
            continue
    deadline = time.monotonic() + grace
    try:
        for w in workers:
            w.join(timeout=max(deadline - time.monotonic(), 0.0))
    finally:
        if getattr(iterator, "_worker_pids_set", False):
            _REMOVE_WORKER_PIDS(id(iterator))
            pool._worker_pids_set = False
        _end_processes(workers)
        queues = [*getattr(iterator, "_index_queues", ()), results]
        for queue in queues:
            try:
                queue.cancel_join_thread()
                queue.close()
            except Exception:  # noqa: BLE001 - closed already
                continue


def _end_processes(processes: Sequence[Any]) -> None:
    """Terminate, then kill, the processes still alive; reap them all."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + 0.5
    for p in alive:
        p.join(timeout=max(deadline - time.monotonic(), 0.0))
        if p.is_alive():
            p.kill()
            p.join(timeout=0.5)


def _dead_workers(iterator: object, *, wait: float = 1.0) -> list[tuple[int, int | None, int]]:
    """``(worker id, pid, exit code)`` of the torch iterator's workers that have ended.

    A negative exit code is the signal that ended the worker (multiprocessing's convention).
    A worker that is dying may not be reaped yet: the workers are polled for up to ``wait``
    seconds in all (not per worker) until one is found.
    """
    workers = list(getattr(iterator, "_workers", ()))
    deadline = time.monotonic() + wait
    while True:
        found = []
        for worker_id, process in enumerate(workers):
            code = process.exitcode  # polls (reaps) without blocking
            if code is not None and code != 0:
                found.append((worker_id, process.pid, int(code)))
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _awaited(iterator: object) -> tuple[int, int | None] | None:
    """(task index in the pass, worker id) of the batch torch's iterator is waiting for.

    torch sends task ``i`` of a pass to a worker (round-robin over the available ones),
    records it in ``_task_info[i] = (worker id,)`` until it arrives, and returns tasks in
    order: ``_rcvd_idx`` is the one awaited.
    """
    index = getattr(iterator, "_rcvd_idx", None)
    info = getattr(iterator, "_task_info", {})
    if not isinstance(index, int):
        return None
    task = info.get(index) if isinstance(info, dict) else None
    worker = task[0] if isinstance(task, tuple) and task and isinstance(task[0], int) else None
    return index, worker


class _Awaited(NamedTuple):
    """The batch a broken pool was waiting for, and the worker that held it."""

    epoch: int | None
    batch_index: int | None
    worker_id: int | None
    pid: int | None
    samples: str = ""


def _worker_error(
    exc: Exception,
    timeout: float | None,
    dead: Sequence[tuple[int, int | None, int]] = (),
    awaited: _Awaited | None = None,
) -> WorkerError | None:
    """The :class:`WorkerError` for a torch worker failure, or ``None`` for anything else."""
    text = str(exc)
    batch = None if awaited is None else awaited.batch_index
    if dead and ("DataLoader worker" in text or not isinstance(exc, RuntimeError | DataError)):
        worker_id, pid, code = dead[0]
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
            hint = (
                " (SIGKILL is often the out-of-memory killer: lower num_workers or the memory a "
                "sample needs)"
                if name == "SIGKILL"
                else ""
            )
        else:
            name, how, hint = None, f"exited with exit code {code}", ""
        return WorkerError(
            f"worker {worker_id} (pid {pid}) {how}{hint}; the batches it held were not "
            f"delivered. The loader stays usable: iterating again restarts the workers from "
            f"the last delivered batch",
            worker_id=worker_id,
            pid=pid,
            signal=name,
            exit_code=None if code < 0 else code,
            batch_index=batch,
        )
    timed = _TIMEOUT.search(text)
    if timed:
        seconds = float(timed.group(1))
        held = "no worker delivered it in time"
        holder: int | None = None
        holder_pid: int | None = None
        if awaited is not None:
            holder, holder_pid = awaited.worker_id, awaited.pid
            what = "a batch" if batch is None else f"batch {batch}"
            if awaited.epoch is not None and batch is not None:
                what += f" of epoch {awaited.epoch}"
            who = "its worker" if holder is None else f"worker {holder} (pid {holder_pid})"
            held = f"{what}{awaited.samples} was held by {who}, which did not deliver it in time"
        return WorkerError(
            f"a batch timed out after {seconds:g} s (with_workers(timeout={timeout})): {held}; "
            f"look for a sample or transform that blocks, or raise the timeout. The loader "
            f"stays usable: iterating again restarts the workers from the last delivered batch",
            timeout=seconds,
            worker_id=holder,
            pid=holder_pid,
            batch_index=batch,
        )
    killed = _WORKER_KILLED.search(text)
    if killed:
        pids = [int(p) for p in re.findall(r"\d+", killed.group(1))]
        signal_name = killed.group(2)
        exit_code = None if killed.group(3) is None else int(killed.group(3))
        how = (
            f"was killed by signal {signal_name}"
            if signal_name
            else f"exited unexpectedly (exit code {exit_code})"
            if exit_code is not None
            else "exited unexpectedly"
        )
        hint = (
            " (SIGKILL: often the out-of-memory killer; lower num_workers or the memory a "
            "sample needs)"
            if signal_name and "Killed" in signal_name
            else ""
        )
        return WorkerError(
            f"worker process (pid {', '.join(map(str, pids))}) {how}{hint}; the batches it "
            f"held were not delivered. The loader stays usable: iterating again restarts the "
            f"workers from the last delivered batch. torch said: {text.splitlines()[0]}",
            pid=pids[0] if pids else None,
            signal=signal_name,
            exit_code=exit_code,
            batch_index=batch,
        )
    return None


class _Raised:
    """A :class:`DataError` in the stream of host batches, in the failed batch's place.

    Carried as a value (not raised) so the generators that fetch the pass stay alive: the
    pass raises it from ``next()`` and goes on with the next batch. Not a tuple, mapping or
    dataclass, so moving batches to the device passes it through untouched.
    """

    __slots__ = ("error",)

    def __init__(self, error: DataError) -> None:
        self.error = error


class _Pass:
    """What ``iter(loader)`` returns: one pass of a :class:`Loader`, started by its first next.

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

    def __iter__(self) -> _Pass:
        return self

    def __next__(self) -> Any:
        loader = self._loader
        if loader is None:
            raise StopIteration
        if self._batches is None:
            self._epoch, self._start = loader._start_pass()
            self._generation, self._moves = loader._generation, loader._moves
            self._batches = loader._deliverable(self._epoch, self._start, self._generation)
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
            except BaseException:  # StopIteration included: the pass is over
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
            if isinstance(batch, _Raised):
                self._fail(loader, index)
                raise batch.error
            if batch is _NO_BATCH:  # every sample of this batch was skipped
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
      was taken (empty if it was taken after the epoch's last batch). ``set_epoch`` with the
      state's own epoch does not undo it. A pass that the loader itself ended with
      :class:`~loaderkit.DataError` or :class:`~loaderkit.WorkerError` is resumed the same way.
    - A pass starts at its iterator's first ``next()``: an iterator never advanced has no
      effect. Keeping an iterator continues its pass; an iterator superseded by a newer
      pass, ``set_epoch``, ``load_state_dict``, ``check`` or ``close`` raises
      ``RuntimeError`` (it takes nothing from the newer pass).
    - ``state_dict()`` / ``load_state_dict()``: a small JSON-serializable position (the
      current or last pass's epoch and batches *delivered to the caller*, not merely
      prefetched) tied to the plan's fingerprint.
    """

    batch_sampler: None = None
    """Always ``None``: the loader plans its batches itself. Named like torch's ``DataLoader``
    attribute, which tools that inspect data loaders (Lightning) read."""

    def __init__(self, plan: LoaderPlan, *, split: str = "train") -> None:
        if plan.bindings is None:
            raise PlanError.single(
                "bindings",
                "this plan was loaded without its live objects (require_bindings=False); load "
                "it again with bindings={...} to build it",
            )
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
        data = plan.bindings.get(plan.dataset.binding)  # None for a mixture (never split)
        self._part = split_part(data, plan.dataset, plan.split, plan.order.seed, split)
        """The sample indices of the split's part (positions map through it), or ``None``."""
        self.split = None if plan.split is None else split
        """The part of the plan's split this loader reads (``None``: the plan has no split)."""
        if self._part is not None:
            n = len(self._part)
        self.batch_sizes = _batch_sizes(plan)
        self._max_lengths = _max_lengths(plan)
        self._planner: _AnyPlanner
        self.lengths_cost = ""
        self.sampler: _SequencePlanner | None = None
        self.sampler_cost = ""
        listed = self._list_planner(plan)
        if listed is not None:
            self._planner, self.lengths_cost = listed
        elif plan.batch.by == "step" and plan.batch.scheduled:
            self._planner = _StepSizedPlanner(
                n,
                plan.order.seed,
                plan.order.shuffle,
                self.batch_sizes,
                self.world_size,
                self.rank,
                plan.batch.drop_last,
                plan.distributed.even_batches,
            )
        else:
            sizes, world, rank = self.batch_sizes, self.world_size, self.rank
            batch, even = plan.batch, plan.distributed.even_batches

            def layout(epoch: int) -> ShardLayout:
                return ShardLayout(n, sizes(epoch), world, rank, batch.drop_last, even)

            self._planner = _Planner(n, plan.order.seed, plan.order.shuffle, layout)
        if plan.batch.drop_last and self._planner.num_batches(0) == 0 and listed is None:
            raise PlanError.single(
                "batch.drop_last",
                f"with batch_size {plan.batch.batch_size} on {self.world_size} ranks and {n} "
                f"samples, drop_last=True leaves 0 batches per epoch; lower batch_size or set "
                f"drop_last=False",
            )
        self._request_plan = _Requests(self._planner, self._part, self._max_lengths)
        self.workers = resolve_workers(plan.workers)
        """The worker settings this loader runs with (``"auto"`` resolved on this machine)."""
        self.pin_memory = wants_pinning(plan.workers.pin_memory, self.device)
        collate = _resolve_callable(plan, plan.collator, "collator")
        self._on_device: Callable[[Any], Any] | None = getattr(collate, "on_device", None)
        self.batch_checks = batch_checker(plan)
        """The plan's batch contract (``with_checks``), run on delivered batches."""
        transform = (
            None if plan.transform is None else _resolve_callable(plan, plan.transform, "transform")
        )
        self._cache = (
            None
            if plan.cache is None
            else open_cache(plan, self.workers.num_workers + 1, self.workers.start_method)
        )
        source = self._source(plan)
        if self._cache is not None and plan.cache is not None and plan.cache.stage == "fetched":
            source = CachedSource(source, self._cache)
        self._fetcher = BatchFetcher(
            source,
            collate=collate,
            collator_name=plan.collator.describe(),
            default_collator=plan.collator.source == "registry" and plan.collator.name == "default",
            transform=transform,
            transform_rng=plan.transform is not None and plan.transform.accepts_rng,
            seed=plan.order.seed,
            source_key=plan.mixture.source_key if plan.mixture is not None else None,
            skip=plan.error_policy.policy == "skip",
            cache=self._cache
            if plan.cache is not None and plan.cache.stage == "transformed"
            else None,
        )
        self.skipped: list[Skipped] = []
        """The last :data:`~loaderkit.runtime.skips.SKIPPED_RECORDS_KEPT` samples the ``skip``
        policy dropped, in order (index, epoch, batch, worker, exception type, message);
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
        self._torch_loader: DataLoader[Any] | None = None
        self._sampler: _RequestSampler | None = None
        self._pool: object = None
        """The torch iterator of the workers in use (persistent or not), or ``None``."""

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

    @staticmethod
    def _source(plan: LoaderPlan) -> Source:
        assert plan.bindings is not None
        mixture = plan.mixture
        if mixture is None:
            return make_source(plan.bindings[plan.dataset.binding], plan.dataset)
        parts = [make_source(plan.bindings[s.binding], s) for s in mixture.sources]
        return MixtureSource(parts, mixture.names, mixture.sizes)

    def _list_planner(self, plan: LoaderPlan) -> tuple[_ListPlanner, str] | None:
        """The planner for bucketing, weights, a curriculum or a mixture, with what it cost.

        ``None`` for plain fixed-size batches. Bucketing combined with another sampler groups
        that sampler's epoch (its planner, kept in :attr:`sampler`) into length buckets; the
        cost is then the lengths' and the sampler's values' in :attr:`sampler_cost`.
        """
        assert plan.bindings is not None
        if plan.bucketing is None:
            return self._sampler_planner(plan, check_empty=True)
        shard = self._shard(plan)
        if plan.mixture is not None:
            lengths, cost = mixture_lengths(plan.bucketing.length, plan.mixture, plan.bindings)
        else:
            lengths, cost = sample_lengths(plan.bucketing.length, plan.dataset, plan.bindings)
            lengths = self._in_part(lengths)
        sampler = self._sampler_planner(plan, check_empty=False)
        source: _SequencePlanner | None = None
        if sampler is not None:
            planner, self.sampler_cost = sampler
            assert isinstance(planner, _WeightedPlanner | _CurriculumPlanner | _MixturePlanner)
            source = self.sampler = planner
        padding = bucket_padding(plan)
        bucketed = _BucketPlanner(
            lengths, plan.bucketing, plan.batch, *shard, source=source, padding=padding
        )
        if plan.mixture is not None and bucketed.num_batches(0) == 0:
            raise PlanError.single(
                "batch.drop_last",
                f"with batch_size {plan.batch.batch_size} on {self.world_size} ranks, the "
                f"mixture's bucketed epoch leaves 0 batches per rank; lower batch_size or set "
                f"drop_last=False",
            )
        return bucketed, cost

    def _in_part(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Per-sample values of the whole dataset cut to the split's part, in position order."""
        return values if self._part is None else values[self._part]

    def _shard(self, plan: LoaderPlan) -> tuple[int, int, int, bool, Schedule[int]]:
        """The planners' arguments that deal an epoch's batches to this rank."""
        return (
            plan.order.seed,
            self.world_size,
            self.rank,
            plan.distributed.even_batches,
            self.batch_sizes,
        )

    def _sampler_planner(
        self, plan: LoaderPlan, *, check_empty: bool
    ) -> tuple[_ListPlanner, str] | None:
        """The planner for weights, a curriculum or a mixture, with what its values cost."""
        assert plan.bindings is not None
        shard = self._shard(plan)
        if plan.sampling_weights is not None:
            weights, cost = sample_weights(
                plan.sampling_weights.source, plan.dataset, plan.bindings
            )
            weights = self._in_part(weights)
            return _WeightedPlanner(weights, plan.sampling_weights, plan.batch, *shard), cost
        if plan.curriculum is not None:
            difficulty, cost = sample_weights(
                plan.curriculum.difficulty, plan.dataset, plan.bindings, "curriculum.difficulty"
            )
            difficulty = self._in_part(difficulty)
            fn = plan.curriculum.fn
            schedule = None if fn is None else _resolve_callable(plan, fn, "curriculum.schedule")
            planner = _CurriculumPlanner(difficulty, plan.curriculum, schedule, plan.batch, *shard)
            return planner, cost
        if plan.mixture is not None:
            fn = plan.mixture.fn
            weights_fn = None if fn is None else _resolve_callable(plan, fn, "mixture.weights")
            mixed = _MixturePlanner(
                plan.mixture, weights_fn, plan.batch, plan.order.shuffle, *shard
            )
            if check_empty and mixed.num_batches(0) == 0:
                raise PlanError.single(
                    "batch.drop_last",
                    f"with batch_size {plan.batch.batch_size} on {self.world_size} ranks, the "
                    f"mixture's epoch leaves 0 batches per rank; lower batch_size or set "
                    f"drop_last=False",
                )
            return mixed, ""
        return None

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
        read. 0 before any pass.
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
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"set_epoch: epoch must be an int >= 0 (got {epoch!r})")
        if self._pending == "resume" and epoch == self._epoch:
            return  # keep the loaded (or interrupted) position of this very epoch
        self._set_pending(epoch)
        self._generation += 1
        self._moves += 1

    def _set_pending(self, epoch: int) -> None:
        """Make the next pass epoch ``epoch`` from batch 0 (the position is reset)."""
        self._epoch, self._delivered = epoch, 0
        self._pending = "set"

    def batch_indices(self, epoch: int, batch_index: int) -> list[int]:
        """The sample indices of batch ``batch_index`` of ``epoch`` on this rank."""
        positions = self._planner.indices(epoch, batch_index)
        part = self._part  # with a split, the planner's positions index the part
        indices: list[int] = (positions if part is None else part[positions]).tolist()
        return indices

    # -- iteration --------------------------------------------------------------------------

    def _requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start``, with their sequence length."""
        return self._request_plan(epoch, start)

    def _host_batches(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches; a :class:`DataError` comes as a :class:`_Raised` in its place."""
        if self.plan.error_policy.policy != "skip":  # no Fetched records to unpack
            yield from self._fetched(epoch, start, generation)
            return
        unsettled = self._unsettled = collections.deque()  # a new pass: nothing delivered yet
        for item in self._fetched(epoch, start, generation):
            if isinstance(item, Fetched):  # counted when delivered (_settle), not before
                unsettled.append(item._replace(batch=None))
                yield _NO_BATCH if item.batch is None else item.batch
            else:
                unsettled.append(Fetched(None, (), 0))
                yield item

    def _fetched(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches of ``epoch`` from ``start``; nothing is fetched once superseded.

        Persistent workers share one torch iterator between passes: a superseded pass must
        not take a batch of the newer pass from it, so the check comes before every read. A
        batch that failed (raise policy) comes as a :class:`_Raised` and the pass goes on, as
        torch's iterator goes on after an exception. Non-persistent workers belong to their
        pass: they are shut down when it is given up (as torch's are when its iterator is
        dropped) or when the next pass starts.
        """
        workers = self.workers.num_workers
        if workers == 0:
            fetch = self._fetcher
            for request in self._requests(epoch, start):
                self._superseded(generation)
                try:
                    batch = fetch(request)
                except DataError as error:
                    batch = _Raised(error)
                yield batch
            return
        self._superseded(generation)  # before the shared sampler and torch iterator are reset
        persistent = self.workers.persistent is not False
        torch_loader, sampler = self._worker_loader()
        sampler.epoch, sampler.start = epoch, start
        if not persistent:
            _shutdown_pool(self._pool)  # the workers of a pass given up and not yet collected
        iterator = self._pool = iter(torch_loader)
        try:
            while True:
                self._superseded(generation)
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                except Exception as exc:
                    # a killed worker surfaces as torch's RuntimeError, or as a broken pipe or
                    # connection reset while its result was being read: look at the workers
                    worker_error = self._broken_pool(iterator, exc, (epoch, start))
                    if worker_error is None:
                        raise
                    raise worker_error from exc
                if isinstance(item, Failure):
                    try:
                        item.reraise()
                    except DataError as error:
                        item = _Raised(error)
                yield item
        finally:
            if not persistent and self._pool is iterator:
                self._pool = None
                _shutdown_pool(iterator)

    def _broken_pool(
        self, iterator: object, exc: Exception, where: tuple[int, int] | None = None
    ) -> WorkerError | None:
        """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

        The pool is then shut down (within about a second, stuck workers terminated).
        ``where`` is (epoch, first batch) of the pass, to name the batch that was awaited
        and its samples. torch's SIGCHLD handler raises its own RuntimeError in the main
        thread whenever a worker ends, wherever the main thread is; while this handles a
        death it may fire again, so its errors are absorbed until the pool is shut down
        (which unregisters the workers from the handler).
        """
        worker_error: WorkerError | None = None
        awaited = self._awaited_batch(iterator, where)
        for _ in range(5):
            try:
                if worker_error is None:
                    timed_out = _TIMEOUT.search(str(exc)) is not None
                    dead = [] if timed_out else _dead_workers(iterator)
                    worker_error = _worker_error(exc, self.workers.timeout, dead, awaited)
                    if worker_error is None:
                        return None
                _shutdown_pool(iterator, grace=_BROKEN_GRACE)
                self.close()  # the pool is broken: the next iteration starts new workers
                return worker_error
            except RuntimeError as again:
                if "DataLoader worker" not in str(again):
                    raise
        return worker_error

    def _settle(self, batch: Any) -> Any:
        """Count the skip records of ``batch``, the host batch being delivered now."""
        if not self._unsettled:  # not the skip policy
            return batch
        fetched = self._unsettled.popleft()
        return self._account(fetched._replace(batch=None if batch is _NO_BATCH else batch))

    def _awaited_batch(self, iterator: object, where: tuple[int, int] | None) -> _Awaited:
        """The batch the torch iterator waits for (its epoch, index, samples) and its worker."""
        found = _awaited(iterator)
        if found is None:
            return _Awaited(None, None, None, None)
        task, worker = found
        workers = list(getattr(iterator, "_workers", ()))
        pid = workers[worker].pid if worker is not None and worker < len(workers) else None
        if where is None:
            return _Awaited(None, None, worker, pid)
        epoch, first = where
        batch = first + task
        try:
            indices = self.batch_indices(epoch, batch)
        except Exception:  # noqa: BLE001 - naming the samples is a courtesy
            return _Awaited(epoch, batch, worker, pid)
        shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
        return _Awaited(epoch, batch, worker, pid, f" (samples {shown})")

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
        return _NO_BATCH if fetched.batch is None else fetched.batch

    def _worker_loader(self) -> tuple[DataLoader[Any], _RequestSampler]:
        if self._torch_loader is None or self._sampler is None:
            w = self.workers
            sampler = _RequestSampler(self._request_plan)
            self._sampler = sampler
            self._torch_loader = DataLoader(
                _BatchDataset(self._fetcher, WorkerSeeder(self.plan.order.seed, self.rank)),
                sampler=sampler,
                batch_size=None,
                collate_fn=_identity,
                num_workers=w.num_workers,
                prefetch_factor=w.prefetch_factor,
                persistent_workers=True if w.persistent is None else w.persistent,
                pin_memory=self.pin_memory and self.device.type == "cuda",
                timeout=w.timeout or 0,
                multiprocessing_context=w.start_method,
                generator=_base_seed_generator(self.plan.order.seed),
            )
        return self._torch_loader, self._sampler

    def __iter__(self) -> Iterator[Any]:
        """A new pass (see the class docstring for which one), started by its first ``next()``.

        An iterator that is never advanced has no effect (Lightning calls ``iter()`` once
        only to check that a loader is iterable); once started, the pass supersedes any
        iterator still open. A :class:`~loaderkit.DataError` raised by ``next()`` does not
        end the pass: the next ``next()`` delivers the batch after the failed one.
        """
        return _Pass(self)

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

    def _resumed(self, moves: int) -> None:
        """The pass a loader error interrupted goes on: it is no longer to be resumed."""
        if moves == self._moves and self._pending == "resume":
            self._pending = "next"

    def _deliverable(self, epoch: int, start: int, generation: int) -> Iterator[Any]:
        """The host batches of a pass, on the device (not yet finished or checked)."""
        host = self._host_batches(epoch, start, generation)
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
        kept = self._epoch, self._delivered, self._pending
        try:
            return check_loader(self)
        finally:
            self._epoch, self._delivered, self._pending = kept
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
            _shutdown_pool(iterator)
        _shutdown_pool(pool)

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
        ``batches_delivered`` is that epoch's batch count.
        """
        epoch, delivered = self._cursor()
        state: dict[str, Any] = {
            "loaderkit_state": STATE_VERSION,
            "fingerprint": self.plan.fingerprint,
            "epoch": epoch,
            "batches_delivered": delivered,
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

        The next ``iter()`` resumes batch ``batches_delivered`` of the state's epoch; a state
        taken after the last batch of an epoch gives an empty pass (as torchdata's
        ``StatefulDataLoader`` does), and the pass after it is the next epoch. A
        ``set_epoch`` with the state's own epoch before that pass keeps the resume.

        The state must come from a loader of a plan with the same fingerprint, or from one
        whose *global* stream is the same (an elastic resume: another world size with the
        same global batch size, ``batch_size x world_size``, or another rank): the next global
        batch is then the one after the last delivered. Otherwise
        :class:`~loaderkit.ResumeError` says why and shows the differences (``strict=False``
        accepts it and only checks that the position fits this loader).
        """
        _check_state_shape(state, _STATE_KEYS, "loader", "Loader")
        if strict and state.get("split") != self.split:
            raise ResumeError(
                f"the state was saved by a loader of the {state.get('split')!r} part of the "
                f"split, this loader reads the {self.split!r} part: another part is another "
                f"stream; load it into plan.build(split={state.get('split')!r}), or pass "
                f"strict=False to take the position anyway"
            )
        if strict:
            self._check_stream(state)
        epoch, delivered = state["epoch"], state["batches_delivered"]
        if delivered and delivered > self._planner.num_batches(epoch):
            raise ResumeError(
                f"the state has {delivered} batches of epoch {epoch} delivered but that epoch "
                f"of this loader has {self._planner.num_batches(epoch)}"
            )
        counts = SkipCounts.from_state(state.get("skips"))
        self._epoch, self._delivered = epoch, delivered
        self._skip_counts = counts
        self._pending = "resume"
        self._generation += 1
        self._moves += 1

    def _check_stream(self, state: Mapping[str, Any]) -> None:
        """Raise :class:`ResumeError` unless ``state`` continues this loader's global stream."""
        same_place = (state["world_size"], state["rank"]) == (self.world_size, self.rank)
        if state["fingerprint"] == self.plan.fingerprint and same_place:
            return
        if state.get("global_fingerprint") == self.global_fingerprint:
            return  # another world size or rank, the same global stream: an elastic resume
        differences = self._differences(state)
        world, mine = state["world_size"], self.world_size
        plan = self.plan
        tied = ""
        if plan.bucketing is not None and plan.bucketing.max_tokens is not None:
            tied = "a token budget is per rank, so the global batches depend on the world size"
        elif plan.batch.fn is not None:
            tied = "a batch-size function gives per-rank sizes, tied to the world size"
        if world != mine and tied:
            raise ResumeError(
                f"the state was saved at {world} rank(s), this loader has {mine}: {tied}; "
                f"resume at {world} rank(s), or pass strict=False to take the position anyway"
            )
        if world != mine:
            saved = state.get("global_batch_size")
            here = self.plan.batch.batch_size * mine
            if isinstance(saved, int) and saved != here:
                fix = (
                    f"build this loader with with_batch_size({saved // mine}) to continue the "
                    f"same stream"
                    if saved % mine == 0
                    else f"{saved} samples cannot be split over {mine} ranks; pick a world size "
                    f"that divides it"
                )
                raise ResumeError(
                    f"the state was saved at {world} rank(s) with a global batch of {saved} "
                    f"samples; this loader has {mine} rank(s) x {self.plan.batch.batch_size} = "
                    f"{here}: another global batch is another stream; {fix}. Differences "
                    f"(state -> this plan):",
                    differences,
                )
            raise ResumeError(
                f"the state was saved by rank {state['rank']} of {world}, this loader is rank "
                f"{self.rank} of {mine}, and their global streams differ: the plans differ "
                f"beyond the world size; resume with the same plan, or pass strict=False. "
                f"Differences (state -> this plan):",
                differences,
            )
        raise ResumeError(
            f"the state was saved by a loader of another plan (fingerprint "
            f"{str(state['fingerprint'])[:12]}, this plan {self.plan.fingerprint[:12]}); "
            f"load it into a loader built from the same plan, or pass strict=False. "
            f"Differences (state -> this plan):",
            differences,
        )

    def _differences(self, state: Mapping[str, Any]) -> list[str]:
        """The plan fields that differ, ``path: state's -> this plan's`` (never empty)."""
        old = state["plan"] if isinstance(state["plan"], Mapping) else {}
        return diff_dicts(old, self.plan.to_dict()) or [
            "(no visible field differs: the datasets' identities differ)"
        ]

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
        lines = [
            self.plan.explain(),
            f"  resolved    rank {self.rank} of {self.world_size} "
            f"({self.distributed_source}); device {self.device}; pin memory "
            f"{'on' if self.pin_memory else 'off'}",
        ]
        if self.workers.auto is not None:
            lines.append(f"  workers     resolved {self.workers.reason}")
        if self._part is not None:
            lines.append(
                f"  part        {self.split!r} of the split: {len(self._part):,} of "
                f"{self.plan.dataset.length:,} samples"
            )
        planner = self._planner
        if self.world_size > 1:
            epoch = self._cursor()[0]
            lines.append(
                f"  ranks       epoch {epoch}: {planner.num_batches(epoch):,} batches on this "
                f"rank; {planner.repeated(epoch):,} samples delivered twice across ranks to "
                f"even them out (wrap-around)"
            )
        sampler = planner if self.sampler is None else self.sampler
        if isinstance(sampler, _CurriculumPlanner):
            cost = self.lengths_cost if self.sampler is None else self.sampler_cost
            lines.append(
                f"  curriculum  difficulties: {cost}; epoch {self._epoch}: "
                f"{sampler.eligible(self._epoch):,} of {len(sampler.order):,} samples eligible, "
                f"{planner.num_batches(self._epoch):,} batches on this rank"
            )
        if isinstance(planner, _BucketPlanner):
            spec = planner.spec
            mine = planner.batches(self._epoch)
            stats = padding_stats(
                planner.lengths,
                mine,
                max_tokens=spec.max_tokens,
                cost=spec.cost,
                padding=planner.padding,
                max_batch_size=spec.max_batch_size,
            )
            sizes = mine.sizes() if len(mine) else np.zeros(1, dtype=np.int64)
            grouped = ""
            if self.sampler is not None:  # what the combined sampler chose for this rank
                what = {
                    _WeightedPlanner: "weighted draws",
                    _CurriculumPlanner: "eligible samples",
                    _MixturePlanner: "mixture samples",
                }[type(self.sampler)]
                grouped = f"{mine.num_samples:,} {what} in "
            line = (
                f"  bucketing   lengths: {self.lengths_cost}; epoch {self._epoch}: "
                f"{grouped}{len(mine):,} batches of {int(sizes.min())}-{int(sizes.max())} "
                f"samples, padding {stats['waste']:.1%} of tokens"
            )
            if "utilization" in stats:
                line += f", budget used {stats['utilization']:.1%}; {budget_split(spec, stats)}"
            if isinstance(self.sampler, _WeightedPlanner):
                line += f"; weights: {self.sampler_cost}"
            lines.append(line)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return loader_html(self)


def build_loader(plan: LoaderPlan, *, split: str = "train") -> Loader:
    """Make the :class:`Loader` for ``plan`` (for ``split``, the part of its split).

    An iterable (streamed) dataset gets a :class:`~loaderkit.runtime.stream.StreamLoader`.
    """
    if plan.dataset.iterable and plan.bindings is not None:
        from loaderkit.runtime.stream import StreamLoader  # it builds on this module

        return StreamLoader(plan)
    return Loader(plan, split=split)
