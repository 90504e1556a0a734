"""The ``[preset]`` section: which ``loaderkit.presets`` entry made the plan (display only)."""

from __future__ import annotations

from typing import Any

from loaderkit._checks import thaw_value
from loaderkit.plan.preset import PresetSpec
from loaderkit.plan.sections.base import FingerprintRow, Section

__all__ = ["SECTION", "preset_to_dict"]


def preset_to_dict(spec: PresetSpec) -> dict[str, Any]:
    """The ``[preset]`` table of a plan file: information only, never called on load."""
    return {"name": spec.name, "options": thaw_value(spec.options)}


SECTION: Section[PresetSpec] = Section(
    name="preset",
    key="preset",
    to_dict=preset_to_dict,
    fingerprint="info",
    rows=(
        FingerprintRow(
            "`preset`",
            "info",
            "which [preset](presets.md) made the plan: neither compared nor hashed",
        ),
    ),
)
