"""Benchmark of loaderkit's CUDA path: delivery, overlap, on-device normalization, GPU decode.

Every figure is compared with its baseline measured in the same run, on the same GPU. The
workloads (sizes: full / ``--quick``; ``--dry-run`` uses tiny ones on the CPU):

1. **copy** - batches of float32 rows (32,768 x 4,096, batch 512: 64 batches of 8 MiB; quick
   16,384 rows), shuffled, through a real loaderkit loader with ``with_workers(0)``:
   ``with_device("cuda")`` (loaderkit's delivery, ``loaderkit/runtime/passes/device.py``: each host
   batch pinned and copied with ``non_blocking=True`` on a side stream, one batch ahead)
   against the same plan with ``with_device("cpu")`` and a synchronous pageable
   ``batch.to("cuda")`` in the loop. GB/s of batches delivered per epoch. A reference row
   times the raw copy of one 8 MiB tensor, pinned + ``non_blocking`` against pageable (no
   loader: what the bus gives). The delivered batches are checked to equal the host batches.
2. **overlap** - the same two loaders feeding a training-step-like loop: each step is ``k``
   chained ``(512 x 4096) @ (4096 x 4096)`` float32 matmuls on the batch, ``k`` chosen in the
   run so that one step's compute is about 1.5x the time loaderkit takes to deliver a batch
   (so the copy can hide behind it). Time per step, loaderkit against the synchronous
   pageable copy; "hidden" is how much of each path's delivery time (measured alone, without
   compute, in the same rounds) the step does not pay: ``1 - (step - compute) / delivery``,
   where ``compute`` is the step over batches already on the GPU.
3. **vision** - 2,048 images 224x224x3 ``uint8`` (quick 1,024), batch 128, through the
   ``vision`` collator (``normalize="imagenet"``) in a loaderkit loader with
   ``with_device("cuda")``: ``normalize_on_device=True`` (the ``uint8`` batch is pinned and
   copied, 4x fewer bytes, and normalized on the GPU; what ``"auto"`` picks for CUDA) against
   ``normalize_on_device=False`` (normalized to float32 on the host, then copied). Images/s
   per epoch; torch keeps its default intra-op threads for the host arithmetic. The
   GPU-normalized batch is checked against the CPU-normalized one and against the collator
   run by hand on the host (max abs difference <= 1e-5).
4. **decode** - 128 JPEGs of 640x480 (quick 64), generated in the run with
   ``torchvision.io.encode_jpeg`` (quality 90, smooth gradients plus noise): one call of
   ``torchvision.io.decode_jpeg(list, device="cuda")`` (nvJPEG, batched) against the CPU
   decoder (``decode_jpeg(list)``, one thread, libjpeg-turbo) followed by ``.to("cuda")`` of
   each image (what a GPU consumer of CPU-decoded images pays); a reference row times the
   CPU decode alone. Images/s. The two decoders' outputs are checked to agree (mean abs
   difference <= 1.5 per image; JPEG decoders may round differently).

Timing: ``time.perf_counter`` around each timed call, with ``torch.cuda.synchronize()``
before it starts and before it stops, so the GPU's queued work is inside the time. Each
contender runs one untimed warm-up (CUDA context, nvJPEG, the caching allocators, the
loaders' first pass); then rounds alternate the contenders, and each figure is the median
over the rounds (5; 3 with ``--quick``; 1 with ``--dry-run``). Every row is a reference row:
no target is set for the CUDA path before it has been measured once (see docs/benchmarks.md).
Ratios are candidate / baseline: for throughput higher is better, for time lower is better.

``--dry-run`` runs every workload end to end at tiny sizes on the CPU (device ``"cpu"``: the
"pinned" raw copy is a plain clone there, since pinning needs CUDA), with the same table and
checks, so that CI proves the script works on a machine without a GPU; it uses one torch
thread, and its figures mean nothing. Without ``--dry-run`` and without CUDA the script exits
with 2 and says why.

Run it as ``python benchmarks/bench_device.py [--quick | --dry-run]``; ``benchmarks/run.py``
calls :func:`main` (which prints the table and returns the figures) only where CUDA is
available (:func:`unavailable` says why not).
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the checkout's loaderkit, as benchmarks/run.py imports it
    sys.path.insert(0, str(ROOT))

from loaderkit import DataLoaderBuilder  # noqa: E402 - after the checkout is on the path
from loaderkit.collators.vision import VisionCollator  # noqa: E402

NAN = float("nan")


@dataclass(frozen=True)
class Sizes:
    """The sizes of one mode (full, quick, dry run)."""

    rows: int
    dim: int
    batch: int
    images: int
    side: int
    image_batch: int
    jpegs: int
    jpeg_hw: tuple[int, int]
    repeats: int


FULL = Sizes(32_768, 4_096, 512, 2_048, 224, 128, 128, (480, 640), 5)
QUICK = Sizes(16_384, 4_096, 512, 1_024, 224, 128, 64, (480, 640), 3)
DRY = Sizes(128, 64, 32, 16, 16, 8, 4, (48, 64), 1)

COMPUTE_OVER_DELIVERY = 1.5
"""The overlap workload's step computes for about this many times loaderkit's delivery."""
MAX_MATMULS = 64

ROWS = (
    "copy: raw batch-sized tensor, pinned+non_blocking vs pageable",
    "copy: loader epoch, with_device(cuda) vs cpu + .to()",
    "overlap: step, loaderkit delivery vs sync pageable .to()",
    "vision: epoch, normalize_on_device True vs False",
    "decode: decode_jpeg device=cuda vs CPU + .to()",
    "decode: decode_jpeg device=cuda vs CPU decode alone",
)
"""The table's rows, in order (the dry run prints the same ones)."""


