"""The cost of a batch under a token budget, the greedy cut, and the padding a batching wastes.

Step 3 of the bucketing algorithm (:mod:`loaderkit.order.bucketing`, whose docstring is the
contract) when ``max_tokens`` is set: a batch's cost is that of the *padded* tensor the
collator makes (its padding rule, :mod:`loaderkit.order.padding`), ``cost="linear"`` (tokens)
or ``"quadratic"`` (token² units); :func:`cut_budget` cuts a bucket-sorted sequence of lengths
greedily into the longest prefixes that fit, and :func:`oversize_sample` finds a sample that
alone exceeds the budget (it is refused, never dropped). :func:`padding_stats` measures the
padding and the budget's fill of any batching. Also the argument checks the bucketing
functions share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.batches import EpochBatches
from loaderkit.order.epoch import CHUNK
from loaderkit.order.keys import as_int
from loaderkit.order.padding import NO_PADDING, BatchPadding, PackedRows, PaddedLength, padded_costs

__all__ = [
    "COSTS",
    "MAX_BUDGET",
    "MAX_LENGTH",
    "check_budget",
    "check_cost",
    "check_lengths",
    "check_padding",
    "check_sequence_budget",
    "cut_budget",
    "int_array",
    "length_dtype",
    "optional_int",
    "oversize_message",
    "oversize_sample",
    "padding_stats",
]

#: The cost models of a token budget (see :mod:`loaderkit.order.bucketing`).
COSTS = ("linear", "quadratic")

#: Token budgets must be below this (they are int64).
MAX_BUDGET = 2**63

#: Lengths must be below this (so that ``length**2`` fits in an int64).
MAX_LENGTH = 2**31

_I64 = npt.NDArray[np.int64]
_Int = npt.NDArray[Any]

_FIRST_WINDOW = 64


# -- argument checks ---------------------------------------------------------------------------


def int_array(name: str, values: object) -> _Int:
    """``values`` as a 1-d integer numpy array (not bool), without copying when possible."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(
            f"{name} must be a 1-d array of integers, got an array of dtype {arr.dtype} and "
            f"shape {arr.shape}; pass numpy.asarray({name}, dtype=numpy.int64)"
        )
    return arr


def check_lengths(lengths: object) -> _Int:
    """Validate sample lengths: a 1-d integer array with values in ``[0, 2**31)``."""
    arr = int_array("lengths", lengths)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= MAX_LENGTH:
            bad = int(np.argmax(arr < 0)) if low < 0 else int(np.argmax(arr >= MAX_LENGTH))
            raise ValueError(
                f"lengths must lie in [0, 2**31), but sample {bad} has length {int(arr[bad])}; "
                f"pass the number of tokens of every sample"
            )
    return arr


def check_cost(cost: object) -> bool:
    """Validate the cost model; return whether it is quadratic."""
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
    return cost == "quadratic"


def optional_int(name: str, value: object) -> int | None:
    """``None`` or an int ``>= 1``."""
    return None if value is None else as_int(name, value, minimum=1)


# -- 3. cutting under a budget ---------------------------------------------------------------


def length_dtype(high: int) -> type[np.unsignedinteger[Any]]:
    """The smallest unsigned dtype that holds lengths up to ``high``."""
    if high < 2**8:
        return np.uint8
    if high < 2**16:
        return np.uint16
    return np.uint32


def _isqrt(value: int) -> int:
    """``floor(sqrt(value))`` for ``0 <= value < 2**63``, exactly."""
    root = int(value**0.5)
    while root * root > value:
        root -= 1
    while (root + 1) * (root + 1) <= value:
        root += 1
    return root


def check_padding(padding: object) -> BatchPadding:
    """Validate the padding rule (``None``: padded to the longest sample)."""
    if padding is None:
        return NO_PADDING
    if not isinstance(padding, PaddedLength | PackedRows):
        raise TypeError(
            f"padding must be a loaderkit.order.padding.PaddedLength or PackedRows (what a "
            f"collator's padded_length() returns), got {type(padding).__name__} {padding!r}"
        )
    return padding


