"""``with_workers("auto")``: how many worker processes this machine gives a loader.

A plan stores ``num_workers = "auto"`` as it is, so a plan file saved on a laptop and loaded
on a 64-core node resolves on the node: :func:`resolve_workers` runs in ``build()`` (and in
``explain()``, to show what it would choose here). The rule, per process:

- ``cpus``: the CPUs this process may run on, ``len(os.sched_getaffinity(0))`` (what
  ``taskset``, cgroups cpusets and SLURM bindings leave it), or ``os.cpu_count()`` where the
  platform has no affinity (macOS, Windows). CPU *quotas* (``docker --cpus``) are not seen;
  give a number in that case.
- ``local_ranks``: the processes of the job on this node (``LOCAL_WORLD_SIZE``, set by
  torchrun), else 1. Each gets an equal share, ``cpus // local_ranks`` (at least 1).
- ``num_workers = min(share - 1, 8)``: one CPU of the share is left to the main process (it
  runs the training step and the batch order), and beyond 8 workers a loader rarely gets
  faster while every worker costs memory (a copy of the dataset's Python objects). A share of
  1 CPU gives 0 workers: loading in the main process beats contending for one CPU.
- with workers, ``prefetch_factor = max(2, ceil(4 / num_workers))`` (at least 4 batches in
  flight: 4 for 1 worker, 2 from 2 workers on) and ``persistent = True``. Values given with
  ``"auto"`` (``with_workers("auto", prefetch_factor=8)``) are kept; when ``"auto"`` comes to 0
  workers the worker-only settings (prefetch factor, persistent, start method, timeout) are
  dropped, since there are no workers to apply them to.

This module is pure (no torch): the plan layer uses it to explain itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sized
from typing import TYPE_CHECKING, Literal

import attrs

from loaderkit._limits import LIMITS
from loaderkit._validate import check_int
from loaderkit.errors import PlanError, PlanTypeError

if TYPE_CHECKING:
    from loaderkit.plan.sections.workers import WorkersSpec

__all__ = [
    "AUTO",
    "AUTO_MAX_WORKERS",
    "AutoWorkers",
    "ResolvedWorkers",
    "check_fits_machine",
    "local_world_size",
    "num_workers_value",
    "resolve_auto_workers",
    "resolve_workers",
    "usable_cpus",
]

AUTO: Literal["auto"] = "auto"
"""The ``num_workers`` value that resolves at build time on the machine that builds."""

AUTO_MAX_WORKERS = 8
"""The most workers ``"auto"`` starts per process."""

_IN_FLIGHT = 4
"""``"auto"`` prefetches enough to keep at least this many batches in flight."""


def num_workers_value(value: object) -> int | Literal["auto"]:
    """Check a ``num_workers`` argument: an int ``>= 0`` or ``"auto"`` (any case)."""
    if isinstance(value, str):
        if value.strip().lower() == AUTO:
            return AUTO
        raise PlanTypeError.single(
            "workers.num_workers",
            f'must be an int >= 0 or "auto" (got {value!r}); give a number of worker '
            f'processes, or "auto" to choose one from the CPUs of the machine that builds',
        )
    return check_int(
        "workers.num_workers",
        value,
        minimum=0,
        maximum=LIMITS.num_workers,
        fix='use 0 to load in the main process, or "auto"',
    )


def usable_cpus(
    affinity: Callable[[int], Sized] | None = None,
    cpu_count: Callable[[], int | None] = os.cpu_count,
) -> tuple[int, str]:
    """The number of CPUs this process may use, and where the number came from.

    ``affinity`` defaults to ``os.sched_getaffinity`` where the platform has it. Returns
    ``(cpus, "affinity")``, or ``(cpus, "cpu_count")`` from the fallback; at least 1.
    """
    getaffinity = affinity if affinity is not None else getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            cpus = len(getaffinity(0))
        except OSError:
            cpus = 0
        if cpus > 0:
            return cpus, "affinity"
    return max(cpu_count() or 1, 1), "cpu_count"


def local_world_size(environ: Mapping[str, str] | None = None) -> int:
    """The processes of this job on this node: ``LOCAL_WORLD_SIZE`` (torchrun), else 1.

    Raises:
        PlanError: ``LOCAL_WORLD_SIZE`` is set but is not an int >= 1.

    """
    env = os.environ if environ is None else environ
    text = env.get("LOCAL_WORLD_SIZE", "").strip()
    if not text:
        return 1
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise PlanError.single(
            "workers.num_workers",
            f'"auto" shares the CPUs between the local ranks, and the environment variable '
            f"LOCAL_WORLD_SIZE is {text!r}, not an int >= 1; unset it or set it to the number "
            f"of processes on this node (torchrun does), or give num_workers as a number",
        )
    return value


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@attrs.frozen
class AutoWorkers:
    """What ``"auto"`` resolved to on this machine, and from what.

    Attributes:
        num_workers: the worker processes chosen.
        prefetch_factor: batches prefetched per worker (``None`` with 0 workers).
        persistent: keep the workers between epochs (``None`` with 0 workers).
        cpus: the CPUs this process may use.
        cpu_source: ``"affinity"`` (``os.sched_getaffinity``) or ``"cpu_count"``.
        local_ranks: the processes sharing this node's CPUs (``LOCAL_WORLD_SIZE``).
        max_workers: the cap applied.

    """

    num_workers: int
    prefetch_factor: int | None
    persistent: bool | None
    cpus: int
    cpu_source: str
    local_ranks: int
    max_workers: int = AUTO_MAX_WORKERS

    @property
    def share(self) -> int:
        """The CPUs of this process's share: ``cpus // local_ranks``, at least 1."""
        return max(self.cpus // self.local_ranks, 1)

    @property
    def reason(self) -> str:
        """One line: ``auto: 2 workers = 3 usable CPUs - 1 for the main process, 1 local rank``.

        With several local ranks: ``... = 16 usable CPUs / 4 local ranks (LOCAL_WORLD_SIZE) - 1
        for the main process``; ``, capped at 8`` when the cap applied.
        """
        workers = _count(self.num_workers, "worker")
        if self.local_ranks == 1:
            base = f"{_count(self.cpus, 'usable CPU')} - 1 for the main process, 1 local rank"
        else:
            base = (
                f"{_count(self.cpus, 'usable CPU')} / {self.local_ranks} local ranks "
                f"(LOCAL_WORLD_SIZE) - 1 for the main process"
            )
        capped = ", capped at " + str(self.max_workers) if self.share - 1 > self.max_workers else ""
        text = f"auto: {workers} = {base}{capped}"
        if self.num_workers == 0:
            text += " (load in the main process)"
        return text


def resolve_auto_workers(
    cpus: int | None = None,
    local_ranks: int | None = None,
    *,
    max_workers: int = AUTO_MAX_WORKERS,
    cpu_source: str | None = None,
) -> AutoWorkers:
    """Resolve ``num_workers="auto"`` for ``cpus`` shared by ``local_ranks`` processes.

    Args:
        cpus: CPUs this process may use; ``None`` asks :func:`usable_cpus`.
        local_ranks: processes sharing them; ``None`` reads :func:`local_world_size`.
        max_workers: the cap (``AUTO_MAX_WORKERS``, 8).
        cpu_source: how ``cpus`` was found, for the reason line (``"given"`` by default when
            ``cpus`` is passed).

    Returns:
        The choice with the numbers it came from; ``.reason`` says it in one line.

    """
    if cpus is None:
        cpus, source = usable_cpus()
    else:
        source = cpu_source or "given"
    if cpus < 1:
        raise PlanError.single("workers.num_workers", f'"auto" needs cpus >= 1 (got {cpus})')
    ranks = local_world_size() if local_ranks is None else local_ranks
    if ranks < 1:
        raise PlanError.single(
            "workers.num_workers", f'"auto" needs local_ranks >= 1 (got {ranks})'
        )
    if max_workers < 0:
        raise PlanError.single(
            "workers.num_workers", f'"auto" needs max_workers >= 0 (got {max_workers})'
        )
    share = max(cpus // ranks, 1)
    count = min(share - 1, max_workers)
    prefetch = max(2, -(-_IN_FLIGHT // count)) if count else None
    return AutoWorkers(
        num_workers=count,
        prefetch_factor=prefetch,
        persistent=True if count else None,
        cpus=cpus,
        cpu_source=source,
        local_ranks=ranks,
        max_workers=max_workers,
    )


@attrs.frozen
class ResolvedWorkers:
    """The worker settings a loader runs with: a :class:`WorkersSpec` with ``"auto"`` resolved.

    ``None`` still means automatic (``prefetch_factor``: torch's 2; ``persistent``: the
    loader's default; ``pin_memory``: by the device). ``auto`` records how ``"auto"`` was
    resolved (``None`` when the plan gave a number).
    """

    num_workers: int
    prefetch_factor: int | None = None
    persistent: bool | None = None
    pin_memory: bool | None = None
    start_method: str | None = None
    timeout: float | None = None
    auto: AutoWorkers | None = None

    @property
    def reason(self) -> str:
        """How ``num_workers`` was chosen: ``"given"`` or the ``"auto: ..."`` line."""
        return "given" if self.auto is None else self.auto.reason


def check_fits_machine(num_workers: int, cpus: int | None = None) -> None:
    """Refuse more worker processes than this machine can hold (``LIMITS.workers_per_cpu``).

    A plan is portable, so its file bound (``LIMITS.num_workers``) is generous; the loader
    is built on one machine, where ``num_workers`` above ``workers_per_cpu`` x the usable
    CPUs would only exhaust its memory and process table. ``cpus`` defaults to
    :func:`usable_cpus`.
    """
    count = usable_cpus()[0] if cpus is None else cpus
    most = LIMITS.workers_per_cpu * count
    if num_workers > most:
        raise PlanError.single(
            "workers.num_workers",
            f"{num_workers} worker processes on a machine with {count} usable CPUs; at most "
            f"{most} ({LIMITS.workers_per_cpu} per CPU) are started: lower num_workers, or "
            f'use with_workers("auto") to choose from the machine that builds',
        )


def resolve_workers(
    spec: WorkersSpec, auto: AutoWorkers | None = None, *, check_machine: bool = True
) -> ResolvedWorkers:
    """The settings ``spec`` means on this machine (``"auto"`` resolved, given values kept).

    ``auto`` is the resolution to use for ``"auto"`` (default: :func:`resolve_auto_workers`
    on this machine); it is ignored when ``spec`` gives a number. A given number is checked
    against the machine (:func:`check_fits_machine`) unless ``check_machine=False`` (a
    description of the plan, not a build).
    """
    if isinstance(spec.num_workers, int):
        if check_machine:
            check_fits_machine(spec.num_workers)
        return ResolvedWorkers(
            spec.num_workers,
            spec.prefetch_factor,
            spec.persistent,
            spec.pin_memory,
            spec.start_method,
            spec.timeout,
        )
    chosen = resolve_auto_workers() if auto is None else auto
    if chosen.num_workers == 0:  # no workers to apply worker settings to
        return ResolvedWorkers(0, pin_memory=spec.pin_memory, auto=chosen)
    return ResolvedWorkers(
        chosen.num_workers,
        chosen.prefetch_factor if spec.prefetch_factor is None else spec.prefetch_factor,
        chosen.persistent if spec.persistent is None else spec.persistent,
        spec.pin_memory,
        spec.start_method,
        spec.timeout,
        auto=chosen,
    )
