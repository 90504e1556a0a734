"""How a collator pads a batch, as a rule the batch planner can compute with (pure numpy).

A token budget (``with_bucketing(..., max_tokens=T)``) bounds the *padded* tensor the model
sees, so the planner must know how the collator pads. The collator declares it once, through
its ``padded_length()`` method, as one of two rules:

- :class:`PaddedLength` (``text``, ``causal_lm``, ``masked_lm``, ``seq2seq``): a batch of
  ``k`` samples whose longest has ``L`` tokens becomes a ``(k, width(L))`` tensor, with
  ``width(L) = round_up(min(L, max_length), multiple)`` (``padding="longest"``) or
  ``round_up(max_length, multiple)`` (``padding="max_length"``);
- :class:`PackedRows` (``packed``): the batch's sequences are placed next-fit, in batch order,
  into ``R`` rows of ``row_length`` tokens (split or cut when longer); the tensor is
  ``(R, row_length)``.

The planner (:mod:`loaderkit.order.bucketing`) cuts batches so that the padded cost of every
batch, computed with this rule, stays within the budget. Collators without the method (a
plain function) are taken to pad to the longest sample of the batch (:data:`NO_PADDING`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["NO_PADDING", "BatchPadding", "PackedRows", "PaddedLength", "padded_costs"]

_I64 = npt.NDArray[np.int64]


def _round_up(values: _I64, multiple: int) -> _I64:
    """``values`` rounded up to a multiple of ``multiple`` (in place when possible)."""
    values += multiple - 1
    values //= multiple
    values *= multiple
    return values


@dataclass(frozen=True)
class PaddedLength:
    """Rows padded to a common width: ``width(L)`` for a batch whose longest sample has ``L``.

    ``multiple``: the width is rounded up to a multiple of it (``pad_to_multiple_of``);
    ``max_length``: sequences are cut to it first; ``fixed``: every batch is ``max_length``
    wide (``padding="max_length"``; needs ``max_length``).
    """

    multiple: int | None = None
    max_length: int | None = None
    fixed: bool = False

    def __post_init__(self) -> None:
        for name in ("multiple", "max_length"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int or None, got {value!r}")
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.fixed and self.max_length is None:
            raise ValueError("fixed=True pads every batch to max_length: give max_length")

    @property
    def exact(self) -> bool:
        """Whether the width is the longest length itself (no rounding, cutting or fixing)."""
        return self.multiple in (None, 1) and self.max_length is None and not self.fixed

    def width(self, longest: npt.NDArray[np.integer[Any]]) -> _I64:
        """The padded width of batches whose longest samples have ``longest`` tokens."""
        out = np.asarray(longest, dtype=np.int64).copy()
        if self.fixed:
            assert self.max_length is not None
            out[...] = self.max_length
        elif self.max_length is not None:
            np.minimum(out, self.max_length, out=out)
        if self.multiple not in (None, 1):
            assert self.multiple is not None
            _round_up(out, self.multiple)
        return out

    def describe(self) -> str:
        """``longest, cut to 512, rounded up to a multiple of 8`` and the like."""
        if self.fixed:
            text = f"every batch padded to max_length={self.max_length}"
        else:
            text = "padded to the longest sample"
            if self.max_length is not None:
                text += f" (cut to {self.max_length})"
        if self.multiple not in (None, 1):
            text += f", rounded up to a multiple of {self.multiple}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for the stream fingerprint."""
        return {
            "kind": "padded",
            "multiple": self.multiple,
            "max_length": self.max_length,
            "fixed": self.fixed,
        }


@dataclass(frozen=True)
class PackedRows:
    """Sequences packed next-fit, in batch order, into rows of ``row_length`` tokens.

    ``split``: a sequence longer than a row is split into chunks of ``row_length`` (the
    remainder last); otherwise it is cut to ``row_length`` (or refused by the collator).
    """

    row_length: int
    split: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.row_length, bool) or not isinstance(self.row_length, int):
            raise TypeError(f"row_length must be an int, got {self.row_length!r}")
        if self.row_length < 1:
            raise ValueError(f"row_length must be >= 1, got {self.row_length}")

    @property
    def exact(self) -> bool:
        """Always False: packed rows are ``row_length`` wide whatever the batch holds."""
        return False

    def segments(self, length: int) -> list[int]:
        """The pieces a sequence of ``length`` tokens is placed as (at least 1 token)."""
        width = self.row_length
        length = max(length, 1)
        if length <= width:
            return [length]
        if not self.split:
            return [width]
        full, rest = divmod(length, width)
        return [width] * full + ([rest] if rest else [])

    def rows_alone(self, lengths: npt.NDArray[np.integer[Any]]) -> _I64:
        """How many rows each sequence fills on its own."""
        out = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
        if not self.split:
            return np.ones_like(out)
        return _round_up(out, self.row_length) // self.row_length

    def describe(self) -> str:
        """``packed into rows of 2048 tokens (longer sequences split)``."""
        how = "split" if self.split else "cut"
        return f"packed next-fit into rows of {self.row_length} tokens (longer sequences {how})"

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for the stream fingerprint."""
        return {"kind": "packed", "row_length": self.row_length, "split": self.split}


BatchPadding = PaddedLength | PackedRows
"""What a collator's ``padded_length()`` returns."""

NO_PADDING = PaddedLength()
"""Rows padded to the longest sample of the batch, nothing more (any collator without a rule)."""


def _next_fit_rows(padding: PackedRows, lengths: list[int]) -> int:
    """The rows the ``packed`` collator fills with ``lengths`` in this order."""
    width = padding.row_length
    rows, used = 0, width
    for length in lengths:
        for piece in padding.segments(length):
            if used + piece > width:
                rows, used = rows + 1, 0
            used += piece
    return rows


def padded_costs(
    lengths: npt.NDArray[np.integer[Any]],
    offsets: npt.NDArray[np.int64],
    padding: BatchPadding,
    *,
    quadratic: bool = False,
) -> tuple[_I64, _I64]:
    """Per batch: (rows, padded cost) of the tensors the collator makes.

    ``lengths`` are the batched samples' lengths in batch order (``lengths[indices]``) and
    ``offsets`` the batch boundaries (an :class:`~loaderkit.order.EpochBatches`' offsets). The
    cost is ``rows * width`` (``rows * width**2`` when ``quadratic``), lengths taken as at
    least 1 as the planner does; empty batches cost nothing.
    """
    values = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
    count = int(offsets.size) - 1
    sizes = np.diff(offsets).astype(np.int64)
    if isinstance(padding, PackedRows):
        rows = np.array(
            [
                _next_fit_rows(padding, values[offsets[b] : offsets[b + 1]].tolist())
                for b in range(count)
            ],
            dtype=np.int64,
        ).reshape(count)
        unit = padding.row_length
        cost = rows * (unit * unit if quadratic else unit)
        return rows, cost
    longest = np.zeros(count, dtype=np.int64)
    nonempty = np.flatnonzero(sizes > 0)
    if nonempty.size:
        longest[nonempty] = np.maximum.reduceat(values, offsets[nonempty])
    width = np.where(sizes > 0, padding.width(longest), 0)
    if quadratic:
        width = width * width
    return sizes, sizes * width
