"""Streams under torchrun (gloo on 127.0.0.1, two ranks): ``even_batches`` never hangs DDP.

The test launches this very file on two ranks through ``lk_torchrun`` under a timeout; each
rank streams uneven lengths through a ``StreamLoader`` built with ``with_distributed()``, runs
a real ``all_reduce`` per batch (a rank with one batch more would wait in it forever; the
process group's own timeout turns that into an error) and writes a JSON report.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from lk_testdata import worker_block
from torch.utils.data import IterableDataset

LENGTHS = (17, 9, 1)
BATCH = 4


class Numbers(IterableDataset[int]):
    """The stream 0 .. n - 1, whole in every process."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


class OwnBlocks(IterableDataset[int]):
    """torch's documented pattern: each worker yields its own block of 0 .. n - 1."""

    splits_by_worker = True

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return worker_block(self.n)


def _rank_main(out: Path) -> None:  # pragma: no cover - runs under torchrun
    import torch.distributed as dist

    from loaderkit import DataLoaderBuilder

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    report: dict[str, object] = {"cases": []}
    for kind in ("element", "worker"):
        for n in LENGTHS:
            for workers in (0, 2):
                for drop_last in (False, True):
                    data = Numbers(n) if kind == "element" else OwnBlocks(n)
                    builder = (
                        DataLoaderBuilder()
                        .with_dataset(data)
                        .with_batch_size(BATCH, drop_last=drop_last)
                        .with_distributed()
                    )
                    if workers:
                        builder = builder.with_workers(workers, start_method="fork")
                    ids: list[int] = []
                    reduced = 0
                    with builder.compile().build() as loader:
                        for batch in loader:
                            total = torch.tensor([float(batch.sum())])
                            dist.all_reduce(total)  # hangs (then times out) if a rank is done
                            reduced += 1
                            ids.extend(batch.tolist())
                        trimmed = loader.trimmed_samples
                        explain = loader.explain()
                    report["cases"].append(  # type: ignore[attr-defined]
                        {
                            "kind": kind,
                            "n": n,
                            "workers": workers,
                            "drop_last": drop_last,
                            "ids": ids,
                            "all_reduced": reduced,
                            "trimmed": trimmed,
                            "explain": explain,
                        }
                    )
    # a resume mid-epoch keeps the ranks even: 1 batch, then the rest in a new loader
    plan = (
        DataLoaderBuilder()
        .with_dataset(Numbers(17))
        .with_batch_size(2)
        .with_workers(2, start_method="fork")
        .with_distributed()
        .compile()
    )
    with plan.build() as loader:
        full = [b.tolist() for b in loader]
    with plan.build() as loader:
        it = iter(loader)
        head = [next(it).tolist()]
        state = json.loads(json.dumps(loader.state_dict()))
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        rest = []
        for batch in resumed:
            dist.all_reduce(torch.ones(1))
            rest.append(batch.tolist())
    report["resume"] = {"full": full, "head": head, "rest": rest}
    (out / f"stream-rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover - the torchrun entry point
    _rank_main(Path(sys.argv[1]))
    sys.exit(0)


from lk_torchrun import LAUNCH_TIMEOUT, torchrun  # noqa: E402 - only the test needs it

pytestmark = [pytest.mark.timeout(LAUNCH_TIMEOUT + 30), pytest.mark.distributed]


def _shares(n: int, kind: str, workers: int) -> list[list[int]]:
    """Each (rank, producer) shard's elements as the loader reads them, by [rank x W + w]."""
    producers = max(workers, 1)
    if kind == "element":
        return [list(range(s, n, 2 * producers)) for s in range(2 * producers)]
    per = -(-n // producers) if workers else n
    own = [list(range(w * per, min(n, (w + 1) * per))) for w in range(producers)]
    return [own[w][r::2] for r in range(2) for w in range(producers)]


def test_uneven_streams_give_every_rank_as_many_batches(tmp_path: Path) -> None:
    reports = torchrun(
        Path(__file__),
        tmp_path,
        reports=[str(tmp_path / f"stream-rank{r}.json") for r in range(2)],
    )
    cases = list(zip(reports[0]["cases"], reports[1]["cases"], strict=True))
    assert len(cases) == 2 * len(LENGTHS) * 2 * 2
    uneven = 0
    for a, b in cases:
        kind, n, workers, drop_last = a["kind"], a["n"], a["workers"], a["drop_last"]
        where = f"{kind} n={n} workers={workers} drop_last={drop_last}"
        assert a["all_reduced"] == b["all_reduced"], where  # equal counts: nobody waits
        ids = a["ids"] + b["ids"]
        assert len(ids) == len(set(ids)), where  # nothing delivered twice
        shares = _shares(n, kind, workers)
        producers = max(workers, 1)
        expected_trim = 0
        for w in range(producers):  # rank 1's share of producer w is the shorter one
            own, short = shares[w], shares[producers + w]
            batches = len(short) // BATCH if drop_last else -(-len(short) // BATCH)
            kept = min(len(own), batches * BATCH)
            full = len(own) // BATCH * BATCH if drop_last else len(own)
            expected_trim += full - kept
            uneven += len(own) != len(short)
        assert a["trimmed"] == expected_trim, where  # the trimmed elements are counted
        assert b["trimmed"] == 0, where  # the shortest rank trims nothing
        if not drop_last:  # every element is delivered once or counted as trimmed
            assert sorted(ids) == sorted(set(range(n)) - _trimmed_ids(shares, producers)), where
            assert len(ids) + a["trimmed"] == n, where
    assert uneven  # the lengths did make uneven shares (else the test would prove nothing)
    assert "trim" in reports[0]["cases"][0]["explain"]
    resume = reports[0]["resume"], reports[1]["resume"]
    for r in resume:
        assert r["head"] + r["rest"] == r["full"]
    assert len(resume[0]["rest"]) == len(resume[1]["rest"])


def _trimmed_ids(shares: list[list[int]], producers: int) -> set[int]:
    """The elements of rank 0's shares beyond rank 1's batch count (``drop_last=False``)."""
    out: set[int] = set()
    for w in range(producers):
        batches = -(-len(shares[producers + w]) // BATCH)
        out.update(shares[w][batches * BATCH :])
    return out
