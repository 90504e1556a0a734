"""The ``[order]`` section: shuffle, seed and a streamed source's shuffle buffer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_bool, check_int
from loaderkit.errors import Problem
from loaderkit.plan.fields import MAX_SEED
from loaderkit.plan.sections.base import FingerprintRow, RuleContext, Section, fields_table

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "DEFAULT_SEED",
    "SECTION",
    "OrderSpec",
    "order_calls",
    "order_spec",
    "order_to_dict",
    "read_order",
]

DEFAULT_SEED = 0
"""The seed of a plan that never called ``with_seed``: unseeded plans are reproducible too."""


@attrs.frozen
class OrderSpec:
    """Whether the epoch order is shuffled, and the seed every random stream derives from.

    ``buffer_size`` is the shuffle buffer of an iterable (streamed) source, ``None`` otherwise.
    """

    shuffle: bool = False
    seed: int = DEFAULT_SEED
    buffer_size: int | None = None

    def __repr__(self) -> str:
        buffer = "" if self.buffer_size is None else f", buffer_size={self.buffer_size}"
        return f"OrderSpec(shuffle={self.shuffle!r}, seed={self.seed!r}{buffer})"


def order_spec(shuffle: object, seed: object, buffer_size: object = None) -> OrderSpec:
    """Whether to shuffle (a bool), the seed (an int in ``[0, 2**63)``), the stream buffer."""
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
    return OrderSpec(check_bool("order.shuffle", shuffle), value, buffer)


order_to_dict = fields_table(("shuffle", "seed"), ("buffer_size",))
"""The ``[order]`` table of a plan file (also what the fingerprint hashes); ``buffer_size``
only when set, so that older fingerprints are unchanged."""


def read_order(reader: Reader, data: Mapping[str, Any]) -> OrderSpec | None:
    """Read the ``[order]`` table (unset keys keep their defaults)."""
    default = OrderSpec()
    sec = reader.section(data, "order", ("shuffle", "seed", "buffer_size"))
    spec: OrderSpec | None = reader.attempt(
        lambda: order_spec(
            sec.get("shuffle", default.shuffle),
            sec.get("seed", default.seed),
            sec.get("buffer_size"),
        )
    )
    return spec


def order_calls(o: OrderSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_shuffle`` and ``with_seed`` calls (none at the defaults)."""
    calls = []
    if o.buffer_size is not None:
        shuffled = "" if o.shuffle else "False, "
        calls.append(f".with_shuffle({shuffled}buffer_size={o.buffer_size})")
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
    return problems


SECTION: Section[OrderSpec] = Section(
    rules={"order": _rules},
    name="order",
    builder_calls=order_calls,
    read=read_order,
    to_dict=order_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`order.shuffle`, `order.seed`",
            "stream",
            "the order of the epoch and every random stream",
        ),
        FingerprintRow(
            "`order.buffer_size`", "stream", "(only when set) a streamed source's shuffle buffer"
        ),
    ),
)
