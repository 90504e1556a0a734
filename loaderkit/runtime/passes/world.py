"""Which rank of how many this process is, and the refusal to build an unsharded plan on a rank."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from loaderkit.errors import PlanError

if TYPE_CHECKING:
    from loaderkit.plan.sections.distributed import DistributedSpec

__all__ = ["refuse_unsharded_ranks", "resolve_world", "unsharded_world"]


def resolve_world(spec: DistributedSpec) -> tuple[int, int, str]:
    """(world size, rank, where they came from) for this process.

    Raises:
        PlanError: at path ``distributed``, when the plan does not shard
            (no ``with_distributed()``) but this process is one of several ranks (an
            initialized ``torch.distributed`` group of more than one process, or
            ``WORLD_SIZE`` > 1 in the environment, as torchrun sets): every rank would read
            the whole dataset. The message names the fix and the explicit opt-out
            (``with_distributed(world_size=1, rank=0)``).

    """
    if not spec.enabled:
        refuse_unsharded_ranks()
        return 1, 0, "single process"
    if spec.world_size is not None and spec.rank is not None:
        return spec.world_size, spec.rank, "given explicitly"
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank(), "torch.distributed process group"
    env_world, env_rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if env_world is not None or env_rank is not None:
        try:
            world, rank = int(env_world or ""), int(env_rank or "")
        except ValueError:
            raise PlanError.single(
                "distributed",
                f"RANK={env_rank!r} and WORLD_SIZE={env_world!r} in the environment are not "
                f"both integers; launch with torchrun or pass with_distributed(world_size=..., "
                f"rank=...)",
            ) from None
        if world < 1 or not 0 <= rank < world:
            raise PlanError.single(
                "distributed",
                f"RANK={rank} is outside [0, WORLD_SIZE={world}) in the environment",
            )
        return world, rank, "RANK/WORLD_SIZE environment (torchrun)"
    return 1, 0, "single process (no process group, no RANK/WORLD_SIZE set)"


def unsharded_world() -> tuple[int, str] | None:
    """(world size, where it was seen) when this process is one of several ranks, else None."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_world_size(), "an initialized torch.distributed process group"
    text = os.environ.get("WORLD_SIZE", "").strip()
    try:
        world = int(text)
    except ValueError:
        return None  # not a launcher's value: nothing to say about ranks
    return (world, f"WORLD_SIZE={world} in the environment (torchrun)") if world > 1 else None


def refuse_unsharded_ranks() -> None:
    """Raise :class:`PlanError` if a plan without sharding is built on one of several ranks."""
    found = unsharded_world()
    if found is None:
        return
    world, where = found
    raise PlanError.single(
        "distributed",
        f"this process is one of {world} ranks ({where}) but the plan does not shard: every "
        f"rank would read the whole dataset, each epoch {world} times over. Add "
        f".with_distributed() to give each rank its part (rank and world size are detected "
        f"at build), or .with_distributed(world_size=1, rank=0) if every rank should read "
        f"everything on purpose (e.g. an evaluation repeated on each rank)",
    )
