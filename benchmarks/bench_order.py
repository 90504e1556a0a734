"""Benchmark of the order engine: amortized cost per index, per batch, and from nothing.

Everything goes through the calls the loader makes
(``loaderkit.runtime.planners.plain.PlainPlanner``): one ``EpochOrder`` per epoch, then
``ShardLayout.indices(order, b)`` per batch, which reads the order from chunks of ``CHUNK``
positions computed in bulk and cached in the ``EpochOrder``.

1. Amortized cost at epoch scale, n in {20k, 100k, 200k, 2M}, batch 1024: a whole epoch (build
   the order, then every batch) in ns per index - target <= 20 ns/index at n = 200k, the
   loader's reference workload (its gathers alone take about 8.7 ms per 200k-sample epoch).
   Baseline: ``torch.randperm(n)`` alone, in ns per index.
2. Per-batch cost, batch 64 / 256 / 1024, n in {200k, 2M}: the same epochs in microseconds per
   batch. Baseline for batch 64: one epoch of torch's own sampler,
   ``BatchSampler(RandomSampler(range(n)), 64)`` (one ``randperm`` per epoch, then batches
   of Python ints) - target: loaderkit's order costs no more per epoch.
3. A shuffled epoch of 100,000,000 samples, batch 1024, from nothing (a resume): build the
   order and the layout and read batch 97,000 (one chunk of the order plus the permutation's
   round tables) - targets <= 50 ms and <= 16 MiB peak extra memory (``tracemalloc``, which
   tracks numpy's allocations); batch ``k`` for ``k`` = 0, 1000, 97000 (flat in ``k``); and
   ``batch_indices`` (the pure function, evaluated pointwise, nothing cached).
   Baseline: ``torch.randperm(100_000_000)``, its time and the 763 MiB it holds.

Every figure is a median over timed repeats, baseline and loaderkit interleaved so that a noisy
neighbour on a shared machine hits both alike. Run it as ``python benchmarks/bench_order.py``;
``benchmarks/run.py`` calls :func:`main`, which prints the tables and returns the figures
(``met:<target>`` keys are 1.0 when that target was met, 0.0 when not).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

try:
    from loaderkit.order import EpochOrder, ShardLayout, batch_indices
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import EpochOrder, ShardLayout, batch_indices

N = 100_000_000
BATCH_SIZE = 1024
BATCHES = (0, 1000, 97_000)
EPOCH_NS = (20_000, 100_000, 200_000, 2_000_000)
PER_BATCH_NS = (200_000, 2_000_000)
PER_BATCH_SIZES = (64, 256, 1024)
TARGET_N = 200_000
TARGET_NS_PER_INDEX = 20.0
TARGET_FIRST_BATCH_MS = 50.0
TARGET_MEMORY_MIB = 16.0
MIB = 2.0**20
TARGET_NS_NAME = (
    f"amortized order cost at n={TARGET_N:_}, B=1024 <= {TARGET_NS_PER_INDEX:g} ns/index"
)

Timed = Callable[[int], float]  # fn(i) -> its own timing in seconds


def _time(fn: Callable[[int], object]) -> Timed:
    """Wrap ``fn(i)`` so that it returns its wall time."""

    def run(i: int) -> float:
        start = time.perf_counter()
        fn(i)
        return time.perf_counter() - start

    return run


def _interleaved(fns: dict[str, Timed], repeats: int) -> dict[str, float]:
    """Median seconds of each function over ``repeats`` rounds, after one warm-up round."""
    for fn in fns.values():
        fn(0)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(1, repeats + 1):
        for name, fn in fns.items():
            gc.collect()
            samples[name].append(fn(i))
    return {name: statistics.median(values) for name, values in samples.items()}


def _epoch(n: int, batch_size: int) -> Timed:
    """Time one shuffled epoch through the loader's calls (epoch ``i``: a new order each time)."""
    layout = ShardLayout(n, batch_size)
    batches = len(layout)

    def run(i: int) -> object:
        order = EpochOrder(n, 7, i, True)
        for b in range(batches):
            layout.indices(order, b)
        return order

    return _time(run)


def _resume(k: int) -> Timed:
    """Time the first batch after a resume at batch ``k`` of the 100M epoch (seed varies)."""

    def run(i: int) -> object:
        return ShardLayout(N, BATCH_SIZE).indices(EpochOrder(N, 1000 + i, 0, True), k)

    return _time(run)


def _pointwise(i: int) -> object:
    return batch_indices(
        N, BATCH_SIZE, seed=2000 + i, epoch=0, shuffle=True, drop_last=False, batch_index=97_000
    )


