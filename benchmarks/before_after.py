"""One benchmark at two commits, in the same run: did a change make loaderkit slower?

Usage, from the repository root::

    python benchmarks/before_after.py --base main~3 loader stream
    python benchmarks/before_after.py --base v0.4 --rounds 5 --quick loader

The package at ``--base`` is exported (``git archive``) into a temporary folder; the benchmark
code is this checkout's for both sides, so both measure the same thing. Each round runs the
module's ``main()`` once for the base and once for this checkout, in fresh processes, in
alternating order, so a machine that gets busier part-way through slows both alike.

Compared are the figures each run normalises by the peer it measured in the same process
(``*_ratio``: loaderkit / torch), so the machine's speed cancels out: the table shows, per
row, the median over rounds of (after / before), the direction turned so that >= 1.0 is never
worse (``resume_*_ratio``, ``build_ratio`` and ``*_ms`` are times, lower is better).
``--min`` (0.97 by default, the architecture issue's bar) marks the rows below it. Reports;
exit code 0 unless a run crashes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent

_RUN = (
    "import json, sys, importlib; m = importlib.import_module(sys.argv[1]); "
    "f = m.main(quick=sys.argv[2] == '1', verbose=False); print('FIGURES ' + json.dumps(f))"
)


def export(rev: str, into: Path) -> Path:
    """The ``loaderkit`` package at ``rev``, written under ``into``; returns its root."""
    archive = into / "base.tar"
    subprocess.run(
        ["git", "archive", "--format=tar", "-o", str(archive), rev, "loaderkit"],
        cwd=ROOT,
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def run_once(module: str, package_root: Path, quick: bool) -> dict[str, float]:
    """``module.main()`` in a fresh process importing ``loaderkit`` from ``package_root``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), str(BENCH_DIR)]))
    done = subprocess.run(
        [sys.executable, "-c", _RUN, module, "1" if quick else "0"],
        env=env,
        cwd=BENCH_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("FIGURES "):
            return {k: float(v) for k, v in json.loads(line[8:]).items()}
    raise RuntimeError(f"{module} at {package_root} crashed:\n{done.stdout}\n{done.stderr}")


def lower_is_better(key: str) -> bool:
    """Times (``*_ms``, and the resume and build rows' ratios of ms) are better when lower."""
    return key.endswith("_ms") or key.startswith(("resume_", "build_"))


def compared_keys(figures: dict[str, float]) -> list[str]:
    """The rows compared: ratios to a peer measured in the same process."""
    return sorted(k for k in figures if k.endswith("_ratio") and figures[k] == figures[k])


def main() -> None:
    """Parse the command line, run the rounds, print one table per module."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="+", help="benchmark names: loader, stream, ...")
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--min", type=float, default=0.97, dest="bar")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lk-before-") as tmp:
        base = export(args.base, Path(tmp))
        for name in args.modules:
            module = name if name.startswith("bench_") else f"bench_{name}"
            before: list[dict[str, float]] = []
            after: list[dict[str, float]] = []
            for round_ in range(args.rounds):
                sides = [(base, before), (ROOT, after)]
                for root, out in sides if round_ % 2 == 0 else sides[::-1]:
                    out.append(run_once(module, root, args.quick))
            print(f"{module}: after / before ({args.rounds} rounds, median; >= 1.0 is no worse)")
            print(f"  {'row':<44} {'before':>9} {'after':>9} {'after/before':>13}")
            for key in compared_keys(after[0]):
                pairs = [(b[key], a[key]) for b, a in zip(before, after, strict=True) if key in b]
                if not pairs:
                    continue
                change = [
                    (b / a if lower_is_better(key) else a / b) for b, a in pairs if a > 0 and b > 0
                ]
                med = statistics.median(change) if change else float("nan")
                flag = "" if med >= args.bar else f"  below {args.bar}"
                b_med = statistics.median(p[0] for p in pairs)
                a_med = statistics.median(p[1] for p in pairs)
                print(f"  {key:<44} {b_med:>9.3f} {a_med:>9.3f} {med:>13.3f}{flag}")


if __name__ == "__main__":
    main()
