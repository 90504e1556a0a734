"""``loaderkit bench PLAN``: throughput and latency per worker count, and where the time goes.

Two measurements, both on the plan's own loader (``plan.build()``), in this process:

1. **Per worker count** (``--workers``; default 0, 1, 2, 4, ... up to the usable CPUs): the plan
   with only ``num_workers`` changed is built and ``--batches`` batches are drawn as fast as
   possible (the loop does nothing with them; on CUDA it synchronizes after each batch so a
   batch counts once it is on the device). The first batch, which pays for starting the workers,
   is reported apart as *first batch*; samples/s and the latency percentiles (the time between
   two consecutive batches reaching the loop) cover the batches after it.
2. **The split** (``0`` workers, so everything runs in this process where it can be timed):
   the loader's source reads (``fetch``; the per-sample transform counts here too), its
   collator calls (``collate``) and the rest of the loop (``other``: batch planning, batch
   checks, bookkeeping) are timed by wrapping those calls with a clock. ``transfer`` is the
   copy of those batches to the plan's device (pinning first when the plan pins), timed apart
   with a synchronize; it is zero on a CPU plan. With the ``default`` collator and no
   transform, sources gather whole columns at once, so ``fetch`` includes the collation.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from loaderkit.cli.app import echo
from loaderkit.cli.demo import progress_bar
from loaderkit.cli.digest import batch_samples
from loaderkit.plan.workers import usable_cpus
from loaderkit.runtime.autotune import endless_batches, with_worker_settings
from loaderkit.runtime.fetch.fetcher import BatchFetcher
from loaderkit.runtime.passes.device import move_to, pin, resolve_device, wants_pinning

if TYPE_CHECKING:
    from loaderkit.plan import LoaderPlan

__all__ = [
    "Split",
    "WorkerResult",
    "default_worker_counts",
    "measure_split",
    "measure_workers",
    "run_bench",
]


@attrs.frozen
class WorkerResult:
    """What drawing batches with one worker count gave."""

    workers: int
    batches: int
    """Batches timed after the first one."""
    samples: int
    """Samples in those batches."""
    seconds: float
    """Time to draw them."""
    first_batch: float
    """Seconds from starting the iteration (and the workers) to the first batch."""
    latencies: tuple[float, ...]
    """Seconds between consecutive batches after the first."""
    unused: str | None = None
    """Why the workers were not started (``Loader.workers_unused``; ``None``: they were)."""

    @property
    def samples_per_second(self) -> float:
        """Samples per second after the first batch."""
        return self.samples / self.seconds if self.seconds > 0 else float("inf")

    def latency(self, percentile: float) -> float:
        """The latency percentile in seconds (``nan`` without timed batches)."""
        if not self.latencies:
            return float("nan")
        return float(np.percentile(np.asarray(self.latencies), percentile))


@attrs.frozen
class Split:
    """Mean seconds per batch spent in each part of making it, in the main process."""

    batches: int
    fetch: float
    collate: float
    other: float
    transfer: float
    device: str
    gathered: bool
    """The source gathered whole columns (the collation happened inside ``fetch``)."""

    @property
    def separable(self) -> bool:
        """Whether fetch and collate were timed apart.

        A streamed source's loader makes batches in its own pipeline: then ``fetch`` and
        ``collate`` are ``nan`` and ``other`` holds their time.
        """
        return self.fetch == self.fetch

    @property
    def total(self) -> float:
        """Mean seconds per batch, all parts together."""
        parts = (self.fetch, self.collate) if self.separable else ()
        return sum(parts) + self.other + self.transfer


class _Clock:
    """Adds up the time spent in wrapped calls; nested calls count once."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with its calls timed."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self._depth -= 1

        return timed


class _TimedCollator:
    """A collator whose calls are timed; other attributes are the collator's own."""

    def __init__(self, collate: Any, clock: _Clock) -> None:
        self._collate = collate
        self._clock = clock
        self._call = clock.wrap(collate)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def with_max_length(self, max_length: int) -> _TimedCollator:
        """The collator cutting to ``max_length``, still timed."""
        return _TimedCollator(self._collate.with_max_length(max_length), self._clock)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collate, name)


