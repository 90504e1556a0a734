"""How plans show themselves: ``explain()``, ``diff()`` and the notebook (HTML) view."""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from loaderkit._text import LINE_CHARS, inert, shown
from loaderkit.errors import PlanError
from loaderkit.order.shard import ShardLayout
from loaderkit.order.split import split_sizes
from loaderkit.plan.diff import diff_dicts, flatten
from loaderkit.plan.sections import EXPLAIN_ORDER
from loaderkit.plan.sections.base import ExplainRows
from loaderkit.plan.sections.batch import BatchSpec
from loaderkit.plan.sections.mixture import mixture_samples
from loaderkit.plan.sections.order import shard_window

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "MONOSPACE",
    "builder_html",
    "diff_dicts",
    "epoch_shape",
    "explain_plan",
    "flatten",
    "loader_html",
    "mixture_samples",
    "plan_html",
    "settings_rows",
]


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


def _batch_schedule(batch: BatchSpec) -> str:
    """``"progressive by step: 16 until 100, 32 until 200, then 64 samples per batch per rank"``.

    A function: ``"progressive: samples per batch per rank from <fn> per epoch (4 at 0)"``.
    """
    if batch.fn is not None:
        return (
            f"progressive: samples per batch per rank from {batch.fn.describe()} per "
            f"{batch.by} ({batch.batch_size} at 0)"
        )
    table = batch.schedule
    parts = [f"{size} until {until:g}" for until, size in table[:-1]]
    parts.append(f"then {table[-1][1]}" if parts else f"{table[-1][1]}")
    return f"progressive by {batch.by}: {', '.join(parts)} samples per batch per rank"


def _bucketed_sampler(plan: LoaderPlan) -> str:
    """What the bucketed epoch of a combined plan is made of, for the order line."""
    if plan.sampling_weights is not None:
        return "each epoch's weighted draws (see sampling)"
    if plan.curriculum is not None:
        return "each epoch's eligible easiest samples, shuffled (see curriculum),"
    how = "each source shuffled" if plan.order.shuffle else "each source in order"
    return f"each epoch's samples mixed from the sources (see mixture), {how},"


def _order_rows(plan: LoaderPlan) -> ExplainRows:
    """The ``order`` row: the seed's order as the sampler sections shape it."""
    o = plan.order
    order = (
        f"shuffled each epoch (keyed Feistel permutation), seed {o.seed}"
        if o.shuffle
        else f"sequential (dataset order), seed {o.seed}"
    )
    window = shard_window(plan)
    if window is not None:
        default = " (the default)" if o.window_shards is None else ""
        order = (
            f"shard-aware: shards shuffled, then samples shuffled within windows of "
            f"{window} shard{'' if window == 1 else 's'}{default} (keyed Feistel "
            f"permutations), seed {o.seed}"
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
    return (("order", order),)


def _per_batch(size: int) -> str:
    """``"64 samples per batch per rank"`` (``"1 sample ..."``): what the batch size counts."""
    return f"{size} sample{'s' if size != 1 else ''} per batch per rank"


def _batch_rows(plan: LoaderPlan) -> ExplainRows:
    """The ``batches`` row and its notes: the batch size over the epoch's shape."""
    b, d = plan.batch, plan.distributed
    per_rank, batches, dropped, repeated = epoch_shape(plan)
    if not b.batched:
        batch_line = (
            "none (batch_size=None): each sample on its own, converted by torch's "
            "default_convert, no batch dimension"
        )
        if plan.dataset.iterable:
            batch_line += "; a stream: samples until the source ends"
        elif batches is None:
            batch_line += "; samples per epoch known when built"
        else:
            batch_line += f" -> {batches:,} samples per epoch per rank"
    elif plan.bucketing is not None and plan.bucketing.max_tokens is not None:
        batch_line = (
            f"sizes vary under a token budget, drop_last={b.drop_last}; batches per epoch known "
            f"when built"
        )
    elif b.scheduled:
        batch_line = f"{_batch_schedule(b)}, drop_last={b.drop_last}"
        batch_line += "; batches per epoch follow the schedule"
    elif plan.dataset.iterable:
        batch_line = f"{_per_batch(b.batch_size)}, drop_last={b.drop_last}; a stream: batches "
        batch_line += "until the source ends"
    elif batches is None:
        batch_line = f"{_per_batch(b.batch_size)}, drop_last={b.drop_last}; batches per epoch "
        batch_line += "known when built"
    else:
        batch_line = f"{_per_batch(b.batch_size)}, drop_last={b.drop_last} -> {batches:,} "
        batch_line += "batches per epoch per rank"
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
    rows = [("batches", batch_line)]
    if dropped:
        rows.append(("", f"{dropped:,} samples dropped per epoch (drop_last)"))
    if repeated:
        rows.append(
            (
                "",
                f"{repeated:,} samples repeated per epoch across ranks to even them out "
                f"(wrap-around)",
            )
        )
    return tuple(rows)


_COMBINED: dict[str, Callable[[LoaderPlan], ExplainRows]] = {
    "order": _order_rows,
    "batch": _batch_rows,
}
"""The rows that are not one section's: the order and the batches depend on the sampler
sections (bucketing, weights, curriculum, mixture), the split and the distribution, so they
are written here rather than declared by ``order`` and ``batch`` (``Section.explain``)."""


def explain_plan(plan: LoaderPlan) -> str:
    """The multi-line report behind ``LoaderPlan.explain()``.

    Its rows are the sections' declared ones (:attr:`Section.explain`), in
    :data:`~loaderkit.plan.sections.EXPLAIN_ORDER`, between the title and the fingerprint.
    """
    status = f"  ({_unbound(plan)})" if not plan.bound else ""
    lines = [f"LoaderPlan {plan.fingerprint[:12]}{status}"]
    for section in EXPLAIN_ORDER:
        explain = _COMBINED.get(section.name, section.explain)
        assert explain is not None
        # a row may show a plan's names, labels and reasons: untrusted text, made inert here
        lines.extend(f"  {label:<11} {inert(text, LINE_CHARS)}" for label, text in explain(plan))
    lines.append(f"  fingerprint {plan.fingerprint}")
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
        rows.append((section, inert(field), shown(value, LINE_CHARS), default))
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
        value_cell = (
            f'<td style="{_VALUE_CELL}"><code style="{MONOSPACE}">{html.escape(value)}</code></td>'
        )
        body.append(f"<tr{attrs_}>{cells}{value_cell}</tr>")
    set_ = sum(not row[3] for row in rows)
    head = "".join(f'<th style="{_CELL}">{name}</th>' for name in ("section", "field", "value"))
    return (
        f"<details open><summary>settings: {set_} set, {len(rows) - set_} default "
        f"(dimmed)</summary>"
        f'<table class="loaderkit-settings"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></details>"
    )


MONOSPACE = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'Liberation Mono',monospace"
"""The font of the chain, the report and the values, set on each element: nbconvert's HTML
sets ``pre { font-family: inherit }``, which would lay the report's columns out in the page's
proportional font (an inline style wins over any stylesheet rule that is not ``!important``)."""

_WRAP = f"white-space:pre-wrap;overflow-wrap:anywhere;{MONOSPACE}"
"""Long lines wrap inside the output cell instead of scrolling it sideways; in monospace."""


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
        f'<code style="{MONOSPACE}">{html.escape(subtitle)}</code></div>{body}</div>'
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
