"""Train a tiny model with DDP on the CPU (gloo), the data sharded by loaderkit.

Run with two processes:

    torchrun --standalone --nproc-per-node 2 examples/ddp_train.py

(``python examples/ddp_train.py`` starts torchrun with two processes for you.) The dataset has
1,003 samples, which no global batch divides: loaderkit gives every rank the same number of
batches (the last global batch is completed by wrapping around to the start of the epoch), so
DDP's all-reduce never waits for a rank that ran out of data.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from loaderkit import DataLoaderBuilder

SAMPLES = 1_003
PER_RANK_BATCH = 32


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    generator = torch.Generator().manual_seed(0)
    features = torch.randn(SAMPLES, 8, generator=generator)
    labels = (features.sum(dim=1) > 0).long()
    plan = (
        DataLoaderBuilder()
        .with_dataset({"x": features, "y": labels, "idx": torch.arange(SAMPLES)})
        .with_batch_size(PER_RANK_BATCH)
        .with_shuffle()
        .with_seed(0)
        .with_distributed()  # rank and world size from the process group
        .compile()
    )
    loader = plan.build()
    if rank == 0:
        print(loader.explain().splitlines()[-1].strip())

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(3):
        loader.set_epoch(epoch)
        seen: list[int] = []
        total_loss, steps = 0.0, 0
        for batch in loader:
            loss = torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach())
            steps += 1
            seen.extend(int(i) for i in batch["idx"])
        counts: list[int] = [0] * world
        everything: list[list[int]] = [[] for _ in range(world)]
        dist.all_gather_object(counts, steps)
        dist.all_gather_object(everything, seen)
        if rank == 0:
            ids = [i for part in everything for i in part]
            print(
                f"epoch {epoch}: batches per rank {counts}, samples {len(set(ids))} of "
                f"{SAMPLES} (+{len(ids) - len(set(ids))} repeated to even the ranks), "
                f"mean loss on rank 0 {total_loss / steps:.3f}"
            )
    # Let DDP's reducer go (it holds gloo's work objects) while the interpreter is fully alive,
    # then the process group: left to interpreter teardown, gloo's threads can abort the
    # process after the training has finished.
    del model, optimizer
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if "RANK" not in os.environ:  # not under torchrun: start it with two processes
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        command += ["--nproc-per-node=2", __file__]
        sys.exit(subprocess.call(command))
    main()
