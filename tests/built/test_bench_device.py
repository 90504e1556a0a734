"""``benchmarks/bench_device.py`` runs end to end on the CPU (``--dry-run``), as CI runs it.

The benchmark measures loaderkit's CUDA path; these tests prove on a machine without a GPU
that every workload's code path runs, that its correctness checks pass, that it prints the
whole table, and that without ``--dry-run`` and without CUDA it refuses clearly. CUDA is
hidden from the child (``CUDA_VISIBLE_DEVICES=""``), so the tests mean the same on a GPU
machine. They time nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_device.py"

pytestmark = pytest.mark.timeout(180)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _rows() -> tuple[str, ...]:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_device
    finally:
        sys.path.remove(str(SCRIPT.parent))
    rows: tuple[str, ...] = bench_device.ROWS
    return rows


def test_the_dry_run_runs_every_workload_and_prints_the_whole_table():
    result = _run("--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("device: DRY RUN on the CPU")
    table = [line for line in lines if line.startswith("  ") and "reference" in line]
    assert [line.split("  ")[1] for line in table] == list(_rows())
    assert all("x (" in line for line in table)  # every row has its ratio, none is n/a
    checks = [line for line in lines if line.startswith("  check OK: ")]
    assert [c.split(": ")[1] for c in checks] == ["copy", "vision", "decode"]


def test_without_cuda_and_without_dry_run_it_exits_non_zero_saying_why():
    result = _run()
    assert result.returncode == 2
    assert "CUDA is not available" in result.stderr and "--dry-run" in result.stderr
    assert result.stdout == ""
