"""The ``[collator]`` section: what makes a batch of samples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loaderkit._checks import thaw_value
from loaderkit.errors import Problem
from loaderkit.plan.fields import collator_spec, resolve_auto
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import callable_to_dict
from loaderkit.plan.specs import DEFAULT_COLLATOR, CallableSpec, DatasetSpec
from loaderkit.registry import PluginNotImportedError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "collator_to_dict", "read_collator"]


def collator_to_dict(spec: CallableSpec) -> dict[str, Any]:
    """The ``[collator]`` table of a plan file."""
    return callable_to_dict(spec, with_options=True)


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    spec = plan.collator
    return {
        "collator": {
            "source": spec.source,
            "name": spec.name,
            "options": thaw_value(spec.options),
            "label": spec.label,
        }
    }


def read_collator(reader: Reader, data: Mapping[str, Any]) -> CallableSpec | None:
    """Read the ``[collator]`` table; ``"auto"`` is resolved from the dataset read before."""
    if "collator" not in data:
        return DEFAULT_COLLATOR
    chosen = reader.read_callable(data, "collator", collator_spec)
    dataset: DatasetSpec | None = reader.values.get("dataset")
    if chosen is None or dataset is None:
        return chosen
    try:
        resolved: CallableSpec | None = reader.attempt(lambda: resolve_auto(chosen, dataset))
    except PluginNotImportedError as exc:  # inspecting: 'auto' would import plugins
        reader.problems.append(
            Problem(
                "collator",
                f"'auto' cannot be resolved without importing plugins ({exc}); name the "
                f"collator, or load the plan to build",
            )
        )
        return chosen
    return resolved


SECTION: Section[CallableSpec] = Section(
    name="collator",
    key="collator",
    read=read_collator,
    to_dict=collator_to_dict,
    fingerprint="stream",
    stream=_stream,
    execution_only=("reason",),
    rows=(
        FingerprintRow(
            "collator", "stream", "source, name, options, label: what a batch is made of"
        ),
    ),
)
