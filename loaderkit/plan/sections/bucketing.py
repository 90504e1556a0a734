"""The ``[bucketing]`` section: batches of samples of similar length, or a token budget."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs
import numpy as np

from loaderkit._limits import LIMITS
from loaderkit._validate import check_choice, check_int, did_you_mean
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.order.padding import NO_PADDING, BatchPadding, PackedRows
from loaderkit.plan.padding_rule import bucket_padding, registry_padding
from loaderkit.plan.sections.base import RuleContext, Section, explain_row
from loaderkit.plan.sections.common import (
    check_count,
    source_problems,
    source_to_dict,
    values_source,
)
from loaderkit.plan.sections.max_length import MaxLengthSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec, LengthSource
from loaderkit.registry import PluginNotImportedError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.mixture import MixtureSpec

__all__ = [
    "BUCKET_COSTS",
    "SECTION",
    "BucketCost",
    "BucketingSpec",
    "bucket_plan",
    "bucketing_calls",
    "bucketing_line",
    "bucketing_problems",
    "bucketing_spec",
    "bucketing_to_dict",
    "budget_limits",
    "budget_padding_problems",
    "budget_split",
    "default_num_buckets",
    "read_bucketing",
]

BucketCost = Literal["linear", "quadratic"]
"""How a token budget counts a padded batch: ``rows x width`` or ``rows x width**2``."""
BUCKET_COSTS: tuple[BucketCost, ...] = get_args(BucketCost)


@attrs.frozen
class BucketingSpec:
    """Batches of samples of similar length (see ``DataLoaderBuilder.with_bucketing``)."""

    length: LengthSource
    num_buckets: int | None = None
    max_tokens: int | None = None
    max_batch_size: int | None = None
    cost: str = "linear"

    def bound_names(self) -> tuple[str, ...]:
        """The binding of the lengths (precomputed values or a function; none for a column)."""
        return self.length.bound_names()


def bucketing_spec(
    length: object,
    *,
    num_buckets: object = None,
    max_tokens: object = None,
    max_batch_size: object = None,
    cost: object = "linear",
) -> tuple[BucketingSpec, object | None]:
    """The bucketing spec and the live object to bind (lengths or a length function).

    ``length`` is a column/sample key name, a ``"module:qualname"`` function, a callable taking
    a sample, or a sequence of precomputed lengths (one int per sample).
    """
    source, live = values_source("bucketing.length", length, "lengths", "length", _lengths_array)
    buckets = (
        None
        if num_buckets is None
        else check_int("bucketing.num_buckets", num_buckets, minimum=1, maximum=LIMITS.batch_size)
    )
    tokens = (
        None
        if max_tokens is None
        else check_int(
            "bucketing.max_tokens",
            max_tokens,
            minimum=1,
            maximum=LIMITS.batch_size,
            fix="a token budget",
        )
    )
    cap = (
        None
        if max_batch_size is None
        else check_int(
            "bucketing.max_batch_size", max_batch_size, minimum=1, maximum=LIMITS.batch_size
        )
    )
    model = check_choice("bucketing.cost", cost, BUCKET_COSTS)
    return BucketingSpec(source, buckets, tokens, cap, model), live


def _lengths_array(path: str, values: object) -> Any:
    import numpy as np

    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise PlanTypeError.single(
            path,
            f"must be a column name, a function of a sample or a sequence of lengths (got "
            f"{type(values).__name__})",
        )
    check_count(path, values, "lengths")
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        raise PlanTypeError.single(path, f"cannot read lengths from it: {exc}") from None
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise PlanTypeError.single(
            path, f"must be one int per sample (got an array of {array.dtype}, shape {array.shape})"
        )
    if array.size and int(array.min()) < 0:
        raise PlanError.single(path, f"lengths must be >= 0 (got {int(array.min())})")
    return np.ascontiguousarray(array, dtype=np.int64)


def bucketing_to_dict(spec: BucketingSpec) -> dict[str, Any]:
    """The ``[bucketing]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"length": source_to_dict(spec.length), "cost": spec.cost}
    for key in ("num_buckets", "max_tokens", "max_batch_size"):
        if getattr(spec, key) is not None:
            out[key] = getattr(spec, key)
    return out


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.bucketing is None:
        return {}
    data = bucketing_to_dict(plan.bucketing)
    # absent when the budget is cut on the longest sample, as before padding rules: those
    # plans keep their fingerprints; the others' batches changed (issue 16), so do they
    padding = registry_padding(plan.collator) if bucket_padding(plan) is not None else None
    if padding is not None and not padding.exact:
        data["padding"] = padding.to_dict()
    return {"bucketing": data}


