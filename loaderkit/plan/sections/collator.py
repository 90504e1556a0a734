"""The ``[collator]`` section: what makes a batch of samples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderkit._checks import thaw_value
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.sections.common import callable_to_dict
from loaderkit.plan.specs import CallableSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["SECTION", "collator_to_dict"]


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


SECTION: Section[CallableSpec] = Section(
    name="collator",
    key="collator",
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
