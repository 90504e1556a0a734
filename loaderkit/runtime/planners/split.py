"""The part of a split a loader reads: its sample indices, computed once and cached.

:func:`split_part` turns ``LoaderPlan.build(split=...)`` into the sorted sample indices of that
part (see :mod:`loaderkit.order.split` for the math). A stratified split reads the class labels
of every sample once:

- an HF ``datasets.Dataset`` column is read in Arrow (the dataset's indices mapping honoured);
- a dict of columns gives the column itself; a list of samples gives ``sample[key]``;
- any other map-style dataset is indexed sample by sample (``dataset[i][key]``).

0-d tensors and arrays count as their value. The parts are cached in this process for the same
dataset object, key and split settings, so building the train, val and test loaders reads the
labels once. A dataset changed in place (same object, same size) after a build is not re-read:
build from a new object.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.split import PARTS, split_parts, split_sizes
from loaderkit.plan.sections.split import SplitSpec
from loaderkit.plan.specs import DatasetSpec

__all__ = ["read_labels", "split_part"]

_CACHE: OrderedDict[tuple[Any, ...], tuple[object, dict[str, npt.NDArray[np.int64]]]] = (
    OrderedDict()
)
_CACHE_SIZE = 8


def _scalar(value: Any) -> Any:
    """A label as a plain value: 0-d tensors and arrays (and numpy scalars) as their item."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def read_labels(data: Any, spec: DatasetSpec, key: str) -> npt.NDArray[Any]:
    """One class label per sample of ``data``, read from column or sample key ``key``."""
    n = spec.length or 0
    try:
        if spec.kind == "hf" and key in data.column_names:
            column = data.data.column(key)
            indices = getattr(data, "_indices", None)
            if indices is not None:
                column = column.take(indices.column(0))
            values: Any = column.to_pylist()
        elif spec.kind == "columns" and isinstance(data, Mapping):
            column = data[key]
            values = column.tolist() if hasattr(column, "tolist") else list(column)
        elif spec.kind == "samples" and isinstance(data, Sequence):
            values = [_scalar(sample[key]) for sample in data]
        else:
            values = [_scalar(data[i][key]) for i in range(n)]
    except (KeyError, IndexError, TypeError) as exc:
        raise PlanError.single(
            "split.stratify_by",
            f"could not read the label {key!r} of every sample ({type(exc).__name__}: {exc}); "
            f"name a column or sample key holding one class label per sample",
        ) from exc
    if len(values) != n:
        raise PlanError.single(
            "split.stratify_by", f"read {len(values)} labels for {n} samples; need one each"
        )
    kinds = {type(v) for v in values}
    if len(kinds) == 1 and kinds <= {int, bool, str, float}:
        return np.asarray(values)  # one plain type: sorts the same everywhere
    labels = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        labels[i] = value
    return labels


def _parts(
    data: object, spec: DatasetSpec, split: SplitSpec, seed: int
) -> dict[str, npt.NDArray[np.int64]]:
    n = spec.length or 0
    key = (id(data), n, split.val, split.test, seed, split.stratify_by)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is data:
        _CACHE.move_to_end(key)
        return hit[1]
    labels = None
    if split.stratify_by is not None:
        labels = read_labels(data, spec, split.stratify_by)
    try:
        parts = split_parts(n, seed, split.val, split.test, labels)
    except (TypeError, ValueError) as exc:
        raise PlanError.single(
            "split.stratify_by", f"{exc}; give one sortable label per sample"
        ) from None
    for values in parts.values():
        values.setflags(write=False)
    _CACHE[key] = (data, parts)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parts


def split_part(
    data: object, spec: DatasetSpec, split: SplitSpec | None, seed: int, part: object
) -> npt.NDArray[np.int64] | None:
    """The sorted sample indices of ``part`` (``None``: the plan has no split, read it all).

    ``seed`` is the plan's seed (used unless the split has its own). Raises
    :class:`~loaderkit.PlanError` (path ``split``) for an unknown part, for ``"val"`` or
    ``"test"`` of a plan without a split, and for a part the split leaves empty.
    """
    if not isinstance(part, str) or part not in PARTS:
        raise PlanError.single(
            "split",
            f"build(split=...) takes 'train', 'val' or 'test' (got {part!r})",
        )
    if split is None:
        if part == "train":
            return None
        raise PlanError.single(
            "split",
            f"this plan has no split, so it has no {part!r} part; add .with_split(val=..., "
            f"test=...) to the builder, or call build() for the whole dataset",
        )
    n = spec.length or 0
    sizes = dict(zip(PARTS, split_sizes(n, split.val, split.test), strict=True))
    if sizes[part] < 1:
        raise PlanError.single(
            "split",
            f"the split has no {part!r} part ({part}=0); give with_split({part}=...) a fraction "
            f"or a number of samples",
        )
    return _parts(data, spec, split, seed if split.seed is None else split.seed)[part]
