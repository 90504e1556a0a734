"""Cross-field rules: every problem of a whole plan, found at once.

:func:`plan_problems` is run whenever a :class:`~loaderkit.plan.LoaderPlan` is created (by
``compile()``, by loading a file, by ``attrs.evolve``), so a plan that exists is a plan that
builds. Nothing here spawns a process or loads data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loaderkit._checks import LIMITS
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.sections import SECTIONS
from loaderkit.plan.sections.batch import BatchSpec, batch_schedule_problems
from loaderkit.plan.sections.bucketing import (
    BucketingSpec,
    bucketing_problems,
    budget_padding_problems,
)
from loaderkit.plan.sections.common import callable_problems, default_start_method, source_problems
from loaderkit.plan.sections.curriculum import CurriculumSpec
from loaderkit.plan.sections.distributed import DistributedSpec
from loaderkit.plan.sections.max_length import MaxLengthSpec, max_length_problems
from loaderkit.plan.sections.mixture import MixtureSpec, mixture_problems
from loaderkit.plan.sections.order import OrderSpec
from loaderkit.plan.sections.sampling_weights import WeightsSpec, weights_problems
from loaderkit.plan.sections.split import SplitSpec, split_problems
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec
from loaderkit.plan.workers import resolve_auto_workers

__all__ = ["NO_DATASET", "default_start_method", "plan_problems"]

NO_DATASET = "no dataset; call .with_dataset(ds) (or .with_mixture({...})) on the builder"
"""The problem of a plan without a source, whether ``compile()`` or ``build()`` meets it."""


def _uneven_reason(
    dataset: DatasetSpec | None,
    batch: BatchSpec,
    distributed: DistributedSpec,
    bucketing: BucketingSpec | None,
    sampling_weights: WeightsSpec | None,
    curriculum: CurriculumSpec | None,
    mixture: MixtureSpec | None,
) -> str:
    """Why ``even_batches=False`` could leave ranks with different batch counts ("" if not)."""
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


def plan_problems(
    sections: Mapping[str, Any], bindings: Mapping[str, object] | None
) -> list[Problem]:
    """All problems of a plan, in section order. ``bindings=None`` skips binding checks.

    ``sections`` maps each section's name (:data:`~loaderkit.plan.sections.SECTIONS`) to its
    value in the plan. The rules that involve several sections are written here; a section's
    own rules are its declared ``rules`` hook, run for each section that is set.
    """
    dataset: DatasetSpec | None = sections["dataset"]
    batch: BatchSpec = sections["batch"]
    order: OrderSpec = sections["order"]
    collator: CallableSpec = sections["collator"]
    transform: CallableSpec | None = sections["transform"]
    workers: WorkersSpec = sections["workers"]
    distributed: DistributedSpec = sections["distributed"]
    bucketing: BucketingSpec | None = sections.get("bucketing")
    sampling_weights: WeightsSpec | None = sections.get("sampling_weights")
    curriculum: CurriculumSpec | None = sections.get("curriculum")
    mixture: MixtureSpec | None = sections.get("mixture")
    max_length: MaxLengthSpec | None = sections.get("max_length")
    split: SplitSpec | None = sections.get("split")
    problems: list[Problem] = []

    if dataset is None:
        problems.append(Problem("dataset", NO_DATASET))
    else:
        parts = (
            []
            if mixture is None
            else [(f"mixture.sources.{s.binding}", s) for s in mixture.sources]
        )
        for where, spec in [("dataset", dataset), *parts]:
            if spec.length is not None and spec.length > LIMITS.dataset_length:
                problems.append(  # the bound a plan file's dataset.length is read with
                    Problem(
                        where,
                        f"holds {spec.length:,} samples; a plan describes at most "
                        f"{LIMITS.dataset_length:,} (LIMITS.dataset_length): split it into parts",
                    )
                )
        if dataset.kind == "mixture" and mixture is None:
            problems.append(
                Problem(
                    "dataset",
                    "is a mixture but the plan has no mixture section; build it with "
                    "with_mixture({...})",
                )
            )
        if dataset.kind != "mixture" and bindings is not None and dataset.binding not in bindings:
            problems.append(
                Problem(
                    "dataset",
                    f"no object bound to {dataset.binding!r}; give the dataset to the builder, "
                    f"or pass bindings={{{dataset.binding!r}: your_dataset}} when loading",
                )
            )
        if dataset.length == 0:
            problems.append(
                Problem(
                    "dataset",
                    f"{dataset.binding!r} has 0 samples; every epoch would be "
                    f"empty; pass a non-empty dataset",
                )
            )

    if batch.batch_size < 1:
        problems.append(
            Problem(
                "batch.batch_size",
                f"must be >= 1 (got {batch.batch_size}); pass a positive number of samples",
            )
        )
    elif batch.drop_last and dataset is not None and dataset.length:
        world = distributed.world_size if distributed.enabled and distributed.world_size else 1
        per_rank = dataset.length // world
        if per_rank < batch.batch_size:
            problems.append(
                Problem(
                    "batch.drop_last",
                    f"with batch_size {batch.batch_size} and {per_rank} samples per rank, "
                    f"drop_last=True leaves 0 batches per epoch; lower batch_size or keep the "
                    f"partial batch: .with_batch_size({batch.batch_size})",
                )
            )

    if order.shuffle and dataset is not None and dataset.iterable and order.buffer_size is None:
        problems.append(
            Problem(
                "order.shuffle",
                f"cannot shuffle the iterable dataset {dataset.binding!r} by index (got "
                f"shuffle=True); shuffle it through a buffer with "
                f"with_shuffle(buffer_size=...), read it in order with .with_shuffle(False), or "
                f"pass a map-style dataset",
            )
        )
    if order.buffer_size is not None and dataset is not None and not dataset.iterable:
        problems.append(
            Problem(
                "order.buffer_size",
                f"a shuffle buffer is for iterable (streamed) datasets, and "
                f"{dataset.binding!r} is a {dataset.kind} dataset shuffled by index; drop "
                f"buffer_size: .with_shuffle()",
            )
        )

    if workers.num_workers == 0:
        if workers.prefetch_factor is not None:
            problems.append(
                Problem(
                    "workers.prefetch_factor",
                    f"must be unset when num_workers == 0 (got {workers.prefetch_factor}); set "
                    f"num_workers >= 1, or drop it: .with_workers(0)",
                )
            )
        if workers.persistent:
            problems.append(
                Problem(
                    "workers.persistent",
                    "must be unset when num_workers == 0 (got True); set num_workers >= 1, or "
                    "drop it: .with_workers(0)",
                )
            )
        if workers.start_method is not None:
            problems.append(
                Problem(
                    "workers.start_method",
                    f"must be unset when num_workers == 0 (got {workers.start_method!r}); set "
                    f"num_workers >= 1, or drop it: .with_workers(0)",
                )
            )
        if workers.timeout:
            problems.append(
                Problem(
                    "workers.timeout",
                    f"only applies to worker processes, and num_workers == 0 (got "
                    f"{workers.timeout:g}); set num_workers >= 1, or drop it: .with_workers(0)",
                )
            )
    elif workers.timeout is not None and workers.timeout < 0:
        problems.append(Problem("workers.timeout", f"must be >= 0 (got {workers.timeout:g})"))
    if workers.num_workers == "auto" and dataset is not None and dataset.iterable:
        try:
            here = str(resolve_auto_workers().num_workers)
        except PlanError:  # a malformed LOCAL_WORLD_SIZE: build() reports it
            here = "N"
        problems.append(
            Problem(
                "workers.num_workers",
                f'"auto" is refused for the iterable dataset {dataset.binding!r}: a stream\'s '
                f"order depends on num_workers (it is in the fingerprint), so it must not change "
                f"with the machine that builds; give a number, e.g. with_workers({here}) (what "
                f'"auto" would choose on this machine)',
            )
        )

    if distributed.enabled:
        size, rank = distributed.world_size, distributed.rank
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
                    f"must be in [0, {size}) for world_size {size} (got {rank}); ranks count "
                    f"from 0",
                )
            )
        if not distributed.even_batches and dataset is not None and dataset.iterable:
            if distributed.world_size != 1:
                problems.append(
                    Problem(
                        "distributed.even_batches",
                        f"False is not allowed for the iterable dataset {dataset.binding!r} on "
                        f"several ranks: a stream's shards have lengths no rank knows before "
                        f"reading them, so a rank could get fewer batches than another and "
                        f"leave it waiting in a collective (a hang); keep even_batches=True "
                        f"(each rank stops when the shortest rank's share ends: the rest is "
                        f"trimmed and counted in loader.trimmed_samples)",
                    )
                )
        elif not distributed.even_batches:
            reason = _uneven_reason(
                dataset, batch, distributed, bucketing, sampling_weights, curriculum, mixture
            )
            if reason:
                problems.append(
                    Problem(
                        "distributed.even_batches",
                        f"False is allowed only where every rank gets the same number of "
                        f"batches (else a rank that ran out leaves the others waiting in a "
                        f"collective: a hang), and {reason}; keep even_batches=True (the last "
                        f"global batch is completed by wrapping around) or set drop_last=True",
                    )
                )

    needs_pickle = None
    if workers.num_workers == "auto" or workers.num_workers > 0:  # "auto" may start workers
        method = workers.start_method or default_start_method()
        if method != "fork":
            needs_pickle = method
    problems.extend(callable_problems("collator", collator, bindings, needs_pickle))
    if transform is not None:
        problems.extend(callable_problems("transform", transform, bindings, needs_pickle))

    if batch.scheduled:
        problems.extend(
            batch_schedule_problems(
                batch, bindings, bucketing, sampling_weights, curriculum, mixture
            )
        )
    if bucketing is not None:
        problems.extend(
            bucketing_problems(bucketing, dataset, batch, bindings, needs_pickle, mixture)
        )
        problems.extend(budget_padding_problems(bucketing, collator, max_length))
    if sampling_weights is not None:
        problems.extend(weights_problems(sampling_weights, dataset, bindings, needs_pickle))
    if curriculum is not None:
        problems.extend(
            source_problems(
                "curriculum.difficulty", curriculum.difficulty, dataset, bindings, needs_pickle
            )
        )
        if curriculum.fn is not None:
            problems.extend(
                callable_problems("curriculum.schedule", curriculum.fn, bindings, needs_pickle)
            )
        if dataset is not None and dataset.iterable:
            problems.append(
                Problem(
                    "curriculum",
                    f"needs random access to pick the easiest samples, and {dataset.binding!r} "
                    f"is an iterable dataset; pass a map-style dataset",
                )
            )
        if sampling_weights is not None:
            problems.append(
                Problem(
                    "curriculum",
                    "cannot be combined with with_sampling_weights yet; choose one of them: "
                    ".without('sampling_weights') or .without('curriculum')",
                )
            )
        if bucketing is not None and curriculum.by == "step":
            problems.append(
                Problem(
                    "curriculum.by",
                    "a per-step curriculum cannot be combined with with_bucketing: it draws "
                    "each batch from the eligible samples of its own step, while bucketing "
                    "regroups a whole epoch's samples by length; use with_curriculum(..., "
                    "by='epoch') (the eligible samples of each epoch are bucketed), or drop the "
                    "bucketing with .without('bucketing')",
                    related=("bucketing",),
                )
            )

    if mixture is not None:
        problems.extend(
            mixture_problems(
                mixture, dataset, bindings, needs_pickle, bucketing, sampling_weights, curriculum
            )
        )

    if max_length is not None:
        problems.extend(max_length_problems(max_length, collator, bindings))

    if split is not None and dataset is not None:

        def uneven(part: DatasetSpec) -> str:
            return _uneven_reason(
                part, batch, distributed, bucketing, sampling_weights, curriculum, mixture
            )

        problems.extend(split_problems(split, dataset, batch, distributed, mixture, uneven))

    for section in SECTIONS:
        if section.rules is not None and sections.get(section.name) is not None:
            problems.extend(section.rules(sections))

    names: dict[str, str] = {}
    sources = [(f"mixture.sources.{n}", n) for n in (mixture.names if mixture else ())]
    for path, name in (
        ("dataset", dataset.binding if dataset and dataset.kind != "mixture" else None),
        *sources,
        ("collator", collator.name if collator.source == "binding" else None),
        ("transform", transform.name if transform and transform.source == "binding" else None),
    ):
        if name is None:
            continue
        if name in names:
            fix = (
                "rename the source in with_mixture({...})"
                if path.startswith("mixture") or names[name].startswith("mixture")
                else "give the dataset another name with with_dataset(ds, name=...)"
            )
            problems.append(
                Problem(path, f"binding name {name!r} is already used by {names[name]}; {fix}")
            )
        names[name] = path
    return problems