def _variant(plan: LoaderPlan, workers: int, device: str | None = None) -> LoaderPlan:
    """``plan`` with ``workers`` worker processes (its other worker settings kept)."""
    variant = with_worker_settings(plan, workers, plan.workers.prefetch_factor)
    return variant if device is None else attrs.evolve(variant, device=device)


def measure_workers(
    plan: LoaderPlan, workers: int, batches: int, advance: Callable[[], None] = lambda: None
) -> WorkerResult:
    """Draw ``batches`` batches from ``plan`` built with ``workers`` workers; time them."""
    variant = _variant(plan, workers)
    with variant.build() as loader:
        unused = loader.workers_unused
        sync = loader.device.type == "cuda"
        samples = 0
        latencies: list[float] = []
        first = 0.0
        started = time.perf_counter()
        last = started
        for i, batch in enumerate(endless_batches(loader)):
            if sync:
                torch.cuda.synchronize(loader.device)
            now = time.perf_counter()
            if i == 0:
                first = now - started
            else:
                latencies.append(now - last)
                samples += batch_samples(batch)
            last = now
            advance()
            if i + 1 >= batches:
                break
    return WorkerResult(
        workers, len(latencies), samples, float(sum(latencies)), first, tuple(latencies), unused
    )


def measure_split(
    plan: LoaderPlan, batches: int, advance: Callable[[], None] = lambda: None
) -> Split:
    """Mean time per batch in fetch, collate, other and transfer (see the module docstring)."""
    device = resolve_device(plan.device)
    variant = _variant(plan, 0, device="cpu")
    fetch, collate = _Clock(), _Clock()
    host: list[Any] = []
    with variant.build() as loader:
        # the object that turns batch requests into batches (a streamed source has none)
        fetcher = getattr(loader, "_fetcher", None)
        separable = isinstance(fetcher, BatchFetcher)
        gathered = False
        if isinstance(fetcher, BatchFetcher):
            source = fetcher.source
            for name in ("sample", "samples", "default_batch"):
                setattr(source, name, fetch.wrap(getattr(source, name)))
            if fetcher.step is not None:
                fetcher.step.transform = fetch.wrap(fetcher.step.transform)
            fetcher.collate = _TimedCollator(fetcher.collate, collate)
            gathered = fetcher.fast
        started = time.perf_counter()
        for batch in endless_batches(loader):
            host.append(batch)
            advance()
            if len(host) >= batches:
                break
        total = time.perf_counter() - started
    transfer = 0.0
    if device.type != "cpu":
        pinning = wants_pinning(plan.workers.pin_memory, device)
        started = time.perf_counter()
        for batch in host:
            move_to(pin(batch) if pinning else batch, device, non_blocking=pinning)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        transfer = time.perf_counter() - started
    n = max(len(host), 1)
    other = max(total - fetch.seconds - collate.seconds, 0.0)
    unknown = float("nan")
    return Split(
        len(host),
        fetch.seconds / n if separable else unknown,
        collate.seconds / n if separable else unknown,
        other / n,
        transfer / n,
        str(device),
        gathered,
    )


def _ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1e3:,.2f} ms"  # nan: nothing timed


def results_table(results: list[WorkerResult]) -> Table:
    """One row per worker count: samples/s, latency p50 and p99, first batch."""
    table = Table(title="per worker count", title_justify="left")
    table.add_column("workers", justify="right")
    table.add_column("samples/s", justify="right")
    table.add_column("p50 latency", justify="right")
    table.add_column("p99 latency", justify="right")
    table.add_column("first batch", justify="right")
    unused = next((r.unused for r in results if r.unused is not None), None)
    if unused is not None:  # the same source for every count: one note says it
        table.caption = f"* {unused}"
        table.caption_justify = "left"
    for r in results:
        table.add_row(
            f"{r.workers}*" if r.unused is not None else str(r.workers),
            f"{r.samples_per_second:,.0f}",
            _ms(r.latency(50)),
            _ms(r.latency(99)),
            _ms(r.first_batch),
        )
    return table


