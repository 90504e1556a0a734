"""Benchmark of ``StreamLoader`` (iterable sources) against plain torch, in the same run.

Workload: a generated HF ``datasets.IterableDataset`` of 100,000 rows (``{"x": 16 float32,
"label": int64}``, ``Dataset.from_dict(...).to_iterable_dataset(num_shards=4)``, no format:
rows are Python dicts), batch 64, workers 0 and 2: samples/s of one epoch of
``DataLoader(ids, batch_size=64, num_workers=w)`` and of loaderkit over the same
``IterableDataset`` (no shuffle) - target >= 0.95x. Each uses its default collation
(torch's ``default_collate`` makes ``x`` a list of 16 tensors of 64, loaderkit's ``default``
collator one 64 x 16 tensor). Worker start-up is INCLUDED for both: torch
starts its (non-persistent) workers every epoch, and so does the stream loader. One reference
row (no target): loaderkit with a 10,000-sample buffer shuffle, workers 0.

Every figure is a median over timed repeats (5 by default, 3 with ``quick=True``) after one
warm-up, with baseline and loaderkit repeats interleaved so that a noisy neighbour hits both
alike. Ratios are loaderkit / baseline (higher is better).

Run it as ``python benchmarks/bench_stream.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints the table and returns the figures (``met:<target>`` keys are 1.0
when that target was met, 0.0 when not).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

try:
    from loaderkit import DataLoaderBuilder
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit import DataLoaderBuilder

N, DIM, BATCH, SHARDS, WORKERS = 100_000, 16, 64, 4, (0, 2)
BUFFER = 10_000
TARGET_RATIO = 0.95


def stream_dataset(n: int = N, dim: int = DIM) -> Any:
    """The generated HF IterableDataset both loaders read."""
    import datasets

    rng = np.random.default_rng(0)
    ds = datasets.Dataset.from_dict(
        {
            "x": rng.standard_normal((n, dim), dtype=np.float32),
            "label": rng.integers(0, 10, n, dtype=np.int64),
        }
    )
    return ds.to_iterable_dataset(num_shards=SHARDS)


def _interleaved(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median of what each ``fn()`` returns (seconds) over ``repeats`` interleaved rounds."""
    for fn in fns.values():  # warm-up
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            samples[name].append(fn())
    return {name: statistics.median(values) for name, values in samples.items()}


def _epoch(loader: Iterable[Any], expected: int) -> Callable[[], float]:
    """A function timing one full pass over ``loader`` (seconds), checking the row count."""

    def run() -> float:
        start = time.perf_counter()
        rows = 0
        for batch in loader:
            rows += int(batch["label"].shape[0])
        seconds = time.perf_counter() - start
        if rows != expected:
            raise AssertionError(f"an epoch delivered {rows} rows, expected {expected}")
        return seconds

    return run


def _loaderkit(ds: Any, workers: int, buffer: int | None = None) -> Any:
    builder = DataLoaderBuilder().with_dataset(ds).with_batch_size(BATCH).with_workers(workers)
    if buffer is not None:
        builder = builder.with_shuffle(buffer_size=buffer)
    return builder.compile().build()


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the workload, print the table (when ``verbose``) and return the figures.

    Keys: ``stream_w<k>_<who>_sps`` (samples/s), ``stream_w<k>_ratio`` (loaderkit / torch),
    ``stream_buffer_w0_sps`` and ``met:<target>`` (1.0 met, 0.0 not met).
    """
    repeats = 3 if quick else 5
    ds = stream_dataset()
    figures: dict[str, float] = {}
    rows: list[tuple[str, float, float, float, str]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's worker-count advice on small machines
        for workers in WORKERS:
            plain = DataLoader(ds, batch_size=BATCH, num_workers=workers)
            loader = _loaderkit(ds, workers)
            fns = {"torch": _epoch(plain, N), "loaderkit": _epoch(loader, N)}
            if workers == 0:
                fns["buffer"] = _epoch(_loaderkit(ds, 0, BUFFER), N)
            seconds = _interleaved(fns, repeats)
            loader.close()
            sps = {name: N / s for name, s in seconds.items()}
            ratio = sps["loaderkit"] / sps["torch"]
            key = f"stream_w{workers}"
            figures[f"{key}_torch_sps"] = sps["torch"]
            figures[f"{key}_loaderkit_sps"] = sps["loaderkit"]
            figures[f"{key}_ratio"] = ratio
            met = ratio >= TARGET_RATIO
            figures[f"met:stream HF IterableDataset w{workers} >= 0.95x DataLoader"] = float(met)
            label = f"HF IterableDataset {N // 1000}k, B={BATCH}, w{workers}"
            rows.append((label, sps["torch"], sps["loaderkit"], ratio, "MET" if met else "MISSED"))
            if "buffer" in sps:
                figures["stream_buffer_w0_sps"] = sps["buffer"]
                rows.append(
                    (
                        f"  ref: buffer shuffle {BUFFER:,}, w0",
                        sps["torch"],
                        sps["buffer"],
                        sps["buffer"] / sps["torch"],
                        "",
                    )
                )
    if verbose:
        print(
            f"stream: {'QUICK' if quick else 'full'} ({repeats} repeats); medians after a "
            f"warm-up, torch baselines in the same run; torch {torch.__version__}; worker "
            f"start-up included for both"
        )
        print(f"  {'workload':<44} {'torch':>12} {'loaderkit':>12} {'ratio':>7}  target >= 0.95x")
        for label, base, mine, ratio, verdict in rows:
            print(f"  {label:<44} {base:>12,.0f} {mine:>12,.0f} {ratio:>7.3f}  {verdict}")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
