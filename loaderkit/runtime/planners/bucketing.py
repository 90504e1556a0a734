"""The bucketing planner: length-bucketed batches (``with_bucketing``).

Alone it batches every sample once; combined with weights, a curriculum or a mixture it
groups that sampler's epoch into buckets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.errors import DataError, PlanError
from loaderkit.order.batches import EpochBatches
from loaderkit.order.bucketing import (
    bucket_ids,
    bucketed_batches,
    bucketed_sequence_batches,
)
from loaderkit.order.padding import BatchPadding
from loaderkit.order.token_budget import oversize_message, oversize_sample
from loaderkit.plan.padding_rule import bucket_padding
from loaderkit.plan.sections.bucketing import bucket_plan
from loaderkit.runtime.planners.base import (
    ListPlanner,
    PlannerContext,
    Selected,
    SequenceSource,
    Shard,
)
from loaderkit.runtime.planners.curriculum import CurriculumPlanner
from loaderkit.runtime.planners.lengths import mixture_lengths, sample_lengths
from loaderkit.runtime.planners.mixture import MixturePlanner
from loaderkit.runtime.planners.weighted import WeightedPlanner

if TYPE_CHECKING:
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.bucketing import BucketingSpec

__all__ = ["BucketPlanner", "make_bucketing"]


class BucketPlanner(ListPlanner):
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
        shard: Shard,
        source: SequenceSource | None = None,
        padding: BatchPadding | None = None,
    ) -> None:
        super().__init__(shard, batch.drop_last)
        self.lengths = lengths
        self.spec = spec
        self.source = source
        self.padding = padding
        """How the collator pads a batch: a token budget bounds the padded tensor."""
        self.elastic = spec.max_tokens is None  # budgets are per rank: deal whole batches
        n = len(lengths)
        self.num_buckets, size = bucket_plan(spec, batch, n, self.world_size)
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
        """The global batches of ``epoch``, before they are dealt to the ranks."""
        size = self.batch_size
        if self.elastic and size is not None:
            size *= self.world_size
        options: dict[str, Any] = {
            "bucket_ids": self.bucket_ids,
            "seed": self.seed,
            "epoch": epoch,
            "batch_size": size,
            "max_tokens": self.spec.max_tokens,
            "cost": self.spec.cost,
            "drop_last": self.drop_last,
            "padding": self.padding,
        }
        if self.source is None:  # the dataset's own samples, or another sampler's sequence
            return bucketed_batches(self.lengths, **options)
        return bucketed_sequence_batches(self.source.sequence(epoch), self.lengths, **options)


def make_bucketing(
    context: PlannerContext, sampler_for: Callable[[PlannerContext], Selected | None]
) -> Selected:
    """Bucketed batches, grouping the epoch of the sampler ``sampler_for`` selects, if any.

    The lengths are measured first, then the sampler is made (so a length source that fails
    fails before the sampler's values are read).
    """
    plan = context.plan
    assert plan.bindings is not None
    assert plan.bucketing is not None
    if plan.mixture is not None:
        lengths, cost = mixture_lengths(plan.bucketing.length, plan.mixture, plan.bindings)
    else:
        lengths, cost = sample_lengths(plan.bucketing.length, plan.dataset, plan.bindings)
        lengths = context.in_part(lengths)
    sampler = sampler_for(context)
    source: WeightedPlanner | CurriculumPlanner | MixturePlanner | None = None
    sampler_cost = ""
    if sampler is not None:
        assert isinstance(sampler.planner, WeightedPlanner | CurriculumPlanner | MixturePlanner)
        source, sampler_cost = sampler.planner, sampler.cost
    padding = bucket_padding(plan)
    bucketed = BucketPlanner(
        lengths,
        plan.bucketing,
        plan.batch,
        context.shard(),
        source=source,
        padding=padding,
    )
    if plan.mixture is not None and bucketed.num_batches(0) == 0:
        raise PlanError.single(
            "batch.drop_last",
            f"with batch_size {plan.batch.batch_size} on {context.world_size} ranks, the "
            f"mixture's bucketed epoch leaves 0 batches per rank; lower batch_size or set "
            f"drop_last=False",
        )
    return Selected(bucketed, cost, source, sampler_cost)
