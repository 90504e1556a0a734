"""A process killed with SIGKILL mid-epoch resumes from its checkpoint: nothing lost or doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

CHILD = r"""
import json, os, sys, time
import torch
from loaderkit import DataLoaderBuilder

ckpt, log, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = (torch.arange(1000),)
plan = (DataLoaderBuilder().with_dataset(data, name="ids").with_batch_size(32).with_shuffle()
        .with_seed(77).with_workers(workers).compile())
loader = plan.build()
if os.path.exists(ckpt):
    with open(ckpt) as f:
        loader.load_state_dict(json.load(f))
with open(log, "a") as out:
    for batch in loader:
        ids = batch[0].tolist()
        # the step: record what was consumed, then checkpoint (atomically) after it
        out.write(json.dumps(ids) + "\n")
        out.flush()
        os.fsync(out.fileno())
        tmp = ckpt + ".tmp"
        with open(tmp, "w") as f:
            json.dump(loader.state_dict(), f)
        os.replace(tmp, ckpt)
        if os.environ.get("SLOW"):
            time.sleep(0.02)
    if loader.batches_delivered == len(loader):  # the epoch was delivered completely
        out.write("DONE\n")
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_sigkill_mid_epoch_then_resume_delivers_the_epoch_exactly(tmp_path: Path, workers):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ckpt, log = tmp_path / "state.json", tmp_path / "consumed.jsonl"
    args = [sys.executable, str(script), str(ckpt), str(log), str(workers)]
    env = {**os.environ, "SLOW": "1"}
    child = subprocess.Popen(args, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) >= 9:
                break
            if child.poll() is not None:
                pytest.fail(f"child exited early with {child.returncode}")
            time.sleep(0.01)
        os.killpg(child.pid, signal.SIGKILL)  # the child and its workers, no clean-up
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == -signal.SIGKILL
    lines = log.read_text().splitlines()
    # a batch logged after its checkpoint was not written yet is consumed again on resume,
    # which a real trainer also does (it redoes the step it did not checkpoint)
    state = json.loads(ckpt.read_text())
    delivered_before = state["batches_delivered"]
    # killed after logging batch k and before (or after) writing its checkpoint
    assert len(lines) - 1 <= delivered_before <= len(lines)
    assert 8 <= delivered_before < 32
    consumed_before = [json.loads(line) for line in lines[:delivered_before]]

    subprocess.run(args, check=True, timeout=120)
    lines_after = log.read_text().splitlines()
    assert lines_after[-1] == "DONE"
    resumed = [json.loads(line) for line in lines_after[len(lines) : -1]]

    ids = [i for batch in consumed_before + resumed for i in batch]
    assert sorted(ids) == list(range(1000))  # nothing lost, nothing doubled
    assert len(consumed_before) + len(resumed) == 32
