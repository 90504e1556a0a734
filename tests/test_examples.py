"""Every script in examples/ runs to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    # the README's first command installs no test extras: run as if they were absent
    runner = (
        "import runpy, sys\n"
        "for name in ('hypothesis', 'pytest'):\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = [{str(script)!r}]\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    command = [sys.executable, "-c", runner]
    if script.name == "ddp_train.py":  # a torchrun script: two processes, gloo on localhost
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += ["--nproc-per-node=2", str(script)]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip()
