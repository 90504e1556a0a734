"""One rank of a multi-process test, launched by torchrun (gloo on localhost).

Usage: ``python -m torch.distributed.run --standalone --nproc-per-node W dist_worker.py
SCENARIO OUT_DIR [ARGS...]``. Every rank writes ``OUT_DIR/<scenario>-rank<r>.json``; the test
(tests/built/test_distributed_gloo.py) reads them. Scenarios:

- ``epoch WORKERS``: two epochs of a shuffled plan over an uneven dataset; each rank reports its
  sample ids per epoch and batch counts, and what building a plan without
  ``with_distributed()`` (refused) and with the opt-out ``with_distributed(world_size=1,
  rank=0)`` gives.
- ``train``: a short DDP training loop (two epochs) over an uneven dataset with bucketing and a
  mixture; reports the steps done and the final weights' checksum.
- ``resume-save K GLOBAL``: deliver K global batches (per-rank batch GLOBAL // world), save
  the loader state, then every rank kills itself with SIGKILL mid-epoch.
- ``resume-load STATE GLOBAL``: load that state at this world size and finish the epoch.
- ``full GLOBAL``: one uninterrupted epoch at this world size (the reference).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from loaderkit import DataLoaderBuilder, PlanError

N = 103  # not a multiple of any batch size used: exercises the tail rules


def dataset() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {
        "idx": torch.arange(N),
        "x": torch.randn(N, 4, generator=generator),
        "length": torch.randint(1, 40, (N,), generator=generator),
    }


def gather_batch(values: list[int]) -> list[int]:
    """The ranks' batches of one step, concatenated in rank order: the global batch."""
    return [i for part in gathered(values) for i in part]


def gathered(values: list[int]) -> list[list[int]]:
    """Every rank's list, in rank order (all_gather_object over gloo)."""
    out: list[list[int]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(out, values)
    return out


def epoch_scenario(workers: int) -> dict[str, object]:
    builder = (
        DataLoaderBuilder()
        .with_dataset(dataset())
        .with_batch_size(8)
        .with_shuffle()
        .with_seed(11)
        .with_distributed()
    )
    if workers:
        builder = builder.with_workers(workers, start_method="fork")
    loader = builder.compile().build()
    report: dict[str, object] = {"explain": loader.explain(), "epochs": []}
    for epoch in range(2):
        loader.set_epoch(epoch)
        ids = [int(i) for batch in loader for i in batch["idx"]]
        report["epochs"].append({"ids": ids, "batches": len(loader)})  # type: ignore[attr-defined]
        report.setdefault("all", []).append(gathered(ids))  # type: ignore[attr-defined]
    loader.close()
    plain = DataLoaderBuilder().with_dataset(dataset()).with_batch_size(8)
    try:  # issue 14: forgetting with_distributed() on one of several ranks is refused
        plain.compile().build()
        report["unsharded"] = None
    except PlanError as exc:
        report["unsharded"] = str(exc)
    whole = plain.with_distributed(world_size=1, rank=0).compile().build()  # the opt-out
    report["opt_out"] = [whole.rank, whole.world_size, len(whole)]
    return report


def train_scenario() -> dict[str, object]:
    from torch.nn.parallel import DistributedDataParallel

    data = dataset()
    extra = {"idx": torch.arange(1000, 1037), "x": torch.randn(37, 4), "length": torch.ones(37)}
    plan = (
        DataLoaderBuilder()
        .with_mixture({"main": data, "extra": extra}, weights={"main": 3, "extra": 1})
        .with_batch_size(6)
        .with_shuffle()
        .with_distributed()
        .compile()
    )
    loader = plan.build()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for batch in loader:
            loss = model(batch["x"]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()  # an all-reduce: a rank with fewer batches would hang here
            optimizer.step()
            steps += 1
    checksum = float(sum(p.detach().sum() for p in model.parameters()))
    return {"steps": steps, "checksum": checksum, "batches_per_epoch": len(loader)}


def _elastic_plan(global_batch: int) -> DataLoaderBuilder:
    world = dist.get_world_size()
    return (
        DataLoaderBuilder()
        .with_dataset(dataset())
        .with_batch_size(global_batch // world)
        .with_shuffle()
        .with_seed(5)
        .with_distributed()
    )


def full_scenario(global_batch: int) -> dict[str, object]:
    loader = _elastic_plan(global_batch).compile().build()
    return {"global_batches": [gather_batch([int(i) for i in b["idx"]]) for b in loader]}


def resume_save_scenario(out: Path, k: int, global_batch: int) -> dict[str, object]:
    loader = _elastic_plan(global_batch).compile().build()
    steps = []
    for step, batch in enumerate(loader):
        steps.append(gather_batch([int(i) for i in batch["idx"]]))
        if step + 1 == k:
            break
    state = loader.state_dict()
    if dist.get_rank() == 0:
        (out / "state.json").write_text(json.dumps(state))
    return {"global_batches": steps}


def resume_load_scenario(state_file: Path, global_batch: int) -> dict[str, object]:
    loader = _elastic_plan(global_batch).compile().build()
    loader.load_state_dict(json.loads(state_file.read_text()))
    steps = [gather_batch([int(i) for i in batch["idx"]]) for batch in loader]
    return {"global_batches": steps}


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    args = sys.argv[3:]
    dist.init_process_group("gloo")
    try:
        if scenario == "epoch":
            report = epoch_scenario(int(args[0]))
        elif scenario == "train":
            report = train_scenario()
        elif scenario == "full":
            report = full_scenario(int(args[0]))
        elif scenario == "resume-save":
            report = resume_save_scenario(out, int(args[0]), int(args[1]))
        elif scenario == "resume-load":
            report = resume_load_scenario(Path(args[0]), int(args[1]))
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
        report["rank"] = dist.get_rank()
        report["world"] = dist.get_world_size()
        name = f"{scenario}-rank{dist.get_rank()}.json"
        (out / name).write_text(json.dumps(report))
        dist.barrier()
        if scenario == "resume-save":  # killed mid-epoch: no cleanup, no flush
            os.kill(os.getpid(), signal.SIGKILL)
    finally:
        dist.destroy_process_group()
    os._exit(0)  # skip interpreter teardown: nothing is left to flush


if __name__ == "__main__":
    main()