def _peak_mib(fn: Callable[[], object]) -> float:
    """Peak extra memory (MiB) traced by tracemalloc while ``fn()`` runs."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.clear_traces()
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return (peak - base) / MIB


def _torch_baselines() -> dict[str, Timed]:
    """``randperm(n)`` per n and torch's batch-64 sampler epochs; empty without torch."""
    try:
        import torch
        from torch.utils.data import BatchSampler, RandomSampler
    except ImportError:
        return {}

    def randperm(n: int) -> Timed:
        return _time(lambda i: torch.randperm(n, generator=torch.Generator().manual_seed(i)))

    def sampler(n: int) -> Timed:
        def run(i: int) -> object:
            generator = torch.Generator().manual_seed(i)
            return list(BatchSampler(RandomSampler(range(n), generator=generator), 64, False))

        return _time(run)

    fns = {f"randperm_{n}": randperm(n) for n in EPOCH_NS}
    fns |= {f"torch_sampler_{n}_b64": sampler(n) for n in PER_BATCH_NS}
    return fns


def _randperm_big(repeats: int) -> tuple[float, float]:
    """Median time (ms) of ``torch.randperm(N)`` and the MiB it holds; NaN without torch."""
    try:
        import torch
    except ImportError:
        return float("nan"), float("nan")
    perm = torch.randperm(N)  # warm-up, and the size of what it materializes
    mib = perm.numel() * perm.element_size() / MIB
    del perm
    run = _time(lambda i: torch.randperm(N, generator=torch.Generator().manual_seed(i)))
    return statistics.median(run(i) for i in range(repeats)) * 1e3, mib


