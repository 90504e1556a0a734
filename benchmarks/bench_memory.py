"""Worker memory over a large in-memory list of small dicts: loaderkit against torch's DataLoader.

The workload (issue 24): a list of 2,000,000 small dicts (two ints, a float, a short string),
2 workers, batch 256, one shuffled epoch. torch's ``DataLoader`` reads the list itself in
its forked workers, touching the reference count of every dict it reads, so each worker
ends up with its own copy of the pages of the list (copy-on-read). loaderkit stores the list
flat at ``build()`` (``storage="auto"``: one byte buffer plus offsets) and its workers read
that buffer.

The same list held by a ``Dataset`` class of the user's (issue 29: ``self.items = items`` in
``__init__``, ``__getitem__`` returns ``self.items[i]``) is the user's to store: loaderkit
cannot, and says so (``build()`` warns, ``explain()`` names ``Annotations.items`` with its
estimated copy per worker and the fix). Two more rows: ``"class"``, that class holding the
list (each worker copies it, as torch's do), and ``"class-flat"``, the same class with the
one-line fix the warning names (``self.items = loaderkit.datasets.flat(items)``).

Each run is a fresh Python process (so neither loader inherits what the other left behind)
that makes the list, builds the loader and reads one epoch; after the last batch arrived and
before the iterator is exhausted (the workers still alive, holding what they read), it
measures each worker process (the children sharing the parent's command line, so
multiprocessing's resource tracker is left out) with ``psutil``: USS (memory only that
worker holds) and PSS (its share of what it shares). Runs alternate torch, loaderkit, torch,
... and the table gives medians.

- samples/s: the epoch (first ``next()`` to last batch); for loaderkit also "with build",
  counting the ``build()`` that serializes the list (torch's ``DataLoader()`` costs nothing).
- Targets: worker USS <= 25% of torch's; epoch throughput >= 0.95x torch's (for the list
  given to ``with_dataset``); the class with the fix: worker USS <= 25% of torch's; the class
  without it: the warning given, and its estimate within 1.5x of the USS the fix saves.

``quick=True`` (``--quick``): 200,000 dicts and one run each (a smoke test; no target is
judged on it); ``--runs N`` sets the runs of each kind. Run as
``python benchmarks/bench_memory.py [--quick] [--runs N]``; ``benchmarks/run.py`` calls
:func:`main`, which returns the figures (``met:<target>`` keys 1.0 when met).
"""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

N, N_QUICK, BATCH, WORKERS = 2_000_000, 200_000, 256, 2
RUNS, RUNS_QUICK = 5, 1
TARGET_USS, TARGET_SPEED, TARGET_ESTIMATE = 0.25, 0.95, 1.5
KINDS = ("torch", "loaderkit", "class", "class-flat")
LABELS = {
    "torch": "torch DataLoader",
    "loaderkit": "loaderkit (list)",
    "class": "loaderkit (class)",
    "class-flat": "loaderkit (class+flat)",
}
ROOT = Path(__file__).resolve().parent.parent


def make_samples(n: int) -> list[dict[str, Any]]:
    """``n`` small dicts: an id, a label, a float score and a short tag."""
    return [{"id": i, "label": i % 10, "score": i * 0.5, "tag": f"t{i % 97}"} for i in range(n)]


class Annotations:
    """The user's own map-style dataset holding its samples in a list (or flat)."""

    def __init__(self, items: Any) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


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
    warned = 0
    if kind == "torch":
        generator = torch.Generator().manual_seed(0)
        loader: Any = DataLoader(
            samples, batch_size=BATCH, shuffle=True, num_workers=WORKERS, generator=generator
        )
    else:
        import loaderkit
        from loaderkit import DataLoaderBuilder

        dataset: Any = samples
        if kind != "loaderkit":
            held = loaderkit.datasets.flat(samples) if kind == "class-flat" else samples
            dataset = Annotations(held)
        heard: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: heard.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("loaderkit").addHandler(handler)
        start = time.perf_counter()
        loader = (
            DataLoaderBuilder()
            .with_dataset(dataset)
            .with_batch_size(BATCH)
            .with_shuffle()
            .with_seed(0)
            .with_workers(WORKERS)
            .build()
        )
        build = time.perf_counter() - start
        logging.getLogger("loaderkit").removeHandler(handler)
        storage = next(
            (line.strip() for line in loader.explain().splitlines() if "storage" in line), ""
        )
        warned = sum("copy-on-read" in message for message in heard)
    seconds, memory, seen = _epoch(loader, expected)
    if hasattr(loader, "close"):
        loader.close()
    assert seen == n, (seen, n)
    return {
        "kind": kind,
        "seconds": seconds,
        "build": build,
        "workers": memory,
        "storage": storage,
        "warned": warned,
    }


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


