"""Benchmark of the ``vision`` collator against per-sample normalization + ``default_collate``.

Workload: 10,000 images of 64x64 RGB, ``uint8``, HWC numpy arrays, as samples
``{"pixel_values": image, "label": int}``; batches of 128 (79 per epoch, the last one short).
Every figure is the median time of collating one whole epoch, batch by batch, in the main
process (no loader, no workers: the collate step alone):

* **vision**: ``VisionCollator(normalize="imagenet")``: one stack of the uint8 images, one
  permute, one converting copy and an in-place multiply-add over the batch.
* **baseline** (what a torchvision ``Compose([ToTensor(), Normalize(mean, std)])`` transform
  followed by torch's ``default_collate`` does): per sample, ``torch.from_numpy(img)
  .permute(2, 0, 1).float().div(255)``, then ``(x - mean) / std``; then ``default_collate``
  of the list of ``{"pixel_values": x, "label": int}``. Target: vision >= 1.5x faster.

Reference rows, without a target: ``normalize_on_device=True`` on the host (the uint8 batch
that is shipped) and its ``on_device`` step run on the CPU (on a GPU it runs there instead).

Threads: every contender runs with ONE torch intra-op thread (``torch.set_num_threads(1)``,
restored afterwards), which is what collation gets inside loader workers (torch limits each
worker to one thread), and what keeps the comparison fair: the baseline's per-image ops are
below torch's parallelization grain and run on one thread anyway, while a whole-batch op fans
out to every core and, on a machine whose cores are busy with other work, waits for the slowest
of them. One reference row runs vision with torch's default thread count.

The repeats (5, or 3 with ``quick=True``) alternate between the contenders after one warm-up,
so a noisy neighbour hits all alike. The outputs of vision and the baseline are checked to
agree (max abs difference <= 1e-5).

Run it as ``python benchmarks/bench_collate_vision.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints a table and returns the figures (``met:<target>`` is 1.0 when the
target was met, 0.0 when not).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate

try:
    from loaderkit.collators.vision import PRESETS, VisionCollator
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.collators.vision import PRESETS, VisionCollator

N, SIZE, CHANNELS, BATCH = 10_000, 64, 3, 128
TARGET_RATIO = 1.5
TARGET_KEY = "met:vision collate >= 1.5x per-sample normalize + default_collate"


def make_samples(n: int = N, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` samples ``{"pixel_values": (64, 64, 3) uint8, "label": int}``, each its own array."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, SIZE, SIZE, CHANNELS), dtype=np.uint8)
    labels = rng.integers(0, 1000, size=n)
    return [{"pixel_values": images[i].copy(), "label": int(labels[i])} for i in range(n)]


class PerSampleBaseline:
    """torchvision-style ``ToTensor()`` + ``Normalize(mean, std)`` per sample, then collate."""

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, samples: Sequence[dict[str, Any]]) -> Any:
        out = []
        for sample in samples:
            x = torch.from_numpy(sample["pixel_values"]).permute(2, 0, 1).float().div(255)
            x = (x - self.mean) / self.std
            out.append({"pixel_values": x, "label": sample["label"]})
        return default_collate(out)


def _epoch(collate: Callable[[Sequence[Any]], Any], samples: list[dict[str, Any]]) -> Any:
    last = None
    for start in range(0, len(samples), BATCH):
        last = collate(samples[start : start + BATCH])
    return last


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print a table (when ``verbose``) and return the figures.

    Keys: ``vision_ms``, ``baseline_ms``, ``speedup`` (baseline / vision),
    ``on_device_host_ms``, ``on_device_step_ms``, ``vision_default_threads_ms`` (per epoch,
    medians), ``default_threads`` and the ``met:`` key.
    """
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        figures = _measure(3 if quick else 5, default_threads)
    finally:
        torch.set_num_threads(default_threads)
    if verbose:
        _print_table(figures, 3 if quick else 5)
    return figures


def _measure(repeats: int, default_threads: int) -> dict[str, float]:
    samples = make_samples()
    mean, std = PRESETS["imagenet"]
    vision = VisionCollator(normalize="imagenet")
    shipped = VisionCollator(normalize="imagenet", normalize_on_device=True)
    baseline = PerSampleBaseline(mean, std)

    check = samples[:BATCH]
    diff = (vision(check)["pixel_values"] - baseline(check)["pixel_values"]).abs().max()
    if float(diff) > 1e-5:
        raise AssertionError(f"vision and the baseline disagree by {float(diff)}")
    host_batches = [shipped(samples[s : s + BATCH]) for s in range(0, len(samples), BATCH)]

    def on_device_step() -> None:
        for batch in host_batches:
            shipped.on_device(batch)

    def with_default_threads() -> None:
        torch.set_num_threads(default_threads)
        try:
            _epoch(vision, samples)
        finally:
            torch.set_num_threads(1)

    runs: dict[str, Callable[[], Any]] = {
        "vision": lambda: _epoch(vision, samples),
        "baseline": lambda: _epoch(baseline, samples),
        "on_device_host": lambda: _epoch(shipped, samples),
        "on_device_step": on_device_step,
        "vision_default_threads": with_default_threads,
    }
    for fn in runs.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            times[name].append(_timed(fn))
    figures = {f"{name}_ms": statistics.median(t) * 1e3 for name, t in times.items()}
    figures["speedup"] = figures["baseline_ms"] / figures["vision_ms"]
    figures["default_threads"] = float(default_threads)
    figures[TARGET_KEY] = float(figures["speedup"] >= TARGET_RATIO)
    return figures


def _print_table(figures: dict[str, float], repeats: int) -> None:
    batches = -(-N // BATCH)
    met = figures[TARGET_KEY] == 1.0

    def rate(ms: float) -> str:
        return f"{N / ms * 1e3:,.0f} img/s"

    rows = [
        (
            "baseline: per-sample ToTensor+Normalize, default_collate",
            figures["baseline_ms"],
            rate(figures["baseline_ms"]),
        ),
        ("vision (normalize='imagenet')", figures["vision_ms"], rate(figures["vision_ms"])),
        (
            "vision, normalize_on_device: host part (uint8)",
            figures["on_device_host_ms"],
            "reference",
        ),
        (
            "vision, normalize_on_device: on_device step (CPU)",
            figures["on_device_step_ms"],
            "reference",
        ),
        (
            f"vision with torch's {figures['default_threads']:.0f} default threads",
            figures["vision_default_threads_ms"],
            "reference",
        ),
    ]
    print(
        f"vision collate: {N:,} images {CHANNELS}x{SIZE}x{SIZE} uint8 HWC, batch {BATCH} "
        f"({batches} batches); time per epoch, median of {repeats}, 1 torch thread"
    )
    width = max(len(r[0]) for r in rows)
    for name, ms, note in rows:
        print(f"  {name:<{width}}  {ms:>9.1f} ms  {note}")
    print(
        f"  {'speedup (baseline / vision)':<{width}}  {figures['speedup']:>9.2f} x   "
        f">= {TARGET_RATIO:g}x {'OK' if met else 'MISSED'}"
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
