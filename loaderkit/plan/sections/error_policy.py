"""The ``[error_policy]`` section: what a bad sample does (raise, or skip within budgets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import attrs

from loaderkit._validate import check_choice, check_int, check_number
from loaderkit.errors import PlanError
from loaderkit.plan.sections.base import ExplainRows, Section

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "BUDGET_SCOPES",
    "ERROR_POLICIES",
    "ERROR_POLICY_KEYS",
    "SECTION",
    "SKIPPED_RECORDS_KEPT",
    "BudgetScope",
    "ErrorPolicy",
    "ErrorPolicySpec",
    "error_line",
    "error_policy_calls",
    "error_policy_options",
    "error_policy_spec",
    "error_policy_to_dict",
    "read_error_policy",
]

SKIPPED_RECORDS_KEPT = 1_000
"""``loader.skipped`` keeps the records of the last this many dropped samples; the counts in
``loader.skip_counts`` stay exact (a long run with a few bad samples per epoch would
otherwise grow the list without bound)."""

ErrorPolicy = Literal["raise", "skip"]
"""What ``with_error_policy`` does with a sample that fails to load."""
ERROR_POLICIES: tuple[ErrorPolicy, ...] = get_args(ErrorPolicy)

BudgetScope = Literal["epoch", "run"]
"""What the skip budget counts: the samples of the current epoch, or of the whole run."""

BUDGET_SCOPES: tuple[BudgetScope, ...] = get_args(BudgetScope)


@attrs.frozen
class ErrorPolicySpec:
    """What a sample that fails to load or transform does (see ``with_error_policy``).

    ``"raise"`` stops with a :class:`~loaderkit.DataError`; ``"skip"`` drops the sample,
    records it, and raises once ``max_errors`` samples or a ``max_error_rate`` share of the
    samples read were dropped (``None``: no limit), counted ``per`` epoch (from 0 again at
    each epoch) or per run (every epoch read, resumes included).

    The fields after ``policy`` are its options: the builder's keyword arguments, the keys of
    the ``[error_policy]`` table and the builder's repr are all read from this declaration.
    """

    policy: str = "raise"
    max_errors: int | None = None
    max_error_rate: float | None = None
    per: BudgetScope = "epoch"


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


def read_error_policy(reader: Reader, data: Mapping[str, Any]) -> ErrorPolicySpec | None:
    """Read the ``[error_policy]`` table: the keyword arguments of ``with_error_policy``."""
    sec = reader.section(data, "error_policy", ERROR_POLICY_KEYS)
    if not sec:
        return None
    spec: ErrorPolicySpec | None = reader.attempt(lambda: error_policy_spec(**sec))
    return spec


def error_policy_spec(
    policy: object = "raise",
    *,
    max_errors: object = None,
    max_error_rate: object = None,
    per: object = "epoch",
) -> ErrorPolicySpec:
    """The error policy of ``with_error_policy``."""
    chosen = check_choice("error_policy.policy", policy, ERROR_POLICIES)
    scope = cast("BudgetScope", check_choice("error_policy.per", per, BUDGET_SCOPES))
    count = (
        None
        if max_errors is None
        else check_int(
            "error_policy.max_errors", max_errors, minimum=0, fix="samples that may be skipped"
        )
    )
    rate = None
    if max_error_rate is not None:
        rate = check_number("error_policy.max_error_rate", max_error_rate, minimum=0.0)
        if not 0 < rate <= 1:
            raise PlanError.single(
                "error_policy.max_error_rate",
                f"must be in (0, 1], a share of the samples read (got {max_error_rate!r})",
            )
    if chosen == "raise" and (count is not None or rate is not None or scope != "epoch"):
        raise PlanError.single(
            "error_policy",
            "max_errors, max_error_rate and per only apply to policy='skip' (with 'raise' "
            "the first bad sample stops the loader); drop them (.with_error_policy('raise')) or "
            "use 'skip'",
        )
    return ErrorPolicySpec(chosen, count, rate, scope)


def error_line(plan: LoaderPlan) -> str:
    """The ``errors`` line of ``explain()`` (for ``"skip"``): the budget and where skips go."""
    spec = plan.error_policy
    limits = []
    if spec.max_errors is not None:
        limits.append(f"at most {spec.max_errors:,} samples")
    if spec.max_error_rate is not None:
        limits.append(f"at most {spec.max_error_rate:.2%} of the samples read")
    budget = f"{' and '.join(limits)} per {spec.per}" if limits else "no limit"
    return (
        f"skip samples that fail to load or transform ({budget}); each one is counted in "
        f"loader.skip_counts, recorded in loader.skipped (the last "
        f"{SKIPPED_RECORDS_KEPT:,}) and logged"
    )


def error_policy_calls(e: ErrorPolicySpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_error_policy`` call (none at the default)."""
    if e == ErrorPolicySpec():
        return ()
    args = [repr(e.policy)]
    args.extend(f"{key}={value!r}" for key, value in error_policy_options(e).items())
    return (f".with_error_policy({', '.join(args)})",)


def _explain(plan: LoaderPlan) -> ExplainRows:
    """The ``errors`` row of ``explain()``, none under the default policy (``raise``)."""
    return () if plan.error_policy.policy == "raise" else (("errors", error_line(plan)),)


SECTION: Section[ErrorPolicySpec] = Section(
    name="error_policy",
    explain=_explain,
    builder_calls=error_policy_calls,
    read=read_error_policy,
    to_dict=error_policy_to_dict,
    fingerprint="stream",
    written=_skips,
    why='(only `"skip"`, with its budgets and their scope, `per`) bad samples are dropped',
)
