"""Benchmark of sharding: what one rank pays to compute its part of a 10M-sample epoch.

For world sizes 1, 2, 4 and 8, rank 0 of a shuffled 10,000,000-sample epoch with 256 samples
per batch per rank computes every batch it delivers the way the loader does
(``ShardLayout.indices(EpochOrder, b)``): the order is evaluated only at this rank's
positions, chunk by chunk, and never materialized whole. Reported per world size: the median
time over repeats, its ratio to ``time(1) / world_size`` (target <= 1.5: the time falls
roughly as 1 / world size), and the peak extra memory (``tracemalloc``, which sees numpy's
allocations). The memory is bounded by the chunk the order is evaluated in, not by the epoch:
it does not grow with ``n`` and stays far below the ``n / world_size`` indices of the shard
(target: peak <= 8 bytes x n / world_size, the shard as int64).

Baseline: ``torch.randperm(n)`` then slicing rank 0's share, what a rank pays with torch's
``DistributedSampler`` (which materializes the whole permutation on every rank).

Run it as ``python benchmarks/bench_shard.py``; ``benchmarks/run.py`` calls :func:`main`,
which prints the tables and returns the figures (``met:<target>`` keys are 1.0 when met).
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
    from loaderkit.order import EpochOrder, ShardLayout
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import EpochOrder, ShardLayout

N = 10_000_000
BATCH_SIZE = 256
WORLDS = (1, 2, 4, 8)
TARGET_RATIO = 1.5
MIB = 2.0**20


def rank_epoch(n: int, world: int, seed: int = 0, epoch: int = 0) -> int:
    """Compute every batch of rank 0's epoch; return the number of indices read."""
    order = EpochOrder(n, seed, epoch, True)
    layout = ShardLayout(n, BATCH_SIZE, world, 0, False, True)
    total = 0
    for b in range(len(layout)):
        total += layout.indices(order, b).size
    return total


def torch_share(n: int, world: int) -> int:
    """torch's DistributedSampler way: the whole permutation, then this rank's stride."""
    import torch

    generator = torch.Generator().manual_seed(0)
    perm = torch.randperm(n, generator=generator)
    return int(perm[0::world].numel())


def _timed(fn: Callable[..., object], *args: int) -> float:
    gc.collect()
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _peak(fn: Callable[..., object], *args: int) -> float:
    gc.collect()
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / MIB


def main(quick: bool = False) -> dict[str, float]:
    """Print the table; return the figures and ``met:`` flags."""
    n = N // 10 if quick else N
    repeats = 1 if quick else 3
    figures: dict[str, float] = {}
    times: dict[int, float] = {}
    rows = []
    for world in WORLDS:
        samples = []
        base = []
        for _ in range(repeats):
            samples.append(_timed(rank_epoch, n, world))
            base.append(_timed(torch_share, n, world))
        times[world] = statistics.median(samples)
        peak = _peak(rank_epoch, n, world)
        shard_mib = 8 * n / world / MIB
        ratio = times[world] / (times[1] / world)
        figures[f"seconds w{world}"] = times[world]
        figures[f"peak MiB w{world}"] = peak
        figures[f"randperm seconds w{world}"] = statistics.median(base)
        rows.append((world, times[world], ratio, peak, shard_mib, statistics.median(base)))
    print(
        f"\nbench_shard: rank 0 of a shuffled {n:,}-sample epoch, {BATCH_SIZE} per batch per rank"
    )
    print(
        f"{'world':>5} {'seconds':>8} {'vs t1/W':>8} {'peak MiB':>9} {'shard MiB':>10} "
        f"{'randperm s':>11}"
    )
    ratio_ok = memory_ok = True
    for world, seconds, ratio, peak, shard_mib, randperm in rows:
        print(
            f"{world:>5} {seconds:>8.3f} {ratio:>7.2f}x {peak:>9.1f} {shard_mib:>10.1f} "
            f"{randperm:>11.3f}"
        )
        ratio_ok &= ratio <= TARGET_RATIO
        memory_ok &= peak <= shard_mib
    figures[f"met:time falls as 1/world (<= {TARGET_RATIO}x of t1/W)"] = float(ratio_ok)
    figures["met:peak memory <= the shard as int64"] = float(memory_ok)
    for name, ok in figures.items():
        if name.startswith("met:"):
            print(f"  {'OK' if ok else 'MISSED'}: {name[4:]}")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
