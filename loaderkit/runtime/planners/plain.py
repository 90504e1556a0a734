"""The plain planner: fixed-size batches over the epoch order, computed directly."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.epoch import EpochOrder
from loaderkit.order.shard import ShardLayout
from loaderkit.runtime.planners.base import Planner, PlannerContext, Selected
from loaderkit.runtime.records import BatchRequest

__all__ = ["PlainPlanner", "make_plain", "refuse_empty"]


class PlainPlanner:
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
        """The shard layout of ``epoch`` (the last one is kept)."""
        cached = self._layout
        if cached is None or cached[0] != epoch:
            cached = self._layout = (epoch, self.layout_for(epoch))
        return cached[1]

    def order(self, epoch: int) -> EpochOrder:
        """The epoch order of ``epoch`` (the last one is kept: epochs are visited in turn)."""
        order = self._order
        if order is None or order.epoch != epoch:  # keep one: epochs are visited in turn
            order = self._order = EpochOrder(self.n, self.seed, epoch, self.shuffle)
        return order

    def num_batches(self, epoch: int) -> int:
        """Batches of ``epoch`` on this rank."""
        return len(self.layout(epoch))

    def repeated(self, epoch: int) -> int:
        """Samples all ranks deliver a second time in ``epoch`` to even out the ranks."""
        return self.layout(epoch).repeated

    def indices(self, epoch: int, batch_index: int) -> npt.NDArray[np.int64]:
        """The sample positions of batch ``batch_index`` of ``epoch`` on this rank."""
        cached = self._order
        order = cached if cached is not None and cached.epoch == epoch else None
        if order is None:  # another epoch: do not evict the order iteration is using
            order = EpochOrder(self.n, self.seed, epoch, self.shuffle)
        return self.layout(epoch).indices(order, batch_index)

    def requests(self, epoch: int, start: int) -> Iterator[BatchRequest]:
        """The requests of ``epoch`` from batch ``start`` on, in order."""
        order = self.order(epoch)
        layout = self.layout(epoch)
        for b in range(start, len(layout)):
            yield BatchRequest(epoch, b, layout.indices(order, b))


def refuse_empty(context: PlannerContext, planner: Planner) -> None:
    """Raise :class:`PlanError` if ``drop_last`` leaves epoch 0 without a batch."""
    plan = context.plan
    if plan.batch.drop_last and planner.num_batches(0) == 0:
        raise PlanError.single(
            "batch.drop_last",
            f"with batch_size {plan.batch.batch_size} on {context.world_size} ranks and "
            f"{context.n} samples, drop_last=True leaves 0 batches per epoch; lower batch_size "
            f"or set drop_last=False",
        )


def make_plain(context: PlannerContext) -> Selected:
    """Fixed-size batches (the batch size may follow a per-epoch schedule)."""
    plan, n = context.plan, context.n
    sizes, world, rank = context.sizes, context.world_size, context.rank
    batch, even = plan.batch, plan.distributed.even_batches

    def layout(epoch: int) -> ShardLayout:
        """The shard layout of ``epoch`` (the last one is kept)."""
        return ShardLayout(n, sizes(epoch), world, rank, batch.drop_last, even)

    planner = PlainPlanner(n, plan.order.seed, plan.order.shuffle, layout)
    refuse_empty(context, planner)
    return Selected(planner)
