"""Benchmark of the order engine against materializing a permutation with ``torch.randperm``.

For a shuffled epoch of 100,000,000 samples with batch size 1024 it measures:

* the time to compute the first batch's indices from nothing (building the
  ``EpochOrder`` / ``FeistelPermutation``, deriving its keys, mapping 1024
  positions) - target <= 50 ms;
* the extra memory that takes (peak, measured with ``tracemalloc``, which
  tracks numpy's allocations) - target <= 16 MiB;
* the time to compute batch ``k`` for ``k`` = 0, 1000, 97000 (should be flat in ``k``);
* as the baseline, ``torch.randperm(100_000_000)``: its time and the 763 MiB
  (8 bytes per sample) it must hold for the whole epoch.

Run it as ``python benchmarks/bench_order.py``; a top-level runner can call
:func:`main`, which prints a table and returns the figures.
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
    from loaderkit.order import batch_indices
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import batch_indices

N = 100_000_000
BATCH_SIZE = 1024
BATCHES = (0, 1000, 97_000)
TARGET_FIRST_BATCH_MS = 50.0
TARGET_MEMORY_MIB = 16.0
MIB = 2.0**20


def _first_batch(seed: int, batch_index: int = 0) -> object:
    """Compute one batch of the 100M-sample shuffled epoch from nothing."""
    return batch_indices(
        N,
        BATCH_SIZE,
        seed=seed,
        epoch=0,
        shuffle=True,
        drop_last=False,
        batch_index=batch_index,
    )


def _batch_k(k: int) -> Callable[[int], object]:
    """Return a function computing batch ``k`` from nothing with seed ``2000 + i``."""

    def run(i: int) -> object:
        return _first_batch(2000 + i, k)

    return run


def _median_ms(fn: Callable[[int], object], repeats: int) -> float:
    """Median wall time of ``fn(i)`` over ``repeats`` calls, in milliseconds."""
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


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


def _randperm_baseline(repeats: int) -> tuple[float, float]:
    """Median time (ms) of ``torch.randperm(N)`` and the MiB its result holds; NaN without torch."""
    try:
        import torch
    except ImportError:
        return float("nan"), float("nan")
    perm = torch.randperm(N)  # warm-up, and the size of what it materializes
    mib = perm.numel() * perm.element_size() / MIB
    del perm

    def run(i: int) -> object:
        torch.manual_seed(i)
        return torch.randperm(N)

    return _median_ms(run, repeats), mib


def main(repeats: int = 15, baseline_repeats: int = 3, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print a table (when ``verbose``) and return the figures.

    Keys of the result: ``first_batch_ms``, ``first_batch_peak_mib``,
    ``batch_<k>_ms`` for each ``k`` in ``BATCHES``, ``randperm_ms``,
    ``randperm_mib``, ``speedup_vs_randperm`` and ``memory_ratio_vs_randperm``
    (both "how many times less"), all medians where timed.
    """
    _first_batch(0)  # warm-up: imports, numpy dispatch caches
    figures: dict[str, float] = {}
    figures["first_batch_ms"] = _median_ms(lambda i: _first_batch(1000 + i), repeats)
    figures["first_batch_peak_mib"] = max(_peak_mib(lambda: _first_batch(7)) for _ in range(3))
    for k in BATCHES:
        figures[f"batch_{k}_ms"] = _median_ms(_batch_k(k), repeats)
    figures["randperm_ms"], figures["randperm_mib"] = _randperm_baseline(baseline_repeats)
    figures["speedup_vs_randperm"] = figures["randperm_ms"] / figures["first_batch_ms"]
    figures["memory_ratio_vs_randperm"] = figures["randperm_mib"] / max(
        figures["first_batch_peak_mib"], 1e-9
    )
    if verbose:
        _print_table(figures, repeats, baseline_repeats)
    return figures


def _print_table(figures: dict[str, float], repeats: int, baseline_repeats: int) -> None:
    """Print the figures as a small table."""
    first_ok = figures["first_batch_ms"] <= TARGET_FIRST_BATCH_MS
    mem_ok = figures["first_batch_peak_mib"] <= TARGET_MEMORY_MIB
    rows = [
        (
            "first batch (build + 1024 indices)",
            f"{figures['first_batch_ms']:.3f} ms",
            f"<= {TARGET_FIRST_BATCH_MS:.0f} ms {'OK' if first_ok else 'MISSED'}",
        ),
        (
            "first batch peak extra memory",
            f"{figures['first_batch_peak_mib'] * 1024:.1f} KiB",
            f"<= {TARGET_MEMORY_MIB:.0f} MiB {'OK' if mem_ok else 'MISSED'}",
        ),
    ]
    for k in BATCHES:
        rows.append((f"batch {k}", f"{figures[f'batch_{k}_ms']:.3f} ms", "flat in k"))
    rows += [
        (
            f"torch.randperm({N:_}) (median of {baseline_repeats})",
            f"{figures['randperm_ms']:.1f} ms",
            f"{figures['randperm_mib']:.0f} MiB held",
        ),
        ("speedup (randperm / first batch)", f"{figures['speedup_vs_randperm']:.0f}x", ""),
        ("memory ratio (randperm / peak)", f"{figures['memory_ratio_vs_randperm']:.0f}x", ""),
    ]
    print(f"order engine: n={N:_}, batch_size={BATCH_SIZE}, shuffled; medians of {repeats}")
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>12}  {note}")


if __name__ == "__main__":
    main()