def main(repeats: int = 15, baseline_repeats: int = 3, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print the tables (when ``verbose``) and return the figures.

    Keys: ``epoch_<n>_ns_per_index`` and ``randperm_<n>_ns_per_index`` (workload 1);
    ``batch_<n>_b<size>_us`` and ``torch_sampler_<n>_b64_ms`` / ``order_<n>_b64_ms``
    (workload 2); ``first_batch_ms``, ``first_batch_peak_mib``, ``batch_<k>_ms``,
    ``pointwise_batch_ms``, ``pointwise_peak_mib``, ``randperm_ms``, ``randperm_mib``,
    ``speedup_vs_randperm`` and ``memory_ratio_vs_randperm`` (workload 3); and one
    ``met:<target>`` key per target. All timed figures are medians.
    """
    # cheap epochs (n <= 200k, a few ms) get every repeat, the 2M ones a third of them
    big_repeats = max(3, repeats // 3)
    fns: dict[str, Timed] = {f"epoch_{n}": _epoch(n, 1024) for n in EPOCH_NS}
    for n in PER_BATCH_NS:
        for size in PER_BATCH_SIZES:
            if size != 1024:
                fns[f"epoch_{n}_b{size}"] = _epoch(n, size)
    fns |= _torch_baselines()
    big = {name for name in fns if "2000000" in name}
    seconds = _interleaved({k: f for k, f in fns.items() if k not in big}, repeats)
    seconds |= _interleaved({k: f for k, f in fns.items() if k in big}, big_repeats)

    figures: dict[str, float] = {}
    for n in EPOCH_NS:
        figures[f"epoch_{n}_ns_per_index"] = seconds[f"epoch_{n}"] / n * 1e9
        figures[f"randperm_{n}_ns_per_index"] = seconds.get(f"randperm_{n}", float("nan")) / n * 1e9
    for n in PER_BATCH_NS:
        for size in PER_BATCH_SIZES:
            key = f"epoch_{n}" if size == 1024 else f"epoch_{n}_b{size}"
            figures[f"batch_{n}_b{size}_us"] = seconds[key] / -(-n // size) * 1e6
        figures[f"order_{n}_b64_ms"] = seconds[f"epoch_{n}_b64"] * 1e3
        figures[f"torch_sampler_{n}_b64_ms"] = (
            seconds.get(f"torch_sampler_{n}_b64", float("nan")) * 1e3
        )

    resume = _interleaved(
        {"first": _resume(97_000), "pointwise": _time(_pointwise)}
        | {f"batch_{k}": _resume(k) for k in BATCHES},
        repeats,
    )
    figures["first_batch_ms"] = resume["first"] * 1e3
    figures["first_batch_peak_mib"] = max(_peak_mib(lambda: _resume(97_000)(7)) for _ in range(3))
    for k in BATCHES:
        figures[f"batch_{k}_ms"] = resume[f"batch_{k}"] * 1e3
    figures["pointwise_batch_ms"] = resume["pointwise"] * 1e3
    figures["pointwise_peak_mib"] = max(_peak_mib(lambda: _pointwise(7)) for _ in range(3))
    figures["randperm_ms"], figures["randperm_mib"] = _randperm_big(baseline_repeats)
    figures["speedup_vs_randperm"] = figures["randperm_ms"] / figures["first_batch_ms"]
    figures["memory_ratio_vs_randperm"] = figures["randperm_mib"] / max(
        figures["first_batch_peak_mib"], 1e-9
    )

    target_ns = (
        f"amortized order cost at n={TARGET_N:_}, B=1024 <= {TARGET_NS_PER_INDEX:g} ns/index"
    )
    figures[f"met:{target_ns}"] = float(
        figures[f"epoch_{TARGET_N}_ns_per_index"] <= TARGET_NS_PER_INDEX
    )
    for n in PER_BATCH_NS:
        figures[f"met:order at n={n:_}, B=64 costs no more per epoch than torch's sampler"] = float(
            figures[f"order_{n}_b64_ms"] <= figures[f"torch_sampler_{n}_b64_ms"]
        )
    figures[f"met:first batch of a 100M epoch <= {TARGET_FIRST_BATCH_MS:g} ms"] = float(
        figures["first_batch_ms"] <= TARGET_FIRST_BATCH_MS
    )
    figures[f"met:its peak extra memory <= {TARGET_MEMORY_MIB:g} MiB"] = float(
        figures["first_batch_peak_mib"] <= TARGET_MEMORY_MIB
    )
    if verbose:
        _print_tables(figures, repeats, big_repeats, baseline_repeats)
    return figures


def _ok(figures: dict[str, float], target: str) -> str:
    return "OK" if figures[f"met:{target}"] else "MISSED"


def _print_rows(title: str, rows: list[tuple[str, str, str]]) -> None:
    print(title)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")


def _print_tables(
    figures: dict[str, float], repeats: int, big_repeats: int, baseline_repeats: int
) -> None:
    """Print the figures as three small tables."""
    target_ns = (
        f"amortized order cost at n={TARGET_N:_}, B=1024 <= {TARGET_NS_PER_INDEX:g} ns/index"
    )
    rows = []
    for n in EPOCH_NS:
        note = (
            f"target <= {TARGET_NS_PER_INDEX:g} {_ok(figures, target_ns)}" if n == TARGET_N else ""
        )
        randperm = figures[f"randperm_{n}_ns_per_index"]
        rows.append(
            (
                f"n={n:_}",
                f"{figures[f'epoch_{n}_ns_per_index']:.1f} ns/index",
                f"torch.randperm(n): {randperm:.1f} ns/index  {note}".rstrip(),
            )
        )
    medians = f"medians of {repeats} ({big_repeats} for n=2M)"
    _print_rows(f"1. shuffled epoch, B=1024, loader's calls; {medians}", rows)

    rows = []
    for n in PER_BATCH_NS:
        for size in PER_BATCH_SIZES:
            rows.append((f"n={n:_} B={size}", f"{figures[f'batch_{n}_b{size}_us']:.2f} us", ""))
        met = f"order at n={n:_}, B=64 costs no more per epoch than torch's sampler"
        rows.append(
            (
                f"n={n:_} B=64 whole epoch",
                f"{figures[f'order_{n}_b64_ms']:.1f} ms",
                f"torch's BatchSampler(RandomSampler): "
                f"{figures[f'torch_sampler_{n}_b64_ms']:.1f} ms {_ok(figures, met)}",
            )
        )
    _print_rows(f"2. per batch (epoch time / batches); {medians}", rows)

    first_target = f"first batch of a 100M epoch <= {TARGET_FIRST_BATCH_MS:g} ms"
    memory_target = f"its peak extra memory <= {TARGET_MEMORY_MIB:g} MiB"
    rows = [
        (
            "first batch after a resume (k=97000)",
            f"{figures['first_batch_ms']:.3f} ms",
            f"<= {TARGET_FIRST_BATCH_MS:g} ms {_ok(figures, first_target)}",
        ),
        (
            "its peak extra memory",
            f"{figures['first_batch_peak_mib'] * 1024:.1f} KiB",
            f"<= {TARGET_MEMORY_MIB:g} MiB {_ok(figures, memory_target)}",
        ),
    ]
    for k in BATCHES:
        rows.append((f"batch {k}", f"{figures[f'batch_{k}_ms']:.3f} ms", "flat in k"))
    rows += [
        (
            "batch_indices (pointwise, no cache)",
            f"{figures['pointwise_batch_ms']:.3f} ms",
            f"peak {figures['pointwise_peak_mib'] * 1024:.1f} KiB",
        ),
        (
            f"torch.randperm({N:_}) (median of {baseline_repeats})",
            f"{figures['randperm_ms']:.1f} ms",
            f"{figures['randperm_mib']:.0f} MiB held",
        ),
        ("speedup (randperm / first batch)", f"{figures['speedup_vs_randperm']:.0f}x", ""),
        ("memory ratio (randperm / peak)", f"{figures['memory_ratio_vs_randperm']:.0f}x", ""),
    ]
    _print_rows(f"3. n={N:_}, B={BATCH_SIZE}, from nothing; medians of {repeats}", rows)


if __name__ == "__main__":
    main()
