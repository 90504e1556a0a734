"""The ``[workers]`` section: worker processes, prefetching, pinning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loaderkit.plan.fields import workers_spec
from loaderkit.plan.sections.base import FingerprintRow, Section
from loaderkit.plan.specs import WorkersSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader

__all__ = ["SECTION", "read_workers", "workers_to_dict"]

_KEYS = ("num_workers", "prefetch_factor", "persistent", "pin_memory", "start_method", "timeout")


def workers_to_dict(spec: WorkersSpec) -> dict[str, Any]:
    """The ``[workers]`` table of a plan file; ``None`` (automatic) settings are left out."""
    return {key: getattr(spec, key) for key in _KEYS if getattr(spec, key) is not None}


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.dataset.iterable:  # streamed data is split between workers: order depends on it
        return {"workers": {"num_workers": plan.workers.num_workers}}
    return {}


def read_workers(reader: Reader, data: Mapping[str, Any]) -> WorkersSpec | None:
    """Read the ``[workers]`` table: the arguments of ``with_workers``."""
    sec = reader.section(data, "workers", _KEYS)
    if not sec:
        return None
    spec: WorkersSpec | None = reader.attempt(
        lambda: workers_spec(sec.get("num_workers", 0), **{key: sec.get(key) for key in _KEYS[1:]})
    )
    return spec


SECTION: Section[WorkersSpec] = Section(
    name="workers",
    key="workers",
    read=read_workers,
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
