"""How a plan's collator pads a batch: the rule a token budget is measured with.

The collator declares its rule once (``padded_length()``, a
:class:`~loaderkit.order.padding.PaddedLength` or :class:`~loaderkit.order.padding.PackedRows`);
the batch planner, the compile-time rules, the fingerprint and ``explain()`` all read it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaderkit.errors import PlanError
from loaderkit.order.padding import NO_PADDING, BatchPadding, PackedRows, PaddedLength

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import CallableSpec

__all__ = ["bucket_padding", "registry_padding"]


def registry_padding(spec: CallableSpec) -> BatchPadding | None:
    """The padding rule a registry collator declares (``padded_length()``), from its options.

    ``None`` for collators given as callables (their rule is read from the object at build)
    and for names the plan did not resolve. Pure: the constructors import no torch.
    """
    from loaderkit.collators import collators

    if spec.source != "registry" or spec.name not in collators:
        return None
    collator = collators.get(spec.name).factory(**dict(spec.options))
    return _declared(collator, spec.name)


def _declared(collator: object, name: str) -> BatchPadding:
    declared = getattr(collator, "padded_length", None)
    if not callable(declared):
        return NO_PADDING
    rule = declared()
    if rule is None:
        return NO_PADDING
    if not isinstance(rule, PaddedLength | PackedRows):
        raise PlanError.single(
            "collator",
            f"{name}.padded_length() must return a loaderkit.order.padding.PaddedLength or "
            f"PackedRows (got {type(rule).__name__} {rule!r}); return one, or None for rows "
            f"padded to the longest sample",
        )
    return rule


def bucket_padding(plan: LoaderPlan) -> BatchPadding | None:
    """How the plan's collator pads a batch, for a token budget (``None``: no budget).

    A registry collator's rule comes from its options, a bound collator's from the object's
    ``padded_length()`` (when the plan is bound); without one, rows are padded to the longest
    sample of the batch.
    """
    if plan.bucketing is None or plan.bucketing.max_tokens is None:
        return None
    spec = plan.collator
    if spec.source == "registry":
        return registry_padding(spec) or NO_PADDING
    bound = None if plan.bindings is None else plan.bindings.get(spec.name)
    return NO_PADDING if bound is None else _declared(bound, spec.name)
