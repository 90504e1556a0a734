"""``plan.autotune()``: measure worker settings on this machine and keep the fastest.

Only execution fields change (``workers.num_workers`` and ``workers.prefetch_factor``), so the
tuned plan has the plan's stream fingerprint and yields the same batches; this is checked
before the plan is returned. What it does, within ``budget_s`` seconds of wall time:

1. measure the plan's own settings (the *current* row of the report);
2. sweep ``num_workers`` (default: 0, 1, 2, 4, 8, 16 up to the CPUs of this process's share,
   plus what ``"auto"`` would choose) at a prefetch factor of 2;
3. at the best worker count, try the other ``prefetch_factors`` (default 2 and 4).

Each setting builds a loader, reads ``warmup_batches`` batches (worker start-up, first
fetches; not timed), then times ``batches`` batches in 5 rounds and keeps the median
samples/s of the rounds; its loader is then closed. Every setting gets an equal share of the
budget left when it starts: one that does not finish in its share is recorded with what it
measured (or none) and the next one starts. The fastest setting wins; settings within
``tolerance`` (5 %) of it count as ties, and the one with the fewest workers (then the
smallest prefetch factor) wins the tie: fewer processes, less memory, the same speed.

Not tuned: batched fetch has no setting to tune (a source with ``__getitems__``, tensors,
columns or an HF dataset is always fetched a batch at a time); ``persistent``,
``pin_memory`` and ``start_method`` are kept as the plan has them. For an iterable (streamed)
source ``num_workers`` is a stream field (the order depends on it), so only the prefetch
factor is tuned.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import torch

from loaderkit._validate import check_int, check_number
from loaderkit.errors import PlanError
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.workers import resolve_auto_workers, resolve_workers
from loaderkit.runtime.workers.storage import quiet_copies

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.loader import Loader

__all__ = ["AutotuneReport", "AutotuneResult", "AutotuneTrial", "autotune"]

_LOG = logging.getLogger("loaderkit.autotune")

_SWEEP = (0, 1, 2, 4, 8, 16)
"""The worker counts tried by default (up to the CPUs of this process's share)."""
_ROUNDS = 5
"""Timed rounds per setting; the median of their samples/s is the setting's figure."""
_NOT_BATCHED_KNOB = (
    "batched fetch: no setting to tune (sources with __getitems__, tensors, columns and HF "
    "datasets are always fetched a batch at a time; where each batch is one vectorized gather "
    "and no code of yours runs, no worker is started, whatever num_workers says)"
)


@attrs.frozen
class AutotuneTrial:
    """One setting measured by :func:`autotune`.

    Attributes:
        num_workers: worker processes.
        prefetch_factor: batches prefetched per worker (``None`` with 0 workers).
        samples_per_s: the median samples/s of the timed rounds (``None``: nothing timed).
        batches: batches timed (after the warm-up).
        startup_s: seconds from ``build()`` to the first batch (``None``: no batch came).
        seconds: all the time this setting took (build, warm-up, timing, closing).
        note: ``"current"`` for the plan's own settings, else what cut the measurement
            short (``""`` when nothing did).

    """

    num_workers: int
    prefetch_factor: int | None
    samples_per_s: float | None
    batches: int
    startup_s: float | None
    seconds: float
    note: str = ""

    @property
    def setting(self) -> tuple[int, int | None]:
        """``(num_workers, prefetch_factor)``."""
        return self.num_workers, self.prefetch_factor


@attrs.frozen
class AutotuneReport:
    """What :func:`autotune` tried, what it chose and why it stopped; ``str()`` is a table.

    Attributes:
        trials: every setting tried, in the order tried (the first is the plan's own).
        chosen: the setting the tuned plan has (``None`` when nothing could be timed).
        stopped: why the search ended.
        budget_s: the time budget given.
        elapsed_s: the time the search took.
        not_tuned: what was left as it was, and why.

    """

    trials: tuple[AutotuneTrial, ...]
    chosen: AutotuneTrial | None
    stopped: str
    budget_s: float
    elapsed_s: float
    not_tuned: tuple[str, ...] = ()

    @property
    def current(self) -> AutotuneTrial | None:
        """The plan's own settings, as measured (``None`` if not measured)."""
        first = self.trials[0] if self.trials else None
        return first if first is not None and first.note.startswith("current") else None

    @property
    def speedup(self) -> float | None:
        """Chosen samples/s over current samples/s (``None`` unless both were measured)."""
        now, best = self.current, self.chosen
        if now is None or best is None or not now.samples_per_s or best.samples_per_s is None:
            return None
        return best.samples_per_s / now.samples_per_s

    def __str__(self) -> str:
        base = self.current.samples_per_s if self.current is not None else None
        header = ("num_workers", "prefetch", "samples/s", "vs current", "batches", "startup s")
        rows = []
        for trial in self.trials:
            rate = trial.samples_per_s
            marks = [m for m in (trial.note, "chosen" if trial is self.chosen else "") if m]
            rows.append(
                (
                    str(trial.num_workers),
                    "-" if trial.prefetch_factor is None else str(trial.prefetch_factor),
                    "-" if rate is None else f"{rate:,.0f}",
                    "-" if rate is None or not base else f"{rate / base:.2f}x",
                    str(trial.batches),
                    "-" if trial.startup_s is None else f"{trial.startup_s:.2f}",
                    "; ".join(marks),
                )
            )
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        lines = [
            f"autotune: {len(self.trials)} settings in {self.elapsed_s:.1f} s "
            f"(budget {self.budget_s:g} s); stopped: {self.stopped}",
            "  " + "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
        ]
        for row in rows:
            cells = "  ".join(c.rjust(w) for c, w in zip(row[:-1], widths, strict=True))
            lines.append(f"  {cells}  {row[-1]}".rstrip())
        if self.chosen is None:
            lines.append("chosen: nothing (no setting could be timed); the plan is unchanged")
        else:
            c = self.chosen
            gain = "" if self.speedup is None else f" ({self.speedup:.2f}x the current settings)"
            lines.append(
                f"chosen: num_workers={c.num_workers}, prefetch_factor={c.prefetch_factor}"
                f"{gain}; fingerprint unchanged"
            )
        lines.extend(f"not tuned: {item}" for item in self.not_tuned)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


class AutotuneResult(NamedTuple):
    """What ``plan.autotune()`` returns: ``plan, report = plan.autotune(...)``."""

    plan: LoaderPlan
    """The plan with the fastest settings found (the same fingerprint, the same batches)."""
    report: AutotuneReport
    """Every setting tried with its samples/s, the choice, and why the search stopped."""


def _count_samples(batch: Any, default: int) -> int:
    """The samples in a collated batch: the first dimension of its first tensor, or a length."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else default
    if isinstance(batch, Mapping):
        for value in batch.values():
            return _count_samples(value, default)
        return default
    if isinstance(batch, list | tuple) and batch:
        first = batch[0]
        if isinstance(first, torch.Tensor | Mapping | list | tuple):
            return _count_samples(first, default)
        return len(batch)
    return default


def endless_batches(loader: Loader) -> Iterator[Any]:
    """The loader's batches, epoch after epoch (it ends only if an epoch is empty)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            return


def with_worker_settings(plan: LoaderPlan, num_workers: int, prefetch: int | None) -> LoaderPlan:
    """``plan`` with ``num_workers`` and ``prefetch``; its other worker settings are kept."""
    w = plan.workers
    if num_workers == 0:  # the worker-only settings go (compile() refuses them here)
        spec = WorkersSpec(0, None, False if w.persistent is False else None, w.pin_memory)
    else:
        spec = WorkersSpec(
            num_workers, prefetch, w.persistent, w.pin_memory, w.start_method, w.timeout
        )
    return attrs.evolve(plan, workers=spec)


class _Search:
    def __init__(
        self, plan: LoaderPlan, budget_s: float, warmup: int, batches: int, tolerance: float
    ) -> None:
        self.plan = plan
        self.start = time.perf_counter()
        self.deadline = self.start + budget_s
        self.warmup = warmup
        self.batches = batches
        self.tolerance = tolerance
        self.trials: list[AutotuneTrial] = []
        self.unused: set[tuple[int, int | None]] = set()
        """Settings whose workers were not started (a gathered source): the same reading as
        no workers, so they never win over it on a noisy figure."""

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def tried(self, setting: tuple[int, int | None]) -> bool:
        return any(t.setting == setting for t in self.trials)

    def measure(self, plan: LoaderPlan, setting: tuple[int, int | None], share: float) -> None:
        """Time ``plan`` (which has ``setting``) for at most ``share`` seconds."""
        begin = time.perf_counter()
        stop_at = min(begin + share, self.deadline)
        default = plan.batch.batch_size
        rates: list[float] = []
        timed = 0
        startup: float | None = None
        note = ""
        with quiet_copies():  # the warning is for the loader the user builds
            loader = plan.build()
        unused = setting[0] > 0 and loader.workers_unused is not None
        if unused:
            self.unused.add(setting)
        try:
            stream = endless_batches(loader)
            for i in range(max(self.warmup, 1)):  # at least the first batch: the start-up
                if next(stream, None) is None:
                    note = "the epoch is empty"
                    break
                if i == 0:
                    startup = time.perf_counter() - begin
                if time.perf_counter() > stop_at:
                    note = "its share of the budget was spent in the warm-up"
                    break
            per_round = max(1, math.ceil(self.batches / _ROUNDS))
            while not note and timed < self.batches:
                round_start = time.perf_counter()
                samples = got = 0
                for _ in range(min(per_round, self.batches - timed)):
                    batch = next(stream, None)
                    if batch is None:
                        note = "the epoch is empty"
                        break
                    samples += _count_samples(batch, default)
                    got += 1
                    if time.perf_counter() > stop_at:
                        note = f"its share of the budget ({share:.1f} s) was spent"
                        break
                seconds = time.perf_counter() - round_start
                if got:
                    rates.append(samples / max(seconds, 1e-9))
                    timed += got
        finally:
            loader.close()
        rate = statistics.median(rates) if rates else None
        if unused:
            said = "no worker started: each batch is a vectorized gather, read in the main process"
            note = said if not note else f"{note}; {said}"
        if self.plan is plan:
            note = "current" if not note else f"current; {note}"
        trial = AutotuneTrial(
            setting[0], setting[1], rate, timed, startup, time.perf_counter() - begin, note
        )
        _LOG.info("autotune: %s", trial)
        self.trials.append(trial)

    def best(self) -> AutotuneTrial | None:
        timed = [t for t in self.trials if t.samples_per_s is not None]
        started = [t for t in timed if t.setting not in self.unused]
        timed = started or timed  # the main process's reading is measured as such
        if not timed:
            return None
        top = max(t.samples_per_s or 0.0 for t in timed)
        ties = [t for t in timed if (t.samples_per_s or 0.0) >= top * (1 - self.tolerance)]
        return min(ties, key=lambda t: (t.num_workers, t.prefetch_factor or 0))


def _ints(path: str, values: Sequence[int], minimum: int) -> tuple[int, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise PlanError.single(
            path, f"must be a non-empty sequence of ints >= {minimum} (got {values!r})"
        )
    return tuple(
        sorted({check_int(f"{path}[{i}]", v, minimum=minimum) for i, v in enumerate(values)})
    )


def autotune(
    plan: LoaderPlan,
    budget_s: float = 30.0,
    *,
    num_workers: Sequence[int] | None = None,
    prefetch_factors: Sequence[int] = (2, 4),
    warmup_batches: int = 2,
    batches: int = 20,
    tolerance: float = 0.05,
) -> AutotuneResult:
    """Measure worker settings of ``plan`` on this machine; return the fastest as a plan.

    Args:
        plan: a bound plan (it builds loaders).
        budget_s: seconds of wall time for the whole search (every build, warm-up, timing and
            shutdown included); the search stops when they are spent.
        num_workers: worker counts to try (default: 0, 1, 2, 4, 8, 16 up to the CPUs of this
            process's share, and what ``"auto"`` chooses). Ignored for a streamed source.
        prefetch_factors: prefetch factors to try at the best worker count.
        warmup_batches: batches read before timing each setting.
        batches: batches timed per setting (in 5 rounds; the median round counts).
        tolerance: settings this close to the fastest are ties, won by fewer workers.

    Returns:
        ``AutotuneResult(plan, report)``: the tuned plan (its fingerprint is the plan's) and
        the :class:`AutotuneReport` (``print(report)`` shows a table).

    Raises:
        PlanError: an argument is invalid, or the plan is unbound.

    """
    budget = check_number("autotune.budget_s", budget_s, fix="give seconds > 0")
    if budget <= 0:
        raise PlanError.single("autotune.budget_s", f"must be > 0 seconds (got {budget_s!r})")
    warmup = check_int("autotune.warmup_batches", warmup_batches, minimum=0)
    timed = check_int("autotune.batches", batches, minimum=1)
    tol = check_number("autotune.tolerance", tolerance, minimum=0.0)
    prefetches = _ints("autotune.prefetch_factors", prefetch_factors, 1)
    if plan.bindings is None:
        raise PlanError.single(
            "bindings",
            "autotune builds loaders, and this plan was loaded without its live objects; load "
            "it again with bindings={...}",
        )
    current = resolve_workers(plan.workers)
    not_tuned = [_NOT_BATCHED_KNOB, "persistent, pin_memory, start_method: kept as the plan has"]
    if plan.dataset.iterable:
        counts: tuple[int, ...] = (current.num_workers,)
        not_tuned.append(
            f"num_workers: kept at {current.num_workers}, since the order of the streamed "
            f"dataset {plan.dataset.binding!r} depends on it"
        )
    elif num_workers is not None:
        counts = _ints("autotune.num_workers", num_workers, 0)
    else:
        auto = resolve_auto_workers()
        limit = min(auto.share, _SWEEP[-1])
        counts = tuple(sorted({n for n in _SWEEP if n <= limit} | {auto.num_workers}))

    search = _Search(plan, budget, warmup, timed, tol)
    here = current.num_workers, (current.prefetch_factor or 2) if current.num_workers else None
    planned = [(n, 2 if n else None) for n in counts if (n, 2 if n else None) != here]
    search.measure(plan, here, search.left() / (1 + len(planned) + len(prefetches)))

    def sweep(settings: list[tuple[int, int | None]], later: int) -> str:
        """Measure ``settings`` (``later`` more may follow them); why it stopped, or ``""``."""
        for i, setting in enumerate(settings):
            if search.tried(setting):
                continue
            left = search.left()
            if left <= 0:
                return f"the budget was spent with {len(settings) - i} settings left to try"
            try:
                variant = with_worker_settings(plan, *setting)
            except PlanError as exc:  # e.g. a collator that cannot go to spawned workers
                search.trials.append(AutotuneTrial(*setting, None, 0, None, 0.0, f"refused: {exc}"))
                continue
            search.measure(variant, setting, left / (len(settings) - i + later))
        return ""

    stopped = sweep(planned, len(prefetches))
    best = search.best()
    if not stopped and best is not None and best.num_workers > 0:
        stopped = sweep([(best.num_workers, p) for p in prefetches], 0)
    if not stopped:
        short = sum("budget" in t.note for t in search.trials)
        stopped = (
            "every setting was measured"
            if not short
            else f"every setting was tried, {short} of {len(search.trials)} cut short by their "
            f"share of the budget (a larger budget_s gives steadier figures)"
        )
    chosen = search.best()
    tuned = plan
    if chosen is not None and chosen.setting != here:
        tuned = with_worker_settings(plan, *chosen.setting)
    if tuned.fingerprint != plan.fingerprint:  # an invariant, checked even under python -O
        raise AssertionError(
            f"autotune changed the stream fingerprint ({plan.fingerprint[:12]} -> "
            f"{tuned.fingerprint[:12]}); report this as a loaderkit bug"
        )
    report = AutotuneReport(
        tuple(search.trials),
        chosen,
        stopped,
        budget,
        time.perf_counter() - search.start,
        tuple(not_tuned),
    )
    return AutotuneResult(tuned, report)
