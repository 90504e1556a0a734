"""Tables shared by several sections: callables and per-sample value sources."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
from collections.abc import Callable, Mapping
from typing import Any

from loaderkit._frozen import thaw_value
from loaderkit._limits import LIMITS
from loaderkit._validate import check_str, did_you_mean
from loaderkit.collators import collators
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import function_spec, is_function
from loaderkit.plan.specs import CallableSpec, DatasetSpec, LengthSource
from loaderkit.registry import PluginNotImportedError
from loaderkit.transforms import transforms

__all__ = [
    "callable_problems",
    "callable_to_dict",
    "check_count",
    "default_start_method",
    "float_array",
    "function_table",
    "source_problems",
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


def default_start_method() -> str:
    """The start method workers get when the plan names none (this platform's default)."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    return chosen or multiprocessing.get_all_start_methods()[0]


def callable_problems(
    path: str,
    spec: CallableSpec,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    """Problems of a collator, transform or function at ``path``: unknown, unbound, unpicklable."""
    problems: list[Problem] = []
    if spec.source == "registry":
        registry = collators if path == "collator" else transforms
        if spec.name not in registry:
            problems.append(Problem(path, registry.unknown_message(spec.name)))
        elif path == "collator":
            try:
                found = registry.get(spec.name).option_problems(dict(spec.options))
            except PluginNotImportedError:  # inspecting: a plugin's options are checked to build
                found = []
            for option, message in found:
                where = f"{path}.options.{option}" if option else f"{path}.options"
                problems.append(Problem(where, message))
        return problems
    if bindings is None:
        return problems
    if spec.name not in bindings:
        problems.append(
            Problem(
                path,
                f"no object bound to {spec.name!r}; give the object to the builder, or pass "
                f"bindings={{{spec.name!r}: ...}} when loading the plan",
            )
        )
        return problems
    if needs_pickle and spec.source == "binding":
        obj = bindings[spec.name]
        try:
            pickle.dumps(obj)
        except Exception as exc:  # noqa: BLE001 - any pickling failure is the same problem
            label = getattr(obj, "__qualname__", type(obj).__name__)
            problems.append(
                Problem(
                    path,
                    f"{label!r} cannot be pickled ({type(exc).__name__}: {exc}), but workers "
                    f"started with {needs_pickle!r} must receive it by pickling; define it at "
                    f"module level, or use with_workers(..., start_method='fork')",
                )
            )
    return problems


def source_problems(
    path: str,
    source: LengthSource,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    """Problems of a per-sample value source (column, values, function)."""
    problems: list[Problem] = []
    if (
        source.kind == "column"
        and dataset is not None
        and dataset.columns
        and source.name not in dataset.columns
    ):
        problems.append(
            Problem(
                path,
                f"column {source.name!r} is not in dataset {dataset.binding!r} (columns: "
                f"{', '.join(dataset.columns)}){did_you_mean(source.name, dataset.columns)}",
            )
        )
    if source.kind == "array" and bindings is not None:
        if source.name not in bindings:
            problems.append(
                Problem(
                    path,
                    f"no object bound to {source.name!r}; give the values to the builder, or "
                    f"pass bindings={{{source.name!r}: values}} when loading",
                )
            )
        else:
            size = len(bindings[source.name])  # type: ignore[arg-type]
            if dataset is not None and dataset.length is not None and size != dataset.length:
                problems.append(
                    Problem(
                        path,
                        f"has {size} values but dataset {dataset.binding!r} has "
                        f"{dataset.length} samples; pass one value per sample",
                    )
                )
    if source.kind == "callable" and source.fn is not None:
        problems.extend(callable_problems(path, source.fn, bindings, needs_pickle))
    return problems
