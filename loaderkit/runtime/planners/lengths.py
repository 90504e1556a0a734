"""Sample lengths for bucketing, measured once per (dataset, length source) and cached.

- A **column** of an HF dataset is measured in Arrow (list lengths, no data decoded, the
  dataset's indices mapping honoured); a column of a dict of columns or a key of list samples is
  measured with ``len``; for any other map-style dataset the key is read from every sample once.
- A **function** of a sample is called once per sample (the dataset is read once, outside the
  loader); the result is cached in this process for the same dataset object, function and
  size. A dataset changed in place (same object, same size) after a build is not re-measured:
  build from a new object.
- **Precomputed** lengths are used as given.

A mixture has no dataset object of its own: :func:`mixture_lengths` measures every source
on its own (a column must exist in every source; a function is called on every sample of
every source) and concatenates them in source order, so entry ``offset_s + i`` is the length
of sample ``i`` of source ``s``, the mixture's global index. Precomputed lengths of a mixture
hold one value per sample of the whole mixture, in that order.

:func:`sample_lengths` and :func:`mixture_lengths` return the lengths and a sentence saying
what they cost, which ``Loader.explain()`` shows.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit._validate import did_you_mean
from loaderkit.errors import PlanError
from loaderkit.plan.sections.mixture import MixtureSpec
from loaderkit.plan.specs import DatasetSpec, LengthSource

__all__ = ["mixture_lengths", "sample_lengths", "sample_weights"]

Lengths = npt.NDArray[np.int64]

_CACHE: OrderedDict[tuple[int, int, str], tuple[object, object, Any, str]] = OrderedDict()
_CACHE_SIZE = 8


def _hf_column(data: Any, name: str) -> Lengths | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = data.data
    if name not in table.column_names:
        return None
    column = table.column(name)
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        counts = pc.list_value_length(column)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        counts = pc.utf8_length(column)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        counts = pc.binary_length(column)
    elif pa.types.is_integer(kind):
        counts = column  # the lengths themselves
    else:
        raise PlanError.single(
            "bucketing.length",
            f"column {name!r} holds {kind}, neither sequences nor integer lengths; name a "
            f"column of lists, strings or ints, or give a function of a sample",
        )
    lengths = counts.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    indices = getattr(data, "_indices", None)
    if indices is not None:
        lengths = lengths[indices.column(0).to_numpy()]
    return lengths  # type: ignore[no-any-return]


def _column(data: Any, spec: DatasetSpec, name: str) -> tuple[Lengths, str]:
    started = time.perf_counter()
    if spec.kind == "hf":
        found = _hf_column(data, name)
        if found is not None:
            return found, f"lengths of {name!r} read in Arrow in {_since(started)}"
    if spec.kind == "columns" and isinstance(data, Mapping):
        column = data[name]
        shape = getattr(column, "shape", None)
        if isinstance(shape, tuple) and len(shape) >= 2:
            return np.full(shape[0], shape[1], dtype=np.int64), f"constant width of {name!r}"
        lengths = _measured(column, name, len(column))
        return lengths, f"lengths of the {len(column):,} values of {name!r} in {_since(started)}"
    _check_keyed(data, name)
    if spec.kind == "samples" and isinstance(data, Sequence):
        lengths = _measured((s[name] for s in data), name, len(data))
        return lengths, f"lengths of {name!r} in {len(data):,} samples in {_since(started)}"
    return _call_each(data, lambda s: _length(s[name], name), f"{name!r} of every sample")


def _check_keyed(data: Any, name: str, path: str = "bucketing.length") -> None:
    """Refuse a key ``name`` when the first sample is not a mapping that holds it.

    ``path`` is the plan field that names the key: ``bucketing.length`` (lengths), or the
    value source of ``sampling_weights`` or ``curriculum`` (one number per sample).
    """
    try:
        first = data[0] if len(data) else None
    except Exception:  # noqa: BLE001 - reading sample by sample below says what fails
        return
    if first is None:
        return
    if not isinstance(first, Mapping):
        shape = f" of {len(first)} items" if isinstance(first, tuple | list) else ""
        section = path.split(".", 1)[0]
        example = (
            "with_bucketing(lambda sample: len(sample[0]), ...) for the first item's length"
            if section == "bucketing"
            else f"with_{section}(lambda sample: float(sample[1]), ...) for the second item"
        )
        raise PlanError.single(
            path,
            f"{name!r} names a key, but the samples of this dataset are "
            f"{type(first).__name__}s{shape}, not dicts; give a function of a sample "
            f"instead, e.g. {example}",
        )
    if name not in first:
        keys = [str(k) for k in first]
        raise PlanError.single(
            path,
            f"sample 0 has no key {name!r} (its keys: {', '.join(map(repr, keys))})"
            f"{did_you_mean(name, keys)}; name one of its keys, or give a function of a sample",
        )


def _length(value: Any, name: str) -> int:
    """A sample's length from its ``name`` value: ``len()`` of a sequence, or an int itself."""
    if isinstance(value, bool):
        raise TypeError(f"{name!r} is a bool, neither a sequence nor an int length")
    if isinstance(value, int | np.integer):
        return int(value)
    size = getattr(value, "ndim", None)
    if size == 0:  # a 0-d tensor or array: a number
        return int(value.item())
    return len(value)


