"""``explain()`` of the loaders: the plan's report plus what was resolved on this machine."""

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
from loaderkit.runtime.stream.read import SHARD_HOOK, WORKER_SPLIT

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.fetch.fetcher import BatchFetcher
    from loaderkit.runtime.loader import Loader
    from loaderkit.runtime.passes.cursor import PassCursor
    from loaderkit.runtime.stream.loader import StreamLoader

__all__ = ["explain_loader", "explain_stream", "explained_epoch"]


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


def explain_stream(loader: StreamLoader, collate: object) -> str:
    """The plan's report plus how the stream is read on this machine.

    The sharding used, that the order depends on ``num_workers`` and the world size, the
    shuffle buffer, what a resume costs (and why, when it replays) and, under the ``skip``
    policy, what a stream can skip. ``collate`` is the loader's collator.
    """
    shards = loader.world_size * loader.producers
    name = type(loader.plan.bindings[loader.plan.dataset.binding]).__name__  # type: ignore[index]
    how = _sharding_line(loader, name, shards)
    o = loader.plan.order
    shuffle = (
        f"buffer shuffle of {o.buffer_size:,} samples per (seed, epoch, rank, worker) "
        f"stream, seed {o.seed}"
        if o.shuffle and o.buffer_size is not None
        else "none (stream order)"
    )
    epoch, delivered = loader.epoch, loader.batches_delivered
    if loader.resume_native:
        source = (
            "HF IterableDataset.load_state_dict"
            if loader.sharding == "hf"
            else f"{name}.load_state_dict"
        )
        resume = (
            f"O(1): each producer loads its source's state saved after its last delivered "
            f"batch ({source}), nothing is read twice"
        )
    else:
        resume = (
            f"replays the stream, O(samples already delivered) reading, because "
            f"{loader.resume_replays_because}"
        )
    errors = []
    if loader.plan.error_policy.policy == "skip":
        errors = [
            "  skipping    elements failing in the transform are dropped from their batch "
            "and recorded by stream position; an error raised by the source's own iterator "
            "cannot be skipped (it ends the iterator) and raises DataError"
        ]
    ranks = []
    if loader.even_batches and not loader.uneven_because:
        ranks = [
            f"  ranks       even_batches: every rank's producer w stops where rank "
            f"{loader.world_size - 1}'s (the shortest) does, so all ranks get as many "
            f"batches; the rest is trimmed ({loader.trimmed_samples} element(s) on this rank "
            f"in this pass, loader.trimmed_samples)"
        ]
    elif loader.uneven_because:
        ranks = [
            f"  ranks       even_batches is NOT enforced for this stream: {loader.uneven_because}"
        ]
    return inert_lines(  # names of the data and its source: untrusted text
        "\n".join(
            [
                loader.plan.explain(),
                f"  resolved    rank {loader.rank} of {loader.world_size} "
                f"({loader.distributed_source}); device {loader.device}; pin memory "
                f"{'on' if loader.pin_memory else 'off'}",
                f"  stream      streamed (iterable source: no length, no random access); "
                f"{shards} shard(s) = {loader.world_size} rank(s) x {loader.producers} producer(s)",
                f"  sharding    {how}",
                f"  shuffle     {shuffle}",
                f"  order       depends on num_workers ({loader.num_workers}) and the world size "
                f"({loader.world_size}): batches come round-robin from the producers; change "
                f"either and the order changes",
                f"  resume      {resume}; now at epoch {epoch}, {delivered} batch(es) delivered",
                *(f"  storage     {line}" for r in loader.storage for line in r.lines()),
                *collator_lines(collate),
                *ranks,
                *errors,
            ]
        )
    )


def _sharding_line(loader: StreamLoader, name: str, shards: int) -> str:
    """How the stream of ``loader`` (a dataset of class ``name``) is split into its shards."""
    if loader.sharding == "hf":
        return (
            f"HF split_dataset_by_node(rank={loader.rank}, world_size={loader.world_size}), "
            f"then HF's own split of this rank's shards over {loader.producers} worker(s)"
            if loader.world_size > 1
            else f"HF's own split of its shards over {loader.producers} worker(s)"
        )
    if loader.sharding == "hook":
        return (
            f"{name}.{SHARD_HOOK}({shards}, rank x {loader.producers} + worker) (the "
            f"dataset's sharding hook)"
        )
    if loader.sharding == "worker":
        return (
            f"by the dataset itself across {loader.producers} worker(s) ({name}."
            f"{WORKER_SPLIT} = True): each worker's own stream is taken whole, its element "
            f"j going to rank j mod {loader.world_size}"
        )
    how = f"by element: element k goes to shard k mod {shards} (rank x {loader.producers} + worker)"
    if loader.compares_streams:
        how += "; the workers' first elements are compared (each must read it all)"
    return how
