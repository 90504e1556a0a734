"""The callables a plan names, made live from its registries and bindings.

In the plan layer so that ``plan.explain()`` can look at a transform the way ``build()``
uses it (the image sources say how they decode for it); the runtime imports it from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loaderkit.collators import collators
from loaderkit.errors import PlanError
from loaderkit.transforms import transforms

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import CallableSpec

__all__ = ["resolve_callable"]


def resolve_callable(plan: LoaderPlan, spec: CallableSpec, kind: str) -> Callable[..., Any]:
    """The callable ``spec`` names: a registry entry, or the object bound to its name.

    ``kind`` is the plan path reported when a bound object is not callable.
    """
    if spec.source == "registry":
        if kind == "collator":
            collate: Callable[..., Any] = collators.get(spec.name).factory(**dict(spec.options))
            return collate
        return transforms.get(spec.name).factory
    assert plan.bindings is not None
    obj = plan.bindings[spec.name]
    if not callable(obj):
        raise PlanError.single(kind, f"the object bound to {spec.name!r} is not callable ({obj!r})")
    return obj
