"""The ``[distributed]`` section: sharding between ranks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._checks import check_bool, check_int
from loaderkit.errors import PlanError
from loaderkit.plan.sections.base import FingerprintRow, Section, explain_row, fields_table

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "SECTION",
    "DistributedSpec",
    "distributed_calls",
    "distributed_line",
    "distributed_spec",
    "distributed_to_dict",
    "read_distributed",
]


@attrs.frozen
class DistributedSpec:
    """Sharding across ranks. ``enabled`` with ``None`` sizes means detect at build time."""

    enabled: bool = False
    world_size: int | None = None
    rank: int | None = None
    even_batches: bool = True


def distributed_spec(
    *,
    world_size: object = None,
    rank: object = None,
    even_batches: object = True,
    enabled: object = True,
) -> DistributedSpec:
    """Sharding settings; ``None`` sizes are detected when the plan is built."""
    if not check_bool("distributed.enabled", enabled):
        if world_size is not None or rank is not None or even_batches is not True:
            raise PlanError.single(
                "distributed.enabled",
                f"is False but world_size={world_size!r}, rank={rank!r}, even_batches="
                f"{even_batches!r} were given; drop them (.with_distributed(enabled=False)) or "
                f"enable sharding",
            )
        return DistributedSpec()
    size = (
        None if world_size is None else check_int("distributed.world_size", world_size, minimum=1)
    )
    index = None if rank is None else check_int("distributed.rank", rank, minimum=0)
    return DistributedSpec(True, size, index, check_bool("distributed.even_batches", even_batches))


distributed_to_dict = fields_table(("enabled", "even_batches"), ("world_size", "rank"))
"""The ``[distributed]`` table of a plan file; rank and world size only when fixed."""


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    dist = plan.distributed
    if not dist.enabled or dist.world_size == 1:  # one shard: the whole dataset
        return {"distributed": {"world_size": 1, "rank": 0}}
    return {
        "distributed": {
            "world_size": dist.world_size if dist.world_size is not None else "auto",
            "rank": dist.rank if dist.rank is not None else "auto",
            "even_batches": dist.even_batches,
        }
    }


def read_distributed(reader: Reader, data: Mapping[str, Any]) -> DistributedSpec | None:
    """Read the ``[distributed]`` table: present, it shards unless it says enabled = false."""
    sec = reader.section(data, "distributed", ("enabled", "world_size", "rank", "even_batches"))
    if "distributed" not in data:
        return None
    spec: DistributedSpec | None = reader.attempt(
        lambda: distributed_spec(
            world_size=sec.get("world_size"),
            rank=sec.get("rank"),
            even_batches=sec.get("even_batches", True),
            enabled=sec.get("enabled", True),
        )
    )
    return spec


def distributed_calls(d: DistributedSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_distributed`` call (none when not sharding, the default)."""
    if not d.enabled:
        return ()
    args = ctx.set_args(d, ("world_size", "rank"))
    if not d.even_batches:
        args.append("even_batches=False")
    return (f".with_distributed({', '.join(args)})",)


def distributed_line(plan: LoaderPlan) -> str:
    """The ``distributed`` line of ``explain()``: the ranks, given or detected."""
    d = plan.distributed
    if not d.enabled:
        text = "single process (build() refuses it on one of several ranks)"
    elif d.world_size is None:
        text = "detected at build time (torch.distributed, else RANK/WORLD_SIZE env)"
    else:
        text = f"rank {d.rank} of {d.world_size} (given explicitly)"
    if d.enabled and not d.even_batches:
        text += "; uneven batches allowed"
    return text


SECTION: Section[DistributedSpec] = Section(
    name="distributed",
    explain=explain_row("distributed", distributed_line),
    builder_calls=distributed_calls,
    read=read_distributed,
    to_dict=distributed_to_dict,
    fingerprint="stream",
    stream=_stream,
    execution_only=("enabled",),
    rows=(
        FingerprintRow(
            "distributed world / rank",
            "stream",
            'which shard this loader delivers (1 / 0 when not sharded; `"auto"` when detected '
            "at build time: the loader's state records the rank it resolved, and checks it on "
            "resume)",
        ),
        FingerprintRow(
            "`distributed.even_batches`",
            "stream",
            "(only when sharded) whether the tail is wrapped around",
        ),
    ),
)
