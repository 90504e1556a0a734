"""The ``[workers]`` section: worker processes, prefetching, pinning."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import WorkersSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["SECTION", "workers_to_dict"]

_KEYS = ("num_workers", "prefetch_factor", "persistent", "pin_memory", "start_method", "timeout")


def workers_to_dict(spec: WorkersSpec) -> dict[str, Any]:
    """The ``[workers]`` table of a plan file; ``None`` (automatic) settings are left out."""
    return {key: getattr(spec, key) for key in _KEYS if getattr(spec, key) is not None}


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.dataset.iterable:  # streamed data is split between workers: order depends on it
        return {"workers": {"num_workers": plan.workers.num_workers}}
    return {}


SECTION: Section[WorkersSpec] = Section(
    name="workers",
    key="workers",
    to_dict=workers_to_dict,
    fingerprint="both",
    stream=_stream,
    execution_only=_KEYS[1:],
    rows=(
        FingerprintRow(
            "`workers.num_workers`",
            "both",
            "execution for map-style data (order is worker-invariant); stream for iterable "
            "data, whose order depends on it",
        ),
        FingerprintRow(
            "`workers.*` (the rest)",
            "exec",
            "`prefetch_factor`, `persistent`, `pin_memory`, `start_method`, `timeout`",
        ),
    ),
)
