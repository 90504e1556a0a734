"""What every planner is to the :class:`~loaderkit.runtime.loader.Loader`, and what they share.

A *planner* turns (epoch, batch index) into the sample positions of one rank's batch. The
Loader keeps the cursor (epoch, batches delivered) and asks its planner only through the
:class:`Planner` protocol. :class:`ListPlanner` is the base of the planners whose epoch is
a list of *global* batches (bucketing, weights, curricula, mixtures). :class:`PlannerContext`
is what a planner's factory is given; :class:`Selected` is what it returns (see the selection
table in :mod:`loaderkit.runtime.planners`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from loaderkit.order.batches import EpochBatches
from loaderkit.runtime.planners.schedules import Schedule
from loaderkit.runtime.records import BatchRequest

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "EpochListPlanner",
    "ListPlanner",
    "Planner",
    "PlannerContext",
    "Selected",
    "SequenceSource",
    "Shard",
]


class Planner(Protocol):
    """The calls the Loader makes to its planner (all pure functions of their arguments)."""

    def num_batches(self, epoch: int) -> int:
        """Batches of ``epoch`` on this rank."""
        ...

    def repeated(self, epoch: int) -> int:
        """Samples all ranks deliver a second time in ``epoch`` to even out the ranks."""
        ...

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        """The sample positions of batch ``batch_index`` of ``epoch`` on this rank."""
        ...

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start`` on, in order."""
        ...


class SequenceSource(Protocol):
    """A sampler whose epoch bucketing can group: its samples in order, before batching."""

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's sample positions in order, before batching."""
        ...

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """The samples an epoch can use (``None``: all of them)."""
        ...


@attrs.frozen
class Shard:
    """How a planner deals an epoch's batches to this rank (made by :meth:`PlannerContext.shard`).

    The order's seed, the world size and this rank, whether ranks are evened out
    (``even_batches``), and the per-rank batch size as a function of the epoch or step.
    """

    seed: int
    world_size: int
    rank: int
    even: bool
    sizes: Schedule[int]


class PlannerContext(NamedTuple):
    """What a planner factory needs: the plan and what ``build()`` resolved for this rank."""

    plan: LoaderPlan
    n: int
    """Positions in an epoch: the dataset's length, or the split part's."""
    part: npt.NDArray[Any] | None
    """The sample indices of the split's part (positions map through it), or ``None``."""
    world_size: int
    rank: int
    sizes: Schedule[int]
    """The per-rank batch size as a function of the epoch or step."""
    shard_counts: tuple[int, ...] | None = None
    """The samples per shard of a sharded dataset (its ``shard_counts``), else ``None``."""

    def in_part(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Per-sample values of the whole dataset cut to the split's part, in position order."""
        return values if self.part is None else values[self.part]

    def shard(self) -> Shard:
        """What deals an epoch's batches to this rank (the planners' common arguments)."""
        plan = self.plan
        return Shard(
            plan.order.seed,
            self.world_size,
            self.rank,
            plan.distributed.even_batches,
            self.sizes,
        )


class Selected(NamedTuple):
    """A factory's planner, with what reading its per-sample values cost (for ``explain``).

    With bucketing combined with another sampler, ``sampler`` is that sampler's planner (whose
    epoch the bucketing groups) and ``sampler_cost`` what its values cost.
    """

    planner: Planner
    cost: str = ""
    sampler: ListPlanner | None = None
    sampler_cost: str = ""


class EpochListPlanner:
    """A planner that makes each epoch's batches on this rank as one :class:`EpochBatches`.

    Subclasses define :meth:`batches` (and ``repeated``); counting, indexing and the requests
    of a pass are read from it here, once for every planner.
    """

    def batches(self, epoch: int) -> EpochBatches:
        """The batches of ``epoch`` on this rank."""
        raise NotImplementedError

    def num_batches(self, epoch: int) -> int:
        """Batches of ``epoch`` on this rank."""
        return len(self.batches(epoch))

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        """The sample positions of batch ``batch_index`` of ``epoch`` on this rank."""
        return self.batches(epoch).batch(batch_index)

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start`` on, in order."""
        batches = self.batches(epoch)
        for b in range(start, len(batches)):
            yield BatchRequest(epoch, b, batches.batch(b))


class ListPlanner(EpochListPlanner):
    """Epochs made as a list of *global* batches (bucketing, weights, curricula, mixtures).

    The epoch's global batches (``world_size x`` the per-rank size, see :meth:`global_size`)
    are computed once per epoch (O(n), vectorized) and kept; this rank holds its slice of
    each (:meth:`EpochBatches.split`), so the ranks' ``s``-th batches make global batch
    ``s`` whatever the world size. Planners whose global batches have no fixed size (token
    budgets) deal whole batches to ranks round-robin instead (``elastic = False``).
    """

    elastic = True

    def __init__(self, shard: Shard, drop_last: bool = False) -> None:
        self.seed = shard.seed
        self.world_size = shard.world_size
        self.rank = shard.rank
        self.even = shard.even
        self.sizes = shard.sizes
        self.drop_last = drop_last
        self._epoch: tuple[int, EpochBatches] | None = None

    def global_size(self, epoch: int) -> int:
        """Samples in a global batch of ``epoch``: the per-rank size times the world size."""
        return self.sizes(epoch) * self.world_size

    def global_batches(self, epoch: int) -> EpochBatches:
        """The global batches of ``epoch``, before they are dealt to the ranks."""
        raise NotImplementedError

    def segments(self, epoch: int, batches: EpochBatches) -> npt.NDArray[np.int64] | None:
        """Where a partial global batch is completed from (``None``: the epoch's start)."""
        return None

    def split_drop_last(self) -> bool:
        """Whether :meth:`EpochBatches.split` drops partial global batches."""
        return self.drop_last

    def batches(self, epoch: int) -> EpochBatches:
        """The batches of ``epoch`` on this rank (the last epoch's are kept)."""
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
