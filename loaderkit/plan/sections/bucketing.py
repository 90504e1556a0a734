"""The ``[bucketing]`` section: batches of samples of similar length, or a token budget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._checks import LIMITS, check_choice, check_int
from loaderkit.errors import PlanError, PlanTypeError
from loaderkit.plan.padding_rule import bucket_padding, registry_padding
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import check_count, source_to_dict, values_source
from loaderkit.plan.specs import BUCKET_COSTS, BucketingSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "bucketing_spec", "bucketing_to_dict", "read_bucketing"]


def bucketing_spec(
    length: object,
    *,
    num_buckets: object = None,
    max_tokens: object = None,
    max_batch_size: object = None,
    cost: object = "linear",
) -> tuple[BucketingSpec, object | None]:
    """The bucketing spec and the live object to bind (lengths or a length function).

    ``length`` is a column/sample key name, a ``"module:qualname"`` function, a callable taking
    a sample, or a sequence of precomputed lengths (one int per sample).
    """
    source, live = values_source("bucketing.length", length, "lengths", "length", _lengths_array)
    buckets = (
        None
        if num_buckets is None
        else check_int("bucketing.num_buckets", num_buckets, minimum=1, maximum=LIMITS.batch_size)
    )
    tokens = (
        None
        if max_tokens is None
        else check_int(
            "bucketing.max_tokens",
            max_tokens,
            minimum=1,
            maximum=LIMITS.batch_size,
            fix="a token budget",
        )
    )
    cap = (
        None
        if max_batch_size is None
        else check_int(
            "bucketing.max_batch_size", max_batch_size, minimum=1, maximum=LIMITS.batch_size
        )
    )
    model = check_choice("bucketing.cost", cost, BUCKET_COSTS)
    return BucketingSpec(source, buckets, tokens, cap, model), live


def _lengths_array(path: str, values: object) -> Any:
    import numpy as np

    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise PlanTypeError.single(
            path,
            f"must be a column name, a function of a sample or a sequence of lengths (got "
            f"{type(values).__name__})",
        )
    check_count(path, values, "lengths")
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        raise PlanTypeError.single(path, f"cannot read lengths from it: {exc}") from None
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise PlanTypeError.single(
            path, f"must be one int per sample (got an array of {array.dtype}, shape {array.shape})"
        )
    if array.size and int(array.min()) < 0:
        raise PlanError.single(path, f"lengths must be >= 0 (got {int(array.min())})")
    return np.ascontiguousarray(array, dtype=np.int64)


def bucketing_to_dict(spec: BucketingSpec) -> dict[str, Any]:
    """The ``[bucketing]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"length": source_to_dict(spec.length), "cost": spec.cost}
    for key in ("num_buckets", "max_tokens", "max_batch_size"):
        if getattr(spec, key) is not None:
            out[key] = getattr(spec, key)
    return out


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.bucketing is None:
        return {}
    data = bucketing_to_dict(plan.bucketing)
    # absent when the budget is cut on the longest sample, as before padding rules: those
    # plans keep their fingerprints; the others' batches changed (issue 16), so do they
    padding = registry_padding(plan.collator) if bucket_padding(plan) is not None else None
    if padding is not None and not padding.exact:
        data["padding"] = padding.to_dict()
    return {"bucketing": data}


def read_bucketing(reader: Reader, data: Mapping[str, Any]) -> BucketingSpec | None:
    """Read the ``[bucketing]`` table: the length source and the options."""
    if "bucketing" not in data:
        return None
    sec = reader.section(
        data, "bucketing", ("length", "num_buckets", "max_tokens", "max_batch_size", "cost")
    )
    options = {
        k: sec[k] for k in ("num_buckets", "max_tokens", "max_batch_size", "cost") if k in sec
    }
    base = reader.attempt(lambda: bucketing_spec("placeholder", **options))
    source = reader.values_source(
        sec.get("length"), "bucketing.length", lambda v: bucketing_spec(v)[0].length
    )
    if base is None or source is None:
        return None
    chosen: BucketingSpec = attrs.evolve(base[0], length=source)
    return chosen


SECTION: Section[BucketingSpec] = Section(
    name="bucketing",
    key="bucketing",
    read=read_bucketing,
    to_dict=bucketing_to_dict,
    fingerprint="stream",
    stream=_stream,
    rows=(
        FingerprintRow(
            "`bucketing`",
            "stream",
            "length source (column, function or digest of the lengths), `num_buckets`, "
            "`max_tokens`, `max_batch_size`, `cost`; under a token budget, the registry "
            "collator's padding rule when it pads beyond the longest sample (the budget bounds "
            "the padded batch, so the rule cuts the batches)",
        ),
    ),
)
