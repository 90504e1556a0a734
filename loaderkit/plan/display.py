"""How plans show themselves: ``explain()``, ``diff()`` and the notebook (HTML) view."""

from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from loaderkit.errors import PlanError
from loaderkit.order.padding import NO_PADDING, BatchPadding, PackedRows
from loaderkit.order.shard import ShardLayout
from loaderkit.order.split import split_sizes
from loaderkit.plan.padding_rule import bucket_padding
from loaderkit.plan.sections.batch import BatchSpec
from loaderkit.plan.sections.bucketing import BucketingSpec
from loaderkit.plan.sections.cache import cache_line
from loaderkit.plan.sections.checks import checks_line
from loaderkit.plan.sections.curriculum import curriculum_line
from loaderkit.plan.sections.error_policy import error_line
from loaderkit.plan.sections.max_length import max_length_line
from loaderkit.plan.sections.sampling_weights import weights_line
from loaderkit.plan.sections.split import split_line
from loaderkit.plan.sections.workers import workers_line
from loaderkit.plan.specs import dataset_summary

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "builder_html",
    "diff_dicts",
    "epoch_shape",
    "explain_plan",
    "flatten",
    "loader_html",
    "plan_html",
    "settings_rows",
]


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists stay values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def diff_dicts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``path: old -> new`` for each flattened path that differs (``<unset>`` when absent)."""
    a, b = flatten(old), flatten(new)
    lines = []
    for path in sorted(set(a) | set(b)):
        left, right = a.get(path, _UNSET), b.get(path, _UNSET)
        if left != right or type(left) is not type(right):
            lines.append(f"{path}: {left!r} -> {right!r}")
    return lines


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def epoch_shape(plan: LoaderPlan) -> tuple[int | None, int | None, int, int]:
    """(samples per rank, batches per rank, samples dropped, samples repeated) for one epoch.

    ``None`` when the length or the world size is only known at build time; rank 0's view
    when ranks may differ (uneven batches). See :class:`loaderkit.order.ShardLayout`.
    """
    n = plan.dataset.length
    if plan.split is not None and n is not None:  # build() reads the train part
        n = max(split_sizes(n, plan.split.val, plan.split.test)[0], 0)
    dist = plan.distributed
    world = dist.world_size if dist.enabled else 1
    if n is None or world is None or plan.batch.scheduled:
        return None, None, 0, 0
    if plan.curriculum is not None and plan.curriculum.by == "epoch":
        return None, None, 0, 0  # the eligible set grows with the epoch
    if plan.bucketing is not None and plan.bucketing.max_tokens is not None:
        return None, None, 0, 0  # the budget sizes the batches: their count varies by epoch
    if plan.mixture is not None:
        # bucketing cuts the mixture's epoch into batches of the same size and number
        return _mixture_shape(plan, world)
    if (
        plan.bucketing is not None
        or plan.sampling_weights is not None
        or plan.curriculum is not None
    ):
        return _dealt_shape(plan, n, world)
    layout = ShardLayout(
        n,
        plan.batch.batch_size,
        world,
        dist.rank or 0,
        plan.batch.drop_last,
        dist.even_batches,
    )
    return layout.samples, len(layout), layout.dropped, layout.repeated


def _dealt_shape(plan: LoaderPlan, n: int, world: int) -> tuple[int | None, int | None, int, int]:
    """Epochs of global batches split across ranks (weights, curricula, fixed-size buckets).

    Their shape is that of the plain layout over the epoch's samples.
    """
    weights = plan.sampling_weights
    if weights is not None and weights.num_samples is not None:
        n = weights.num_samples
    dist = plan.distributed
    layout = ShardLayout(
        n, plan.batch.batch_size, world, dist.rank or 0, plan.batch.drop_last, dist.even_batches
    )
    return layout.samples, len(layout), layout.dropped, layout.repeated


def _mixture_shape(plan: LoaderPlan, world: int) -> tuple[int | None, int | None, int, int]:
    from loaderkit.order.mixture import mixture_num_batches

    spec = plan.mixture
    assert spec is not None
    b = plan.batch
    whole = b.batch_size * world  # a global batch
    total = mixture_num_batches(
        spec.sizes,
        mode=spec.mode,
        batch_size=whole,
        num_samples=spec.num_samples,
        drop_last=b.drop_last,
    )
    samples = mixture_samples(plan)
    if spec.mode == "sequential":  # every source cut on its own
        kept = sum(n // whole * whole for n in spec.sizes) if b.drop_last else samples
    else:
        kept = min(samples, total * whole)
    if world == 1:
        return kept, total, samples - kept, 0
    if not plan.distributed.even_batches:
        return None, None, samples - kept, 0  # the ranks' counts may differ
    repeated = 0 if b.drop_last else total * whole - kept
    return total * b.batch_size, total, samples - kept, repeated


def mixture_samples(plan: LoaderPlan) -> int:
    """The samples of one epoch of a mixture, before batching (``drop_last`` not applied)."""
    spec = plan.mixture
    assert spec is not None
    sizes = spec.sizes
    return {
        "weighted": spec.num_samples or sum(sizes),
        "sequential": sum(sizes),
        "round_robin": sum(sizes),
        "max_size_cycle": len(sizes) * max(sizes),
        "min_size": len(sizes) * min(sizes),
    }[spec.mode]


def _mixture_line(plan: LoaderPlan) -> str:
    spec = plan.mixture
    assert spec is not None
    parts = []
    weights = spec.weights
    total = sum(spec.sizes)
    for i, source in enumerate(spec.sources):
        text = f"{source.binding!r} {source.length:,}"
        if spec.mode == "weighted" and spec.fn is None and not spec.schedule:
            w = (weights[i] / sum(weights)) if weights else (source.length or 0) / total
            text += f" (p={w:.3g})"
        parts.append(text)
    line = f"{len(spec.sources)} sources: {', '.join(parts)}; mode {spec.mode}"
    if spec.mode == "weighted":
        if spec.fn is not None:
            line += f", weights from {spec.fn.describe()} per {spec.by}"
        elif spec.schedule:
            steps = "; ".join(
                f"until {u:g}: " + "/".join(f"{w:g}" for w in ws) for u, ws in spec.schedule
            )
            line += f", weights per {spec.by}: {steps}; then the last"
        elif weights is None:
            line += ", weights proportional to sizes"
        if spec.stratified:
            line += ", stratified (every batch in proportion)"
    line += f"; {mixture_samples(plan):,} samples per epoch"
    if spec.source_key is not None:
        line += f"; source ids in batch[{spec.source_key!r}]"
    return line


def _batch_schedule(batch: BatchSpec) -> str:
    """``"progressive by step: 16 until 100, 32 until 200, then 64"``."""
    if batch.fn is not None:
        return (
            f"progressive: size from {batch.fn.describe()} per {batch.by} ({batch.batch_size} at 0)"
        )
    table = batch.schedule
    parts = [f"{size} until {until:g}" for until, size in table[:-1]]
    parts.append(f"then {table[-1][1]}" if parts else f"{table[-1][1]}")
    return f"progressive by {batch.by}: {', '.join(parts)}"


def _bucketing_line(plan: LoaderPlan) -> str:
    spec = plan.bucketing
    if spec is None:
        return ""
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


def _bucketed_sampler(plan: LoaderPlan) -> str:
    """What the bucketed epoch of a combined plan is made of, for the order line."""
    if plan.sampling_weights is not None:
        return "each epoch's weighted draws (see sampling)"
    if plan.curriculum is not None:
        return "each epoch's eligible easiest samples, shuffled (see curriculum),"
    how = "each source shuffled" if plan.order.shuffle else "each source in order"
    return f"each epoch's samples mixed from the sources (see mixture), {how},"


def explain_plan(plan: LoaderPlan) -> str:
    """The multi-line report behind ``LoaderPlan.explain()``."""
    o, b, d = plan.order, plan.batch, plan.distributed
    per_rank, batches, dropped, repeated = epoch_shape(plan)
    order = (
        f"shuffled each epoch (keyed Feistel permutation), seed {o.seed}"
        if o.shuffle
        else f"sequential (dataset order), seed {o.seed}"
    )
    if plan.dataset.iterable:
        order = f"stream order (iterable source), seed {o.seed}"
        if o.shuffle and o.buffer_size is not None:
            order = f"streamed, shuffled through a buffer of {o.buffer_size:,}, seed {o.seed}"
    if plan.bucketing is not None:
        order = f"shuffled within length buckets, batch order shuffled, seed {o.seed}"
    if plan.sampling_weights is not None:
        order = f"weighted draws (see sampling), seed {o.seed}"
    if plan.curriculum is not None:
        order = f"shuffled within the eligible easiest samples (see curriculum), seed {o.seed}"
    if plan.mixture is not None:
        how = "each source shuffled" if o.shuffle else "each source in order"
        order = f"mixed from the sources (see mixture), {how}, seed {o.seed}"
    if plan.bucketing is not None and (
        plan.sampling_weights is not None or plan.curriculum is not None or plan.mixture is not None
    ):
        order = f"{_bucketed_sampler(plan)} grouped in length buckets (see bucketing), batch "
        order += f"order shuffled, seed {o.seed}"
    if plan.bucketing is not None and plan.bucketing.max_tokens is not None:
        batch_line = (
            f"sizes vary under a token budget, drop_last={b.drop_last}; batches per epoch known "
            f"when built"
        )
    elif b.scheduled:
        batch_line = f"{_batch_schedule(b)} per rank, drop_last={b.drop_last}; batches per "
        batch_line += "epoch follow the schedule"
    elif plan.dataset.iterable:
        batch_line = f"{b.batch_size} per rank, drop_last={b.drop_last}; a stream: batches until "
        batch_line += "the source ends"
    elif batches is None:
        batch_line = f"{b.batch_size} per rank, drop_last={b.drop_last}; batches per epoch known "
        batch_line += "when built"
    else:
        batch_line = (
            f"{b.batch_size} per rank, drop_last={b.drop_last} -> {batches:,} batches "
            f"per epoch per rank"
        )
        if (
            per_rank is not None
            and plan.bucketing is None
            and plan.sampling_weights is None
            and plan.mixture is None
            and not b.drop_last
            and d.world_size in (None, 1)
            and per_rank % b.batch_size
        ):
            batch_line += f" (last has {per_rank % b.batch_size})"
    notes = []
    if dropped:
        notes.append(f"{dropped:,} samples dropped per epoch (drop_last)")
    if repeated:
        notes.append(
            f"{repeated:,} samples repeated per epoch across ranks to even them out (wrap-around)"
        )
    if not d.enabled:
        dist_line = "single process (build() refuses it on one of several ranks)"
    elif d.world_size is None:
        dist_line = "detected at build time (torch.distributed, else RANK/WORLD_SIZE env)"
    else:
        dist_line = f"rank {d.rank} of {d.world_size} (given explicitly)"
    if d.enabled and not d.even_batches:
        dist_line += "; uneven batches allowed"
    bucketing = _bucketing_line(plan)
    transform = "none" if plan.transform is None else plan.transform.describe()
    if plan.transform is not None and plan.transform.accepts_rng:
        transform += " with a per-sample rng keyed by (seed, epoch, index)"
    status = f"  ({_unbound(plan)})" if not plan.bound else ""
    lines = [
        f"LoaderPlan {plan.fingerprint[:12]}{status}",
        f"  source      {dataset_summary(plan.dataset)}",
        *([f"  preset      {plan.preset.describe()}"] if plan.preset else []),
        *([f"  split       {split_line(plan)}"] if plan.split else []),
        f"  order       {order}",
        f"  batches     {batch_line}",
        *(f"              {n}" for n in notes),
        f"  collator    {plan.collator.describe()}"
        + (f"  ({plan.collator.reason})" if plan.collator.reason else ""),
        *([f"  bucketing   {bucketing}"] if bucketing else []),
        *([f"  sampling    {weights_line(plan)}"] if plan.sampling_weights else []),
        *([f"  curriculum  {curriculum_line(plan)}"] if plan.curriculum else []),
        *([f"  mixture     {_mixture_line(plan)}"] if plan.mixture else []),
        *([f"  max length  {max_length_line(plan)}"] if plan.max_length else []),
        *([f"  checks      {checks_line(plan)}"] if plan.checks else []),
        f"  transform   {transform}",
        *([f"  errors      {error_line(plan)}"] if plan.error_policy.policy != "raise" else []),
        f"  workers     {workers_line(plan)}",
        *([f"  cache       {cache_line(plan)}"] if plan.cache else []),
        f"  device      {plan.device}",
        f"  distributed {dist_line}",
        f"  fingerprint {plan.fingerprint}",
    ]
    return "\n".join(lines)


# -- the notebook view (``_repr_html_``) --------------------------------------------------------


class _Compiles(Protocol):
    """What the HTML view needs of a builder (``plan/`` does not import ``builder``)."""

    def compile(self) -> LoaderPlan: ...

    def _chain(self) -> list[str]: ...


class _Explains(Protocol):
    """What the HTML view needs of a built loader (``plan/`` does not import ``build/``)."""

    @property
    def plan(self) -> LoaderPlan: ...

    def explain(self) -> str: ...


@functools.cache
def _default_settings() -> dict[str, Any]:
    """The flattened settings of a plan that sets nothing but its dataset (dataset left out)."""
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import DatasetSpec

    bare = LoaderPlan(dataset=DatasetSpec("dataset", "torch_map", "list", 1), bindings=None)
    return {
        path: value
        for path, value in flatten(bare.to_dict()).items()
        if not path.startswith("dataset.")
    }


def settings_rows(plan: LoaderPlan) -> list[tuple[str, str, str, bool]]:
    """``(section, field, value, is_default)`` for every setting of ``plan``'s data.

    The rows are the flattened ``to_dict()`` (``schema_version`` left out), in plan-file
    order; values are Python reprs. A setting is a default when a plan that sets nothing but
    its dataset has the same value there (dataset rows never are).
    """
    defaults = _default_settings()
    rows = []
    for path, value in flatten(plan.to_dict()).items():
        if path == "schema_version":
            continue
        section, _, field = path.partition(".")
        default = path in defaults and defaults[path] == value
        default = default and type(defaults[path]) is type(value)
        rows.append((section, field, repr(value), default))
    return rows


_DIM = "opacity:0.5"
_CELL = "text-align:left;padding-right:1em;white-space:nowrap"
_VALUE_CELL = "text-align:left;overflow-wrap:anywhere"


def _settings_table(plan: LoaderPlan) -> str:
    rows = settings_rows(plan)
    body = []
    previous = None
    for section, field, value, default in rows:
        shown = "" if section == previous else section  # a section's name on its first row
        previous = section
        attrs_ = f' style="{_DIM}" title="default"' if default else ""
        cells = "".join(f'<td style="{_CELL}">{html.escape(text)}</td>' for text in (shown, field))
        value_cell = f'<td style="{_VALUE_CELL}"><code>{html.escape(value)}</code></td>'
        body.append(f"<tr{attrs_}>{cells}{value_cell}</tr>")
    set_ = sum(not row[3] for row in rows)
    head = "".join(f'<th style="{_CELL}">{name}</th>' for name in ("section", "field", "value"))
    return (
        f"<details open><summary>settings: {set_} set, {len(rows) - set_} default "
        f"(dimmed)</summary>"
        f'<table class="loaderkit-settings"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></details>"
    )


_WRAP = "white-space:pre-wrap;overflow-wrap:anywhere"
"""Long lines wrap inside the output cell instead of scrolling it sideways."""


def _plan_parts(explained: str) -> str:
    """The settings table and ``explained`` in a ``<pre>`` without its title line.

    The frame's title names the object; the full fingerprint is the report's last line(s),
    so each fact appears once.
    """
    title, _, body = explained.partition("\n")
    text = body if title.startswith("LoaderPlan ") else explained
    return f'<pre class="loaderkit-explain" style="{_WRAP}">{html.escape(text)}</pre>'


def _frame(title: str, subtitle: str, body: str) -> str:
    return (
        f'<div class="loaderkit-repr"><div><strong>{html.escape(title)}</strong> '
        f"<code>{html.escape(subtitle)}</code></div>{body}</div>"
    )


def _unbound(plan: LoaderPlan) -> str:
    """What an unbound plan lacks to build: its live objects, or only a load that makes them."""
    source = plan.dataset.source
    if source is not None and not source.is_ref:
        return "inspected: LoaderPlan.load(path) makes its dataset to build"
    return "unbound: load with bindings to build"


def plan_html(plan: LoaderPlan) -> str:
    """The notebook view of a plan (``LoaderPlan._repr_html_``).

    Its settings (section / field / value; defaults dimmed) and ``explain()`` in a ``<pre>``
    (which ends with the fingerprint). Every text from the plan is HTML-escaped.
    """
    status = _unbound(plan) if not plan.bound else "bound: build() makes its loader"
    return _frame("LoaderPlan", status, _settings_table(plan) + _plan_parts(plan.explain()))


def _chain_html(builder: _Compiles) -> str:
    """The builder's chain, one call per line (long calls wrap)."""
    head, *calls = builder._chain()
    text = "\n".join([head, *(f"    {call}" for call in calls)])
    return f'<pre class="loaderkit-chain" style="{_WRAP}">{html.escape(text)}</pre>'


