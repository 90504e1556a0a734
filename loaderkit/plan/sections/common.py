"""Tables shared by several sections: callables and per-sample value sources."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from loaderkit._checks import LIMITS, check_str, thaw_value
from loaderkit.errors import PlanError, PlanTypeError
from loaderkit.plan.fields import function_spec, is_function
from loaderkit.plan.specs import CallableSpec, LengthSource

__all__ = [
    "callable_to_dict",
    "check_count",
    "float_array",
    "function_table",
    "source_to_dict",
    "values_source",
]


def callable_to_dict(spec: CallableSpec, *, with_options: bool) -> dict[str, Any]:
    """A collator's (``with_options``) or a transform's table: how it is given, and its name."""
    key = {"registry": "name", "ref": "ref", "binding": "binding"}[spec.source]
    out: dict[str, Any] = {key: spec.name}
    if spec.label:
        out["label"] = spec.label
    if spec.reason:
        out["reason"] = spec.reason
    if with_options:
        out["options"] = thaw_value(spec.options)
    else:
        out["accepts_rng"] = spec.accepts_rng
    return out


def function_table(spec: CallableSpec) -> dict[str, Any]:
    """A schedule's or per-sample function's table: a callable's, without ``accepts_rng``."""
    table = callable_to_dict(spec, with_options=False)
    table.pop("accepts_rng", None)
    return table


def source_to_dict(source: LengthSource) -> dict[str, Any]:
    """A per-sample value source as a file table: column, array + digest, ref or binding."""
    if source.kind == "column":
        return {"column": source.name}
    if source.kind == "array":
        return {"array": source.name, "digest": source.digest}
    assert source.fn is not None
    return function_table(source.fn)


def values_source(
    path: str, value: object, array_name: str, fn_binding: str, read_array: Callable[..., Any]
) -> tuple[LengthSource, object | None]:
    """A per-sample value source (column, function or precomputed array) and its live object."""
    if is_function(value):
        fn, target = function_spec(path, value, fn_binding)
        return LengthSource("callable", fn=fn), target
    if isinstance(value, str):
        return LengthSource("column", check_str(path, value)), None
    values = read_array(path, value)
    digest = hashlib.sha256(values.tobytes()).hexdigest()
    return LengthSource("array", array_name, digest=digest), values


def float_array(path: str, values: object, what: str) -> Any:
    """One float64 per sample from a sequence; the type problems named at ``path``."""
    import numpy as np

    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise PlanTypeError.single(
            path,
            f"must be a column name, a function of a sample or a sequence of {what} (got "
            f"{type(values).__name__})",
        )
    check_count(path, values, what)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:  # an int over 1e308
        raise PlanTypeError.single(path, f"cannot read {what} from it: {exc}") from None
    if array.ndim != 1:
        raise PlanTypeError.single(path, f"must be one number per sample (got shape {array.shape})")
    return np.ascontiguousarray(array)


def check_count(path: str, values: object, what: str) -> None:
    """Refuse a sequence claiming more values than a dataset may hold, before reading it."""
    try:
        count = len(values)  # type: ignore[arg-type]
    except Exception as exc:  # a __len__ too large, negative or failing
        raise PlanTypeError.single(
            path, f"len() of the {what} failed ({type(exc).__name__}: {exc})"
        ) from exc
    if count > LIMITS.dataset_length:
        raise PlanError.single(
            path,
            f"holds {count:,} {what}; at most {LIMITS.dataset_length:,} (one per sample) are "
            f"allowed",
        )
