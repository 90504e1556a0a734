"""Real multi-process runs: torchrun, the gloo backend on localhost, two processes.

Each test launches ``dist_worker.py`` with ``python -m torch.distributed.run`` (through
``lk_torchrun``) under a timeout, so a hang (a rank waiting in a collective) fails the test
instead of stalling the run. The ranks write JSON reports that the test checks.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from lk_torchrun import LAUNCH_TIMEOUT, torchrun

WORKER = Path(__file__).with_name("dist_worker.py")

pytestmark = [pytest.mark.timeout(2 * LAUNCH_TIMEOUT + 30), pytest.mark.distributed]


def launch(
    scenario: str, out: Path, *args: object, nproc: int = 2, killed: bool = False
) -> list[dict]:
    """Run ``scenario`` on ``nproc`` ranks; the ranks' reports in rank order.

    ``killed``: the ranks kill themselves (SIGKILL) once they reported, so the launcher
    must fail.
    """
    reports = [str(out / f"{scenario}-rank{r}.json") for r in range(nproc)]
    return torchrun(WORKER, scenario, out, *args, reports=reports, nproc=nproc, killed=killed)


@pytest.mark.parametrize("workers", [0, 2])
def test_all_ranks_together_deliver_the_epoch(tmp_path, workers):
    reports = launch("epoch", tmp_path, workers)
    assert "torch.distributed process group" in reports[0]["explain"]
    assert "rank 1 of 2" in reports[1]["explain"]
    for epoch in range(2):
        per_rank = reports[0]["all"][epoch]
        assert per_rank == reports[1]["all"][epoch]  # the same all_gather on both ranks
        counts = [r["epochs"][epoch]["batches"] for r in reports]
        assert counts[0] == counts[1] == 7  # ceil(103 / 16): equal, so nobody waits
        ids = per_rank[0] + per_rank[1]
        assert set(ids) == set(range(103))
        repeated = Counter(ids) - Counter(range(103))
        assert sum(repeated.values()) == 7 * 16 - 103  # the documented wrap-around only
    assert reports[0]["all"][0] != reports[0]["all"][1]  # epochs are reshuffled
    for report in reports:  # a plan without with_distributed() would read everything twice
        assert "one of 2 ranks (an initialized torch.distributed process group)" in (
            report["unsharded"] or ""
        )
        assert report["opt_out"] == [0, 1, 13]  # the explicit opt-out: the whole dataset


def test_a_ddp_training_loop_on_uneven_data_finishes_on_every_rank(tmp_path):
    reports = launch("train", tmp_path)
    assert reports[0]["steps"] == reports[1]["steps"] > 0
    assert reports[0]["checksum"] == pytest.approx(reports[1]["checksum"])  # DDP kept in sync


def test_a_run_killed_mid_epoch_resumes_at_another_world_size(tmp_path):
    # 2 ranks x 6 = global batch 12: stop after 3 steps, continue on 1 rank x 12
    reference = launch("full", tmp_path, 12, nproc=1)[0]["global_batches"]
    before = launch("resume-save", tmp_path, 3, 12, killed=True)[0]["global_batches"]
    after = launch("resume-load", tmp_path, tmp_path / "state.json", 12, nproc=1)[0]
    got = before + after["global_batches"]
    assert got == reference  # the same global stream: every sample of the epoch once
    assert sorted(i for batch in got for i in batch) == list(range(103))
