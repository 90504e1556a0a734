"""Launch a script on local ranks with torchrun (gloo on 127.0.0.1), with a timeout.

Shared by the tests that run a training stack under torchrun: each test file is also the
script its ranks run, and each rank writes its report as JSON to ``out``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

LAUNCH_TIMEOUT = 150
"""Seconds a launch may take before it counts as hung (the test fails, it does not stall)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(
    script: str | Path,
    *args: object,
    reports: list[str],
    env: dict[str, str] | None = None,
    nproc: int = 2,
    killed: bool = False,
) -> list[dict]:
    """Run ``script args...`` on ``nproc`` ranks; the JSON files ``reports`` (paths), in order.

    A launch that hangs fails the test after :data:`LAUNCH_TIMEOUT` seconds with the ranks'
    stderr; one that exits non-zero fails it with the end of that stderr. ``killed``: the
    ranks kill themselves once they reported, so the launcher must fail instead.
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(script),
        *(str(a) for a in args),
    ]
    full_env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),
        **(env or {}),
    }
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=LAUNCH_TIMEOUT,
            env=full_env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        name = Path(script).name
        pytest.fail(f"{name} {args} on {nproc} ranks hung for {LAUNCH_TIMEOUT} s:\n{exc.stderr}")
    if killed:
        assert result.returncode != 0, "the ranks were to be killed"
    else:
        assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(Path(path).read_text()) for path in reports]
