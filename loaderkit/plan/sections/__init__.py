"""The plan sections, declared once each: the registry the generic walkers read.

Each module of this package declares one section of a plan (a
:class:`~loaderkit.plan.sections.base.Section`); :data:`SECTIONS` lists them in the order a
plan file writes them. A new section is a new module and one line here.
"""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections import (
    batch,
    bucketing,
    cache,
    checks,
    collator,
    curriculum,
    dataset,
    device,
    distributed,
    error_policy,
    max_length,
    mixture,
    order,
    preset,
    sampling_weights,
    split,
    transform,
    workers,
)
from loaderkit.plan.sections.base import FingerprintRow, Section

__all__ = ["FILE_KEYS", "SECTIONS", "FingerprintRow", "Section", "fingerprint_table"]

SECTIONS: tuple[Section[Any], ...] = (
    dataset.SECTION,
    batch.SECTION,
    order.SECTION,
    collator.SECTION,
    workers.SECTION,
    device.SECTION,
    distributed.SECTION,
    transform.SECTION,
    bucketing.SECTION,
    sampling_weights.SECTION,
    curriculum.SECTION,
    mixture.SECTION,
    max_length.SECTION,
    checks.SECTION,
    split.SECTION,
    error_policy.SECTION,
    cache.SECTION,
    preset.SECTION,
)
"""Every plan section, in the order a plan file writes them."""

FILE_KEYS: tuple[str, ...] = ("schema_version", *(section.key for section in SECTIONS))
"""The top-level keys of a plan file."""


def fingerprint_table() -> str:
    """The fingerprint table of ``docs/plan-format.md`` (Markdown), made from the declarations.

    ``tests/test_docs.py`` checks that the page holds exactly this table, so the page cannot
    drift from what :func:`~loaderkit.plan.fingerprint.stream_fields` hashes.
    """
    lines = ["| field | kind | why |", "| --- | --- | --- |"]
    lines.extend(
        f"| {row.field} | {row.kind} | {row.why} |" for section in SECTIONS for row in section.rows
    )
    return "\n".join(lines) + "\n"
