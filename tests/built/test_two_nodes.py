"""Issue 15: two torchrun "nodes" deliver the same global batches as one node, and as one rank.

Two torchrun agents on 127.0.0.1 (``--nnodes=2``, ``--node-rank`` 0 and 1, the c10d
rendezvous hosted by node 0 on a free port) run this file as a script on one process each:
a world of two ranks spread over two nodes. Each rank builds the same plans with
``with_distributed()`` (rank and world size detected at build) and per-rank batch
``GLOBAL // world size``, runs two epochs (``set_epoch`` before each) and writes its batches.
The global batches (the ranks' ``s``-th batches concatenated in rank order) must be the same
as those of one agent with two processes, and the same as one rank with the whole global
batch, as docs/distributed.md ("Global batches") promises for the plain order and for
bucketing. Both agents run in process groups of their own and are killed if anything fails
or hangs (``lk_torchrun.run_agents``).

Run as a script: ``python -m torch.distributed.run ... test_two_nodes.py OUT_DIR``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from lk_torchrun import LAUNCH_TIMEOUT, free_port, run_agents, torchrun_command

from loaderkit import DataLoaderBuilder

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(LAUNCH_TIMEOUT + 30)]

N = 103  # 13 global batches of 8: the last one completed by wrapping around
GLOBAL = 8
EPOCHS = 2
ROWS = [{"idx": i, "length": 1 + (i * 37) % 50} for i in range(N)]


def ids(samples: list[dict[str, int]]) -> dict[str, torch.Tensor]:
    return {"idx": torch.tensor([s["idx"] for s in samples])}


PLANS = {
    "shuffle": lambda b: b,
    "bucketing": lambda b: b.with_bucketing("length"),
}


def builder(name: str, world: int) -> DataLoaderBuilder:
    base = (
        DataLoaderBuilder()
        .with_dataset(ROWS)
        .with_collator(ids)
        .with_shuffle()
        .with_seed(9)
        .with_batch_size(GLOBAL // world)
    )
    return PLANS[name](base)


def epochs(loader: Any) -> list[list[list[int]]]:
    """Each epoch's batches (sample ids), ``set_epoch`` before each pass."""
    out = []
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        out.append([[int(i) for i in batch["idx"]] for batch in loader])
    return out


def _rank_main(out: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    report: dict[str, Any] = {
        "rank": rank,
        "world": world,
        "node": int(os.environ["GROUP_RANK"]),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "plans": {},
    }
    for name in PLANS:
        with builder(name, world).with_distributed().compile().build() as loader:
            assert (loader.rank, loader.world_size) == (rank, world)
            report["plans"][name] = epochs(loader)
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(Path(sys.argv[1]))


# -- the tests -------------------------------------------------------------------------------


def global_batches(reports: list[dict[str, Any]], name: str) -> list[list[list[int]]]:
    """Per epoch, the global batches: the ranks' ``s``-th batches in rank order."""
    reports = sorted(reports, key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == list(range(len(reports)))
    out = []
    for epoch in range(EPOCHS):
        parts = [r["plans"][name][epoch] for r in reports]
        assert len({len(p) for p in parts}) == 1, "every rank has as many batches"
        out.append([[i for part in step for i in part] for step in zip(*parts, strict=True)])
    return out


def one_rank(name: str) -> list[list[list[int]]]:
    """The same plans on one process with the whole global batch."""
    with builder(name, 1).compile().build() as loader:
        return epochs(loader)


def assert_same_global_stream(ranks: list[list[list[int]]], single: list[list[list[int]]]) -> None:
    """Several ranks' global batches are one rank's with the whole global batch, step by step.

    One rank's partial batch (103 samples: one batch of 7, the last in the plain order,
    anywhere with bucketing) is completed to 8 on several ranks by wrapping around to samples
    of the epoch (``even_batches``, docs/distributed.md); every other batch is the same.
    """
    for epoch, (have, want) in enumerate(zip(ranks, single, strict=True)):
        assert len(have) == len(want) == 13
        assert sorted(len(batch) for batch in want) == [N % GLOBAL] + [GLOBAL] * 12
        for step, (got, batch) in enumerate(zip(have, want, strict=True)):
            assert len(got) == GLOBAL
            assert got[: len(batch)] == batch, f"epoch {epoch}, step {step}"


def reports_of(out: Path, world: int, per_node: int) -> list[dict[str, Any]]:
    """The reports of ``world`` ranks, checked to be spread ``per_node`` ranks per node."""
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    assert {report["world"] for report in reports} == {world}
    nodes = sorted((r["node"], r["local_rank"]) for r in reports)
    assert nodes == [(n, p) for n in range(world // per_node) for p in range(per_node)]
    return reports


def two_nodes(out: Path, nproc_per_node: int, one_node: Path | None = None) -> None:
    """Run two agents (nodes 0 and 1) of ``nproc_per_node`` ranks each, writing to ``out``.

    ``one_node``: meanwhile, one agent of ``2 * nproc_per_node`` ranks writes there (the
    launches are independent: running them side by side halves the wait).
    """
    endpoint = f"127.0.0.1:{free_port()}"
    commands = [
        torchrun_command(
            __file__, out, nproc=nproc_per_node, nnodes=2, node_rank=node, rdzv_endpoint=endpoint
        )
        for node in range(2)
    ]
    if one_node is not None:
        commands.append(torchrun_command(__file__, one_node, nproc=2 * nproc_per_node))
    results = run_agents(commands, name="two torchrun nodes (and one)")
    for agent, result in enumerate(results):
        assert result.returncode == 0, f"agent {agent}:\n{result.stderr[-4000:]}"


def test_two_nodes_of_one_rank_give_one_nodes_and_one_ranks_global_batches(
    tmp_path: Path,
) -> None:
    (tmp_path / "nodes").mkdir()
    (tmp_path / "node").mkdir()
    two_nodes(tmp_path / "nodes", nproc_per_node=1, one_node=tmp_path / "node")
    nodes = reports_of(tmp_path / "nodes", world=2, per_node=1)
    node = reports_of(tmp_path / "node", world=2, per_node=2)
    for name in PLANS:
        got = global_batches(nodes, name)
        assert got == global_batches(node, name), name  # two nodes = one node, step by step
        assert_same_global_stream(got, one_rank(name))
        for epoch in got:  # every sample in every epoch, 13 x 8 - 103 repeated to fill up
            delivered = [i for batch in epoch for i in batch]
            assert sorted(set(delivered)) == list(range(N))
            assert len(delivered) == 13 * GLOBAL
    assert got[0] != got[1]  # epochs are reshuffled


@pytest.mark.slow
def test_two_nodes_of_two_ranks_give_one_ranks_global_batches(tmp_path: Path) -> None:
    two_nodes(tmp_path, nproc_per_node=2)  # 4 ranks x 2
    nodes = reports_of(tmp_path, world=4, per_node=2)
    for name in PLANS:
        assert_same_global_stream(global_batches(nodes, name), one_rank(name))