def unavailable() -> str | None:
    """Why this benchmark cannot run here (``None``: it can): it measures the CUDA path."""
    if not torch.cuda.is_available():
        return (
            "CUDA is not available (torch.cuda.is_available() is False): bench_device measures "
            "loaderkit's CUDA path; run it on a machine with a GPU, or run "
            "`python benchmarks/bench_device.py --dry-run` to check it end to end on the CPU"
        )
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return "torchvision is not installed (the decode workload); pip install -e '.[bench]'"
    return None


# -- measurement ------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timer(device: torch.device, fn: Callable[[], object]) -> Callable[[], float]:
    """A function timing one call of ``fn`` (seconds), the device's queued work included."""

    def run() -> float:
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        return time.perf_counter() - start

    return run


def _interleaved(fns: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median seconds of each function over ``repeats`` alternating rounds, after a warm-up."""
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            samples[name].append(fn())
    return {name: statistics.median(values) for name, values in samples.items()}


def _plan(dataset: object, batch: int, device: str, **collator: Any) -> Any:
    builder = (
        DataLoaderBuilder()
        .with_dataset(dataset)
        .with_batch_size(batch)
        .with_shuffle()
        .with_seed(0)
        .with_workers(0)
        .with_device(device)
    )
    if collator:
        builder = builder.with_collator("vision", **collator)
    return builder.compile()


def _drain(batches: Iterable[Any]) -> None:
    for _batch in batches:
        pass


@dataclass
class Row:
    """One line of the table: baseline and candidate figures, in one unit."""

    workload: str
    unit: str
    baseline: float
    candidate: float
    better: str  # "higher" or "lower"

    @property
    def ratio(self) -> float:
        """Candidate / baseline (NaN where either is missing)."""
        if math.isnan(self.baseline) or math.isnan(self.candidate) or self.baseline == 0:
            return NAN
        return self.candidate / self.baseline


# -- workloads --------------------------------------------------------------------------------


def _copy_and_overlap(
    sizes: Sizes, device: torch.device, figures: dict[str, float], checks: list[str]
) -> tuple[list[Row], list[str]]:
    """Workloads 1 and 2: the loader's delivery, then the same loaders feeding a step."""
    x = torch.randn(sizes.rows, sizes.dim, generator=torch.Generator().manual_seed(0))
    dataset = torch.utils.data.TensorDataset(x)
    on_device = _plan(dataset, sizes.batch, str(device)).build()
    on_host = _plan(dataset, sizes.batch, "cpu").build()
    batches = len(on_device)
    batch_bytes = sizes.batch * sizes.dim * 4
    epoch_bytes = x.numel() * 4

    # the delivered batches equal the host batches, every one of them (untimed)
    delivered = 0
    for (got,), (want,) in zip(on_device, on_host, strict=True):
        if got.device.type != device.type or not torch.equal(got.cpu(), want):
            raise AssertionError(f"batch {delivered}: delivered on {got.device} != host batch")
        delivered += 1
    checks.append(f"copy: the {delivered} delivered batches equal the host batches")

    # raw copy of one batch-sized tensor
    pageable = x[: sizes.batch].clone()
    pinned = pageable.pin_memory() if device.type == "cuda" else pageable.clone()

    def raw_pinned() -> None:
        for _ in range(batches):
            pinned.to(device, non_blocking=True)

    def raw_pageable() -> None:
        for _ in range(batches):
            pageable.to(device)

    def loader_pageable() -> None:
        for (host,) in on_host:
            host.to(device)

    # the step: k chained matmuls, consuming the batch
    weight = torch.randn(sizes.dim, sizes.dim, generator=torch.Generator().manual_seed(1))
    weight = (weight / math.sqrt(sizes.dim)).to(device)
    resident = [b.to(device) for (b,) in on_host]
    matmuls = 1

    def step(batch: torch.Tensor) -> None:
        y = batch
        for _ in range(matmuls):
            y = y @ weight

    one_mm = _interleaved({"mm": _timer(device, lambda: step(resident[0]))}, 3)["mm"]
    deliver_once = _interleaved({"lk": _timer(device, lambda: _drain(on_device))}, 1)["lk"]
    matmuls = max(
        1, min(MAX_MATMULS, round(COMPUTE_OVER_DELIVERY * deliver_once / batches / one_mm))
    )

    def compute_only() -> None:
        for batch in resident:
            step(batch)

    def step_loaderkit() -> None:
        for (batch,) in on_device:
            step(batch)

    def step_pageable() -> None:
        for (host,) in on_host:
            step(host.to(device))

    times = _interleaved(
        {
            name: _timer(device, fn)
            for name, fn in {
                "raw_pinned": raw_pinned,
                "raw_pageable": raw_pageable,
                "loader_lk": lambda: _drain(on_device),
                "loader_pageable": loader_pageable,
                "compute": compute_only,
                "step_lk": step_loaderkit,
                "step_pageable": step_pageable,
            }.items()
        },
        sizes.repeats,
    )
    gbps = {k: batches * batch_bytes / t / 1e9 for k, t in times.items() if k.startswith("raw")}
    gbps.update({k: epoch_bytes / t / 1e9 for k, t in times.items() if k.startswith("loader")})
    per_step = {k: t / batches * 1e3 for k, t in times.items()}  # ms per batch
    compute_ms = per_step["compute"]
    hidden = {
        who: 1.0 - (per_step[f"step_{who}"] - compute_ms) / per_step[f"loader_{who}"]
        for who in ("lk", "pageable")
    }
    figures.update({f"{k}_gbps": v for k, v in gbps.items()})
    figures.update({f"{k}_ms_per_batch": v for k, v in per_step.items()})
    figures.update(
        {
            "overlap_matmuls": float(matmuls),
            "overlap_hidden_lk": hidden["lk"],
            "overlap_hidden_pageable": hidden["pageable"],
        }
    )
    rows = [
        Row(ROWS[0], "GB/s", gbps["raw_pageable"], gbps["raw_pinned"], "higher"),
        Row(ROWS[1], "GB/s", gbps["loader_pageable"], gbps["loader_lk"], "higher"),
        Row(ROWS[2], "ms/step", per_step["step_pageable"], per_step["step_lk"], "lower"),
    ]
    notes = [
        f"copy: {batches} batches of {batch_bytes / 2**20:.2f} MiB ({sizes.batch} x "
        f"{sizes.dim} float32) per epoch, shuffled, workers 0",
        f"overlap: step = {matmuls} matmul(s) ({sizes.batch}x{sizes.dim} @ {sizes.dim}x"
        f"{sizes.dim}); compute alone {compute_ms:.3f} ms/step; delivery alone: loaderkit "
        f"{per_step['loader_lk']:.3f}, pageable {per_step['loader_pageable']:.3f} ms/batch; "
        f"delivery hidden behind the step: loaderkit {hidden['lk']:.0%}, pageable "
        f"{hidden['pageable']:.0%}",
    ]
    return rows, notes


def _vision(
    sizes: Sizes, device: torch.device, figures: dict[str, float], checks: list[str]
) -> tuple[list[Row], list[str]]:
    """Workload 3: uint8 over the bus and normalized on the device, or float32 from the host."""
    rng = np.random.default_rng(0)
    side = sizes.side
    images = rng.integers(0, 256, size=(sizes.images, side, side, 3), dtype=np.uint8)
    labels = rng.integers(0, 1000, size=sizes.images)
    samples = [{"pixel_values": images[i], "label": int(labels[i])} for i in range(sizes.images)]
    loaders = {
        on: _plan(
            samples, sizes.image_batch, str(device), normalize="imagenet", normalize_on_device=on
        ).build()
        for on in (True, False)
    }
    first = {on: next(iter(loader)) for on, loader in loaders.items()}
    indices = loaders[True].batch_indices(0, 0)
    by_hand = VisionCollator(normalize="imagenet", normalize_on_device=False)(
        [samples[i] for i in indices]
    )
    on_gpu = first[True]["pixel_values"]
    if on_gpu.device.type != device.type or on_gpu.dtype != torch.float32:
        raise AssertionError(f"vision: the batch is {on_gpu.dtype} on {on_gpu.device}")
    diff = max(
        float((on_gpu.cpu() - first[False]["pixel_values"].cpu()).abs().max()),
        float((on_gpu.cpu() - by_hand["pixel_values"]).abs().max()),
    )
    labels_equal = torch.equal(first[True]["label"].cpu(), by_hand["label"])
    if diff > 1e-5 or not labels_equal:
        raise AssertionError(f"vision: on-device and host normalization differ by {diff}")
    checks.append(
        f"vision: the batch normalized on {device.type} equals the host-normalized one "
        f"(max abs diff {diff:.1e} <= 1e-5)"
    )
    times = _interleaved(
        {str(on): _timer(device, lambda lo=lo: _drain(lo)) for on, lo in loaders.items()},
        sizes.repeats,
    )
    ips = {on: sizes.images / t for on, t in times.items()}
    figures["vision_on_device_ips"], figures["vision_on_host_ips"] = ips["True"], ips["False"]
    row = Row(ROWS[3], "img/s", ips["False"], ips["True"], "higher")
    batch_mib = sizes.image_batch * side * side * 3 / 2**20
    notes = [
        f"vision: {sizes.images} images {side}x{side}x3 uint8, batch {sizes.image_batch}: "
        f"{batch_mib:.1f} MiB copied per batch as uint8, {4 * batch_mib:.1f} MiB as float32; "
        f"workers 0, {torch.get_num_threads()} torch threads"
    ]
    return [row], notes


def _jpegs(sizes: Sizes) -> list[torch.Tensor]:
    """JPEG files (uint8 tensors) of smooth gradients plus noise, made with encode_jpeg."""
    from torchvision.io import encode_jpeg

    h, w = sizes.jpeg_hw
    gen = torch.Generator().manual_seed(2)
    yy = torch.linspace(0, 1, h).view(1, h, 1)
    xx = torch.linspace(0, 1, w).view(1, 1, w)
    files = []
    for i in range(sizes.jpegs):
        phase = torch.tensor([0.0, 0.3, 0.6]).view(3, 1, 1) + i / sizes.jpegs
        base = 0.5 + 0.5 * torch.sin(6.28 * (xx * (1 + i % 5) + yy * 2 + phase))
        noise = torch.rand(3, h, w, generator=gen) * 0.1
        image = ((base * 0.9 + noise) * 255).clamp(0, 255).to(torch.uint8)
        files.append(encode_jpeg(image, quality=90))
    return files


def _decode(
    sizes: Sizes, device: torch.device, figures: dict[str, float], checks: list[str]
) -> tuple[list[Row], list[str]]:
    """Workload 4: torchvision's GPU JPEG decoder against its CPU decoder."""
    from torchvision.io import decode_jpeg

    files = _jpegs(sizes)

    def on_device() -> list[torch.Tensor]:
        return decode_jpeg(files, device=device)

    def on_cpu_then_copy() -> list[torch.Tensor]:
        return [image.to(device) for image in decode_jpeg(files)]

    def on_cpu() -> list[torch.Tensor]:
        return decode_jpeg(files)

    got, want = on_device(), on_cpu()
    shapes = [(tuple(g.shape), tuple(c.shape)) for g, c in zip(got, want, strict=True)]
    if any(a != b for a, b in shapes) or any(g.device.type != device.type for g in got):
        raise AssertionError(f"decode: shapes or devices differ: {shapes}, {got[0].device}")
    worst = max(
        float((g.cpu().float() - c.float()).abs().mean()) for g, c in zip(got, want, strict=True)
    )
    if worst > 1.5:
        raise AssertionError(f"decode: the decoders disagree (mean abs diff up to {worst})")
    checks.append(
        f"decode: the {device.type} and CPU decoders agree (mean abs diff per image "
        f"<= {worst:.2f}, at most 1.5)"
    )
    times = _interleaved(
        {
            "device": _timer(device, on_device),
            "cpu_copy": _timer(device, on_cpu_then_copy),
            "cpu": _timer(device, on_cpu),
        },
        sizes.repeats,
    )
    ips = {k: sizes.jpegs / t for k, t in times.items()}
    figures.update({f"decode_{k}_ips": v for k, v in ips.items()})
    size_kib = sum(f.numel() for f in files) / len(files) / 1024
    h, w = sizes.jpeg_hw
    rows = [
        Row(ROWS[4], "img/s", ips["cpu_copy"], ips["device"], "higher"),
        Row(ROWS[5], "img/s", ips["cpu"], ips["device"], "higher"),
    ]
    notes = [
        f"decode: {sizes.jpegs} JPEGs {w}x{h} (quality 90, {size_kib:.0f} KiB on average), one "
        f"batched call each; the CPU decoder runs on one thread"
    ]
    return rows, notes


# -- the table --------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"


def _print_table(rows: list[Row]) -> None:
    header = ("workload", "unit", "baseline", "candidate", "ratio [cand/base]", "target", "met")
    lines = [
        (
            r.workload,
            r.unit,
            _fmt(r.baseline),
            _fmt(r.candidate),
            "n/a" if math.isnan(r.ratio) else f"{r.ratio:.3g}x ({r.better} is better)",
            "reference",
            "",
        )
        for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=True)]
    for i, line in enumerate([header, *lines]):
        cells = [
            f"{c:>{w}}" if j in (2, 3) else f"{c:<{w}}"
            for j, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("  " + "  ".join(cells).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main(quick: bool = False, dry_run: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run every workload, print the table (when ``verbose``) and return the figures.

    Keys: ``raw_*_gbps`` / ``loader_*_gbps`` (GB/s), ``*_ms_per_batch``, ``overlap_matmuls``,
    ``overlap_hidden_lk`` / ``overlap_hidden_pageable`` (fractions of the delivery time the
    step does not pay), ``vision_on_device_ips`` / ``vision_on_host_ips`` and
    ``decode_*_ips`` (images/s). There are no ``met:`` keys: every row is a reference row.
    Raises ``RuntimeError`` without CUDA unless ``dry_run``, and ``AssertionError`` when a
    correctness check fails.
    """
    if dry_run:
        sizes, device = DRY, torch.device("cpu")
    else:
        why = unavailable()
        if why is not None:
            raise RuntimeError(f"bench_device: {why}")
        sizes, device = (QUICK if quick else FULL), torch.device("cuda")
    figures: dict[str, float] = {}
    checks: list[str] = []
    rows: list[Row] = []
    notes: list[str] = []
    threads = torch.get_num_threads()
    if dry_run:  # tiny ops on a busy CI machine: a pool of threads only waits for its slowest
        torch.set_num_threads(1)
    try:
        for workload in (_copy_and_overlap, _vision, _decode):
            more_rows, more_notes = workload(sizes, device, figures, checks)
            rows += more_rows
            notes += more_notes
    finally:
        torch.set_num_threads(threads)
    assert [r.workload for r in rows] == list(ROWS)
    if verbose:
        mode = (
            "DRY RUN on the CPU (tiny sizes; figures mean nothing)"
            if dry_run
            else ("QUICK" if quick else "full")
        )
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        print(
            f"device: {mode}; {name}; medians of {sizes.repeats} alternating rounds after a "
            f"warm-up, each baseline measured in the same run; torch {torch.__version__}"
        )
        _print_table(rows)
        for note in notes:
            print(f"  NOTE: {note}")
        for check in checks:
            print(f"  check OK: {check}")
    return figures


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="smaller epochs, 3 rounds")
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="run every workload at tiny sizes on the CPU (CI: proves the script works)",
    )
    args = parser.parse_args(argv)
    if not args.dry_run:
        why = unavailable()
        if why is not None:
            print(f"bench_device: {why}", file=sys.stderr)
            return 2
    main(quick=args.quick, dry_run=args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(_cli())