def read_bucketing(reader: Reader, data: Mapping[str, Any]) -> BucketingSpec | None:
    """Read the ``[bucketing]`` table: the length source and the options."""
    options = ("num_buckets", "max_tokens", "max_batch_size", "cost")
    return reader.values_section(data, "bucketing", "length", "length", options, bucketing_spec)


def bucketing_problems(
    spec: BucketingSpec,
    dataset: DatasetSpec | None,
    batch: BatchSpec,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
    mixture: MixtureSpec | None,
) -> list[Problem]:
    """What keeps ``with_bucketing`` from grouping this plan's samples by length."""
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
        source_problems("bucketing.length", spec.length, checked, bindings, needs_pickle)
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


def budget_padding_problems(
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
    from loaderkit.order.token_budget import oversize_sample

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


def bucketing_calls(spec: BucketingSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_bucketing`` call."""
    args = [ctx.source_arg(spec.length, "lengths")]
    defaults = {"num_buckets": None, "max_tokens": None, "max_batch_size": None, "cost": "linear"}
    args.extend(ctx.changed_args(spec, defaults))
    return (f".with_bucketing({', '.join(args)})",)


def bucketing_line(plan: LoaderPlan) -> str:
    """The ``bucketing`` line of ``explain()``: lengths, buckets and the budget's limits."""
    spec = plan.bucketing
    assert spec is not None
    n = plan.dataset.length or 0
    dist = plan.distributed
    world = dist.world_size if dist.enabled and dist.world_size else 1
    buckets = bucket_plan(spec, plan.batch, n, world)[0]
    text = f"by {spec.length.describe()}, {buckets} buckets"
    if spec.max_tokens is not None:
        text += f"; {budget_limits(spec, bucket_padding(plan))}"
    if spec.length.kind == "callable":
        text += "; lengths measured at build by calling the function once per sample (cached)"
    elif spec.length.kind == "column":
        text += "; lengths read at build (for HF columns: Arrow list lengths, nothing decoded)"
    return text + "; padding estimated by loader.explain()"


def _budget_unit(spec: BucketingSpec) -> str:
    if spec.cost == "linear":
        return "padded tokens"
    return "padded token^2 (quadratic cost)"


def budget_limits(spec: BucketingSpec, padding: BatchPadding | None) -> str:
    """Which limit closes the batches of a token budget, as far as known without the data.

    The budget bounds the padded tensor (``padding``: the collator's rule). With a cap, the
    cap closes the batches whose rows are at most ``max_tokens // cap`` wide (quadratic: its
    square root), the budget the wider ones; when the collator never pads wider than that, the
    budget never binds, and the line says so.
    """
    assert spec.max_tokens is not None
    rule = NO_PADDING if padding is None else padding
    budget, cap = spec.max_tokens, spec.max_batch_size
    unit = _budget_unit(spec)
    text = f"token budget {budget:,} {unit} per batch"
    how = "padded to the longest sample" if rule.exact else rule.describe()
    if cap is None:
        return f"{text} (no cap on samples; batches {how})"
    text = (
        f"at most max_batch_size={cap} samples and max_tokens={budget:,} {unit} per batch, "
        f"whichever is reached first (batches {how})"
    )
    if isinstance(rule, PackedRows):
        rows = budget // (rule.row_length ** (2 if spec.cost == "quadratic" else 1))
        return f"{text}: at most {rows:,} packed rows"
    per_row = budget // cap
    widest = math.isqrt(per_row) if spec.cost == "quadratic" else per_row
    most = None
    if rule.max_length is not None:
        most = int(rule.width(np.array([rule.max_length]))[0])
    if most is not None and most <= widest:
        return (
            f"{text}: max_tokens never binds, {cap} rows of at most {most:,} tokens fit in it; "
            f"raise max_batch_size to let the budget decide"
        )
    return (
        f"{text}: max_batch_size closes batches whose rows are at most {widest:,} tokens "
        f"wide, max_tokens the wider ones"
    )


def budget_split(spec: BucketingSpec, stats: Mapping[str, float]) -> str:
    """The measured split of an epoch's batches between the budget and the cap.

    ``stats`` is :func:`~loaderkit.order.token_budget.padding_stats` of the epoch's batches with
    ``max_tokens``, the padding rule and ``max_batch_size``.
    """
    assert spec.max_tokens is not None
    worst = f"largest batch {stats['max_batch_cost']:,.0f} {_budget_unit(spec)}"
    budget = f"max_tokens={spec.max_tokens:,} ({_budget_unit(spec)})"
    if spec.max_batch_size is None:
        return f"every batch closed by {budget}, no max_batch_size; {worst}"
    capped = stats.get("capped", 0.0)
    return (
        f"batches capped by {budget} for {1 - capped:.0%} of batches, by "
        f"max_batch_size={spec.max_batch_size} for the rest; {worst}"
    )


def default_num_buckets(n: int, batch_size: int) -> int:
    """Buckets when ``with_bucketing`` names none: about four batches per bucket."""
    return max(1, min(n, n // max(1, 4 * batch_size)))


def bucket_plan(
    spec: BucketingSpec, batch: BatchSpec, n: int, world_size: int = 1
) -> tuple[int, int | None]:
    """(number of buckets, samples per batch or its cap) of a bucketed plan over ``n`` samples.

    The batch size is ``with_batch_size``'s (per rank), or under a token budget
    ``max_batch_size`` (``None``: no cap; the default bucket count then assumes batches of 64).
    The default bucket count follows the global batch (per-rank size x ``world_size``, for
    fixed sizes), so the buckets, and the global batches, do not depend on the world size.
    """
    size = batch.batch_size if spec.max_tokens is None else spec.max_batch_size
    world = world_size if spec.max_tokens is None else 1
    return spec.num_buckets or default_num_buckets(n, (size or 64) * world), size


def _rules(ctx: RuleContext) -> list[Problem]:
    """The bucketing's problems, then its token budget's padding."""
    s = ctx.sections
    bucketing: BucketingSpec = s["bucketing"]
    return [
        *bucketing_problems(
            bucketing, s["dataset"], s["batch"], ctx.bindings, ctx.needs_pickle, s.get("mixture")
        ),
        *budget_padding_problems(bucketing, s["collator"], s.get("max_length")),
    ]


SECTION: Section[BucketingSpec] = Section(
    rules={"bucketing": _rules},
    name="bucketing",
    explain=explain_row("bucketing", bucketing_line, of="bucketing"),
    builder_calls=bucketing_calls,
    read=read_bucketing,
    to_dict=bucketing_to_dict,
    bindings=BucketingSpec.bound_names,
    fingerprint="stream",
    stream=_stream,
    why=(
        "length source (column, function or digest of the lengths), `num_buckets`, "
        "`max_tokens`, `max_batch_size`, `cost`; under a token budget, the registry "
        "collator's padding rule when it pads beyond the longest sample (the budget bounds "
        "the padded batch, so the rule cuts the batches)"
    ),
)