def _longest_fitting(budget: int, quadratic: bool, padding: BatchPadding) -> int | None:
    """The longest length that alone fits the budget (``None``: every length; 0: none)."""
    if isinstance(padding, PackedRows):
        row = padding.row_length
        rows = budget // (row * row if quadratic else row)
        if rows == 0:
            return 0
        return rows * row if padding.split else None
    limit = _isqrt(budget) if quadratic else budget  # the widest row that fits alone
    multiple = padding.multiple or 1
    if padding.max_length is not None:
        widest = -(-padding.max_length // multiple) * multiple  # the width of a cut row
        if widest <= limit:
            return None
        if padding.fixed:
            return 0
    return limit // multiple * multiple


def oversize_sample(
    lengths: npt.NDArray[np.integer[Any]],
    max_tokens: int,
    cost: str = "linear",
    padding: BatchPadding | None = None,
) -> tuple[int, int] | None:
    """``(index, longest allowed length)`` of the first sample that alone exceeds the budget.

    ``None`` when every sample fits. A sample alone is a batch of one, padded by ``padding``
    (``None``: to its own length): it fits when its padded cost is ``<= max_tokens``. The
    longest allowed length is ``max_tokens`` (linear) or ``isqrt(max_tokens)`` (quadratic)
    rounded down to the padding's multiple; 0 when no sample fits (the padding alone exceeds
    the budget). A length of 0 costs like 1.
    """
    quadratic = check_cost(cost)
    limit = _longest_fitting(max_tokens, quadratic, check_padding(padding))
    if limit is None or lengths.size == 0 or max(int(lengths.max()), 1) <= limit:
        return None
    return int(np.argmax(np.maximum(lengths, 1) > limit)), limit


def oversize_message(
    sample: int,
    length: int,
    max_tokens: int,
    cost: str,
    padding: BatchPadding | None,
    limit: int,
) -> str:
    """What the error of a sample that alone exceeds the budget says (and how to fix it)."""
    rule = check_padding(padding)
    quadratic = check_cost(cost)
    if isinstance(rule, PackedRows):
        rows = int(rule.rows_alone(np.array([length]))[0])
        unit = rule.row_length * rule.row_length if quadratic else rule.row_length
        alone = f"{rows} row(s) of {rule.row_length} = {rows * unit}"
    else:
        width = int(rule.width(np.array([max(length, 1)]))[0])
        alone = f"{width}² = {width * width}" if quadratic else f"{width}"
        if not rule.exact:
            alone = f"{alone} ({rule.describe()})"
    fix = (
        f"filter out samples longer than {limit}"
        if limit
        else "lower the collator's max_length or pad_to_multiple_of"
    )
    return (
        f"sample {sample} has length {length}: alone it costs {alone} > max_tokens={max_tokens} "
        f"(cost={cost}, padded tokens); no batch can hold it. Raise max_tokens, truncate the "
        f"sequences (the collator's max_length), or {fix}"
    )


def check_budget(lengths: _Int, budget: int, quadratic: bool, padding: BatchPadding) -> None:
    """Raise if a sample alone costs more than the budget (names the smallest such index)."""
    cost = "quadratic" if quadratic else "linear"
    found = oversize_sample(lengths, budget, cost, padding)
    if found is None:
        return
    bad, limit = found
    raise ValueError(oversize_message(bad, int(lengths[bad]), budget, cost, padding, limit))


def check_sequence_budget(
    lengths: _Int, sequence: _Int, budget: int, quadratic: bool, padding: BatchPadding
) -> None:
    """Raise if a sample *of the sequence* alone costs more than the budget (smallest index).

    Samples of the dataset the sequence does not hold are not checked: they are not batched.
    """
    cost = "quadratic" if quadratic else "linear"
    found = oversize_sample(lengths, budget, cost, padding)
    if found is None:  # the usual case: one pass over the lengths, none over the sequence
        return
    limit = found[1]
    bad: int | None = None
    for lo in range(0, int(sequence.size), CHUNK):
        chunk = sequence[lo : lo + CHUNK]
        over = chunk[np.maximum(lengths[chunk], 1) > limit]
        if over.size:
            smallest = int(over.min())
            bad = smallest if bad is None else min(bad, smallest)
    if bad is not None:
        raise ValueError(oversize_message(bad, int(lengths[bad]), budget, cost, padding, limit))


def cut_budget(
    ordered: _Int, budget: int, quadratic: bool, cap: int | None, padding: BatchPadding
) -> tuple[_I64, bool]:
    """The greedy cut of step 3: batch start offsets (plus ``n``), and if the last batch is full.

    ``ordered`` holds ``max(length, 1)`` in the order of ``s``; every value fits the budget
    alone (checked before).
    """
    if isinstance(padding, PackedRows):
        return _cut_packed(ordered, budget, quadratic, cap, padding)
    pad = None if padding.exact else padding.width
    n = int(ordered.size)
    limit = n if cap is None else cap
    top = np.int64(budget)
    steps = np.arange(1, _FIRST_WINDOW + 1, dtype=np.int64)  # candidate counts 1, 2, 3, ...
    starts = np.empty(1024, dtype=np.int64)  # batch start offsets, grown by doubling
    batches = 0
    guess = _FIRST_WINDOW
    p = 0
    count = 0
    while p < n:
        if batches == starts.size:
            starts = np.concatenate((starts, np.empty_like(starts)))
        starts[batches] = p
        batches += 1
        width = min(guess, limit, n - p)
        while True:
            if width > steps.size:
                steps = np.arange(1, 2 * width + 1, dtype=np.int64)
            unit = np.maximum.accumulate(ordered[p : p + width], dtype=np.int64)
            if pad is not None:  # the padded width of each prefix (non-decreasing too)
                unit = pad(unit)
            if quadratic:
                unit *= unit
            allowed = np.floor_divide(top, unit, out=unit)  # non-increasing in the count
            count = int(np.count_nonzero(allowed >= steps[:width]))  # a prefix fits, then none
            if count < width:
                break
            # all fit: widen up to what the first sample allows (allowed[0] >= width)
            bound = min(int(allowed[0]), limit, n - p)
            if width == bound:
                break
            width = min(4 * width, bound)
        p += count
        guess = count + (count >> 1) + 8
    offsets = np.empty(batches + 1, dtype=np.int64)
    offsets[:-1] = starts[:batches]
    offsets[-1] = n
    return offsets, cap is not None and count == cap


def _cut_packed(
    ordered: _Int, budget: int, quadratic: bool, cap: int | None, padding: PackedRows
) -> tuple[_I64, bool]:
    """The greedy cut of step 3 for packed rows: next-fit, sample by sample (a Python loop).

    A batch closes before the sample that would make it fill more than ``budget // row cost``
    rows, or hold more than ``cap`` samples.
    """
    row = padding.row_length
    most = budget // (row * row if quadratic else row)  # >= 1: checked before
    starts = [0]
    rows, used, count = 0, row, 0
    for p, length in enumerate(ordered.tolist()):
        if count and cap is not None and count == cap:
            starts.append(p)
            rows, used, count = 0, row, 0
        r, u = rows, used
        for piece in padding.segments(length) if length > row else (length,):
            if u + piece > row:
                r, u = r + 1, 0
            u += piece
        if count and r > most:  # it opens a row the budget has no room for: a new batch
            starts.append(p)
            r, u = 0, row
            for piece in padding.segments(length):
                if u + piece > row:
                    r, u = r + 1, 0
                u += piece
            count = 0
        rows, used = r, u
        count += 1
    offsets = np.asarray([*starts, int(ordered.size)], dtype=np.int64)
    if ordered.size == 0:
        offsets = np.zeros(1, dtype=np.int64)
    return offsets, cap is not None and count == cap


# -- statistics -------------------------------------------------------------------------------


def padding_stats(
    lengths: npt.NDArray[np.integer[Any]],
    batches: EpochBatches,
    *,
    max_tokens: int | None = None,
    cost: str = "linear",
    padding: BatchPadding | None = None,
    max_batch_size: int | None = None,
) -> dict[str, float]:
    """How much padding a batching wastes, and how well it fills a token budget.

    ``padding`` is how the collator pads a batch (``None``: to its longest sample), as for
    :func:`bucketed_batches`. Keys (all floats):

    - ``num_batches``, ``num_samples``;
    - ``real_tokens``: the sum of the lengths of the batched samples (as cut by the padding's
      ``max_length``, if any);
    - ``padded_tokens``: the sum over batches of the padded tensor's tokens (``size * max_len``
      when batches are padded to their longest sample);
    - ``waste``: ``1 - real_tokens / padded_tokens`` (0 when nothing is padded);
    - ``batch_size_min``, ``batch_size_median``, ``batch_size_max``, ``batch_size_mean``;
    - with ``max_tokens``: ``utilization``, the real cost over the budget of all batches
      (``real_tokens / (num_batches * max_tokens)`` for ``"linear"``, ``sum(length**2) /
      (num_batches * max_tokens)`` for ``"quadratic"``); ``fill``, the same with the padded
      cost (how full the budget is, padding included); ``max_batch_cost`` and
      ``mean_batch_cost`` in the units of the cost model (lengths taken as at least 1, as in
      :func:`bucketed_batches`); with ``max_batch_size`` too: ``capped``, the fraction of
      batches that hold exactly ``max_batch_size`` samples (closed by the cap, not the budget).

    Empty batches count in the batch sizes and cost nothing.
    """
    rule = check_padding(padding)
    cap = optional_int("max_batch_size", max_batch_size)
    arr = check_lengths(lengths)
    quadratic = check_cost(cost)
    budget = optional_int("max_tokens", max_tokens)
    indices = batches.indices
    if indices.size and int(indices.max()) >= arr.size:
        raise ValueError(
            f"the batches hold sample {int(indices.max())} but lengths has only {arr.size} "
            f"entries; pass the lengths of the dataset the batches were built for"
        )
    sizes = batches.sizes()
    count = int(sizes.size)
    batched = arr[indices].astype(np.int64)
    kept = batched
    if isinstance(rule, PaddedLength) and rule.max_length is not None:
        kept = np.minimum(batched, rule.max_length)
    elif isinstance(rule, PackedRows) and not rule.split:
        kept = np.minimum(batched, rule.row_length)
    real = float(kept.sum())
    if isinstance(rule, PackedRows):
        padded = float(padded_costs(batched, batches.offsets, rule)[1].sum())
    else:
        longest = _batch_max(batched, batches.offsets)
        padded = float((sizes * np.where(sizes > 0, rule.width(longest), 0)).sum())
    stats = {
        "num_batches": float(count),
        "num_samples": float(indices.size),
        "real_tokens": real,
        "padded_tokens": padded,
        "waste": 1.0 - real / padded if padded > 0 else 0.0,
        "batch_size_min": float(sizes.min()) if count else 0.0,
        "batch_size_median": float(np.median(sizes)) if count else 0.0,
        "batch_size_max": float(sizes.max()) if count else 0.0,
        "batch_size_mean": float(sizes.mean()) if count else 0.0,
    }
    if budget is not None:
        costs = padded_costs(batched, batches.offsets, rule, quadratic=quadratic)[1]
        total = float(count * budget)
        real_cost = float(kept.astype(np.float64) @ kept) if quadratic else real
        stats["utilization"] = real_cost / total if count else 0.0
        stats["fill"] = float(costs.sum()) / total if count else 0.0
        stats["max_batch_cost"] = float(costs.max()) if count else 0.0
        stats["mean_batch_cost"] = float(costs.mean()) if count else 0.0
        if cap is not None:
            stats["capped"] = float(np.count_nonzero(sizes == cap)) / count if count else 0.0
    return stats


def _batch_max(values: _I64, offsets: _I64) -> _I64:
    """The maximum of every batch's values (0 for an empty batch)."""
    count = int(offsets.size) - 1
    out = np.zeros(count, dtype=np.int64)
    nonempty = np.flatnonzero(offsets[1:] > offsets[:-1])
    if nonempty.size:
        out[nonempty] = np.maximum.reduceat(values, offsets[nonempty])
    return out
