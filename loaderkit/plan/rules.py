"""Cross-field rules: every problem of a whole plan, found at once.

:func:`plan_problems` is run whenever a :class:`~loaderkit.plan.LoaderPlan` is created (by
``compile()``, by loading a file, by ``attrs.evolve``), so a plan that exists is a plan that
builds. Nothing here spawns a process or loads data.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
from collections.abc import Mapping

import numpy as np

from loaderkit._checks import LIMITS, did_you_mean
from loaderkit.collators import collators
from loaderkit.errors import PlanError, Problem
from loaderkit.order.padding import PackedRows
from loaderkit.plan.padding_rule import registry_padding
from loaderkit.plan.sections.cache import CacheSpec, cache_problems
from loaderkit.plan.sections.checks import ChecksSpec, checks_problems
from loaderkit.plan.sections.error_policy import ErrorPolicySpec
from loaderkit.plan.sections.max_length import MaxLengthSpec
from loaderkit.plan.sections.split import SplitSpec, split_problems
from loaderkit.plan.specs import (
    BatchSpec,
    BucketingSpec,
    CallableSpec,
    CurriculumSpec,
    DatasetSpec,
    DistributedSpec,
    LengthSource,
    MixtureSpec,
    OrderSpec,
    WeightsSpec,
    WorkersSpec,
)
from loaderkit.plan.workers import resolve_auto_workers
from loaderkit.registry import PluginNotImportedError
from loaderkit.transforms import transforms

__all__ = ["default_start_method", "plan_problems"]


def default_start_method() -> str:
    """The start method workers get when the plan names none (this platform's default)."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    return chosen or multiprocessing.get_all_start_methods()[0]


def _callable_problems(
    path: str,
    spec: CallableSpec,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    problems: list[Problem] = []
    if spec.source == "registry":
        registry = collators if path == "collator" else transforms
        if spec.name not in registry:
            problems.append(Problem(path, registry.unknown_message(spec.name)))
        elif path == "collator":
            try:
                found = registry.get(spec.name).option_problems(dict(spec.options))
            except PluginNotImportedError:  # inspecting: a plugin's options are checked to build
                found = []
            for option, message in found:
                where = f"{path}.options.{option}" if option else f"{path}.options"
                problems.append(Problem(where, message))
        return problems
    if bindings is None:
        return problems
    if spec.name not in bindings:
        problems.append(
            Problem(
                path,
                f"no object bound to {spec.name!r}; give the object to the builder, or pass "
                f"bindings={{{spec.name!r}: ...}} when loading the plan",
            )
        )
        return problems
    if needs_pickle and spec.source == "binding":
        obj = bindings[spec.name]
        try:
            pickle.dumps(obj)
        except Exception as exc:  # noqa: BLE001 - any pickling failure is the same problem
            label = getattr(obj, "__qualname__", type(obj).__name__)
            problems.append(
                Problem(
                    path,
                    f"{label!r} cannot be pickled ({type(exc).__name__}: {exc}), but workers "
                    f"started with {needs_pickle!r} must receive it by pickling; define it at "
                    f"module level, or use with_workers(..., start_method='fork')",
                )
            )
    return problems


def _source_problems(
    path: str,
    source: LengthSource,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    """Problems of a per-sample value source (column, values, function)."""
    problems: list[Problem] = []
    if (
        source.kind == "column"
        and dataset is not None
        and dataset.columns
        and source.name not in dataset.columns
    ):
        problems.append(
            Problem(
                path,
                f"column {source.name!r} is not in dataset {dataset.binding!r} (columns: "
                f"{', '.join(dataset.columns)}){did_you_mean(source.name, dataset.columns)}",
            )
        )
    if source.kind == "array" and bindings is not None:
        if source.name not in bindings:
            problems.append(
                Problem(
                    path,
                    f"no object bound to {source.name!r}; give the values to the builder, or "
                    f"pass bindings={{{source.name!r}: values}} when loading",
                )
            )
        else:
            size = len(bindings[source.name])  # type: ignore[arg-type]
            if dataset is not None and dataset.length is not None and size != dataset.length:
                problems.append(
                    Problem(
                        path,
                        f"has {size} values but dataset {dataset.binding!r} has "
                        f"{dataset.length} samples; pass one value per sample",
                    )
                )
    if source.kind == "callable" and source.fn is not None:
        problems.extend(_callable_problems(path, source.fn, bindings, needs_pickle))
    return problems


def _weights_problems(
    spec: WeightsSpec,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    problems = _source_problems(
        "sampling_weights.weights", spec.source, dataset, bindings, needs_pickle
    )
    if dataset is not None and dataset.iterable:
        problems.append(
            Problem(
                "sampling_weights",
                f"needs random access to draw samples, and {dataset.binding!r} is an iterable "
                f"dataset; pass a map-style dataset",
            )
        )
    size = dataset.length if dataset is not None else None
    if not spec.replacement and size and spec.num_samples is not None and spec.num_samples > size:
        problems.append(
            Problem(
                "sampling_weights.num_samples",
                f"draws {spec.num_samples} samples without replacement from {size}; lower "
                f"num_samples or set replacement=True",
            )
        )
    return problems


def _bucketing_problems(
    spec: BucketingSpec,
    dataset: DatasetSpec | None,
    batch: BatchSpec,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
    mixture: MixtureSpec | None,
) -> list[Problem]:
    problems: list[Problem] = []
    if dataset is not None and dataset.iterable:
        problems.append(
            Problem(
                "bucketing",
                f"needs random access to group samples by length, and {dataset.binding!r} is an "
                f"iterable dataset; pass a map-style dataset",
            )
        )
    if mixture is not None and spec.length.kind == "column":
        # lengths are read source by source: the column must be in every one of them
        for source in mixture.sources:
            if source.columns and spec.length.name not in source.columns:
                problems.append(
                    Problem(
                        "bucketing.length",
                        f"column {spec.length.name!r} is not in mixture source "
                        f"{source.binding!r} (columns: {', '.join(source.columns)})"
                        f"{did_you_mean(spec.length.name, source.columns)}; the lengths are "
                        f"read from every source, so every source needs it (or give a "
                        f"function of a sample)",
                    )
                )
        checked = None  # the combined spec lists only the columns shared by every source
    else:
        checked = dataset
    problems.extend(
        _source_problems("bucketing.length", spec.length, checked, bindings, needs_pickle)
    )
    samples = dataset.length if dataset is not None else None
    if samples and spec.num_buckets is not None and spec.num_buckets > samples:
        problems.append(
            Problem(
                "bucketing.num_buckets",
                f"must be <= the {samples} samples of the dataset (got {spec.num_buckets})",
            )
        )
    if spec.max_tokens is not None and batch.batch_size != 1:
        problems.append(
            Problem(
                "batch.batch_size",
                f"with a token budget (max_tokens={spec.max_tokens}) the batch size varies (got "
                f"batch_size={batch.batch_size}); drop the fixed size with "
                f".with_batch_size(None), or cap samples per batch with "
                f".with_bucketing(..., max_batch_size={batch.batch_size})",
                related=("bucketing",),
            )
        )
    if spec.max_tokens is None and spec.max_batch_size is not None:
        problems.append(
            Problem(
                "bucketing.max_batch_size",
                f"only applies with max_tokens (got {spec.max_batch_size}); set the batch size "
                f"with with_batch_size",
            )
        )
    return problems


def _budget_padding_problems(
    spec: BucketingSpec, collator: CallableSpec, max_length: MaxLengthSpec | None
) -> list[Problem]:
    """What keeps a token budget from holding the collator's padded batches, data unseen.

    The budget bounds the padded tensor (the collator's ``padded_length()``): a registry
    collator that pads every batch wider than the budget (``padding="max_length"``, rows of
    ``packed``, a ``pad_to_multiple_of`` above it) leaves no batch possible; and ``packed``
    rows narrowed per step by ``with_max_length`` are more numerous than the planner counts.
    """
    if spec.max_tokens is None or collator.source != "registry":
        return []
    from loaderkit.order.bucketing import oversize_sample

    padding = None
    with contextlib.suppress(PlanError, PluginNotImportedError):  # reported by the collator
        padding = registry_padding(collator)
    if padding is None:
        return []
    problems: list[Problem] = []
    if oversize_sample(np.ones(1, dtype=np.int64), spec.max_tokens, spec.cost, padding):
        problems.append(
            Problem(
                "bucketing.max_tokens",
                f"no batch fits: collator {collator.name!r} pads even a one-token sample "
                f"beyond max_tokens={spec.max_tokens} (cost={spec.cost}; "
                f"{padding.describe()}); raise max_tokens, or lower the collator's max_length "
                f"or pad_to_multiple_of",
                related=("collator",),
            )
        )
    if isinstance(padding, PackedRows) and max_length is not None:
        problems.append(
            Problem(
                "max_length",
                f"a sequence-length schedule narrows the packed rows, so a batch fills more "
                f"rows than the token budget (max_tokens={spec.max_tokens}) was cut for; drop "
                f"the schedule with .without('max_length'), or the token budget with "
                f".with_bucketing(...) without max_tokens",
                related=("bucketing", "collator"),
            )
        )
    return problems


def _batch_schedule_problems(
    batch: BatchSpec,
    bindings: Mapping[str, object] | None,
    bucketing: BucketingSpec | None,
    sampling_weights: WeightsSpec | None,
    curriculum: CurriculumSpec | None,
    mixture: MixtureSpec | None,
) -> list[Problem]:
    problems: list[Problem] = []
    if batch.fn is not None:  # runs in the main process: no pickling needed
        problems.extend(_callable_problems("batch.batch_size", batch.fn, bindings, None))
    if bucketing is not None:
        problems.append(
            Problem(
                "batch.batch_size",
                "a batch-size schedule cannot be combined with with_bucketing yet; use a fixed "
                "batch size (or a token budget, which sizes batches itself)",
                related=("bucketing",),
            )
        )
    if curriculum is not None and curriculum.by == "step":
        problems.append(
            Problem(
                "batch.batch_size",
                "a batch-size schedule cannot be combined with a per-step curriculum yet (its "
                "steps per epoch follow the batch size); use with_curriculum(..., by='epoch')",
            )
        )
    others = [
        label
        for spec, label in (
            (sampling_weights, "with_sampling_weights"),
            (curriculum, "with_curriculum"),
            (mixture, "with_mixture"),
        )
        if spec is not None
    ]
    if batch.by == "step" and others:
        problems.append(
            Problem(
                "batch.by",
                f"a per-step batch-size schedule works with plain (shuffled or sequential) "
                f"order, not yet with {others[0]}; use by='epoch'",
            )
        )
    return problems


def _max_length_problems(
    spec: MaxLengthSpec, collator: CallableSpec, bindings: Mapping[str, object] | None
) -> list[Problem]:
    problems: list[Problem] = []
    if spec.fn is not None:  # runs in the main process: no pickling needed
        problems.extend(_callable_problems("max_length", spec.fn, bindings, None))
    if collator.source == "registry":
        entry = None
        if collator.name in collators:
            with contextlib.suppress(PluginNotImportedError):  # inspecting: checked to build
                entry = collators.get(collator.name)
        if entry is not None:
            factory = entry.factory
            if not getattr(factory, "supports_max_length", False):
                able = [  # the collators imported: listing them imports no plugin
                    found.name
                    for found in map(collators.loaded, collators.names())
                    if found is not None and getattr(found.factory, "supports_max_length", False)
                ]
                problems.append(
                    Problem(
                        "max_length",
                        f"collator {collator.name!r} has no max_length to apply a "
                        f"sequence-length schedule to; use one that does ({', '.join(able)})",
                        related=("collator",),
                    )
                )
    elif (
        collator.source == "binding"
        and bindings is not None
        and collator.name in bindings
        and not callable(getattr(bindings[collator.name], "with_max_length", None))
    ):
        problems.append(
            Problem(
                "max_length",
                f"the collator bound to {collator.name!r} has no with_max_length(n) method "
                f"to apply a sequence-length schedule; give it one (see "
                f"loaderkit.collators.Collator.with_max_length) or use the 'text' collator",
            )
        )
    return problems


def _mixture_problems(
    mixture: MixtureSpec,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
    bucketing: BucketingSpec | None,
    sampling_weights: WeightsSpec | None,
    curriculum: CurriculumSpec | None,
) -> list[Problem]:
    problems: list[Problem] = []
    if dataset is not None and dataset.kind != "mixture":
        problems.append(
            Problem(
                "mixture",
                f"the plan reads dataset {dataset.binding!r} and a mixture; with_mixture "
                f"replaces with_dataset, so use one of them",
            )
        )
    elif dataset is not None and dataset.length != sum(mixture.sizes):
        problems.append(
            Problem(
                "dataset.length",
                f"is {dataset.length} but the mixture's sources hold {sum(mixture.sizes)} "
                f"samples; compile the plan again",
            )
        )
    for source in mixture.sources:
        if bindings is not None and source.binding not in bindings:
            problems.append(
                Problem(
                    f"mixture.sources.{source.binding}",
                    f"no object bound to {source.binding!r}; pass bindings="
                    f"{{{source.binding!r}: your_dataset}} when loading",
                )
            )
    if mixture.fn is not None:
        # weight functions run in the main process: no pickling needed
        problems.extend(_callable_problems("mixture.weights", mixture.fn, bindings, None))
    if bucketing is not None:
        problems.extend(_mixture_bucketing_problems(mixture))
    for other, label in (
        (sampling_weights, "with_sampling_weights"),
        (curriculum, "with_curriculum"),
    ):
        if other is not None:
            problems.append(
                Problem(
                    "mixture",
                    f"cannot be combined with {label} yet; weight the sources with "
                    f"with_mixture(..., weights=...) instead (and .without({label[5:]!r})), or "
                    f"use one dataset",
                )
            )
    if mixture.stratified and mixture.mode != "weighted":
        problems.append(
            Problem("mixture.stratified", f"only applies to mode='weighted' (got {mixture.mode!r})")
        )
    return problems


def _mixture_bucketing_problems(mixture: MixtureSpec) -> list[Problem]:
    """What keeps a mixture's epoch from being grouped into length buckets."""
    problems: list[Problem] = []
    if mixture.mode == "sequential":
        problems.append(
            Problem(
                "mixture.mode",
                "mode='sequential' cannot be combined with with_bucketing: its batches never "
                "straddle sources and come source after source, which regrouping the epoch by "
                "length would undo; use mode='round_robin' (every sample of every source "
                "once) or 'weighted', or drop the bucketing with .without('bucketing')",
                related=("bucketing",),
            )
        )
    if mixture.stratified:
        problems.append(
            Problem(
                "mixture.stratified",
                "stratified=True cannot be combined with with_bucketing: stratification sets "
                "each batch's per-source counts, and bucketing regroups the epoch's samples by "
                "length into other batches; pass stratified=False to with_mixture (the weighted "
                "draws still follow the weights over the epoch), or drop the bucketing with "
                ".without('bucketing')",
                related=("bucketing",),
            )
        )
    if mixture.mode == "weighted" and mixture.by == "step" and (mixture.fn or mixture.schedule):
        problems.append(
            Problem(
                "mixture.by",
                "a per-step weight schedule cannot be combined with with_bucketing: the "
                "weights change from batch to batch, and bucketing regroups the whole epoch "
                "by length, so no batch would follow its step's weights; use by='epoch' "
                "(weights that change per epoch) or fixed weights, or drop the bucketing with "
                ".without('bucketing')",
                related=("bucketing",),
            )
        )
    return problems


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
    *,
    dataset: DatasetSpec | None,
    batch: BatchSpec,
    order: OrderSpec,
    collator: CallableSpec,
    transform: CallableSpec | None,
    workers: WorkersSpec,
    distributed: DistributedSpec,
    bindings: Mapping[str, object] | None,
    bucketing: BucketingSpec | None = None,
    sampling_weights: WeightsSpec | None = None,
    curriculum: CurriculumSpec | None = None,
    mixture: MixtureSpec | None = None,
    max_length: MaxLengthSpec | None = None,
    split: SplitSpec | None = None,
    error_policy: ErrorPolicySpec | None = None,
    checks: ChecksSpec | None = None,
    cache: CacheSpec | None = None,
) -> list[Problem]:
    """All problems of a plan, in section order. ``bindings=None`` skips binding checks."""
    problems: list[Problem] = []

    if dataset is None:
        problems.append(Problem("dataset", "no dataset; call .with_dataset(ds) before .compile()"))
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
    problems.extend(_callable_problems("collator", collator, bindings, needs_pickle))
    if transform is not None:
        problems.extend(_callable_problems("transform", transform, bindings, needs_pickle))

    if batch.scheduled:
        problems.extend(
            _batch_schedule_problems(
                batch, bindings, bucketing, sampling_weights, curriculum, mixture
            )
        )
    if bucketing is not None:
        problems.extend(
            _bucketing_problems(bucketing, dataset, batch, bindings, needs_pickle, mixture)
        )
        problems.extend(_budget_padding_problems(bucketing, collator, max_length))
    if sampling_weights is not None:
        problems.extend(_weights_problems(sampling_weights, dataset, bindings, needs_pickle))
    if curriculum is not None:
        problems.extend(
            _source_problems(
                "curriculum.difficulty", curriculum.difficulty, dataset, bindings, needs_pickle
            )
        )
        if curriculum.fn is not None:
            problems.extend(
                _callable_problems("curriculum.schedule", curriculum.fn, bindings, needs_pickle)
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
            _mixture_problems(
                mixture, dataset, bindings, needs_pickle, bucketing, sampling_weights, curriculum
            )
        )

    if max_length is not None:
        problems.extend(_max_length_problems(max_length, collator, bindings))

    if split is not None and dataset is not None:

        def uneven(part: DatasetSpec) -> str:
            return _uneven_reason(
                part, batch, distributed, bucketing, sampling_weights, curriculum, mixture
            )

        problems.extend(split_problems(split, dataset, batch, distributed, mixture, uneven))

    if cache is not None:
        problems.extend(cache_problems(cache, dataset, transform, workers))

    if checks is not None:
        problems.extend(checks_problems(checks))

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
