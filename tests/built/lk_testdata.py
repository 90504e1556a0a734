"""Datasets shared by the build tests (a module of its own, so workers under spawn import it)."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import Dataset


def unchanged(sample: object) -> object:
    """A transform that returns the sample as it is.

    A plan with a transform starts its workers: a source of tensors alone is read in the
    main process whatever ``num_workers`` says, so tests of workers over such data add this.
    """
    return sample


class IndexDataset(Dataset[dict[str, torch.Tensor]]):
    """Sample i is {"index": i, "x": a deterministic float vector of i}."""

    def __init__(self, n: int, dim: int = 3) -> None:
        self.n = n
        self.dim = dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return {"index": torch.tensor(i), "x": torch.arange(self.dim, dtype=torch.float32) * i}


class FailingDataset(IndexDataset):
    """Raises at one index."""

    def __init__(self, n: int, bad: int) -> None:
        super().__init__(n)
        self.bad = bad

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        if i == self.bad:
            raise ValueError(f"corrupt record {i}")
        return super().__getitem__(i)


def noisy(sample: dict[str, torch.Tensor], rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """A random transform keyed by the rng loaderkit passes."""
    out = dict(sample)
    out["noise"] = torch.from_numpy(rng.normal(size=2).astype(np.float32))
    return out


def global_draws(sample: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Draws from the global RNGs of whatever process runs it, plus the pid."""
    out = dict(sample)
    out["np"] = torch.tensor(np.random.random())
    out["torch"] = torch.rand(())
    out["pid"] = torch.tensor(os.getpid())
    return out


class EpochAwareDataset(IndexDataset):
    """A dataset with a curriculum of its own: samples carry the epoch set on this copy."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.epoch = -1

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        out = super().__getitem__(i)
        out["epoch"] = torch.tensor(self.epoch)
        return out


class LoggedDataset(IndexDataset):
    """An IndexDataset writing every index it reads to a file of its process in ``log_dir``."""

    def __init__(self, n: int, log_dir: str, bad: frozenset[int] = frozenset()) -> None:
        super().__init__(n)
        self.log_dir = log_dir
        self.bad = bad

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        with open(os.path.join(self.log_dir, f"reads-{os.getpid()}"), "a") as log:
            log.write(f"{i}\n")
        if i in self.bad:
            raise ValueError(f"corrupt record {i}")
        return super().__getitem__(i)

    def reads(self) -> list[int]:
        """Every index read so far, by any process."""
        out: list[int] = []
        for name in sorted(os.listdir(self.log_dir)):
            if name.startswith("reads-"):
                with open(os.path.join(self.log_dir, name)) as log:
                    out.extend(int(line) for line in log)
        return out


def worker_block(n: int) -> Iterator[int]:
    """torch's documented self-splitting pattern: this worker's contiguous block of 0 .. n-1.

    The whole range in the main process; with workers, worker ``i`` of ``k`` yields
    ``[i * ceil(n / k), (i + 1) * ceil(n / k))`` (cut at ``n``).
    """
    info = torch.utils.data.get_worker_info()
    if info is None:
        return iter(range(n))
    per = -(-n // info.num_workers)
    return iter(range(info.id * per, min(n, (info.id + 1) * per)))


PROC_PROBES = textwrap.dedent(
    """
    import os


    def children():
        \"\"\"This process's live child processes (zombies excluded), from /proc.\"\"\"
        found = []
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/children") as f:
                    found += [int(pid) for pid in f.read().split()]
            except OSError:  # a thread that ended meanwhile
                pass
        live = []
        for pid in found:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:  # reaped meanwhile
                continue
            if state != "Z":
                live.append(pid)
        return sorted(live)


    def threads():
        return len(os.listdir("/proc/self/task"))


    def fds():
        return len(os.listdir("/proc/self/fd"))
    """
)
"""Probes of this process's children, threads and fds, prepended to scripts run in a subprocess."""
