"""The ``[order]`` section: shuffle, seed, a streamed source's shuffle buffer, a shard window.

Over a sharded dataset (``DatasetSpec.shards`` set) a shuffled order is shard-aware: shards
shuffled, then samples shuffled within a window of ``window_shards`` consecutive shards
(:mod:`loaderkit.order.shard_order`), unless another sampler decides the epoch (bucketing,
weights, a curriculum, a mixture, a split). :func:`shard_window` says which window applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_bool, check_int
from loaderkit.errors import Problem
from loaderkit.order.shard_order import DEFAULT_WINDOW_SHARDS
from loaderkit.plan.fields import MAX_SEED
from loaderkit.plan.sections.base import FingerprintRow, RuleContext, Section, fields_table

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_WINDOW_SHARDS",
    "OWN_ORDER",
    "SECTION",
    "OrderSpec",
    "order_calls",
    "order_spec",
    "order_to_dict",
    "read_order",
    "shard_window",
]

DEFAULT_SEED = 0
"""The seed of a plan that never called ``with_seed``: unseeded plans are reproducible too."""


@attrs.frozen
class OrderSpec:
    """Whether the epoch order is shuffled, and the seed every random stream derives from.

    ``buffer_size`` is the shuffle buffer of an iterable (streamed) source, ``None`` otherwise.
    ``window_shards`` the shards per window of a sharded dataset's shuffle (``None``: the
    default, :data:`DEFAULT_WINDOW_SHARDS`, where the order is shard-aware).
    """

    shuffle: bool = False
    seed: int = DEFAULT_SEED
    buffer_size: int | None = None
    window_shards: int | None = None

    def __repr__(self) -> str:
        buffer = "" if self.buffer_size is None else f", buffer_size={self.buffer_size}"
        if self.window_shards is not None:
            buffer += f", window_shards={self.window_shards}"
        return f"OrderSpec(shuffle={self.shuffle!r}, seed={self.seed!r}{buffer})"


def order_spec(
    shuffle: object, seed: object, buffer_size: object = None, window_shards: object = None
) -> OrderSpec:
    """The order's spec from the builder's (or a file's) values, each checked.

    Whether to shuffle (a bool), the seed (an int in ``[0, 2**63)``), the stream buffer, the
    shards per window of a sharded dataset's shuffle (a positive int).
    """
    value = check_int(
        "order.seed", seed, minimum=0, maximum=MAX_SEED, fix="seeds are ints in [0, 2**63)"
    )
    buffer = None
    if buffer_size is not None:
        buffer = check_int(
            "order.buffer_size",
            buffer_size,
            minimum=1,
            fix="pass the number of samples the stream shuffle buffer holds",
        )
    window = None
    if window_shards is not None:
        window = check_int(
            "order.window_shards",
            window_shards,
            minimum=1,
            fix="pass the number of shards a window of the shard-aware shuffle holds, e.g. "
            "with_shuffle(window_shards=16)",
        )
    return OrderSpec(check_bool("order.shuffle", shuffle), value, buffer, window)


order_to_dict = fields_table(("shuffle", "seed"), ("buffer_size", "window_shards"))
"""The ``[order]`` table of a plan file; ``buffer_size`` and ``window_shards`` only when set,
so that older files and fingerprints are unchanged."""

OWN_ORDER: tuple[tuple[str, str], ...] = (
    ("bucketing", "with_bucketing"),
    ("sampling_weights", "with_sampling_weights"),
    ("curriculum", "with_curriculum"),
    ("mixture", "with_mixture"),
    ("split", "with_split"),
)
"""The sections that decide an epoch's samples themselves (and the builder call setting
each): with one of them set, the order is theirs, never shard-aware."""


def _window(order: OrderSpec, value_of: Callable[[str], Any]) -> int | None:
    """:func:`shard_window` over the sections ``value_of(name)`` gives."""
    dataset: DatasetSpec | None = value_of("dataset")
    if not order.shuffle or dataset is None or not dataset.sharded:
        return None
    if any(value_of(name) is not None for name, _ in OWN_ORDER):
        return None
    return DEFAULT_WINDOW_SHARDS if order.window_shards is None else order.window_shards


def shard_window(plan: LoaderPlan) -> int | None:
    """The shards per window of the plan's shard-aware shuffle (``None``: not shard-aware).

    Shard-aware when the order is shuffled, the dataset is sharded and no section of
    :data:`OWN_ORDER` decides the epoch; the window is ``order.window_shards``, or
    :data:`DEFAULT_WINDOW_SHARDS` when unset.
    """
    return _window(plan.order, lambda name: getattr(plan, name))


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    """The ``[order]`` table, with the window in force over a sharded dataset.

    The default window too (changing it changes the batches); a non-sharded plan's table is
    unchanged.
    """
    table = order_to_dict(plan.order)
    window = shard_window(plan)
    if window is not None:
        table["window_shards"] = window
    return {"order": table}


def read_order(reader: Reader, data: Mapping[str, Any]) -> OrderSpec | None:
    """Read the ``[order]`` table (unset keys keep their defaults)."""
    default = OrderSpec()
    sec = reader.section(data, "order", ("shuffle", "seed", "buffer_size", "window_shards"))
    spec: OrderSpec | None = reader.attempt(
        lambda: order_spec(
            sec.get("shuffle", default.shuffle),
            sec.get("seed", default.seed),
            sec.get("buffer_size"),
            sec.get("window_shards"),
        )
    )
    return spec


def order_calls(o: OrderSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_shuffle`` and ``with_seed`` calls (none at the defaults)."""
    calls = []
    options = ctx.set_args(o, ("buffer_size", "window_shards"))
    if options:
        shuffled = [] if o.shuffle else ["False"]
        calls.append(f".with_shuffle({', '.join([*shuffled, *options])})")
    elif o.shuffle:
        calls.append(".with_shuffle()")
    if o.seed != DEFAULT_SEED:
        calls.append(f".with_seed({o.seed})")
    return tuple(calls)


