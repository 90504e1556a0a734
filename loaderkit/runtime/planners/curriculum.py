"""The curriculum planner: easiest-first batches (``with_curriculum``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.batches import EpochBatches
from loaderkit.order.curriculum import (
    competence,
    curriculum_epoch_batches,
    curriculum_step_batches,
    difficulty_order,
    eligible_count,
)
from loaderkit.plan.callables import resolve_callable
from loaderkit.runtime.planners.base import ListPlanner, PlannerContext, Selected, Shard
from loaderkit.runtime.planners.lengths import sample_weights

if TYPE_CHECKING:
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.curriculum import CurriculumSpec

__all__ = ["CurriculumPlanner", "make_curriculum"]


class CurriculumPlanner(ListPlanner):
    """Easiest-first batches: the eligible set follows the competence of the epoch or step."""

    def __init__(
        self,
        difficulty: npt.NDArray[np.float64],
        spec: CurriculumSpec,
        schedule: Callable[[int], Any] | None,
        batch: BatchSpec,
        shard: Shard,
    ) -> None:
        super().__init__(shard, batch.drop_last)
        self.order = difficulty_order(difficulty)
        self.spec = spec
        self.schedule = schedule
        self.batch = batch
        n = len(difficulty)
        g = batch.batch_size * self.world_size  # a step is a global batch
        self.steps_per_epoch = n // g if batch.drop_last else -(-n // g)

    def competence(self, t: int) -> float:
        """The competence at epoch or step ``t``: the share of samples eligible."""
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
        """The global batches of ``epoch``, before they are dealt to the ranks."""
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


def make_curriculum(context: PlannerContext) -> Selected:
    """A curriculum, the difficulties read from the dataset (cut to the split's part)."""
    plan = context.plan
    assert plan.bindings is not None
    assert plan.curriculum is not None
    difficulty, cost = sample_weights(
        plan.curriculum.difficulty, plan.dataset, plan.bindings, "curriculum.difficulty"
    )
    difficulty = context.in_part(difficulty)
    fn = plan.curriculum.fn
    schedule = None if fn is None else resolve_callable(plan, fn, "curriculum.schedule")
    planner = CurriculumPlanner(difficulty, plan.curriculum, schedule, plan.batch, context.shard())
    return Selected(planner, cost)
