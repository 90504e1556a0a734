"""Benchmark of the image sources against torchvision's ``ImageFolder`` + ``DataLoader``.

Workload: 3,000 JPEGs of 320x240 (photo-like: gradients and noise, quality 90) in 10 class
folders, generated once into ``<system temp>/loaderkit-bench-images-v1`` and reused (a file
``loaderkit-bench-images-v1.complete`` beside it says the set is whole). Each
contender reads one shuffled epoch in batches of 64 with 2 workers (persistent; the warm-up
epoch starts them, start-up is excluded for all), with RandomResizedCrop(224) + horizontal
flip + ImageNet normalization, and delivers ``(float32 (64, 3, 224, 224), labels)``:

* **torchvision** (the baseline): ``ImageFolder(root, transform=v2.Compose([
  RandomResizedCrop(224), RandomHorizontalFlip(), ToImage(), ToDtype(float32, scale=True),
  Normalize(mean, std)]))`` and ``DataLoader(batch_size=64, shuffle=True, num_workers=2,
  persistent_workers=True)``: PIL decodes, the crop and flip run on the PIL image, every image
  is normalized on its own, ``default_collate`` stacks the floats.
* **loaderkit**: ``image_folder(root)`` with ``with_transform(v2.Compose([
  RandomResizedCrop(224), RandomHorizontalFlip()]))`` on the decoded uint8 tensors and
  ``with_collator("vision", normalize="imagenet")`` (one normalization per batch). Targets:
  >= 1.5x the baseline with reduced-scale decoding allowed (``decode_scale="auto"``, the
  default), >= 1.0x with full-resolution decoding forced (``decode_scale="full"``).

RandomResizedCrop(224) of a 320x240 image keeps at least 224x224 of output from a crop that is
usually smaller than the image: no 1/2 DCT scale (160x120) is large enough, so JPEG drafting
does not apply and both loaderkit rows run the same path; their speed comes from the decoder
(the faster of PIL and ``torchvision.io.decode_jpeg``, measured at build), the crop on uint8
tensors, and normalizing once per batch. ``explain()``'s decode line is printed.

The price of reproducible augmentation: loaderkit's default ``with_global_rngs("per_sample")``
(the global RNGs seeded per image around the transform) against ``"per_worker"`` (torch's
seeding) - target: costs <= 3% (>= 0.97x).

Reference rows (no target): loaderkit with ``decoder="pil"`` (what the decoder choice is
worth), and an evaluation pipeline, Resize(112) + CenterCrop(112) (no flip), where drafting
at 1/2 scale applies (240 / 2 >= 112), for the baseline and loaderkit.

The repeats (5, or 3 with ``quick=True``) alternate between the contenders after one warm-up
epoch each, so a noisy neighbour hits all alike; figures are medians of images/s.

Run it as ``python benchmarks/bench_images.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints a table and returns the figures (``met:<target>`` is 1.0 when the
target was met, 0.0 when not).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    import loaderkit.datasets as lkd
    from loaderkit import DataLoaderBuilder
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import loaderkit.datasets as lkd
    from loaderkit import DataLoaderBuilder
from loaderkit.plan.sections.global_rngs import GlobalRngs

N, CLASSES, WIDTH, HEIGHT, BATCH, WORKERS = 3_000, 10, 320, 240, 64, 2
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TARGET_REDUCED, TARGET_FULL = 1.5, 1.0
KEY_REDUCED = "met:images: loaderkit >= 1.5x torchvision ImageFolder (reduced-scale decoding)"
KEY_FULL = "met:images: loaderkit >= 1.0x torchvision ImageFolder (full-resolution decoding)"
TARGET_SEEDING = 0.97
KEY_SEEDING = "met:images: global RNGs seeded per sample cost <= 3% (>= 0.97x per_worker)"
CACHE = Path(tempfile.gettempdir()) / "loaderkit-bench-images-v1"


def make_images(root: Path = CACHE) -> Path:
    """The 3,000 JPEGs in 10 class folders, generated once (a marker file says complete)."""
    from PIL import Image

    marker = root.with_name(root.name + ".complete")  # beside the folder: not a stray file in it
    if marker.exists():
        return root
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    for i in range(N):
        folder = root / f"class_{i % CLASSES:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        phase = rng.uniform(0, 2 * np.pi, 3)
        freq = rng.uniform(0.005, 0.05, 3)
        base = np.stack(
            [127 + 100 * np.sin(freq[c] * (x + y * (c + 1)) + phase[c]) for c in range(3)], -1
        )
        pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
    marker.write_text(f"{N} images\n")
    return root


def _steps(crop: int) -> list[Any]:
    """RandomResizedCrop(224) + flip; any other size: Resize + CenterCrop (evaluation)."""
    from torchvision.transforms import v2

    if crop == 224:
        return [v2.RandomResizedCrop(crop), v2.RandomHorizontalFlip()]
    return [v2.Resize(crop), v2.CenterCrop(crop)]


def _torchvision_loader(root: Path, crop: int) -> Iterable[Any]:
    from torchvision import datasets
    from torchvision.transforms import v2

    transform = v2.Compose(
        [
            *_steps(crop),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )
    ds = datasets.ImageFolder(str(root), transform=transform)
    return torch.utils.data.DataLoader(
        ds, batch_size=BATCH, shuffle=True, num_workers=WORKERS, persistent_workers=True
    )


def _loaderkit_loader(
    root: Path, crop: int, global_rngs: GlobalRngs = "per_sample", **options: Any
) -> Any:
    from torchvision.transforms import v2

    return (
        DataLoaderBuilder()
        .with_dataset(lkd.image_folder(root, **options))
        .with_batch_size(BATCH)
        .with_shuffle()
        .with_transform(v2.Compose(_steps(crop)))
        .with_collator("vision", normalize="imagenet")
        .with_workers(WORKERS)
        .with_global_rngs(global_rngs)
        .compile()
        .build()
    )


def _epoch(loader: Iterable[Any]) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        count = 0
        for images, labels in loader:
            count += len(labels)
            assert images.dtype == torch.float32
        elapsed = time.perf_counter() - start
        assert count == N, count
        return elapsed

    return run


def _interleaved(runs: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median seconds of each run: one warm-up each, then ``repeats`` alternating rounds."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            times[name].append(run())
    return {name: statistics.median(t) for name, t in times.items()}


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the workload, print the table (when ``verbose``) and return the figures."""
    repeats = 3 if quick else 5
    root = make_images()
    loaders: dict[str, Any] = {
        "torchvision": _torchvision_loader(root, 224),
        "loaderkit": _loaderkit_loader(root, 224),
        "loaderkit full": _loaderkit_loader(root, 224, decode_scale="full"),
        "loaderkit pil": _loaderkit_loader(root, 224, decoder="pil"),
        "loaderkit per_worker": _loaderkit_loader(root, 224, "per_worker"),
        "torchvision 112": _torchvision_loader(root, 112),
        "loaderkit 112": _loaderkit_loader(root, 112),
    }
    explained = {
        name: next(
            line.split(": ", 1)[1]
            for line in loader.explain().splitlines()
            if line.strip().startswith("images")
        )
        for name, loader in loaders.items()
        if name.startswith("loaderkit")
    }
    try:
        seconds = _interleaved({k: _epoch(v) for k, v in loaders.items()}, repeats)
    finally:
        for loader in loaders.values():
            close = getattr(loader, "close", None)
            if callable(close):
                close()
        loaders.clear()
        gc.collect()
    ips = {name: N / s for name, s in seconds.items()}
    figures = {f"{name.replace(' ', '_')}_ips": value for name, value in ips.items()}
    ratio = ips["loaderkit"] / ips["torchvision"]
    ratio_full = ips["loaderkit full"] / ips["torchvision"]
    seeding = ips["loaderkit"] / ips["loaderkit per_worker"]  # per_sample's cost
    figures.update(
        {
            "ratio_reduced": ratio,
            "ratio_full": ratio_full,
            "ratio_pil": ips["loaderkit pil"] / ips["torchvision"],
            "ratio_112": ips["loaderkit 112"] / ips["torchvision 112"],
            "ratio_seeding": seeding,
            KEY_REDUCED: float(ratio >= TARGET_REDUCED),
            KEY_FULL: float(ratio_full >= TARGET_FULL),
            KEY_SEEDING: float(seeding >= TARGET_SEEDING),
        }
    )
    if verbose:
        print(
            f"images: {N:,} JPEGs {WIDTH}x{HEIGHT}, batch {BATCH}, {WORKERS} workers, shuffled; "
            f"median of {repeats} alternating epochs after a warm-up; torch {torch.__version__}, "
            f"{os.cpu_count()} CPUs"
        )
        rows = [
            ("RRC(224) decode auto", "torchvision", "loaderkit", TARGET_REDUCED),
            ("RRC(224) decode full", "torchvision", "loaderkit full", TARGET_FULL),
            ("RRC(224) decoder=pil (ref)", "torchvision", "loaderkit pil", None),
            ("Resize+Crop(112) auto (ref)", "torchvision 112", "loaderkit 112", None),
            ("per_sample vs per_worker", "loaderkit per_worker", "loaderkit", TARGET_SEEDING),
        ]
        print(
            f"  {'workload':<28} {'torchvision [img/s]':>20} {'loaderkit [img/s]':>18} "
            f"{'ratio':>7}  target"
        )
        for label, base, mine, target in rows:
            r = ips[mine] / ips[base]
            verdict = (
                "" if target is None else f">= {target}x {'met' if r >= target else 'NOT MET'}"
            )
            print(f"  {label:<28} {ips[base]:>20,.0f} {ips[mine]:>18,.0f} {r:>6.2f}x  {verdict}")
        for name, line in explained.items():
            print(f"  explain ({name}): {line}")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
