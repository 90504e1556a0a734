"""Run every benchmark (``benchmarks/bench_*.py``), print their tables and a summary of targets.

Usage, from the repository root::

    python benchmarks/run.py            # everything, full repeats
    python benchmarks/run.py --quick    # fewer repeats, smaller sizes where no target names one
    python benchmarks/run.py --only loader

Each module's ``main()`` prints its own table and returns ``dict[str, float]``. Targets are read
from keys ``met:<target>`` (1.0 met, 0.0 not met); modules that predate that convention get a
small adapter below. A module that needs what this machine lacks (``bench_device``: CUDA)
defines ``unavailable() -> str | None``; where it returns a reason, the module is skipped and
the summary says why. Benchmarks report, they do not gate: the exit code is 0 when targets are
missed or modules skipped, and 1 only when a benchmark crashes.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
for path in (BENCH_DIR, ROOT):  # modules import as "bench_x" (workers unpickle by that name)
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

MET_PREFIX = "met:"


def _order_targets(module: ModuleType, figures: dict[str, float]) -> dict[str, bool]:
    """bench_order prints OK/MISSED itself; restate its two targets from its constants."""
    first, memory = module.TARGET_FIRST_BATCH_MS, module.TARGET_MEMORY_MIB
    return {
        f"order: first batch of a 100M epoch <= {first:g} ms": figures["first_batch_ms"] <= first,
        f"order: its peak extra memory <= {memory:g} MiB": figures["first_batch_peak_mib"]
        <= memory,
    }


LEGACY_TARGETS: dict[str, Callable[[ModuleType, dict[str, float]], dict[str, bool]]] = {
    "bench_order": _order_targets,
}

# how to make modules without a ``quick`` parameter run shorter
QUICK_KWARGS = {"repeats": 5, "baseline_repeats": 1}


def discover(only: list[str]) -> list[str]:
    """Module names of ``benchmarks/bench_*.py``, sorted, filtered by substrings in ``only``."""
    names = sorted(p.stem for p in BENCH_DIR.glob("bench_*.py"))
    if only:
        names = [n for n in names if any(o in n for o in only)]
    return names


def _kwargs(main: Callable[..., Any], quick: bool) -> dict[str, Any]:
    if not quick:
        return {}
    params = inspect.signature(main).parameters
    if "quick" in params:
        return {"quick": True}
    return {k: v for k, v in QUICK_KWARGS.items() if k in params}


def targets_of(name: str, module: ModuleType, figures: dict[str, float]) -> dict[str, bool]:
    """The targets a module's figures meet or miss."""
    met = {k[len(MET_PREFIX) :]: bool(v) for k, v in figures.items() if k.startswith(MET_PREFIX)}
    if not met and name in LEGACY_TARGETS:
        met = LEGACY_TARGETS[name](module, figures)
    return met


def unavailable(module: ModuleType) -> str | None:
    """Why ``module`` cannot run on this machine (its ``unavailable()``), or ``None``."""
    check = getattr(module, "unavailable", None)
    return check() if callable(check) else None


def run(
    names: list[str], quick: bool
) -> tuple[dict[str, dict[str, bool]], list[str], dict[str, str]]:
    """Run each module's ``main()``: targets per module, the crashed ones, the skipped ones."""
    results: dict[str, dict[str, bool]] = {}
    crashed: list[str] = []
    skipped: dict[str, str] = {}
    for name in names:
        print(f"=== {name}" + (" (--quick)" if quick else ""), flush=True)
        start = time.perf_counter()
        try:
            module = importlib.import_module(name)
            why = unavailable(module)
            if why is not None:
                print(f"  skipped: {why}\n", flush=True)
                skipped[name] = why
                continue
            kwargs = _kwargs(module.main, quick)
            if quick and not kwargs:
                print("  (this benchmark has no quick mode: full run)")
            elif quick and "quick" not in kwargs:
                print(f"  (quick: {', '.join(f'{k}={v}' for k, v in kwargs.items())})")
            figures = module.main(**kwargs)
            results[name] = targets_of(name, module, figures)
        except Exception:  # noqa: BLE001 - reported, and turned into the exit code
            traceback.print_exc()
            crashed.append(name)
        print(f"  ({time.perf_counter() - start:.1f} s)\n", flush=True)
    return results, crashed, skipped


def summary(
    results: dict[str, dict[str, bool]],
    crashed: list[str],
    quick: bool,
    skipped: dict[str, str] | None = None,
) -> None:
    """Print every target, met or not, and the totals."""
    title = "summary" + (" (QUICK run: fewer repeats, smaller untargeted sizes)" if quick else "")
    print(f"=== {title}")
    total = met = 0
    for name, targets in results.items():
        if not targets:
            print(f"  {name}: no targets declared")
        for target, ok in targets.items():
            total += 1
            met += ok
            print(f"  {'met    ' if ok else 'NOT MET'}  {name}: {target}")
    for name in crashed:
        print(f"  CRASHED  {name}")
    skipped = skipped or {}
    for name, why in skipped.items():
        print(f"  SKIPPED  {name}: {why}")
    print(
        f"  {met}/{total} targets met"
        + (f"; {len(crashed)} crashed" if crashed else "")
        + (f"; {len(skipped)} skipped" if skipped else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repeats, smaller sizes where a size is not part of a target",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="run modules whose name contains this"
    )
    args = parser.parse_args(argv)
    names = discover(args.only)
    if not names:
        print(f"no benchmark matches {args.only}", file=sys.stderr)
        return 2
    results, crashed, skipped = run(names, args.quick)
    summary(results, crashed, args.quick, skipped)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
