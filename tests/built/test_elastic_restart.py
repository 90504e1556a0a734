"""Issue 15: a rank killed mid-epoch under ``torchrun --max-restarts=1`` resumes exactly.

Each test launches this file as a script under torchrun (gloo on 127.0.0.1, the c10d
rendezvous on a free port, two ranks, one restart allowed). Every rank trains like a real
DDP job: for each batch it appends the batch's sample ids to its own log (fsync), takes a
"step" (an all-reduce, which keeps the ranks in lockstep) and, every ``K`` steps, writes
``loader.state_dict()`` to its checkpoint (atomically: a temporary file, then ``os.replace``).
In the first attempt rank 1 kills itself with SIGKILL mid-epoch, after logging a batch it
never trained; torchrun tears the group down and starts it again; the second attempt loads
each rank's last checkpoint (``load_state_dict``, then the DDP habit ``set_epoch(epoch)``
before each epoch, which keeps the resume) and trains to the end.

What the run defines as trained: the first attempt's batches up to its last checkpoint,
then every batch of the second attempt (the batches after the checkpoint were trained twice:
the documented replay since the checkpoint, what any trainer redoes). Per rank, that sequence
must equal an uninterrupted run's batches exactly: nothing lost, nothing else repeated. The
uninterrupted run is a fresh loader on the same rank after the restart (and the same batches
from ranks simulated in the test process).

Run as a script: ``python -m torch.distributed.run ... test_elastic_restart.py KIND WORKERS
OUT_DIR`` with KIND ``map`` or ``stream``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from lk_torchrun import LAUNCH_TIMEOUT, torchrun
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder

pytestmark = [
    pytest.mark.distributed,
    pytest.mark.timeout(LAUNCH_TIMEOUT + 30),
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

EPOCHS = 2
K = 5  # a checkpoint every K (global) steps
KILL_RANK = 1
MAP_N = 103  # 13 global batches of 2 x 4: the last one completed by wrapping around
STREAM_N = 96  # 48 elements per rank: 12 batches of 4 on each rank, so the ranks stay in step
BATCH = 4  # per rank


class Numbers(IterableDataset[int]):
    """The stream 0 .. n-1 in every process (loaderkit shards it by rank)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def builder(kind: str, workers: int) -> DataLoaderBuilder:
    """The plan every rank runs (``with_distributed()`` detects the rank under torchrun)."""
    base = DataLoaderBuilder().with_batch_size(BATCH).with_seed(21)
    if kind == "map":
        base = base.with_dataset({"idx": torch.arange(MAP_N)}).with_shuffle()
    else:  # a buffer shuffle: the stream resumes by replaying its shard
        base = base.with_dataset(Numbers(STREAM_N)).with_shuffle(buffer_size=8)
    if workers:
        base = base.with_workers(workers, start_method="fork")
    return base


def batch_ids(batch: Any) -> list[int]:
    return [int(i) for i in (batch["idx"] if isinstance(batch, dict) else batch)]


def uninterrupted(loader: Any) -> list[list[int]]:
    """The batches of epochs 0 .. EPOCHS-1, each pass after ``set_epoch`` (the DDP habit)."""
    out = []
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        out.extend(batch_ids(batch) for batch in loader)
    return out


# -- the rank's script -----------------------------------------------------------------------


