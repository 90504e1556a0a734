"""The ``[workers]`` section: worker processes, prefetching, pinning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._limits import LIMITS
from loaderkit._validate import check_choice, check_int, check_number, check_optional_bool
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.sections.base import (
    FingerprintRow,
    RuleContext,
    Section,
    explain_row,
    fields_table,
)
from loaderkit.plan.workers import num_workers_value, resolve_auto_workers, resolve_workers

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "SECTION",
    "START_METHODS",
    "StartMethod",
    "WorkersSpec",
    "read_workers",
    "workers_calls",
    "workers_line",
    "workers_spec",
    "workers_to_dict",
]


@attrs.frozen
class WorkersSpec:
    """Worker processes and host-side execution settings; ``None`` means automatic.

    ``num_workers`` is an int, or ``"auto"``: resolved by the machine that builds the loader
    (see :mod:`loaderkit.plan.workers`).
    """

    num_workers: int | Literal["auto"] = 0
    prefetch_factor: int | None = None
    persistent: bool | None = None
    pin_memory: bool | None = None
    start_method: str | None = None
    timeout: float | None = None


StartMethod = Literal["fork", "spawn", "forkserver"]
"""A multiprocessing start method for workers (``with_workers(start_method=...)``)."""
START_METHODS: tuple[StartMethod, ...] = get_args(StartMethod)


def workers_spec(
    num_workers: object,
    *,
    prefetch_factor: object = None,
    persistent: object = None,
    pin_memory: object = None,
    start_method: object = None,
    timeout: object = None,
) -> WorkersSpec:
    """Worker count (an int or ``"auto"``) and execution settings; ``None`` means automatic."""
    count = num_workers_value(num_workers)
    prefetch = (
        None
        if prefetch_factor is None
        else check_int(
            "workers.prefetch_factor",
            prefetch_factor,
            minimum=1,
            maximum=LIMITS.prefetch_factor,
            fix="it counts batches prefetched per worker",
        )
    )
    if (
        isinstance(count, int)
        and prefetch is not None
        and count * prefetch > (LIMITS.batches_in_flight)
    ):
        raise PlanError.single(
            "workers.prefetch_factor",
            f"{count} workers x prefetch_factor {prefetch} = {count * prefetch:,} batches in "
            f"flight, more than the bound of {LIMITS.batches_in_flight:,}; lower one of them",
        )
    method = (
        None
        if start_method is None
        else check_choice("workers.start_method", start_method, START_METHODS)
    )
    wait = (
        None
        if timeout is None
        else check_number(
            "workers.timeout",
            timeout,
            minimum=0.0,
            maximum=LIMITS.timeout_seconds,
            fix="give seconds to wait for a batch, or None for no limit",
        )
    )
    return WorkersSpec(
        count,
        prefetch,
        check_optional_bool("workers.persistent", persistent),
        check_optional_bool("workers.pin_memory", pin_memory),
        method,
        wait,
    )


_KEYS = ("num_workers", "prefetch_factor", "persistent", "pin_memory", "start_method", "timeout")


workers_to_dict = fields_table((), _KEYS)
"""The ``[workers]`` table of a plan file; ``None`` (automatic) settings are left out."""


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


def workers_line(plan: LoaderPlan) -> str:
    """The ``workers`` line of ``explain()``: the settings as this machine resolves them."""
    w = plan.workers
    try:
        r = resolve_workers(w, check_machine=False)  # "auto" as this machine resolves it
    except PlanError as exc:  # a malformed LOCAL_WORLD_SIZE: build() raises it too
        return f"auto, resolved at build; on this machine it cannot be: {exc}"
    if r.auto is not None:
        text = f"{r.reason} (on this machine; build() resolves it where it runs)"
    else:
        text = "0 (load in the main process)" if r.num_workers == 0 else str(r.num_workers)
    if r.num_workers > 0:
        prefetch = f"prefetch {r.prefetch_factor}" if r.prefetch_factor else "prefetch auto (2)"
        persistent = {None: "persistent auto (on)", True: "persistent", False: "not persistent"}[
            r.persistent
        ]
        if plan.dataset.iterable:
            persistent = "started for every pass over the stream"
        start = r.start_method or "platform default start method"
        text = f"{text}, {prefetch}, {persistent}, {start}"
        if r.timeout:
            text += f", timeout {r.timeout:g} s"
    pin = {None: "auto (when delivering to CUDA)", True: "on", False: "off"}[r.pin_memory]
    return f"{text}; pin memory {pin}"


def workers_calls(w: WorkersSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_workers`` call (none at the default)."""
    if w == WorkersSpec():
        return ()
    args = [repr(w.num_workers), *ctx.set_args(w, _KEYS[1:])]
    return (f".with_workers({', '.join(args)})",)


def _no_worker_problems(workers: WorkersSpec) -> list[Problem]:
    """The worker settings given to a plan without workers, and a negative timeout."""
    problems: list[Problem] = []
    if workers.num_workers != 0:
        if workers.timeout is not None and workers.timeout < 0:
            problems.append(Problem("workers.timeout", f"must be >= 0 (got {workers.timeout:g})"))
        return problems
    if workers.prefetch_factor is not None:
        problems.append(
            Problem(
                "workers.prefetch_factor",
                f"must be unset when num_workers == 0 (got {workers.prefetch_factor}); set "
                f"num_workers >= 1, or drop it: .with_workers(0)",
            )
        )
    if workers.persistent:
        problems.append(
            Problem(
                "workers.persistent",
                "must be unset when num_workers == 0 (got True); set num_workers >= 1, or "
                "drop it: .with_workers(0)",
            )
        )
    if workers.start_method is not None:
        problems.append(
            Problem(
                "workers.start_method",
                f"must be unset when num_workers == 0 (got {workers.start_method!r}); set "
                f"num_workers >= 1, or drop it: .with_workers(0)",
            )
        )
    if workers.timeout:
        problems.append(
            Problem(
                "workers.timeout",
                f"only applies to worker processes, and num_workers == 0 (got "
                f"{workers.timeout:g}); set num_workers >= 1, or drop it: .with_workers(0)",
            )
        )
    return problems


def _rules(ctx: RuleContext) -> list[Problem]:
    """The settings that need workers, and ``"auto"`` workers for a stream."""
    workers: WorkersSpec = ctx.sections["workers"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    problems = _no_worker_problems(workers)
    if workers.num_workers == "auto" and dataset is not None and dataset.iterable:
        try:
            here = str(resolve_auto_workers().num_workers)
        except PlanError:  # a malformed LOCAL_WORLD_SIZE: build() reports it
            here = "N"
        problems.append(
            Problem(
                "workers.num_workers",
                f'"auto" is refused for the iterable dataset {dataset.binding!r}: a stream\'s '
                f"order depends on num_workers (it is in the fingerprint), so it must not change "
                f"with the machine that builds; give a number, e.g. with_workers({here}) (what "
                f'"auto" would choose on this machine)',
            )
        )
    return problems


SECTION: Section[WorkersSpec] = Section(
    rules={"workers": _rules},
    name="workers",
    explain=explain_row("workers", workers_line),
    builder_calls=workers_calls,
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
