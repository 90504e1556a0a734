"""A plain training loop's checkpoints, at every boundary, against an uninterrupted run.

The loop every tutorial writes::

    for epoch in range(start, EPOCHS):
        loader.set_epoch(epoch)  # the DistributedSampler habit (also run without it)
        for batch in loader:
            step(batch)  # a checkpoint may be saved here, after the step
        save({"epoch": epoch + 1, "loader": loader.state_dict()})  # or here, after the loop

A run is stopped right after a checkpoint and a fresh loader (and a fresh one-``Linear``
model) resumes from it; the sample ids trained and the final weights must equal the
uninterrupted run's. torchdata's ``StatefulDataLoader`` runs the same loop side by side: the
samples it trains per epoch are the oracle for "nothing lost, nothing repeated" (its orders
are its own, so only the counts and the sets of samples are compared with it).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import torch
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),  # torchdata's
]

N, BATCH, EPOCHS = 40, 4, 3
BATCHES = N // BATCH


class Ids(IterableDataset):  # type: ignore[type-arg]
    """The ids 0..N-1 as a stream (torch and loaderkit read it alike)."""

    def __iter__(self):
        return iter(range(N))

    def __len__(self) -> int:
        return N


def _loaderkit(kind: str, workers: int) -> Any:
    data: Any = list(range(N)) if kind == "map" else Ids()
    builder = DataLoaderBuilder().with_dataset(data, name="ids").with_batch_size(BATCH)
    builder = builder.with_seed(5).with_workers(workers)
    builder = builder.with_shuffle() if kind == "map" else builder
    return builder.compile().build()


def _torchdata(kind: str, workers: int) -> Any:
    from torchdata.stateful_dataloader import StatefulDataLoader

    if kind == "map":
        return StatefulDataLoader(
            list(range(N)), batch_size=BATCH, shuffle=True, num_workers=workers
        )
    return StatefulDataLoader(Ids(), batch_size=BATCH, num_workers=0)


# where the first run saves and stops: (epoch, batch index) inside the loop, after the step,
# or (epoch, "after") after the epoch's loop ended
BOUNDARIES = {
    "mid-epoch": (1, 4),
    "last batch, inside the loop": (0, BATCHES - 1),
    "after the loop": (0, "after"),
    "last step": (EPOCHS - 1, "after"),
}


class Run:
    """One run of the loop: the ids trained and a one-``Linear`` model's weights."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Linear(1, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.ids: list[int] = []

    def step(self, batch: torch.Tensor) -> None:
        self.ids += [int(i) for i in batch]
        x = batch.float().unsqueeze(1) / N
        loss = torch.nn.functional.mse_loss(self.model(x), 2 * x + 1)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def train(
        self, loader: Any, start: int, stop_at: tuple[int, Any] | None, set_epoch: bool
    ) -> dict[str, Any] | None:
        """Train epochs ``start..EPOCHS-1``; return the checkpoint saved at ``stop_at``."""
        for epoch in range(start, EPOCHS):
            if set_epoch:
                loader.set_epoch(epoch)
            for index, batch in enumerate(loader):
                self.step(batch)
                if stop_at == (epoch, index):
                    return self.checkpoint(epoch, loader)
            if stop_at == (epoch, "after"):
                return self.checkpoint(epoch + 1, loader)
        return None

    def checkpoint(self, epoch: int, loader: Any) -> dict[str, Any]:
        saved = {
            "epoch": epoch,
            "loader": loader.state_dict(),
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
        }
        if "loaderkit_state" in saved["loader"]:  # a loaderkit state is JSON, as on disk
            saved["loader"] = json.loads(json.dumps(saved["loader"]))
        return saved

    def resume(self, loader: Any, saved: dict[str, Any], set_epoch: bool) -> None:
        self.model.load_state_dict(saved["model"])
        self.opt.load_state_dict(saved["opt"])
        loader.load_state_dict(saved["loader"])
        self.train(loader, saved["epoch"], None, set_epoch)


def _interrupted(make: Any, where: str, set_epoch: bool) -> tuple[Run, Run]:
    first, rest = Run(), Run()
    loader = make()
    saved = first.train(loader, 0, BOUNDARIES[where], set_epoch)
    assert saved is not None
    getattr(loader, "close", lambda: None)()  # the process is gone
    resumed = make()
    rest.ids = list(first.ids)
    rest.resume(resumed, saved, set_epoch)
    getattr(resumed, "close", lambda: None)()
    return first, rest


@pytest.mark.parametrize("set_epoch", [False, True], ids=["no-set_epoch", "set_epoch"])
@pytest.mark.parametrize("where", list(BOUNDARIES))
@pytest.mark.parametrize(
    ("kind", "workers"), [("map", 0), ("map", 2), ("stream", 0), ("stream", 2)]
)
def test_a_checkpoint_resumes_to_the_uninterrupted_run(
    kind: str, workers: int, where: str, set_epoch: bool
) -> None:
    if set_epoch and workers:
        pytest.skip("set_epoch with workers: covered at 0 workers (the rule is the same)")
    full = Run()
    loader = _loaderkit(kind, workers)
    full.train(loader, 0, None, set_epoch)
    loader.close()
    _, resumed = _interrupted(lambda: _loaderkit(kind, workers), where, set_epoch)
    assert resumed.ids == full.ids  # the same samples in the same order: none lost or doubled
    for got, want in zip(resumed.model.parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("where", list(BOUNDARIES))
@pytest.mark.parametrize("kind", ["map", "stream"])
def test_the_samples_trained_are_those_torchdata_trains(kind: str, where: str) -> None:
    """The oracle for loss and repetition: torchdata's StatefulDataLoader in the same loop."""
    pytest.importorskip("torchdata")
    _, ours = _interrupted(lambda: _loaderkit(kind, 0), where, set_epoch=False)
    _, theirs = _interrupted(lambda: _torchdata(kind, 0), where, set_epoch=False)
    assert len(ours.ids) == len(theirs.ids)
    assert Counter(ours.ids) == Counter(theirs.ids)
    for epoch in range(EPOCHS):  # epoch by epoch: each a whole pass in both
        window = slice(epoch * N, (epoch + 1) * N)
        assert sorted(ours.ids[window]) == sorted(theirs.ids[window])
