"""The callables a plan names (collator, transform, schedule functions), made live at build."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torch.utils.data import default_convert

from loaderkit.plan.callables import resolve_callable

if TYPE_CHECKING:
    import torch

    from loaderkit.plan.plan import LoaderPlan

__all__ = ["convert_sample", "plan_collate"]


def convert_sample(samples: Sequence[Any]) -> Any:
    """The one sample of ``samples`` as torch's ``DataLoader(batch_size=None)`` delivers it.

    Converted by ``torch.utils.data.default_convert`` (numpy arrays and numbers to tensors,
    containers walked, Python numbers kept), with no batch dimension: what a plan without
    batching (``with_batch_size(None)``) makes of each one-sample step.
    """
    (sample,) = samples
    return default_convert(sample)  # type: ignore[no-untyped-call]  # torch leaves it untyped


def plan_collate(plan: LoaderPlan, device: torch.device) -> Callable[..., Any]:
    """What makes a delivered batch of ``plan``'s samples: its collator, made live.

    A plan without batching (``plan.batch.batched`` is False) converts its one sample per
    step instead (:func:`convert_sample`); its collator is the default one, by the rules.
    A collator with a ``for_device`` method (:meth:`Collator.for_device
    <loaderkit.collators.base.Collator.for_device>`) is set up for ``device``, the device the
    loader delivers to, before any worker gets it.
    """
    if not plan.batch.batched:
        return convert_sample
    collate = resolve_callable(plan, plan.collator, "collator")
    for_device = getattr(collate, "for_device", None)
    if callable(for_device):
        made: Callable[..., Any] = for_device(device)
        return made
    return collate
