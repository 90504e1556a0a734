"""Benchmark of the ``skip`` error policy's overhead when nothing fails.

A per-sample map-style dataset (``__getitem__`` does a little Python work and returns ``{"x":
16 float32, "label": int}``; no ``__getitems__``) of 50,000 samples, batch 64, shuffled, in the
main process and with 2 workers: samples/s of the same plan with
``with_error_policy("raise")`` (the default) and ``with_error_policy("skip")`` - target: skip
>= 0.98x raise. With workers both keep persistent workers and the warm-up epoch (which starts
them) is not timed. A third row measures ``skip`` with 1% of the samples failing, for
information (the failing samples are read one by one, then dropped).

Every figure is a median over timed epochs (5; 3 with ``quick=True``, which also shrinks the
dataset to 10,000 samples), the two policies interleaved so that a noisy neighbour hits both
alike. Run it as ``python benchmarks/bench_faults.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints the table and returns the figures (``met:<target>`` keys are 1.0
when met).
"""

from __future__ import annotations

import gc
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

try:
    from loaderkit import DataLoaderBuilder
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit import DataLoaderBuilder

TARGET = 0.98
N = 50_000


class Arithmetic(Dataset[dict[str, Any]]):
    """A little Python work per sample; every ``fail_every``-th sample raises (0: none)."""

    def __init__(self, n: int, fail_every: int = 0) -> None:
        self.n, self.fail_every = n, fail_every
        self.base = torch.arange(16, dtype=torch.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        if self.fail_every and i % self.fail_every == 0:
            raise ValueError(f"corrupt record {i}")
        value = (i * 2654435761) % 1000 / 1000.0
        return {"x": self.base * value, "label": i % 10}


def _loader(dataset: Dataset[Any], workers: int, policy: str) -> Any:
    builder = (
        DataLoaderBuilder().with_dataset(dataset).with_batch_size(64).with_shuffle().with_seed(1)
    )
    if workers:
        builder = builder.with_workers(workers)
    return builder.with_error_policy(policy).compile().build()


def epoch_seconds(loader: Any) -> float:
    """Seconds to iterate ``loader`` once, after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def main(quick: bool = False) -> dict[str, float]:
    """Print the table; return the figures and ``met:`` flags."""
    n = 10_000 if quick else N
    repeats = 3 if quick else 5
    logging.getLogger("loaderkit").setLevel(logging.ERROR)  # the failing row logs every skip
    figures: dict[str, float] = {}
    rows = []
    ok = True
    for workers in (0, 2):
        loaders = {p: _loader(Arithmetic(n), workers, p) for p in ("raise", "skip")}
        loaders["skip, 1% failing"] = _loader(Arithmetic(n, fail_every=100), workers, "skip")
        for loader in loaders.values():
            epoch_seconds(loader)  # warm-up: starts the workers
        times: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(repeats):
            for name, loader in loaders.items():
                times[name].append(epoch_seconds(loader))
        rates = {name: n / statistics.median(t) for name, t in times.items()}
        for loader in loaders.values():
            loader.close()
        ratio = rates["skip"] / rates["raise"]
        ok &= ratio >= TARGET
        figures[f"raise samples/s w{workers}"] = rates["raise"]
        figures[f"skip samples/s w{workers}"] = rates["skip"]
        figures[f"skip/raise w{workers}"] = ratio
        figures[f"skip 1% failing samples/s w{workers}"] = rates["skip, 1% failing"]
        rows.append((workers, rates, ratio))
    print(f"\nbench_faults: {n:,} per-sample items, batch 64, shuffled (samples/s, median)")
    print(f"{'workers':>7} {'raise':>10} {'skip':>10} {'skip/raise':>11} {'skip, 1% bad':>13}")
    for workers, rates, ratio in rows:
        print(
            f"{workers:>7} {rates['raise']:>10,.0f} {rates['skip']:>10,.0f} {ratio:>10.3f}x "
            f"{rates['skip, 1% failing']:>13,.0f}"
        )
    figures[f"met:skip policy >= {TARGET}x raise with no errors"] = float(ok)
    print(f"  {'OK' if ok else 'MISSED'}: skip policy >= {TARGET}x raise with no errors")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
