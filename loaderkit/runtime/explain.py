"""``Loader.explain()``: the plan's report plus what was resolved on this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.bucketing import padding_stats
from loaderkit.plan.display import budget_split
from loaderkit.runtime.planners import (
    BucketPlanner,
    CurriculumPlanner,
    MixturePlanner,
    Planner,
    WeightedPlanner,
)

if TYPE_CHECKING:
    from loaderkit.runtime.loader import Loader

__all__ = ["explain_loader"]


def explain_loader(loader: Loader, planner: Planner, part: npt.NDArray[Any] | None) -> str:
    """The plan's report plus what was resolved on this machine.

    Where rank and world size came from, the device, and for bucketed plans what measuring
    the lengths cost and the padding of the current epoch on this rank (for bucketing
    combined with weights, a curriculum or a mixture: how many samples that sampler chose
    for the epoch on this rank, and what reading its values cost).

    ``planner`` and ``part`` are the loader's planner and its split part (or ``None``).
    """
    lines = [
        loader.plan.explain(),
        f"  resolved    rank {loader.rank} of {loader.world_size} "
        f"({loader.distributed_source}); device {loader.device}; pin memory "
        f"{'on' if loader.pin_memory else 'off'}",
    ]
    if loader.workers.auto is not None:
        lines.append(f"  workers     resolved {loader.workers.reason}")
    if part is not None:
        lines.append(
            f"  part        {loader.split!r} of the split: {len(part):,} of "
            f"{loader.plan.dataset.length:,} samples"
        )
    if loader.world_size > 1:
        epoch = loader.epoch
        lines.append(
            f"  ranks       epoch {epoch}: {planner.num_batches(epoch):,} batches on this "
            f"rank; {planner.repeated(epoch):,} samples delivered twice across ranks to "
            f"even them out (wrap-around)"
        )
    sampler = planner if loader.sampler is None else loader.sampler
    if isinstance(sampler, CurriculumPlanner):
        cost = loader.lengths_cost if loader.sampler is None else loader.sampler_cost
        lines.append(
            f"  curriculum  difficulties: {cost}; epoch {loader.epoch}: "
            f"{sampler.eligible(loader.epoch):,} of {len(sampler.order):,} samples eligible, "
            f"{planner.num_batches(loader.epoch):,} batches on this rank"
        )
    if isinstance(planner, BucketPlanner):
        spec = planner.spec
        mine = planner.batches(loader.epoch)
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
        if loader.sampler is not None:  # what the combined sampler chose for this rank
            what = {
                WeightedPlanner: "weighted draws",
                CurriculumPlanner: "eligible samples",
                MixturePlanner: "mixture samples",
            }[type(loader.sampler)]
            grouped = f"{mine.num_samples:,} {what} in "
        line = (
            f"  bucketing   lengths: {loader.lengths_cost}; epoch {loader.epoch}: "
            f"{grouped}{len(mine):,} batches of {int(sizes.min())}-{int(sizes.max())} "
            f"samples, padding {stats['waste']:.1%} of tokens"
        )
        if "utilization" in stats:
            line += f", budget used {stats['utilization']:.1%}; {budget_split(spec, stats)}"
        if isinstance(loader.sampler, WeightedPlanner):
            line += f"; weights: {loader.sampler_cost}"
        lines.append(line)
    return "\n".join(lines)
