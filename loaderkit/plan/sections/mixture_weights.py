"""What ``with_mixture(weights=...)`` accepts: per-source weights, a schedule, or a function.

Helpers of the ``[mixture]`` section (:mod:`loaderkit.plan.sections.mixture`); the runtime's
mixture planner checks a weight function's results with :func:`source_weights` too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from loaderkit._validate import check_number, did_you_mean
from loaderkit.errors import PlanError, PlanTypeError
from loaderkit.plan.fields import function_spec, is_function, until_table
from loaderkit.plan.specs import CallableSpec

__all__ = [
    "WeightOptions",
    "is_schedule_table",
    "source_weights",
    "weights_options",
    "weights_table",
]

WeightOptions = tuple[
    tuple[float, ...] | None,
    tuple[tuple[float, tuple[float, ...]], ...],
    CallableSpec | None,
    list[tuple[str, object]],
]
"""Fixed weights, a schedule table, a function, and the live objects to bind (one is set)."""


def weights_options(weights: object, names: tuple[str, ...]) -> WeightOptions:
    """Read ``weights`` for the sources ``names``: none, a function, a table or fixed weights."""
    if weights is None:
        return None, (), None, []
    if is_function(weights):
        fn, target = function_spec("mixture.weights", weights, "mixture_weights")
        return None, (), fn, [(fn.name, target)]
    if is_schedule_table(weights):
        return None, weights_table("mixture.weights", weights, names), None, []
    return source_weights("mixture.weights", weights, names), (), None, []


def source_weights(path: str, value: object, names: tuple[str, ...]) -> tuple[float, ...]:
    """One weight per source, from a mapping name -> weight or a sequence in source order."""
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in names]
        if unknown:
            name = str(unknown[0])
            raise PlanError.single(
                path,
                f"names no source {name!r}{did_you_mean(name, names)}; the sources are "
                f"{', '.join(repr(n) for n in names)}",
            )
        missing = [n for n in names if n not in value]
        if missing:
            raise PlanError.single(
                path,
                f"has no weight for {', '.join(repr(n) for n in missing)}; give every source "
                f"a weight (0 leaves a source out)",
            )
        raw = [value[n] for n in names]
    elif isinstance(value, list | tuple):
        if len(value) != len(names):
            raise PlanError.single(
                path,
                f"has {len(value)} weights for {len(names)} sources "
                f"({', '.join(repr(n) for n in names)}); give one weight per source",
            )
        raw = list(value)
    else:
        raise PlanTypeError.single(
            path,
            f"must be a mapping of source name to weight or a list of weights (got "
            f"{type(value).__name__})",
        )
    weights = tuple(
        check_number(f"{path}[{n!r}]", w, minimum=0.0, fix="weights are numbers >= 0")
        for n, w in zip(names, raw, strict=True)
    )
    if not all(math.isfinite(w) for w in weights):
        raise PlanError.single(path, f"weights must be finite (got {list(weights)})")
    if not any(weights):
        raise PlanError.single(path, "all weights are 0; give some source a positive weight")
    return weights


def weights_table(
    path: str, value: object, names: tuple[str, ...]
) -> tuple[tuple[float, tuple[float, ...]], ...]:
    """A discrete weight schedule ``[(until, weights), ...]`` with increasing ``until``."""
    assert isinstance(value, list | tuple)
    out = until_table(path, value, "weights", lambda where, v: source_weights(where, v, names))
    if not out:
        raise PlanError.single(path, "an empty weight schedule; give (until, weights) pairs")
    return out


def is_schedule_table(value: object) -> bool:
    """Whether ``value`` looks like ``[(until, weights), ...]`` (a schedule, not weights)."""
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(p, list | tuple) and len(p) == 2 for p in value)
        and all(isinstance(p[1], Mapping | list | tuple) for p in value)
    )
