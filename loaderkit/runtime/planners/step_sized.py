"""The step-sized planner: the batch size follows a per-step schedule."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from loaderkit.order.batches import EpochBatches
from loaderkit.order.epoch import EpochOrder
from loaderkit.runtime.planners.base import EpochListPlanner, PlannerContext, Selected, Shard
from loaderkit.runtime.planners.plain import refuse_empty

__all__ = ["PositionOrder", "StepSizedPlanner", "make_step_sized"]


class PositionOrder(Protocol):
    """An epoch's order as the step-sized planner reads it: positions -> sample indices."""

    def at(self, positions: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The sample indices at ``positions``."""
        ...


class StepSizedPlanner(EpochListPlanner):
    """Batches whose size follows a per-step schedule, over the plain epoch order.

    Step ``t`` counts the batches a rank delivered since training started (epochs before
    included). The global batch of step ``t`` holds ``size(t) x world_size`` consecutive
    positions of the epoch order, rank ``r`` taking the ``r``-th slice of ``size(t)``; the
    tail follows the fixed-size rules (dropped with ``drop_last``; with even batches,
    completed by wrapping around to the start of the epoch order; else ranks past the end get
    nothing).
    """

    def __init__(self, n: int, shuffle: bool, shard: Shard, drop_last: bool) -> None:
        self.n = n
        self.seed = shard.seed
        self.shuffle = shuffle
        self.sizes = shard.sizes
        self.world_size = shard.world_size
        self.rank = shard.rank
        self.drop_last = drop_last
        self.even = shard.even
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

    def epoch_order(self, epoch: int) -> PositionOrder:
        """The order the positions of ``epoch`` are read through (the plain epoch order)."""
        return EpochOrder(self.n, self.seed, epoch, self.shuffle)

    def batches(self, epoch: int) -> EpochBatches:
        """The batches of ``epoch`` on this rank (the last epoch's are kept)."""
        cached = self._epoch
        if cached is None or cached[0] != epoch:
            plan = self._walk(epoch)
            order = self.epoch_order(epoch)
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


def make_step_sized(context: PlannerContext) -> Selected:
    """Batches whose size follows a per-step schedule (``with_batch_size(..., by="step")``)."""
    plan = context.plan
    planner = StepSizedPlanner(context.n, plan.order.shuffle, context.shard(), plan.batch.drop_last)
    refuse_empty(context, planner)
    return Selected(planner)
