"""The ``[mixture]`` section: several datasets read as one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit.errors import Problem
from loaderkit.plan.fields import combined_dataset, mixture_options
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table
from loaderkit.plan.sections.dataset import dataset_to_dict, describe_recorded, read_dataset
from loaderkit.plan.specs import CallableSpec, DatasetSpec, MixtureSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "mixture_to_dict", "read_mixture"]


def mixture_to_dict(spec: MixtureSpec) -> dict[str, Any]:
    """The ``[mixture]`` table of a plan file."""
    out: dict[str, Any] = {
        "mode": spec.mode,
        "by": spec.by,
        "stratified": spec.stratified,
        "sources": [dataset_to_dict(s) for s in spec.sources],
    }
    if spec.weights is not None:
        out["weights"] = dict(zip(spec.names, spec.weights, strict=True))
    if spec.schedule:
        out["schedule"] = [
            [until, dict(zip(spec.names, w, strict=True))] for until, w in spec.schedule
        ]
    if spec.fn is not None:
        out["weights_fn"] = function_table(spec.fn)
    if spec.num_samples is not None:
        out["num_samples"] = spec.num_samples
    if spec.source_key is not None:
        out["source_key"] = spec.source_key
    return out


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.mixture is None:
        return {}
    data = mixture_to_dict(plan.mixture)
    for table, spec in zip(data["sources"], plan.mixture.sources, strict=True):
        if spec.source is not None:  # where the files are is not what they hold
            table["source"] = spec.source.without_paths()
    return {"mixture": data}


def read_mixture(reader: Reader, data: Mapping[str, Any]) -> MixtureSpec | None:
    """Read the ``[mixture]`` table: its sources, and check the recorded dataset is theirs."""
    if "mixture" not in data:
        return None
    dataset: DatasetSpec | None = reader.values.get("dataset")
    names = (
        "sources",
        "mode",
        "weights",
        "schedule",
        "weights_fn",
        "by",
        "stratified",
        "num_samples",
        "source_key",
    )
    sec = reader.section(data, "mixture", names)
    tables = sec.get("sources")
    if not isinstance(tables, list) or not tables:
        reader.problems.append(
            Problem("mixture.sources", f"must be a non-empty list of tables (got {tables!r})")
        )
        return None
    sources = []
    for i, table in enumerate(tables):
        spec = read_dataset(reader, {f"mixture.sources[{i}]": table}, f"mixture.sources[{i}]")
        if spec is None:
            return None
        sources.append(spec)
    weights: object = None
    given = [k for k in ("weights", "schedule", "weights_fn") if k in sec]
    if len(given) > 1:
        reader.problems.append(
            Problem("mixture", f"give one of weights, schedule, weights_fn (got {given})")
        )
        return None
    fn: CallableSpec | None = None
    if "weights" in sec:
        weights = sec["weights"]
    elif "schedule" in sec:
        weights = sec["schedule"]
        if not isinstance(weights, list) or not weights:
            reader.problems.append(
                Problem(
                    "mixture.schedule",
                    f"must be a list of [until, weights] pairs (got {weights!r})",
                )
            )
            return None
    elif "weights_fn" in sec:
        fn = reader.read_callable(
            {"mixture.weights": sec["weights_fn"]}, "mixture.weights", value_fn
        )
        if fn is None:
            return None
        weights = _equal_weights  # stands in while the other options are checked
    options = {
        k: sec[k] for k in ("mode", "by", "stratified", "num_samples", "source_key") if k in sec
    }
    result = reader.attempt(lambda: mixture_options(sources, weights=weights, **options))
    if result is None:
        return None
    chosen: MixtureSpec = result[0]
    if fn is not None:
        chosen = attrs.evolve(chosen, fn=fn)
    if dataset is not None and dataset.kind == "mixture":
        expected = combined_dataset(chosen)
        if expected != dataset:
            reader.problems.append(
                Problem(
                    "dataset",
                    f"does not match the mixture's sources: {describe_recorded(dataset)} recorded, "
                    f"{describe_recorded(expected)} from the sources; compile the plan again",
                )
            )
    return chosen


def _equal_weights(t: float) -> float:
    """A weight-schedule stand-in used while a file's mixture options are checked."""
    return 1.0


SECTION: Section[MixtureSpec] = Section(
    name="mixture",
    key="mixture",
    read=read_mixture,
    to_dict=mixture_to_dict,
    fingerprint="stream",
    stream=_stream,
    rows=(
        FingerprintRow(
            "`mixture`",
            "stream",
            "sources (the identity of each, source paths left out), `mode`, weights or their "
            "schedule or function, `by`, `stratified`, `num_samples`, `source_key`",
        ),
    ),
)
