"""Tables shared by several sections: callables and per-sample value sources."""

from __future__ import annotations

from typing import Any

from loaderkit._checks import thaw_value
from loaderkit.plan.specs import CallableSpec, LengthSource

__all__ = ["callable_to_dict", "function_table", "source_to_dict"]


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
