"""``explain()`` of the map-style loader, and the parts both loaders' reports share.

The stream loader's report is :mod:`loaderkit.runtime.stream.explain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit._text import inert_lines
from loaderkit.order.token_budget import padding_stats
from loaderkit.plan.sections.bucketing import budget_split
from loaderkit.runtime.fetch.global_rngs import seen_line
from loaderkit.runtime.planners import (
    BucketPlanner,
    CurriculumPlanner,
    MixturePlanner,
    Planner,
    WeightedPlanner,
)

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.fetch.fetcher import BatchFetcher
    from loaderkit.runtime.loader import Loader
    from loaderkit.runtime.passes.cursor import PassCursor

__all__ = ["collator_lines", "decode_lines", "explain_loader", "explained_epoch"]


def explain_loader(
    loader: Loader,
    planner: Planner,
    part: npt.NDArray[Any] | None,
    fetcher: BatchFetcher,
    cursor: PassCursor,
) -> str:
    """The plan's report plus what was resolved on this machine.

    Where rank and world size came from, the device, and for bucketed plans what measuring
    the lengths cost and the padding of the current epoch on this rank (for bucketing
    combined with weights, a curriculum or a mixture: how many samples that sampler chose
    for the epoch on this rank, and what reading its values cost).

    ``planner``, ``part``, ``fetcher`` and ``cursor`` are the loader's planner, its split
    part (or ``None``), its fetcher and its pass cursor.
    The epoch reported is the one the loader is at (a pass in progress, or the position
    ``set_epoch`` or ``load_state_dict`` set), or, once its last pass ran to the end, the one
    the next pass reads (:func:`explained_epoch`).
    """
    epoch, which = explained_epoch(cursor)
    lines = [
        loader.plan.explain(),
        f"  resolved    rank {loader.rank} of {loader.world_size} "
        f"({loader.distributed_source}); device {loader.device}; pin memory "
        f"{'on' if loader.pin_memory else 'off'}",
    ]
    for name, line in decode_lines(loader.plan, fetcher.source):
        lines.append(f"  images      {name!r}: {line}")
    lines.extend(f"  storage     {line}" for report in fetcher.storage for line in report.lines())
    seeding = fetcher.seeding
    if seeding is not None and seeding.watch:
        lines.append(f"  global rngs {seen_line(seeding.log)}")
    lines.extend(collator_lines(fetcher.collate))
    if loader.workers.auto is not None:
        lines.append(f"  workers     resolved {loader.workers.reason}")
    if loader.workers_unused is not None:
        lines.append(f"  workers     {loader.workers_unused}")
    if part is not None:
        lines.append(
            f"  part        {loader.split!r} of the split: {len(part):,} of "
            f"{loader.plan.dataset.length:,} samples"
        )
    if loader.world_size > 1:
        lines.append(
            f"  ranks       epoch {epoch}{which}: {planner.num_batches(epoch):,} batches on this "
            f"rank; {planner.repeated(epoch):,} samples delivered twice across ranks to "
            f"even them out (wrap-around)"
        )
    sampler = planner if loader.sampler_planner is None else loader.sampler_planner
    if isinstance(sampler, CurriculumPlanner):
        cost = loader.lengths_cost if loader.sampler_planner is None else loader.sampler_cost
        lines.append(
            f"  curriculum  difficulties: {cost}; epoch {epoch}{which}: "
            f"{sampler.eligible(epoch):,} of {len(sampler.order):,} samples eligible, "
            f"{planner.num_batches(epoch):,} batches on this rank"
        )
    if isinstance(planner, BucketPlanner):
        spec = planner.spec
        mine = planner.batches(epoch)
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
        if loader.sampler_planner is not None:  # what the combined sampler chose for this rank
            what = {
                WeightedPlanner: "weighted draws",
                CurriculumPlanner: "eligible samples",
                MixturePlanner: "mixture samples",
            }[type(loader.sampler_planner)]
            grouped = f"{mine.num_samples:,} {what} in "
        line = (
            f"  bucketing   lengths: {loader.lengths_cost}; epoch {epoch}{which}: "
            f"{grouped}{len(mine):,} batches of {int(sizes.min())}-{int(sizes.max())} "
            f"samples, padding {stats['waste']:.1%} of tokens"
        )
        if "utilization" in stats:
            line += f", budget used {stats['utilization']:.1%}; {budget_split(spec, stats)}"
        if isinstance(loader.sampler_planner, WeightedPlanner):
            line += f"; weights: {loader.sampler_cost}"
        lines.append(line)
    return inert_lines("\n".join(lines))  # names of the data: untrusted text


def explained_epoch(cursor: PassCursor) -> tuple[int, str]:
    """The epoch ``explain()`` reports, and how it is labelled (``""`` or ``" (next pass)"``).

    While a pass is in progress, or after ``set_epoch(e)`` / ``load_state_dict(state)``
    (before the next ``iter()``), that is :attr:`Loader.epoch`. Once the last pass ran to
    its end, and so after loading a state taken at that point, the loader is done with that
    epoch: the report is about the epoch the next pass reads (:attr:`Loader.next_pass`).
    """
    if cursor.ended:
        return cursor.next_pass[0], " (next pass)"
    return cursor.epoch, ""


def collator_lines(collate: object) -> list[str]:
    """The collator's own line (``loaderkit_explain``: what it chose for the device), if any."""
    describe = getattr(collate, "loaderkit_explain", None)
    line = describe() if callable(describe) else None
    return [] if line is None else [f"  collator    {line}"]


def decode_lines(plan: LoaderPlan, source: object) -> list[tuple[str, str]]:
    """(binding, line) for each source that says how it decodes (``loaderkit_explain``)."""
    inner = getattr(source, "inner", None)  # a cache at the "fetched" stage wraps the source
    source = inner if inner is not None else source
    bindings = (
        [plan.dataset.binding]
        if plan.mixture is None
        else [s.binding for s in plan.mixture.sources]
    )
    parts = getattr(source, "parts", [source])
    out = []
    for binding, part in zip(bindings, parts, strict=False):
        describe = getattr(part.data, "loaderkit_explain", None)
        if callable(describe):
            out.append((binding, str(describe())))
    return out
