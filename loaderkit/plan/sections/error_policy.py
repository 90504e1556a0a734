"""The ``[error_policy]`` section: what a bad sample does (raise, or skip within budgets)."""

from __future__ import annotations

from typing import Any

import attrs

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import ErrorPolicySpec

__all__ = ["ERROR_POLICY_KEYS", "SECTION", "error_policy_options", "error_policy_to_dict"]

ERROR_POLICY_KEYS = tuple(field.name for field in attrs.fields(ErrorPolicySpec))
"""The keys of the ``[error_policy]`` table: the fields of :class:`ErrorPolicySpec`."""


def error_policy_options(spec: ErrorPolicySpec) -> dict[str, Any]:
    """The options of ``spec`` (its fields after ``policy``) that differ from their default.

    The plan file's table, the fingerprint and the builder's repr all list these, so a new
    option of ``with_error_policy`` is one field of :class:`ErrorPolicySpec`.
    """
    return {
        field.name: getattr(spec, field.name)
        for field in attrs.fields(ErrorPolicySpec)[1:]
        if getattr(spec, field.name) != field.default
    }


def error_policy_to_dict(spec: ErrorPolicySpec) -> dict[str, Any]:
    """The ``[error_policy]`` table of a plan file (also what the fingerprint hashes)."""
    return {"policy": spec.policy, **error_policy_options(spec)}


def _skips(spec: ErrorPolicySpec | None) -> bool:
    """Written (and hashed) unless the default ``"raise"``, which takes no options."""
    return spec is not None and spec != ErrorPolicySpec()


SECTION: Section[ErrorPolicySpec] = Section(
    name="error_policy",
    key="error_policy",
    to_dict=error_policy_to_dict,
    fingerprint="stream",
    written=_skips,
    rows=(
        FingerprintRow(
            "`error_policy`",
            "stream",
            '(only `"skip"`, with its budgets and their scope, `per`) bad samples are dropped',
        ),
    ),
)
