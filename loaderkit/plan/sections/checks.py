"""The ``[checks]`` section: the batch contract of ``with_checks``."""

from __future__ import annotations

from typing import Any

import attrs

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import ChecksSpec, ClassCheck

__all__ = ["SECTION", "checks_to_dict"]


def _class_to_dict(check: ClassCheck) -> int | dict[str, int]:
    if check.one_hot:
        return {"one_hot": check.n}
    if check.ignore_index is None:
        return check.n
    return {"n": check.n, "ignore_index": check.ignore_index}


def checks_to_dict(spec: ChecksSpec) -> dict[str, Any]:
    """The ``[checks]`` table of a plan file: the arguments ``with_checks`` takes back."""
    out: dict[str, Any] = {}
    if spec.keys:
        out["keys"] = list(spec.keys)
    if spec.dtypes:
        out["dtypes"] = dict(spec.dtypes)
    if spec.shapes:
        out["shapes"] = {key: list(dims) for key, dims in spec.shapes}
    if spec.finite:
        out["finite"] = list(spec.finite)
    if spec.ranges:
        out["ranges"] = {
            key: {name: v for name, v in (("low", low), ("high", high)) if v is not None}
            for key, low, high in spec.ranges
        }
    if spec.label_pad is not None:
        out["label_pad"] = attrs.asdict(spec.label_pad)
    if spec.classes:
        out["classes"] = {check.key: _class_to_dict(check) for check in spec.classes}
    if spec.every is not None:
        out["every"] = spec.every
    return out


SECTION: Section[ChecksSpec] = Section(
    name="checks",
    key="checks",
    to_dict=checks_to_dict,
    fingerprint="exec",
    rows=(
        FingerprintRow(
            "`checks`",
            "exec",
            "the batch contract of `with_checks` reads batches, never changes them",
        ),
    ),
)
