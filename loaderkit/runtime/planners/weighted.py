"""The weighted planner: batches of weighted draws (``with_sampling_weights``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.batches import EpochBatches
from loaderkit.order.weighted import weighted_batches
from loaderkit.runtime.planners.base import ListPlanner, PlannerContext, Selected, Shard
from loaderkit.runtime.planners.lengths import sample_weights

if TYPE_CHECKING:
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.sampling_weights import WeightsSpec

__all__ = ["WeightedPlanner", "make_weighted"]


class WeightedPlanner(ListPlanner):
    """Batches of weighted draws (with or without replacement), keyed by (seed, epoch)."""

    def __init__(
        self,
        weights: npt.NDArray[np.float64],
        spec: WeightsSpec,
        batch: BatchSpec,
        shard: Shard,
    ) -> None:
        super().__init__(shard, batch.drop_last)
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
        """The global batches of ``epoch``, before they are dealt to the ranks."""
        return self._batches(epoch, self.global_size(epoch), self.batch.drop_last)

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's draws in order, before batching (the batch size does not change them)."""
        whole = max(self.spec.num_samples or 0, len(self.weights), 1)  # one batch of all
        return self._batches(epoch, whole, False).indices

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """The samples an epoch can draw: those of positive weight."""
        positive: npt.NDArray[np.bool_] = self.weights > 0
        return positive


def make_weighted(context: PlannerContext) -> Selected:
    """Weighted draws, the weights read from the dataset (cut to the split's part)."""
    plan = context.plan
    assert plan.bindings is not None
    assert plan.sampling_weights is not None
    weights, cost = sample_weights(plan.sampling_weights.source, plan.dataset, plan.bindings)
    weights = context.in_part(weights)
    planner = WeightedPlanner(weights, plan.sampling_weights, plan.batch, context.shard())
    return Selected(planner, cost)