def _write_atomically(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _rank_main(kind: str, workers: int, out: Path, kill_step: int) -> None:
    import torch.distributed as dist

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    plan = builder(kind, workers).with_distributed().compile()
    loader = plan.build()
    ckpt = out / f"ckpt-rank{rank}.json"
    step, first_epoch, resumed_from = 0, 0, None
    if ckpt.exists():
        saved = json.loads(ckpt.read_text())
        step, resumed_from = saved["step"], saved["loader"]
        loader.load_state_dict(saved["loader"])
        first_epoch = saved["loader"]["epoch"]
    with (out / f"trained-rank{rank}.jsonl").open("a") as log:
        for epoch in range(first_epoch, EPOCHS):
            loader.set_epoch(epoch)  # the state's own epoch first: keeps the resume
            for batch in loader:
                log.write(json.dumps({"attempt": attempt, "ids": batch_ids(batch)}) + "\n")
                log.flush()
                os.fsync(log.fileno())
                if attempt == 0 and rank == KILL_RANK and step + 1 == kill_step:
                    os.kill(os.getpid(), signal.SIGKILL)  # mid-step: logged, never trained
                dist.all_reduce(torch.ones(1))  # the training step: every rank takes part
                step += 1
                if step % K == 0:
                    _write_atomically(ckpt, {"step": step, "loader": loader.state_dict()})
    loader.close()
    with plan.build() as fresh:
        reference = uninterrupted(fresh)
    report = {
        "attempt": attempt,
        "world": dist.get_world_size(),
        "resumed_from": resumed_from,
        "step": step,
        "reference": reference,
    }
    _write_atomically(out / f"report-rank{rank}.json", report)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))


# -- the tests -------------------------------------------------------------------------------


def _simulated(kind: str, workers: int, rank: int) -> list[list[int]]:
    """The uninterrupted batches of ``rank``, the two ranks simulated in this process."""
    plan = builder(kind, 0).with_distributed(world_size=2, rank=rank).compile()
    with plan.build() as loader:
        return uninterrupted(loader)


def _trained(out: Path, rank: int, resumed_at: int) -> tuple[list[list[int]], int]:
    """The batches the run trained on ``rank`` (deduplicated), and how many were replayed."""
    lines = [
        json.loads(line) for line in (out / f"trained-rank{rank}.jsonl").read_text().splitlines()
    ]
    first = [line["ids"] for line in lines if line["attempt"] == 0]
    second = [line["ids"] for line in lines if line["attempt"] == 1]
    assert len(first) + len(second) == len(lines), "only two attempts"
    return first[:resumed_at] + second, len(first) - resumed_at


@pytest.mark.parametrize(
    ("kind", "workers", "kill_step", "resumed_at"),
    [
        # killed at global step 18 (epoch 1, batch 5): resumed from step 15 (epoch 1, batch 2)
        pytest.param("map", 0, 18, 15, id="map-mid-epoch", marks=pytest.mark.slow),
        # killed at step 12 with 2 workers each: resumed from step 10 (epoch 0, batch 10)
        pytest.param("map", 2, 12, 10, id="map-workers"),
        # killed at step 17 (epoch 1, batch 4), resumed from step 15 (epoch 1, batch 3)
        pytest.param("stream", 0, 17, 15, id="stream"),
    ],
)
def test_a_rank_killed_mid_epoch_is_restarted_and_resumes_exactly(
    tmp_path: Path, kind: str, workers: int, kill_step: int, resumed_at: int
) -> None:
    reports = torchrun(
        __file__,
        kind,
        workers,
        tmp_path,
        kill_step,
        reports=[str(tmp_path / f"report-rank{r}.json") for r in range(2)],
        max_restarts=1,
        rdzv=True,
    )
    for rank, report in enumerate(reports):
        assert report["attempt"] == 1, "torchrun restarted the group once"
        assert report["world"] == 2
        state = report["resumed_from"]
        assert state is not None, "the second attempt resumed from a checkpoint"
        assert state["rank"] == rank
        trained, replayed = _trained(tmp_path, rank, resumed_at)
        # the first attempt went on past its last checkpoint: that span is what is replayed
        assert 1 <= replayed <= kill_step - resumed_at
        want = report["reference"]
        assert want == _simulated(kind, workers, rank)  # the same batches as simulated ranks
        assert trained == want, f"rank {rank}: the resumed run differs from an uninterrupted one"
        assert report["step"] == len(want)
    # together the ranks read every sample of each epoch (the map order wraps its last batch)
    per_epoch = len(reports[0]["reference"]) // EPOCHS
    for epoch in range(EPOCHS):
        ids = {
            i
            for report in reports
            for batch in report["reference"][epoch * per_epoch : (epoch + 1) * per_epoch]
            for i in batch
        }
        assert ids == set(range(MAP_N if kind == "map" else STREAM_N))