def _rules(ctx: RuleContext) -> list[Problem]:
    """A shuffle by index of a stream, or a shuffle buffer for a map-style dataset."""
    order: OrderSpec = ctx.sections["order"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    problems: list[Problem] = []
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
    if order.window_shards is not None:
        problems.extend(_window_problems(order.window_shards, ctx))
    return problems


def _window_problems(window: int, ctx: RuleContext) -> list[Problem]:
    """A window of shards set where none applies.

    Over a dataset that is not sharded, an order not shuffled, or an epoch another sampler
    decides.
    """
    order: OrderSpec = ctx.sections["order"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    path = "order.window_shards"
    if dataset is not None and not dataset.sharded:
        return [
            Problem(
                path,
                f"a window of shards is for a sharded dataset, and {dataset.binding!r} is a "
                f"{dataset.kind} dataset that is not made of shards (got window_shards="
                f"{window}); drop window_shards: .with_shuffle(), or pass a sharded dataset "
                f"(one with shard_counts, such as loaderkit.datasets.shards(...))",
            )
        ]
    if not order.shuffle:
        return [
            Problem(
                path,
                f"the order is not shuffled (shuffle=False), so no window of shards applies "
                f"(got window_shards={window}); drop window_shards, or shuffle: "
                f".with_shuffle(window_shards={window})",
            )
        ]
    return [
        Problem(
            path,
            f"{name} decides the epoch's samples itself, so no window of shards applies (got "
            f"window_shards={window} with {name} set); drop window_shards (.with_shuffle()), "
            f"or drop {call}(...) to read the shards in windows",
        )
        for name, call in OWN_ORDER
        if ctx.sections.get(name) is not None
    ]


SECTION: Section[OrderSpec] = Section(
    rules={"order": _rules},
    name="order",
    builder_calls=order_calls,
    read=read_order,
    to_dict=order_to_dict,
    fingerprint="stream",
    stream=_stream,
    rows=(
        FingerprintRow(
            "`order.shuffle`, `order.seed`",
            "stream",
            "the order of the epoch and every random stream",
        ),
        FingerprintRow(
            "`order.buffer_size`", "stream", "(only when set) a streamed source's shuffle buffer"
        ),
        FingerprintRow(
            "`order.window_shards`",
            "stream",
            "(only over a sharded dataset whose shuffle is shard-aware) the shards per window, "
            "the default's too",
        ),
    ),
)
