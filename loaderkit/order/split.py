"""Seeded train / val / test splits of a map-style dataset: pure functions of their inputs.

A split is a function of (seed, dataset length, the val and test sizes, and, when stratified,
the class labels) and of nothing else: no global RNG, no platform-dependent arithmetic.

**Sizes** (:func:`split_sizes`). ``val`` and ``test`` are each a fraction in (0, 1) (a
float), a number of samples (an int >= 1), or 0 for no such part. A fraction rounds *up*:
``ceil(fraction x n)``, as ``test_size`` does in HF ``Dataset.train_test_split``; train is the
rest (HF's ``floor`` of the train fraction, for two parts). The product is computed exactly on
the fraction as written (the decimal ``repr(x)``): 0.7 of 10 samples is 7, where floating point
would round ``7.000000000000001`` up to 8.

**Which samples** (:func:`split_parts`). The keyed permutation
``FeistelPermutation(n, derive_key(seed, "split"))`` orders the samples; the first ``test``
samples of that order are the test part, the next ``val`` the val part, the rest train. Test is
carved first, so changing ``val`` never moves a sample into or out of test, and growing ``val``
keeps every sample of the smaller val part. Each part is returned in ascending index order.

**Stratified** (``labels`` given): each class keeps its proportion in each part as closely as
integers allow. Test's size is shared out among the classes by the largest-remainder method:
class ``c`` with ``n_c`` samples first gets ``floor(test x n_c / n)``; the samples still to
place go one each to the classes with the largest remainders ``(test x n_c) mod n`` (ties: the
smaller label first). Then val the same way over what test left (``n_c`` and ``n`` are then
the samples test left of class ``c`` and in all), so val is a stratified sample of the rest and
makes up for test's rounding; train is what remains. Within a class, samples are taken in the
order of the same keyed permutation. With a single class this is exactly the unstratified
split. Classes are the sorted distinct labels.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from loaderkit.order.feistel import FeistelPermutation
from loaderkit.order.keys import derive_key

__all__ = [
    "PARTS",
    "SplitName",
    "allocate",
    "decimal_ratio",
    "part_size",
    "split_parts",
    "split_sizes",
]

SplitName = Literal["train", "val", "test"]
"""A part of a split, as ``LoaderPlan.build(split=...)`` takes it."""

PARTS: tuple[SplitName, ...] = get_args(SplitName)
"""The names of the parts of a split, as ``LoaderPlan.build(split=...)`` takes them."""

_I64 = npt.NDArray[np.int64]


def part_size(value: float, n: int) -> int:
    """Samples in a part of size ``value`` (a fraction in (0, 1), a count, or 0) of ``n``."""
    if isinstance(value, float):
        if value == 0:
            return 0
        numerator, denominator = decimal_ratio(value)
        return -(-numerator * n // denominator)  # ceil, exactly
    return int(value)


def decimal_ratio(value: float) -> tuple[int, int]:
    """``value`` as written (its shortest ``repr``) as an exact ``(numerator, denominator)``.

    ``0.1`` is ``(1, 10)``, not the binary double's ``(3602879701896397, 2**55)``.
    """
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, decimals = mantissa.partition(".")
    numerator = int(whole + decimals)
    power = int(exponent or 0) - len(decimals)
    if power >= 0:
        return numerator * 10**power, 1
    return numerator, 10**-power


def split_sizes(n: int, val: float, test: float) -> tuple[int, int, int]:
    """``(train, val, test)`` sample counts of a split of ``n`` samples.

    ``train`` is what val and test leave; it is negative or zero when they take everything
    (the plan rules refuse such a split).
    """
    n_val, n_test = part_size(val, n), part_size(test, n)
    return n - n_val - n_test, n_val, n_test


def allocate(total: int, counts: _I64, capacity: _I64) -> _I64:
    """Share ``total`` among classes of ``counts`` samples by the largest-remainder method.

    Class ``c`` gets ``floor(total x counts[c] / n)`` (``n = counts.sum()``), at most
    ``capacity[c]``; the rest go one at a time to the classes with the largest remainders (ties
    by class order), skipping classes at capacity. ``total`` must fit in ``capacity.sum()``.
    """
    n = int(counts.sum())
    if total == 0 or n == 0:
        return np.zeros(len(counts), dtype=np.int64)
    scaled = counts.astype(np.int64) * total
    given = np.minimum(scaled // n, capacity).astype(np.int64)
    by_remainder = np.argsort(-(scaled % n), kind="stable")
    left = total - int(given.sum())
    while left > 0:
        placed = False
        for c in by_remainder.tolist():
            if left == 0:
                break
            if given[c] < capacity[c]:
                given[c] += 1
                left -= 1
                placed = True
        if not placed:
            raise ValueError(f"cannot place {left} more samples: every class is full")
    return given


def _classes(labels: npt.ArrayLike, n: int) -> tuple[_I64, _I64]:
    """(class code of every sample, samples per class), classes in sorted label order."""
    values = np.asarray(labels)
    if values.ndim != 1 or len(values) != n:
        raise ValueError(f"need one label per sample: {n} labels (got shape {values.shape})")
    try:
        _, codes, counts = np.unique(values, return_inverse=True, return_counts=True)
    except TypeError as exc:
        raise TypeError(f"the labels cannot be sorted into classes ({exc})") from None
    return codes.astype(np.int64).reshape(-1), counts.astype(np.int64)


def split_parts(
    n: int,
    seed: int,
    val: float,
    test: float,
    labels: npt.ArrayLike | None = None,
) -> dict[str, _I64]:
    """The sample indices of each part, ``{"train": ..., "val": ..., "test": ...}``.

    Each is a sorted int64 array; together they are disjoint and cover ``range(n)``. With
    ``labels`` (one per sample, any sortable values) the split is stratified (see the module
    docstring for the rounding and allocation rules).
    """
    _, n_val, n_test = split_sizes(n, val, test)
    order = FeistelPermutation(n, derive_key(seed, "split")).slice(0, n)
    if labels is None:
        codes = np.zeros(n, dtype=np.int64)
        counts = np.asarray([n], dtype=np.int64)
    else:
        codes, counts = _classes(labels, n)
    tests = allocate(n_test, counts, counts)
    vals = allocate(n_val, counts - tests, counts - tests)
    # the samples grouped by class, each class in permutation order
    grouped = order[np.argsort(codes[order], kind="stable")]
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    klass = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    rank = np.arange(n, dtype=np.int64) - starts[klass]
    in_test = rank < tests[klass]
    in_val = ~in_test & (rank < tests[klass] + vals[klass])
    return {
        "train": np.sort(grouped[~in_test & ~in_val]),
        "val": np.sort(grouped[in_val]),
        "test": np.sort(grouped[in_test]),
    }
