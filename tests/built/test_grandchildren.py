"""Processes a dataset starts in a worker end with the loader (issue 22).

A script builds a loader with 2 workers whose dataset starts a ``sleep 60`` process in each
worker (the loader's grandchildren) and records their pids; the test then interrupts
(``SIGINT``), terminates (``SIGTERM``) or kills (``SIGKILL``) the script's main process, or
lets it close the loader, and waits (polling, up to :data:`WAIT` seconds) for the
grandchildren to be gone. torch's ``DataLoader`` leaves them all running in each case
(measured: 2 of 2 alive 10 s after each signal); loaderkit's workers lead a process group of
their own, ended with them (``loaderkit.runtime.workers.groups``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX"),
]

WAIT = 20.0
"""Seconds the grandchildren may take to go (they take about one; generous under load)."""

SCRIPT = r"""
import os, signal, subprocess, sys, time
import torch
from loaderkit import DataLoaderBuilder

# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where this test runs in a background
# job (a shell starts those with SIGINT ignored, and Python then keeps it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)

FOLDER, KIND, STUBBORN, ENDING = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
START = sys.argv[5] if sys.argv[5] != "default" else None
COMMAND = ["sh", "-c", "trap '' TERM; sleep 60 & wait"] if STUBBORN else ["sleep", "60"]


def grandchild():
    process = subprocess.Popen(COMMAND)
    path = os.path.join(FOLDER, f"pid-{os.getpid()}")
    with open(path + ".tmp", "w") as f:
        f.write(str(process.pid))
    os.replace(path + ".tmp", path)


class Spawning(torch.utils.data.Dataset):
    started = False

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        if not Spawning.started:
            Spawning.started = True
            grandchild()
        time.sleep(0.002)
        return i


class SpawningStream(torch.utils.data.IterableDataset):
    def __iter__(self):
        grandchild()
        for i in range(100_000):
            time.sleep(0.002)
            yield i


if __name__ == "__main__":
    data = SpawningStream() if KIND == "stream" else Spawning()
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(4)
    plan = builder.with_workers(2, start_method=START).compile()
    loader = plan.build()
    for n, batch in enumerate(loader):
        if len([p for p in os.listdir(FOLDER) if not p.endswith(".tmp")]) >= 2:
            if ENDING == "close":
                loader.close()
                print("closed", flush=True)
                time.sleep(60)
            print("ready", flush=True)
            time.sleep(60)
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return os.path.exists(f"/proc/{pid}") or sys.platform != "linux"
    return state != "Z"


def run_and_end(
    tmp_path: Path, kind: str, ending: str, *, stubborn: bool = False, start: str = "default"
) -> list[int]:
    """Start the script, end it by ``ending``; the grandchildren still alive after WAIT s."""
    folder = tmp_path / "pids"
    folder.mkdir()
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), str(folder), kind, "1" if stubborn else "0", ending, start],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    pids: list[int] = []
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the grandchildren are recorded
        assert line.strip() in ("ready", "closed"), line
        pids = [int(p.read_text()) for p in folder.glob("pid-*") if p.suffix != ".tmp"]
        assert len(pids) == 2, pids
        if ending != "close":
            process.send_signal(getattr(signal, ending))
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.1)
        return [p for p in pids if alive(p)]
    finally:
        process.kill()
        process.wait(30)
        for pid in pids:  # never leave one behind, whatever the outcome
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# every ending with map-style workers, a stream's once (the rest: -m slow)
@pytest.mark.parametrize(
    ("ending", "kind"),
    [
        *((ending, "map") for ending in ("SIGINT", "SIGTERM", "SIGKILL")),
        pytest.param("SIGINT", "stream", marks=pytest.mark.slow),
        ("SIGTERM", "stream"),
        pytest.param("SIGKILL", "stream", marks=pytest.mark.slow),
    ],
)
def test_grandchildren_end_when_the_main_process_is_signalled(tmp_path, kind, ending):
    assert run_and_end(tmp_path, kind, ending) == []


def test_grandchildren_end_when_the_loader_closes(tmp_path):
    assert run_and_end(tmp_path, "map", "close") == []


@pytest.mark.parametrize("ending", ["close", "SIGINT", "SIGTERM", "SIGKILL"])
def test_a_grandchild_ignoring_sigterm_is_killed(tmp_path, ending):
    assert run_and_end(tmp_path, "map", ending, stubborn=True) == []


# SIGKILL's way (the workers see the main process gone) is the fork rows' too; 10 s here
@pytest.mark.parametrize("ending", ["SIGINT", pytest.param("SIGKILL", marks=pytest.mark.slow)])
def test_grandchildren_of_spawned_workers_end_too(tmp_path, ending):
    assert run_and_end(tmp_path, "map", ending, stubborn=True, start="spawn") == []