def split_table(split: Split) -> Table:
    """Mean time per batch in each part, and its share."""
    table = Table(
        title=f"time per batch, 0 workers, in this process ({split.batches} batches)",
        title_justify="left",
    )
    table.add_column("part")
    table.add_column("per batch", justify="right")
    table.add_column("share", justify="right")
    table.add_column("what")
    total = split.total or 1.0
    fetch_what = "source reads and transform"
    if split.gathered:
        fetch_what += " (columns gathered: collation included)"
    transfer_what = (
        "none: the plan delivers on the CPU"
        if split.device == "cpu"
        else f"pin and copy to {split.device}, synchronized"
    )
    other_what = "batch planning, checks, the loop"
    if not split.separable:
        fetch_what = collate_what = "counted in other"
        other_what = "the whole batch: a stream makes it in one pipeline"
    else:
        collate_what = "the collator"
    rows = [
        ("fetch", split.fetch, fetch_what),
        ("collate", split.collate, collate_what),
        ("other", split.other, other_what),
        ("transfer", split.transfer, transfer_what),
    ]
    for name, seconds, what in rows:
        share = "-" if seconds != seconds else f"{seconds / total:.0%}"
        table.add_row(name, _ms(seconds), share, what)
    return table


def default_worker_counts(cpus: int | None = None) -> tuple[int, ...]:
    """``0`` and the powers of two up to ``cpus`` (default: the CPUs this process may use).

    More workers than CPUs only measures contention, so the default stops there (2 CPUs:
    ``(0, 1, 2)``; 6 CPUs: ``(0, 1, 2, 4)``); ask for more with ``--workers``.
    """
    if cpus is None:
        cpus = usable_cpus()[0]
    counts, n = [0], 1
    while n <= cpus:
        counts.append(n)
        n *= 2
    return tuple(counts)


def run_bench(plan: LoaderPlan, *, batches: int, worker_counts: tuple[int, ...]) -> None:
    """Run ``loaderkit bench``: time each worker count, split the time, name the fastest."""
    console = Console()
    results: list[WorkerResult] = []
    cpus = usable_cpus()[0]
    over = [n for n in worker_counts if n > cpus]
    if over:  # said once here, instead of torch's warning twice per loader
        echo(
            f"note: {', '.join(map(str, over))} workers is more than the {cpus} "
            f"CPU{'' if cpus == 1 else 's'} this process may use; those rows measure contention",
            err=True,
        )
    with warnings.catch_warnings(), progress_bar(Console(stderr=True)) as progress:
        warnings.filterwarnings(
            "ignore", message="This DataLoader will create", category=UserWarning
        )
        for workers in worker_counts:
            label = f"{workers} worker" + ("" if workers == 1 else "s")
            task = progress.add_task(label, total=batches, status="")
            results.append(measure_workers(plan, workers, batches, _advance(progress, task)))
        task = progress.add_task("fetch/collate split", total=batches, status="")
        split = measure_split(plan, batches, _advance(progress, task))
    echo(
        f"bench: {plan.dataset.binding!r}, {batches} batches per worker count, device "
        f"{split.device}, fingerprint {plan.fingerprint[:12]}"
    )
    console.print(results_table(results))
    console.print(split_table(split))
    best = max(results, key=lambda r: r.samples_per_second)
    noun = "worker" if best.workers == 1 else "workers"
    line = f"fastest: {best.workers} {noun}, {best.samples_per_second:,.0f} samples/s"
    baseline = next((r for r in results if r.workers == 0), None)
    if baseline is not None and best is not baseline and baseline.samples_per_second > 0:
        line += f" ({best.samples_per_second / baseline.samples_per_second:.1f}x 0 workers)"
    echo(line)


def _advance(progress: Progress, task: Any) -> Callable[[], None]:
    return lambda: progress.advance(task)