def builder_html(builder: _Compiles) -> str:
    """The notebook view of a builder (``DataLoaderBuilder._repr_html_``).

    The chain that rebuilds it, one call per line, then what it compiles to (as
    :func:`plan_html`), or, when it does not compile yet, every problem ``compile()`` reports.
    """
    chain = _chain_html(builder)
    try:
        plan = builder.compile()
    except PlanError as exc:
        problems = len(exc.problems)
        return _frame(
            "DataLoaderBuilder",
            f"does not compile yet: {problems} problem{'s' if problems != 1 else ''}",
            f'{chain}<pre class="loaderkit-problems" style="{_WRAP}">{html.escape(str(exc))}</pre>',
        )
    return _frame(
        "DataLoaderBuilder",
        "compiles to the plan below",
        chain + _settings_table(plan) + _plan_parts(plan.explain()),
    )


def loader_html(loader: _Explains) -> str:
    """The notebook view of a built loader (``Loader._repr_html_``, ``StreamLoader``'s too).

    Its position, rank and device (its ``repr`` without the plan's short fingerprint, which
    the report shows in full), its plan's settings and the loader's ``explain()`` (the plan's
    report plus what was resolved on this machine).
    """
    name, _, rest = repr(loader).partition("(")
    rest = re.sub(r"^plan=[0-9a-f]+, ", "", rest)
    body = _settings_table(loader.plan) + _plan_parts(loader.explain())
    return _frame(name, f"({rest}", body)
