"""The ``[distributed]`` section: sharding between ranks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_bool, check_int
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.sections.base import (
    FingerprintRow,
    RuleContext,
    Section,
    explain_row,
    fields_table,
)

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.bucketing import BucketingSpec
    from loaderkit.plan.sections.curriculum import CurriculumSpec
    from loaderkit.plan.sections.mixture import MixtureSpec
    from loaderkit.plan.sections.sampling_weights import WeightsSpec
    from loaderkit.plan.specs import DatasetSpec

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


def uneven_reason(sections: Mapping[str, Any], dataset: DatasetSpec | None) -> str:
    """Why ``even_batches=False`` could leave ranks with different batch counts ("" if not).

    ``dataset`` is the plan's dataset, or one part of it (a split's).
    """
    batch: BatchSpec = sections["batch"]
    distributed: DistributedSpec = sections["distributed"]
    bucketing: BucketingSpec | None = sections.get("bucketing")
    sampling_weights: WeightsSpec | None = sections.get("sampling_weights")
    curriculum: CurriculumSpec | None = sections.get("curriculum")
    mixture: MixtureSpec | None = sections.get("mixture")
    world = distributed.world_size
    budget = bucketing is not None and bucketing.max_tokens is not None
    if batch.drop_last and not budget and not batch.scheduled and curriculum is None:
        return ""  # only whole global batches: every rank the same count
    if world is None:
        return "the world size is detected when the plan is built, so compile() cannot check it"
    if world == 1 or dataset is None or dataset.length is None:
        return ""
    if batch.scheduled:
        return "the batch size follows a schedule"
    if budget:
        return "a token budget makes the number of batches vary"
    if curriculum is not None:
        return "a curriculum changes the number of samples per epoch or step"
    b = batch.batch_size
    whole = b * world
    if mixture is not None:
        sizes = mixture.sizes
        totals = {
            "weighted": [mixture.num_samples or sum(sizes)],
            "sequential": list(sizes),  # each source cut on its own
            "round_robin": [sum(sizes)],
            "max_size_cycle": [len(sizes) * max(sizes)],
            "min_size": [len(sizes) * min(sizes)],
        }[mixture.mode]
    elif sampling_weights is not None:
        if sampling_weights.num_samples is None and not sampling_weights.replacement:
            return (
                "without replacement the number of draws (the samples of positive weight) is "
                "known only at build; give num_samples"
            )
        totals = [sampling_weights.num_samples or dataset.length]
    else:
        totals = [dataset.length]
    for total in totals:
        tail = total % whole
        if tail and tail <= (world - 1) * b:
            short = [r for r in range(world) if tail <= r * b]
            return (
                f"{total} samples in global batches of {whole} ({b} x {world} ranks) leave a "
                f"last batch of {tail}, which rank(s) {', '.join(map(str, short))} would not "
                f"get"
            )
    return ""


def _even_batches_problems(ctx: RuleContext) -> list[Problem]:
    """Where ``even_batches=False`` could leave a rank waiting for the others (a hang)."""
    distributed: DistributedSpec = ctx.sections["distributed"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    if distributed.even_batches:
        return []
    if dataset is not None and dataset.iterable:
        if distributed.world_size == 1:
            return []
        return [
            Problem(
                "distributed.even_batches",
                f"False is not allowed for the iterable dataset {dataset.binding!r} on "
                f"several ranks: a stream's shards have lengths no rank knows before "
                f"reading them, so a rank could get fewer batches than another and "
                f"leave it waiting in a collective (a hang); keep even_batches=True "
                f"(each rank stops when the shortest rank's share ends: the rest is "
                f"trimmed and counted in loader.trimmed_samples)",
            )
        ]
    reason = uneven_reason(ctx.sections, dataset)
    if not reason:
        return []
    return [
        Problem(
            "distributed.even_batches",
            f"False is allowed only where every rank gets the same number of "
            f"batches (else a rank that ran out leaves the others waiting in a "
            f"collective: a hang), and {reason}; keep even_batches=True (the last "
            f"global batch is completed by wrapping around) or set drop_last=True",
        )
    ]


def _rules(ctx: RuleContext) -> list[Problem]:
    """A rank without a world size (or the reverse), a rank out of range, uneven batches."""
    distributed: DistributedSpec = ctx.sections["distributed"]
    if not distributed.enabled:
        return []
    size, rank = distributed.world_size, distributed.rank
    problems: list[Problem] = []
    if rank is not None and size is None:
        problems.append(
            Problem(
                "distributed.world_size",
                f"must be given when rank is (got rank={rank}, world_size=None); pass both "
                f"or neither to detect them",
            )
        )
    if size is not None and rank is None:
        problems.append(
            Problem(
                "distributed.rank",
                f"must be given when world_size is (got world_size={size}, rank=None); "
                f"pass both or neither to detect them",
            )
        )
    if size is not None and rank is not None and not 0 <= rank < size:
        problems.append(
            Problem(
                "distributed.rank",
                f"must be in [0, {size}) for world_size {size} (got {rank}); ranks count from 0",
            )
        )
    problems.extend(_even_batches_problems(ctx))
    return problems


SECTION: Section[DistributedSpec] = Section(
    rules={"distributed": _rules},
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
