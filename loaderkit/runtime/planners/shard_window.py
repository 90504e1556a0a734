"""The shard-window planner: a sharded dataset's shard-aware shuffle, cut into batches.

The epoch order is :class:`~loaderkit.order.shard_order.ShardOrder` (shards shuffled, then
samples within windows of shards); the batches are those of the plain planner over it: the
same elastic rank layout (:class:`~loaderkit.order.shard.ShardLayout`: global batch ``s`` is
positions ``[s*G, (s+1)*G)``, rank ``r`` its ``r``-th slice), ``drop_last``, even batches and
per-epoch batch-size schedules, or, with sizes by step, the step-sized planner's walk. So the
global batches are the same for any world size and ``num_workers``, and batch ``b`` of any
epoch is computed directly from ``(epoch, b)`` (an exact O(1) resume).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.shard import ShardLayout as RankLayout
from loaderkit.order.shard_order import ShardOrder, check_counts
from loaderkit.plan.sections.order import shard_window
from loaderkit.runtime.planners.base import PlannerContext, Selected
from loaderkit.runtime.planners.plain import PlainPlanner, refuse_empty
from loaderkit.runtime.planners.step_sized import StepSizedPlanner
from loaderkit.runtime.records import BatchRequest

__all__ = ["ShardStepSizedPlanner", "ShardWindowPlanner", "make_shard_window"]

_I64 = npt.NDArray[np.int64]


class _Orders:
    """The shard orders of a planner's epochs: the last one is kept (epochs come in turn)."""

    def __init__(self, counts: _I64, seed: int, window: int) -> None:
        self.counts = counts
        self.seed = seed
        self.window = window
        self._last: ShardOrder | None = None

    def __call__(self, epoch: int, *, keep: bool = True) -> ShardOrder:
        """The order of ``epoch``; ``keep=False`` does not evict the kept one."""
        last = self._last
        if last is not None and last.epoch == epoch:
            return last
        order = ShardOrder(self.counts, self.seed, epoch, self.window)
        if keep:
            self._last = order
        return order


class ShardWindowPlanner(PlainPlanner):
    """Fixed-size batches of one rank over the shard-aware order (sizes may follow epochs).

    The plain planner's rank layouts (so whatever reads a plain planner's layout, such as
    Accelerate's ``remainder``, reads this one's alike), with positions read through the
    shard-aware order instead of the global shuffle.
    """

    def __init__(self, orders: _Orders, n: int, layout: Callable[[int], RankLayout]) -> None:
        super().__init__(n, orders.seed, True, layout)
        self.orders = orders

    def indices(self, epoch: int, batch_index: int) -> _I64:
        """The sample indices of batch ``batch_index`` of ``epoch`` on this rank."""
        order = self.orders(epoch, keep=False)
        return order.at(self.layout(epoch).positions(batch_index))

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start`` on, in order."""
        order = self.orders(epoch)
        layout = self.layout(epoch)
        for b in range(start, len(layout)):
            yield BatchRequest(epoch, b, order.at(layout.positions(b)))


class ShardStepSizedPlanner(StepSizedPlanner):
    """The step-sized planner (sizes follow a per-step schedule) over the shard-aware order."""

    orders: _Orders

    def epoch_order(self, epoch: int) -> ShardOrder:
        """The shard-aware order of ``epoch``."""
        return self.orders(epoch)


def _counts(context: PlannerContext) -> _I64:
    """The dataset's shard counts, checked against what the plan recorded of it."""
    counts = context.shard_counts
    recorded = context.plan.dataset.shards
    if counts is None or len(counts) != recorded or sum(counts) != context.n:
        got = "none" if counts is None else f"{len(counts)} shards of {sum(counts)} samples"
        raise PlanError.single(
            "dataset",
            f"the plan was made for a sharded dataset of {recorded} shards and "
            f"{context.n} samples, and the dataset bound gives {got}; bind the dataset the "
            f"plan was made for, or compile a new plan",
        )
    return check_counts(counts)


def make_shard_window(context: PlannerContext) -> Selected:
    """Batches over a sharded dataset's shard-aware shuffle (fixed, by epoch, or by step)."""
    plan, n = context.plan, context.n
    window = shard_window(plan)
    assert window is not None  # the selection table's condition
    orders = _Orders(_counts(context), plan.order.seed, window)
    if plan.batch.by == "step" and plan.batch.scheduled:
        stepped = ShardStepSizedPlanner(n, True, context.shard(), plan.batch.drop_last)
        stepped.orders = orders
        refuse_empty(context, stepped)
        return Selected(stepped)
    sizes, world, rank = context.sizes, context.world_size, context.rank
    batch, even = plan.batch, plan.distributed.even_batches

    def layout(epoch: int) -> RankLayout:
        """The rank layout of ``epoch``."""
        return RankLayout(n, sizes(epoch), world, rank, batch.drop_last, even)

    planner = ShardWindowPlanner(orders, n, layout)
    refuse_empty(context, planner)
    return Selected(planner)
