"""The ``[mixture]`` section: several datasets read as one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import function_table
from loaderkit.plan.sections.dataset import dataset_to_dict
from loaderkit.plan.specs import MixtureSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["SECTION", "mixture_to_dict"]


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


SECTION: Section[MixtureSpec] = Section(
    name="mixture",
    key="mixture",
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