def _measured(values: Any, name: str, count: int) -> Lengths:
    """The lengths of ``count`` values (sequences, or ints that are the lengths)."""
    out = np.empty(count, dtype=np.int64)
    for i, value in enumerate(values):
        try:
            out[i] = _length(value, name)
        except TypeError as exc:
            raise PlanError.single(
                "bucketing.length",
                f"sample {i}: {exc}; name a column of sequences or int lengths, or give a "
                f"function of a sample",
            ) from None
    return out


def _call_each(
    data: Any, fn: Callable[[Any], Any], what: str, path: str = "bucketing.length"
) -> tuple[Any, str]:
    """Call ``fn`` on every sample once: int lengths, or float weights for ``sampling_weights``."""
    started = time.perf_counter()
    n = len(data)
    weights = not path.startswith("bucketing")
    out = np.empty(n, dtype=np.float64 if weights else np.int64)
    for i in range(n):
        try:
            value = fn(data[i])
        except Exception as exc:
            raise PlanError.single(
                path, f"reading sample {i} failed: {type(exc).__name__}: {exc}"
            ) from exc
        kinds = (int, float, np.integer, np.floating) if weights else (int, np.integer)
        signed = path.startswith("curriculum")
        if isinstance(value, bool) or not isinstance(value, kinds) or not (signed or value >= 0):
            wanted = "a number >= 0" if weights else "an int >= 0"
            raise PlanError.single(
                path, f"the value of sample {i} must be {wanted} (got {value!r})"
            )
        out[i] = value
    return out, f"read {what} once ({n:,} samples) in {_since(started)}, cached"


def _since(started: float) -> str:
    seconds = time.perf_counter() - started
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def sample_weights(
    source: LengthSource,
    spec: DatasetSpec,
    bindings: Mapping[str, object],
    path: str = "sampling_weights.weights",
) -> tuple[npt.NDArray[np.float64], str]:
    """The weight of every sample (float64, finite, >= 0, not all 0) and what reading cost.

    With ``path="curriculum.difficulty"`` it reads difficulties instead: any finite number.
    """
    data: Any = bindings[spec.binding]
    started = time.perf_counter()
    if source.kind == "array":
        weights, how = np.asarray(bindings[source.name], dtype=np.float64), "precomputed"
    elif source.kind == "callable":
        fn = bindings.get(source.fn.name if source.fn else "")
        if not callable(fn):
            raise PlanError.single(path, "the weight function is not bound to a callable")
        weights, how = _cached(
            data,
            fn,
            source.fn.name if source.fn else "",
            lambda: _call_each(data, fn, "the weight of every sample", path),
        )
    else:
        name = source.name

        def read() -> tuple[Any, str]:
            if spec.kind == "hf" and name in data.data.column_names:
                column = data.data.column(name).to_numpy()
                indices = getattr(data, "_indices", None)
                if indices is not None:
                    column = column[indices.column(0).to_numpy()]
                return np.asarray(column, dtype=np.float64), f"Arrow column {name!r}"
            if spec.kind == "columns" and isinstance(data, Mapping):
                return np.asarray(data[name], dtype=np.float64), f"column {name!r}"
            _check_keyed(data, name, path)
            if spec.kind == "samples" and isinstance(data, Sequence):
                with contextlib.suppress(TypeError, ValueError, KeyError, IndexError):
                    return (  # the fast path; a value that is no number is named below
                        np.fromiter((float(s[name]) for s in data), np.float64, len(data)),
                        f"{name!r} of {len(data):,} samples in {_since(started)}",
                    )
            return _call_each(data, lambda s: s[name], f"{name!r} of every sample", path)

        weights, how = _cached(data, None, name, read)
    if len(weights) != spec.length:
        raise PlanError.single(path, f"read {len(weights)} values for {spec.length} samples")
    if path.startswith("curriculum"):
        if np.isnan(weights).any():
            raise PlanError.single(path, "difficulties must not be NaN")
        return weights, how
    if not np.isfinite(weights).all() or (weights.size and weights.min() < 0):
        raise PlanError.single(path, "weights must be finite and >= 0")
    if weights.size and not weights.any():
        raise PlanError.single(path, "all weights are 0; give some sample a positive weight")
    return weights, how


