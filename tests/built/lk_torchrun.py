"""Launch a script on local ranks with torchrun (gloo on 127.0.0.1), with a timeout.

Shared by the tests that run a training stack under torchrun: each test file is also the
script its ranks run, and each rank writes its report as JSON to ``out``.

Every agent runs in a process group of its own (a new session): a launch that hangs or a test
that fails kills the agent, its ranks and their loader workers together, so nothing outlives
the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pytest

LAUNCH_TIMEOUT = 150
"""Seconds a launch may take before it counts as hung (the test fails, it does not stall)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun_command(
    script: str | Path,
    *args: object,
    nproc: int = 2,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    max_restarts: int = 0,
) -> list[str]:
    """The ``python -m torch.distributed.run`` command line of one agent.

    Without ``rdzv_endpoint``: one node, static rendezvous on a free port (the default).
    With it (``127.0.0.1:<port>``): the c10d rendezvous of ``nnodes`` agents, this one being
    node ``node_rank`` (node 0 hosts the rendezvous store). ``max_restarts``: how many times
    the agent restarts the whole group after a rank fails (it then polls every 0.1 s).
    """
    if rdzv_endpoint is None:
        assert nnodes == 1, "several nodes need a rendezvous endpoint"
        where = ["--nnodes=1", "--master-addr=127.0.0.1", f"--master-port={free_port()}"]
    else:
        where = [
            f"--nnodes={nnodes}",
            f"--node-rank={node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv_endpoint}",
            "--rdzv-id=loaderkit-test",
            f"--rdzv-conf=is_host={int(node_rank == 0)},join_timeout=60",
            "--local-addr=127.0.0.1",
        ]
    restarts = [f"--max-restarts={max_restarts}", "--monitor-interval=0.1"] if max_restarts else []
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
        f"--nproc-per-node={nproc}",
        *restarts,
        str(script),
        *(str(a) for a in args),
    ]


def launch_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an agent: one thread per rank, this process's import path."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),
        **(env or {}),
    }


def kill_group(process: subprocess.Popen[str]) -> None:
    """SIGKILL the process group of ``process`` (an agent, its ranks, their workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_agents(
    commands: Sequence[list[str]], env: dict[str, str] | None = None, name: str = "torchrun"
) -> list[subprocess.CompletedProcess[str]]:
    """Run the agents ``commands`` side by side; their results once all have exited.

    All of them must end within :data:`LAUNCH_TIMEOUT` seconds together, else the test fails
    with their stderr. An agent that fails gets the others killed 10 s later (they would wait
    for it in the rendezvous). Whatever happens (a timeout, an interrupt), every agent's process
    group is killed before this returns or raises, so no rank is left behind.
    """
    full_env = launch_env(env)
    with contextlib.ExitStack() as files:
        processes: list[subprocess.Popen[str]] = []
        logs: list[tuple[IO[str], IO[str]]] = []
        try:
            for command in commands:
                out = files.enter_context(tempfile.TemporaryFile("w+"))
                err = files.enter_context(tempfile.TemporaryFile("w+"))
                logs.append((out, err))
                processes.append(
                    subprocess.Popen(
                        command,
                        stdout=out,
                        stderr=err,
                        text=True,
                        env=full_env,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + LAUNCH_TIMEOUT
            failed_at: float | None = None
            while any(p.poll() is None for p in processes):
                now = time.monotonic()
                if failed_at is None and any(p.poll() not in (None, 0) for p in processes):
                    failed_at = now
                if now > deadline or (failed_at is not None and now > failed_at + 10):
                    break
                time.sleep(0.05)
            hung = [p for p in processes if p.poll() is None]
            for process in hung:
                kill_group(process)
                process.wait()
            texts = []
            for out, err in logs:
                out.seek(0)
                err.seek(0)
                texts.append((out.read(), err.read()))
            if hung and failed_at is None:
                pytest.fail(
                    f"{name} hung for {LAUNCH_TIMEOUT} s:\n"
                    + "\n----\n".join(e[-3000:] for _, e in texts)
                )
            return [
                subprocess.CompletedProcess(p.args, p.returncode, o, e)
                for p, (o, e) in zip(processes, texts, strict=True)
            ]
        finally:
            for process in processes:
                kill_group(process)  # the ranks too, should one outlive its agent
                if process.poll() is None:
                    process.wait()


def torchrun(
    script: str | Path,
    *args: object,
    reports: list[str],
    env: dict[str, str] | None = None,
    nproc: int = 2,
    killed: bool = False,
    max_restarts: int = 0,
    rdzv: bool = False,
) -> list[dict]:
    """Run ``script args...`` on ``nproc`` ranks; the JSON files ``reports`` (paths), in order.

    A launch that hangs fails the test after :data:`LAUNCH_TIMEOUT` seconds with the ranks'
    stderr; one that exits non-zero fails it with the end of that stderr. ``killed``: the
    ranks kill themselves once they reported, so the launcher must fail instead.
    ``max_restarts``: torchrun restarts the ranks that many times after a failure.
    ``rdzv``: use the c10d rendezvous on a free port instead of the static one.
    """
    endpoint = f"127.0.0.1:{free_port()}" if rdzv else None
    if max_restarts:
        # torch's ranks otherwise share the rendezvous store across restarts and may read a
        # dead rank's gloo address from the attempt before ("Gloo connectFullMesh failed ...
        # Connection refused": pytorch/pytorch#135712)
        env = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **(env or {})}
    command = torchrun_command(
        script, *args, nproc=nproc, rdzv_endpoint=endpoint, max_restarts=max_restarts
    )
    (result,) = run_agents([command], env=env, name=f"{Path(script).name} {args} on {nproc} ranks")
    if killed:
        assert result.returncode != 0, "the ranks were to be killed"
    else:
        assert result.returncode == 0, result.stderr[-4000:]
    return [json.loads(Path(path).read_text()) for path in reports]
