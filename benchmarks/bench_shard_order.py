"""Benchmark of the shard-aware shuffle: how well it mixes, and what a position costs.

1. **Quality against a global shuffle.** A dataset sorted by label, cut into shards (the worst
   case for reading shards: every shard holds one or two labels): 1,000,000 samples, 100
   labels of 10,000 samples each, 1,000 shards of 1,000. For each order (the dataset order,
   the shard-aware shuffle with windows of 1, 4, 16 and 64 shards, and a global shuffle,
   ``EpochOrder``), over the batches of 256 of one epoch:

   - *labels per batch*: distinct labels in a batch (a global shuffle: about 92 of 100);
   - *TV distance*: the total variation distance between a batch's label histogram and the
     dataset's (0: the batch looks like the dataset; 1: disjoint), mean over batches;
   - *neighbour correlation*: the correlation of the labels of samples ``p`` and ``p + 1``
     (0 for a global shuffle, 1 for the sorted order);
   - *shards per batch*: distinct shards a batch reads (what the shard cache must hold at once);
   - *shards in flight*: the most shards an epoch needs at once (the window: every shard of
     the window is read from its first sample to its last in a random interleaving);
   - *downloads*: whole shards fetched in the epoch through a cache of 25% and of 2% of the
     shards, as a multiple of the dataset, evicting by the order's own future (Belady's rule,
     what the shard cache does) and by LRU.

2. **Speed at scale.** 100,000,000 samples over 100,000 shards of 1,000, batch 1024: building
   one epoch's order (the per-shard arrays), the batches of an epoch read in order (what the
   loader does; ns per index), one batch from nothing (a resume anywhere), and a whole
   vectorised block of 1,000,000 positions; the global shuffle's ``EpochOrder`` in the same
   run for comparison.

Every timing is a median of interleaved repeats. Run as ``python benchmarks/bench_shard_order.py``
(``--quick`` for a smaller run); it prints the tables.
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

try:
    from loaderkit.order import EpochOrder, ShardOrder
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import EpochOrder, ShardOrder

WINDOWS = (1, 4, 16, 64)
BATCH = 256
SPEED_BATCH = 1024

_I64 = npt.NDArray[np.int64]


def _quality(order: _I64, labels: _I64, shard_of: _I64, classes: int) -> dict[str, float]:
    """The quality figures of one epoch order (an array of dataset indices)."""
    usable = order.size // BATCH * BATCH
    batch_labels = labels[order[:usable]].reshape(-1, BATCH)
    batch_shards = shard_of[order[:usable]].reshape(-1, BATCH)
    rows = np.arange(batch_labels.shape[0])[:, None]
    hist = np.zeros((batch_labels.shape[0], classes))
    np.add.at(hist, (rows, batch_labels), 1.0)
    distinct = (hist > 0).sum(axis=1).mean()
    overall = np.bincount(labels, minlength=classes) / labels.size
    tv = 0.5 * np.abs(hist / BATCH - overall).sum(axis=1).mean()
    seq = labels[order].astype(np.float64)
    corr = float(np.corrcoef(seq[:-1], seq[1:])[0, 1])
    sorted_shards = np.sort(batch_shards, axis=1)
    shards = (1 + (np.diff(sorted_shards, axis=1) != 0).sum(axis=1)).mean()
    return {"labels": float(distinct), "tv": float(tv), "corr": corr, "shards": float(shards)}


def downloads(sequence: _I64, capacities: tuple[int, ...]) -> list[tuple[int, int]]:
    """Shard downloads of reading ``sequence`` (shard ids) through caches of ``capacities``.

    ``(belady, lru)`` per capacity (in shards): evicting the shard whose next use is furthest
    away (what a cache that knows the order does: optimal) and the least recently used one.
    Whole-shard granularity; consecutive reads of one shard count as one.
    """
    keep = np.ones(sequence.size, dtype=bool)
    keep[1:] = sequence[1:] != sequence[:-1]
    runs = sequence[keep]
    size = runs.size
    by_shard = np.argsort(runs, kind="stable")  # positions grouped by shard, in order
    next_use = np.full(size, size, dtype=np.int64)
    same = runs[by_shard[:-1]] == runs[by_shard[1:]]
    next_use[by_shard[:-1][same]] = by_shard[1:][same]
    reads = runs.tolist()
    nexts = next_use.tolist()
    out = []
    for capacity in capacities:
        belady = 0
        cached: dict[int, int] = {}  # shard -> its next use
        heap: list[tuple[int, int]] = []  # (-next use, shard); stale entries are skipped
        for k, upcoming in zip(reads, nexts, strict=True):
            if k not in cached:
                belady += 1
                while len(cached) >= capacity:
                    far, victim = heapq.heappop(heap)
                    if cached.get(victim) == -far:
                        del cached[victim]
            cached[k] = upcoming
            heapq.heappush(heap, (-upcoming, k))
        lru = 0
        recent: OrderedDict[int, None] = OrderedDict()
        for k in reads:
            if k in recent:
                recent.move_to_end(k)
                continue
            lru += 1
            recent[k] = None
            if len(recent) > capacity:
                recent.popitem(last=False)
        out.append((belady, lru))
    return out


def quality_table(samples: int, shards: int, classes: int, seed: int) -> list[str]:
    """The quality table: each order's figures, for epoch 0 of ``seed``."""
    labels = (np.arange(samples, dtype=np.int64) * classes) // samples  # sorted by label
    per_shard = samples // shards
    counts = (per_shard,) * shards
    shard_of = np.arange(samples, dtype=np.int64) // per_shard
    orders: list[tuple[str, _I64, str]] = [
        ("dataset order (no shuffle)", np.arange(samples, dtype=np.int64), "1")
    ]
    for w in WINDOWS:
        shard_order = ShardOrder(counts, seed, 0, w)
        orders.append((f"shard-aware, window {w}", shard_order.indices(0, samples), str(w)))
    glob = EpochOrder(samples, seed, 0, True).indices(0, samples)
    orders.append(("global shuffle (EpochOrder)", glob, f"{shards} (all)"))
    lines = [
        f"quality: {samples:,} samples sorted by label ({classes} labels), {shards:,} shards of "
        f"{per_shard:,}, batches of {BATCH}",
        "| order | labels per batch | TV distance | neighbour corr. | shards per batch | "
        "shards in flight | downloads, cache of 25% (Belady / LRU) | cache of 2% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, order, flight in orders:
        q = _quality(order, labels, shard_of, classes)
        sequence = shard_of[order]
        capacities = tuple(max(1, int(shards * fraction)) for fraction in (0.25, 0.02))
        cells = [
            f"{belady / shards:.2f}x / {lru / shards:.2f}x"
            for belady, lru in downloads(sequence, capacities)
        ]
        lines.append(
            f"| {name} | {q['labels']:.1f} | {q['tv']:.3f} | {q['corr']:.3f} | "
            f"{q['shards']:.1f} | {flight} | {cells[0]} | {cells[1]} |"
        )
    lines.append(
        "downloads: whole shards fetched in one epoch, as a multiple of the dataset, through a "
        "cache of that fraction of the shards"
    )
    return lines


def _median(fn: Callable[[int], object], repeats: int) -> float:
    """Median seconds of ``fn(i)`` over ``repeats`` calls, after one warm-up."""
    fn(0)
    times = []
    for i in range(1, repeats + 1):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def speed_table(samples: int, shards: int, repeats: int) -> list[str]:
    """Position -> index speed at scale: the shard-aware order and the global shuffle."""
    counts = np.full(shards, samples // shards, dtype=np.int64)
    n = int(counts.sum())
    batches = 2_000  # the first batches of an epoch, read in order
    rng = np.random.default_rng(0)
    starts = rng.integers(0, n // SPEED_BATCH, size=repeats + 1) * SPEED_BATCH
    lines = [
        f"speed: {n:,} samples over {shards:,} shards, batch {SPEED_BATCH} (median of {repeats})",
        "| order | build an epoch | batches in order | one batch from nothing | "
        "1,000,000 positions at once |",
        "|---|---|---|---|---|",
    ]
    made: dict[str, Callable[[int], ShardOrder | EpochOrder]] = {
        "shard-aware, window 16": lambda e: ShardOrder(counts, 1, e, 16),
        "global shuffle (EpochOrder)": lambda e: EpochOrder(n, 1, e, True),
    }
    for name, make in made.items():
        build = _median(make, repeats)
        order = make(0)

        def in_order(i: int, order: ShardOrder | EpochOrder = order) -> None:
            base = i * batches * SPEED_BATCH
            for b in range(batches):
                order.indices(base + b * SPEED_BATCH, base + (b + 1) * SPEED_BATCH)

        def cold(i: int, make: Callable[[int], ShardOrder | EpochOrder] = make) -> None:
            start = int(starts[i])
            make(i).indices(start, start + SPEED_BATCH)

        def block(i: int, order: ShardOrder | EpochOrder = order) -> None:
            order.indices(i * 1_000_000, (i + 1) * 1_000_000)

        per_index = _median(in_order, max(3, repeats // 3)) / (batches * SPEED_BATCH)
        lines.append(
            f"| {name} | {build * 1e3:.1f} ms | {per_index * 1e9:.0f} ns/index "
            f"({per_index * SPEED_BATCH * 1e6:.0f} us/batch) | {_median(cold, repeats) * 1e3:.2f} "
            f"ms | {_median(block, repeats) * 1e3:.0f} ms |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the quality and the speed tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    args = parser.parse_args(argv)
    if args.quick:
        quality = quality_table(200_000, 200, 100, seed=0)
        speed = speed_table(10_000_000, 10_000, repeats=5)
    else:
        quality = quality_table(1_000_000, 1_000, 100, seed=0)
        speed = speed_table(100_000_000, 100_000, repeats=11)
    print("\n".join(quality))
    print()
    print("\n".join(speed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