def _estimate_mb(storage: str) -> float:
    """The copy per worker that the class's explain line estimates (0.0 when it has none)."""
    found = re.search(r"copies about ([0-9.,]+) MB", storage)
    return float(found[1].replace(",", "")) if found else 0.0


def main(quick: bool = False, runs: int | None = None) -> dict[str, float]:
    """Run the alternating runs, print the table, return the figures."""
    n = N_QUICK if quick else N
    repeats = runs or (RUNS_QUICK if quick else RUNS)
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for _ in range(repeats):
        for kind in KINDS:
            result = _spawn(kind, n)
            if len(result["workers"]) != WORKERS:
                raise RuntimeError(f"{kind}: found {len(result['workers'])} workers, not 2")
            results[kind].append(result)
    figures: dict[str, float] = {}
    print(
        f"{n:,} small dicts, {WORKERS} workers, batch {BATCH}, one shuffled epoch; medians of "
        f"{repeats} alternating run(s) each, every run a fresh process"
        + (" (QUICK: fewer samples; targets not judged)" if quick else "")
    )
    print(f"{'loader':<24}{'USS/worker MB':>15}{'PSS/worker MB':>15}{'samples/s':>12}")
    for kind in KINDS:
        uss, pss = _median(results[kind], "uss"), _median(results[kind], "pss")
        speed = statistics.median(n / r["seconds"] for r in results[kind])
        key = kind.replace("-", "_")
        figures |= {f"{key}_uss_mb": uss, f"{key}_pss_mb": pss, f"{key}_samples_s": speed}
        print(f"{LABELS[kind]:<24}{uss:>15,.1f}{pss:>15,.1f}{speed:>12,.0f}")
    with_build = statistics.median(n / (r["seconds"] + r["build"]) for r in results["loaderkit"])
    figures["loaderkit_with_build_samples_s"] = with_build
    print(f"{'loaderkit (with build)':<24}{'':>15}{'':>15}{with_build:>12,.0f}")
    print(f"  list:  {results['loaderkit'][0]['storage']}")
    print(f"  class: {results['class'][0]['storage'][:160]}...")
    uss_ratio = figures["loaderkit_uss_mb"] / figures["torch_uss_mb"]
    speed_ratio = figures["loaderkit_samples_s"] / figures["torch_samples_s"]
    fixed_ratio = figures["class_flat_uss_mb"] / figures["torch_uss_mb"]
    estimate = statistics.median(_estimate_mb(r["storage"]) for r in results["class"])
    saved = figures["class_uss_mb"] - figures["class_flat_uss_mb"]
    warned = all(r["warned"] == 1 for r in results["class"]) and not any(
        r["warned"] for r in results["class-flat"] + results["loaderkit"]
    )
    figures |= {
        "uss_ratio": uss_ratio,
        "speed_ratio": speed_ratio,
        "class_flat_uss_ratio": fixed_ratio,
        "class_estimate_mb": estimate,
        "class_saved_mb": saved,
    }
    print(
        f"worker USS loaderkit/torch {uss_ratio:.2f} (target <= {TARGET_USS}); epoch "
        f"samples/s {speed_ratio:.2f}x torch (target >= {TARGET_SPEED}x; with build "
        f"{with_build / figures['torch_samples_s']:.2f}x)"
    )
    print(
        f"the user's class: warned once {'yes' if warned else 'NO'}; estimated copy "
        f"{estimate:,.1f} MB a worker, the fix saved {saved:,.1f} MB a worker (target: within "
        f"{TARGET_ESTIMATE}x); with the fix worker USS {fixed_ratio:.2f} of torch's (target <= "
        f"{TARGET_USS})"
    )
    if not quick:
        figures[f"met:memory: worker USS <= {TARGET_USS:.0%} of torch's"] = float(
            uss_ratio <= TARGET_USS
        )
        figures[f"met:memory: epoch samples/s >= {TARGET_SPEED}x torch's"] = float(
            speed_ratio >= TARGET_SPEED
        )
        figures[f"met:memory: a class with flat(): worker USS <= {TARGET_USS:.0%} of torch's"] = (
            float(fixed_ratio <= TARGET_USS)
        )
        figures[
            f"met:memory: a class holding a list is warned of, its copy estimated within "
            f"{TARGET_ESTIMATE}x"
        ] = float(warned and saved / TARGET_ESTIMATE <= estimate <= saved * TARGET_ESTIMATE)
    return figures


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--one" in args:
        kind = args[args.index("--one") + 1]
        size = int(args[args.index("--n") + 1])
        print(json.dumps(one_run(kind, size)))
    else:
        count = int(args[args.index("--runs") + 1]) if "--runs" in args else None
        main(quick="--quick" in args, runs=count)
