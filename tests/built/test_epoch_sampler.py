"""``loader.sampler``: where trainers and DDP scripts set the epoch, as on a torch DataLoader.

``loader.sampler.set_epoch(e)`` is ``loader.set_epoch(e)`` (the DDP habit
``train_loader.sampler.set_epoch(epoch)``), and the tools that read ``.sampler`` /
``.batch_sampler`` on a loader (Lightning, transformers, Accelerate) are run on it for real:
they set the epoch through it and take it for no torch sampler of theirs. The conformance test
runs Lightning on a torch ``DataLoader`` whose sampler records the epoch of every pass, and
checks that a loaderkit loader reads those very epochs (training and validation).
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler, SequentialSampler

from loaderkit import DataLoaderBuilder, DataModule
from loaderkit.integrations.accelerate import AcceleratedLoader
from loaderkit.integrations.lightning import LightningTrainLoader, for_lightning
from loaderkit.runtime.passes.epoch_sampler import EpochSampler

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N = 24
DATA = {"idx": torch.arange(N), "x": torch.linspace(0, 1, N)[:, None]}


class _Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for i in range(N):
            yield {"idx": torch.tensor(i), "x": torch.tensor([i / N])}


def _plan(stream: bool = False, seed: int = 3) -> Any:
    builder = DataLoaderBuilder().with_batch_size(4).with_seed(seed)
    if stream:
        return builder.with_dataset(_Stream()).with_shuffle(buffer_size=6).compile()
    return builder.with_dataset(DATA).with_shuffle().compile()


def _ids(batches: Any) -> list[list[int]]:
    return [batch["idx"].flatten().tolist() for batch in batches]


def _epoch(plan: Any, epoch: int) -> list[list[int]]:
    loader = plan.build()
    loader.set_epoch(epoch)
    return _ids(loader)


@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_the_ddp_habit_sets_the_epoch_of_the_next_pass(stream: bool) -> None:
    plan = _plan(stream)
    loader = plan.build()
    assert isinstance(loader.sampler, EpochSampler)
    assert loader.batch_sampler is None
    seen = []
    for epoch in (2, 0, 5):
        loader.sampler.set_epoch(epoch)
        assert loader.sampler.epoch == loader.epoch == epoch
        seen.append(_ids(loader))
    assert seen == [_epoch(plan, 2), _epoch(plan, 0), _epoch(plan, 5)]
    assert repr(loader.sampler) == "EpochSampler(epoch=5)"


def test_a_resumed_pass_is_kept_by_set_epoch_of_its_own_epoch() -> None:
    plan = _plan()
    first = plan.build()
    first.set_epoch(1)
    batches = iter(first)
    taken = _ids(itertools.islice(batches, 2))
    state = first.state_dict()
    loader = plan.build()
    loader.load_state_dict(state)
    loader.sampler.set_epoch(1)  # the epoch it resumes: the resume stands
    assert taken + _ids(loader) == _epoch(plan, 1)
    loader.load_state_dict(state)
    loader.sampler.set_epoch(2)  # another epoch replaces it
    assert _ids(loader) == _epoch(plan, 2)


def test_it_is_no_torch_sampler() -> None:
    sampler = _plan().build().sampler
    for torch_class in (Sampler, RandomSampler, SequentialSampler, BatchSampler):
        assert not isinstance(sampler, torch_class)
    with pytest.raises(TypeError, match="not iterable"):
        iter(sampler)  # type: ignore[call-overload]


def test_the_wrappers_set_the_epoch_their_own_way() -> None:
    plan = _plan()
    accelerated = AcceleratedLoader(plan.build())
    batches = iter(accelerated)
    next(batches), next(batches)  # a batch is read ahead: the state is held
    accelerated.sampler.set_epoch(3)  # the wrapper's set_epoch: the held state goes too
    assert accelerated.state_dict()["epoch"] == 3
    assert _ids(accelerated) == _epoch(plan, 3)

    class Trainer:
        current_epoch = 4

    trainer: Any = Trainer()
    told = for_lightning(plan.build(), trainer)
    assert isinstance(told, LightningTrainLoader)
    told.sampler.set_epoch(9)  # Lightning's number gives way to the trainer's epoch
    assert _ids(told) == _epoch(plan, 4)
    told.set_epoch(2)  # the loader's own set_epoch is not the trainer's
    assert told.epoch == 2
    untold = LightningTrainLoader(plan.build(), lambda: None)
    untold.sampler.set_epoch(1)  # no trainer (yet): Lightning's number
    assert untold.epoch == 1


def test_an_evaluation_loader_reads_epoch_0_whatever_epoch_it_is_told() -> None:
    plan = _plan().to_builder().with_split(val=0.5).compile()
    dm = DataModule(plan, val=plan.to_builder().with_shuffle().compile())
    val = dm.val_dataloader()
    first = _ids(val)
    val.sampler.set_epoch(3)
    assert _ids(val) == first


# -- the tools that read .sampler and .batch_sampler, run on a loader -------------------------


def test_lightning_sets_the_epoch_and_takes_it_for_no_shuffling_sampler() -> None:
    data = pytest.importorskip("lightning.pytorch.utilities.data")
    fabric_data = pytest.importorskip("lightning.fabric.utilities.data")
    from lightning.pytorch.utilities.combined_loader import CombinedLoader

    plan = _plan()
    loader = plan.build()
    fabric_data._set_sampler_epoch(loader, 3)  # what the fit and evaluation loops call
    assert _ids(loader) == _epoch(plan, 3)
    # a validation loader's sampler is neither random nor sequential: no shuffling warning
    assert data._is_dataloader_shuffled(loader) is False
    combined = CombinedLoader([loader, for_lightning(plan.build(), object())])
    samplers = combined.sampler
    assert all(isinstance(s, EpochSampler) for s in samplers)
    assert combined.batch_sampler == [None, None]


def test_lightning_neither_rebuilds_nor_reshards_it() -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.trainer.states import RunningStage

    loader = _plan().build()
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, use_distributed_sampler=True)
    connector = trainer._data_connector
    for stage in (RunningStage.TRAINING, RunningStage.VALIDATING, RunningStage.PREDICTING):
        # the DistributedSampler injection and the predict re-instantiation: DataLoaders only
        assert connector._prepare_dataloader(loader, shuffle=True, mode=stage) is loader


def test_transformers_and_accelerate_see_the_epoch_sampler_only() -> None:
    trainer_pt_utils = pytest.importorskip("transformers.trainer_pt_utils")
    accelerate = pytest.importorskip("accelerate")

    loader = _plan().build()
    assert isinstance(trainer_pt_utils.get_dataloader_sampler(loader), EpochSampler)
    accelerator = accelerate.Accelerator(cpu=True)
    assert accelerator.prepare(loader) is loader
    with pytest.raises(AttributeError, match="skip_first_batches"):
        accelerator.skip_first_batches(loader, 2)  # it reads .dataset first and stops there


# -- conformance: the epochs Lightning gives a torch sampler are the ones a loader reads -------


class _RecordingSampler(Sampler[int]):
    """A torch sampler that records the epoch of every pass Lightning starts."""

    def __init__(self, n: int, passes: list[int]) -> None:
        self.n, self.epoch, self.passes = n, 0, passes

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        self.passes.append(self.epoch)
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def _fit(train: Any, val: Any, epochs: int) -> tuple[list[list[int]], list[list[int]]]:
    pl = pytest.importorskip("lightning.pytorch")

    class Model(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(1, 1)
            self.train_ids: list[list[int]] = []
            self.val_ids: list[list[int]] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            self.train_ids.append(batch["idx"].flatten().tolist())
            return self.lin(batch["x"]).mean()

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.val_ids.append(batch["idx"].flatten().tolist())

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    model = Model()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=epochs,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, train_dataloaders=train, val_dataloaders=val)
    return model.train_ids, model.val_ids


def test_a_loader_reads_the_epochs_lightning_gives_a_torch_sampler() -> None:
    pytest.importorskip("lightning.pytorch")
    train_passes: list[int] = []
    val_passes: list[int] = []
    rows = [{"idx": torch.tensor(i), "x": torch.tensor([0.0])} for i in range(N)]
    torch_train = torch.utils.data.DataLoader(
        rows, batch_size=4, sampler=_RecordingSampler(N, train_passes)
    )
    torch_val = torch.utils.data.DataLoader(
        rows, batch_size=4, sampler=_RecordingSampler(N, val_passes)
    )
    _fit(torch_train, torch_val, epochs=3)
    assert train_passes == [0, 1, 2]
    assert val_passes[0] == 0 and len(val_passes) == 4  # the sanity check, then one per epoch

    train_plan, val_plan = _plan(seed=3), _plan(seed=4)  # both shuffled, on purpose
    train_ids, val_ids = _fit(train_plan.build(), val_plan.build(), epochs=3)
    assert train_ids == [ids for e in train_passes for ids in _epoch(train_plan, e)]
    sanity = _epoch(val_plan, val_passes[0])[:2]  # the sanity check reads two batches
    assert val_ids == sanity + [ids for e in val_passes[1:] for ids in _epoch(val_plan, e)]
