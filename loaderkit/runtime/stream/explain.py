"""``explain()`` of the stream loader: the plan's report plus how the stream is read here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaderkit._text import inert_lines
from loaderkit.runtime.explain import collator_lines
from loaderkit.runtime.stream.read import SHARD_HOOK, WORKER_SPLIT

if TYPE_CHECKING:
    from loaderkit.runtime.stream.loader import StreamLoader

__all__ = ["explain_stream"]


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
