"""The ``[split]`` section: train / val / test parts of the dataset."""

from __future__ import annotations

from typing import Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import SplitSpec

__all__ = ["SECTION", "split_to_dict"]


def split_to_dict(spec: SplitSpec) -> dict[str, Any]:
    """The ``[split]`` table of a plan file (also what the fingerprint hashes).

    Sizes keep their type: a float is a fraction, an int a number of samples.
    """
    out: dict[str, Any] = {"val": spec.val, "test": spec.test}
    if spec.seed is not None:
        out["seed"] = spec.seed
    if spec.stratify_by is not None:
        out["stratify_by"] = spec.stratify_by
    return out


SECTION: Section[SplitSpec] = Section(
    name="split",
    key="split",
    to_dict=split_to_dict,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`split`",
            "stream",
            "`val`, `test`, `seed`, `stratify_by`: which samples each part holds (the part a "
            'loader reads is in its state: `"split"`)',
        ),
    ),
)