def _cached(
    data: object, fn: object, name: str, compute: Callable[[], tuple[Any, str]]
) -> tuple[Any, str]:
    key = (id(data), id(fn), name)
    hit = _CACHE.get(key)
    size = len(data)  # type: ignore[arg-type]
    if hit is not None and hit[0] is data and hit[1] is fn and len(hit[2]) == size:
        _CACHE.move_to_end(key)
        return hit[2], f"cached ({hit[3]})"
    values, how = compute()
    _CACHE[key] = (data, fn, values, how)
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return values, how


def sample_lengths(
    source: LengthSource, spec: DatasetSpec, bindings: Mapping[str, object]
) -> tuple[Lengths, str]:
    """The length of every sample of the bound dataset, and what measuring them cost."""
    data = bindings[spec.binding]
    if source.kind == "array":
        values = np.asarray(bindings[source.name], dtype=np.int64)
        return values, "precomputed"
    key_name = source.name if source.kind == "column" else (source.fn.name if source.fn else "")
    fn_obj = bindings.get(key_name) if source.kind == "callable" else None
    if source.kind == "column":
        lengths, how = _cached(data, None, key_name, lambda: _column(data, spec, source.name))
    else:
        if not callable(fn_obj):
            raise PlanError.single(
                "bucketing.length", f"the object bound to {key_name!r} is not callable"
            )
        lengths, how = _cached(
            data,
            fn_obj,
            key_name,
            lambda: _call_each(data, fn_obj, f"{key_name} of every sample"),
        )
    if len(lengths) != spec.length:
        raise PlanError.single(
            "bucketing.length",
            f"measured {len(lengths)} lengths for {spec.length} samples",
        )
    return lengths, how


def mixture_lengths(
    source: LengthSource, mixture: MixtureSpec, bindings: Mapping[str, object]
) -> tuple[Lengths, str]:
    """The length of every sample of a mixture, source after source, and what it cost.

    Entry ``offset_s + i`` is the length of sample ``i`` of source ``s`` (the mixture's global
    index). Each source is measured like a dataset of its own (and cached per source).
    """
    total = sum(mixture.sizes)
    if source.kind == "array":
        values = np.asarray(bindings[source.name], dtype=np.int64)
        if len(values) != total:
            counts = ", ".join(f"{s.binding!r} {s.length}" for s in mixture.sources)
            raise PlanError.single(
                "bucketing.length",
                f"has {len(values)} values but the mixture's sources hold {total} samples "
                f"({counts}); pass one length per sample of the whole mixture, source after "
                f"source in the order of with_mixture",
            )
        return values, "precomputed"
    if source.kind == "column":
        for spec in mixture.sources:
            if spec.columns and source.name not in spec.columns:
                raise PlanError.single(
                    "bucketing.length",
                    f"column {source.name!r} is not in mixture source {spec.binding!r} "
                    f"(columns: {', '.join(spec.columns)}); every source needs it, or give "
                    f"a function of a sample",
                )
    parts: list[Lengths] = []
    costs: list[str] = []
    for spec in mixture.sources:
        try:
            lengths, how = sample_lengths(source, spec, bindings)
        except PlanError as exc:
            problem = exc.problems[0]
            raise PlanError.single(
                problem.path, f"mixture source {spec.binding!r}: {problem.message}"
            ) from exc
        parts.append(np.asarray(lengths, dtype=np.int64))
        costs.append(f"{spec.binding!r}: {how}")
    return np.concatenate(parts), "; ".join(costs)
