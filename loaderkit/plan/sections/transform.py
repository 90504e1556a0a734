"""The ``[transform]`` section: the per-sample function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loaderkit.plan.fields import transform_spec
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import callable_to_dict
from loaderkit.plan.specs import CallableSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "read_transform", "transform_to_dict"]


def transform_to_dict(spec: CallableSpec) -> dict[str, Any]:
    """The ``[transform]`` table of a plan file."""
    return callable_to_dict(spec, with_options=False)


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    spec = plan.transform
    if spec is None:  # hashed as null: unset is a stream of its own
        return {"transform": None}
    return {
        "transform": {
            "source": spec.source,
            "name": spec.name,
            "accepts_rng": spec.accepts_rng,
            "label": spec.label,
        }
    }


def read_transform(reader: Reader, data: Mapping[str, Any]) -> CallableSpec | None:
    """Read the ``[transform]`` table."""
    if "transform" not in data:
        return None
    return reader.read_callable(data, "transform", transform_spec)


SECTION: Section[CallableSpec] = Section(
    name="transform",
    key="transform",
    read=read_transform,
    to_dict=transform_to_dict,
    fingerprint="stream",
    stream=_stream,
    execution_only=("reason",),
    rows=(
        FingerprintRow(
            "transform", "stream", "source, name, `accepts_rng`, label: what a sample becomes"
        ),
    ),
)
