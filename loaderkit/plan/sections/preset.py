"""The ``[preset]`` section: which ``loaderkit.presets`` entry made the plan (display only)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loaderkit._checks import thaw_value
from loaderkit.plan.preset import PresetSpec, preset_spec
from loaderkit.plan.sections.base import FingerprintRow, Section

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "preset_to_dict", "read_preset"]


def preset_to_dict(spec: PresetSpec) -> dict[str, Any]:
    """The ``[preset]`` table of a plan file: information only, never called on load."""
    return {"name": spec.name, "options": thaw_value(spec.options)}


def read_preset(reader: Reader, data: Mapping[str, Any]) -> PresetSpec | None:
    """Read the ``[preset]`` table: a name and options, recorded, never called."""
    if "preset" not in data:
        return None
    sec = reader.section(data, "preset", ("name", "options"))
    spec: PresetSpec | None = reader.attempt(
        lambda: preset_spec(sec.get("name"), sec.get("options"))
    )
    return spec


SECTION: Section[PresetSpec] = Section(
    name="preset",
    key="preset",
    read=read_preset,
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
