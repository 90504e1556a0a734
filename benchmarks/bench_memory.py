"""Worker memory over a large in-memory list of small dicts: loaderkit against torch's DataLoader.

The workload (issue 24): a list of 2,000,000 small dicts (two ints, a float, a short string),
2 workers, batch 256, one shuffled epoch. torch's ``DataLoader`` reads the list itself in
its forked workers, touching the reference count of every dict it reads, so each worker
ends up with its own copy of the pages of the list (copy-on-read). loaderkit stores the list
flat at ``build()`` (``storage="auto"``: one byte buffer plus offsets) and its workers read
that buffer.

Each run is a fresh Python process (so neither loader inherits what the other left behind)
that makes the list, builds the loader and reads one epoch; after the last batch arrived and
before the iterator is exhausted (the workers still alive, holding what they read), it
measures each worker process (the children sharing the parent's command line, so
multiprocessing's resource tracker is left out) with ``psutil``: USS (memory only that
worker holds) and PSS (its share of what it shares). Runs alternate torch, loaderkit, torch,
... and the table gives medians.

- samples/s: the epoch (first ``next()`` to last batch); for loaderkit also "with build",
  counting the ``build()`` that serializes the list (torch's ``DataLoader()`` costs nothing).
- Targets: worker USS <= 25% of torch's; epoch throughput >= 0.95x torch's.

``quick=True`` (``--quick``): 200,000 dicts and one run each (a smoke test; no target is
judged on it). Run as ``python benchmarks/bench_memory.py [--quick]``; ``benchmarks/run.py``
calls :func:`main`, which returns the figures (``met:<target>`` keys 1.0 when met).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

N, N_QUICK, BATCH, WORKERS = 2_000_000, 200_000, 256, 2
RUNS, RUNS_QUICK = 5, 1
TARGET_USS, TARGET_SPEED = 0.25, 0.95
ROOT = Path(__file__).resolve().parent.parent


def make_samples(n: int) -> list[dict[str, Any]]:
    """``n`` small dicts: an id, a label, a float score and a short tag."""
    return [{"id": i, "label": i % 10, "score": i * 0.5, "tag": f"t{i % 97}"} for i in range(n)]


def _worker_memory() -> list[dict[str, float]]:
    """USS and PSS (MB) of this process's loader workers (children with its command line)."""
    import psutil

    me = psutil.Process()
    line = me.cmdline()
    out = []
    for child in me.children():
        try:
            if child.cmdline() != line:  # e.g. multiprocessing's resource tracker
                continue
            info = child.memory_full_info()
        except psutil.Error:
            continue
        out.append({"uss": info.uss / 1e6, "pss": info.pss / 1e6})
    return out


def _epoch(batches: Any, expected: int) -> tuple[float, list[dict[str, float]], int]:
    """Read ``expected`` batches; (seconds, worker memory after the last one, samples)."""
    iterator = iter(batches)
    seen = 0
    start = time.perf_counter()
    for _ in range(expected):
        batch = next(iterator)
        seen += len(batch["id"])
    seconds = time.perf_counter() - start
    memory = _worker_memory()  # the workers are alive: the iterator is not exhausted yet
    for _ in iterator:  # the end of the epoch (nothing more comes)
        raise AssertionError("more batches than expected")
    return seconds, memory, seen


def one_run(kind: str, n: int) -> dict[str, Any]:
    """One measured run in this process: ``kind`` is ``"torch"`` or ``"loaderkit"``."""
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    samples = make_samples(n)
    expected = -(-n // BATCH)
    build = 0.0
    storage = ""
    if kind == "torch":
        generator = torch.Generator().manual_seed(0)
        loader: Any = DataLoader(
            samples, batch_size=BATCH, shuffle=True, num_workers=WORKERS, generator=generator
        )
    else:
        from loaderkit import DataLoaderBuilder

        start = time.perf_counter()
        loader = (
            DataLoaderBuilder()
            .with_dataset(samples)
            .with_batch_size(BATCH)
            .with_shuffle()
            .with_seed(0)
            .with_workers(WORKERS)
            .build()
        )
        build = time.perf_counter() - start
        storage = next(
            (line.strip() for line in loader.explain().splitlines() if "storage" in line), ""
        )
    seconds, memory, seen = _epoch(loader, expected)
    if hasattr(loader, "close"):
        loader.close()
    assert seen == n, (seen, n)
    return {"kind": kind, "seconds": seconds, "build": build, "workers": memory, "storage": storage}


def _spawn(kind: str, n: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--one", kind, "--n", str(n)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {kind} run failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    """The median over runs of the mean over workers of ``key`` (uss or pss)."""
    return statistics.median(statistics.mean(w[key] for w in r["workers"]) for r in runs)


def main(quick: bool = False) -> dict[str, float]:
    """Run the alternating runs, print the table, return the figures."""
    n = N_QUICK if quick else N
    repeats = RUNS_QUICK if quick else RUNS
    runs: dict[str, list[dict[str, Any]]] = {"torch": [], "loaderkit": []}
    for _ in range(repeats):
        for kind in ("torch", "loaderkit"):
            result = _spawn(kind, n)
            if len(result["workers"]) != WORKERS:
                raise RuntimeError(f"{kind}: found {len(result['workers'])} workers, not 2")
            runs[kind].append(result)
    figures: dict[str, float] = {}
    print(
        f"{n:,} small dicts, {WORKERS} workers, batch {BATCH}, one shuffled epoch; medians of "
        f"{repeats} alternating run(s) each, every run a fresh process"
        + (" (QUICK: fewer samples; targets not judged)" if quick else "")
    )
    print(f"{'loader':<22}{'USS/worker MB':>15}{'PSS/worker MB':>15}{'samples/s':>12}")
    for kind in ("torch", "loaderkit"):
        uss, pss = _median(runs[kind], "uss"), _median(runs[kind], "pss")
        speed = statistics.median(n / r["seconds"] for r in runs[kind])
        figures |= {f"{kind}_uss_mb": uss, f"{kind}_pss_mb": pss, f"{kind}_samples_s": speed}
        print(f"{kind:<22}{uss:>15,.1f}{pss:>15,.1f}{speed:>12,.0f}")
    with_build = statistics.median(n / (r["seconds"] + r["build"]) for r in runs["loaderkit"])
    figures["loaderkit_with_build_samples_s"] = with_build
    print(f"{'loaderkit (with build)':<22}{'':>15}{'':>15}{with_build:>12,.0f}")
    print(f"  {runs['loaderkit'][0]['storage']}")
    uss_ratio = figures["loaderkit_uss_mb"] / figures["torch_uss_mb"]
    speed_ratio = figures["loaderkit_samples_s"] / figures["torch_samples_s"]
    figures |= {"uss_ratio": uss_ratio, "speed_ratio": speed_ratio}
    print(
        f"worker USS loaderkit/torch {uss_ratio:.2f} (target <= {TARGET_USS}); epoch "
        f"samples/s {speed_ratio:.2f}x torch (target >= {TARGET_SPEED}x; with build "
        f"{with_build / figures['torch_samples_s']:.2f}x)"
    )
    if not quick:
        figures[f"met:memory: worker USS <= {TARGET_USS:.0%} of torch's"] = float(
            uss_ratio <= TARGET_USS
        )
        figures[f"met:memory: epoch samples/s >= {TARGET_SPEED}x torch's"] = float(
            speed_ratio >= TARGET_SPEED
        )
    return figures


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--one" in args:
        kind = args[args.index("--one") + 1]
        size = int(args[args.index("--n") + 1])
        print(json.dumps(one_run(kind, size)))
    else:
        main(quick="--quick" in args)
