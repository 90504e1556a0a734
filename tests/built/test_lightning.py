"""DataModule with Lightning itself: Trainer.fit reads the plan's batches, resumes mid-epoch."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch

from loaderkit import DataLoaderBuilder, DataModule
from loaderkit.integrations.lightning import LightningTrainLoader

pl = pytest.importorskip("lightning.pytorch", reason="Lightning is in the test extra")

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N = 40
DATA = {"x": torch.arange(N, dtype=torch.float32), "y": torch.arange(N) % 2}


def _plan(workers: int = 0):
    return (
        DataLoaderBuilder()
        .with_dataset(DATA)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(5)
        .with_workers(workers)
        .with_split(val=0.2)
        .compile()
    )


class Recorder(pl.LightningModule):
    """A one-weight model that records the sample ids of every batch it trains and validates on."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.train_ids: list[list[int]] = []
        self.val_ids: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        self.train_ids.append([int(v) for v in batch["x"]])
        return self.lin(batch["x"][:, None]).mean()

    def validation_step(self, batch, batch_idx):
        self.val_ids.append([int(v) for v in batch["x"]])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(plan, max_steps: int, ckpt: str | None = None, every: int | None = None, folder=None):
    model = Recorder()
    callbacks = []
    if every:
        callbacks.append(
            pl.callbacks.ModelCheckpoint(dirpath=folder, every_n_train_steps=every, save_top_k=-1)
        )
    trainer = pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=bool(every),
        callbacks=callbacks,
        num_sanity_val_steps=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, datamodule=DataModule(plan).to_lightning(), ckpt_path=ckpt)
    return model


@pytest.fixture(autouse=True)
def _quiet_lightning():
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _expected_train(plan, epochs: int) -> list[list[int]]:
    loader = plan.build()
    return [[int(v) for v in b["x"]] for _ in range(epochs) for b in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_trainer_fit_reads_the_plan_epochs_and_the_val_part(workers):
    plan = _plan(workers)
    per_epoch = len(plan.build())
    model = _fit(plan, max_steps=2 * per_epoch)
    assert model.train_ids == _expected_train(plan, 2)
    val = [[int(v) for v in b["x"]] for b in plan.for_eval().build(split="val")]
    assert model.val_ids == val + val  # one full pass after each epoch
    train_samples = {i for ids in model.train_ids for i in ids}
    assert train_samples.isdisjoint({i for ids in val for i in ids})


def test_a_mid_epoch_checkpoint_resumes_exactly(tmp_path: Path):
    plan = _plan()
    per_epoch = len(plan.build())
    total = 2 * per_epoch + 3
    stop = per_epoch + 3  # inside the second epoch
    full = _fit(plan, max_steps=total).train_ids
    first = _fit(plan, max_steps=stop, every=stop, folder=tmp_path).train_ids
    (ckpt,) = tmp_path.glob("*.ckpt")
    rest = _fit(plan, max_steps=total, ckpt=str(ckpt)).train_ids
    assert first + rest == full
    assert len(rest) == total - stop


def test_to_lightning_delegates_to_the_data_module():
    dm = DataModule(_plan())
    wrapped = dm.to_lightning()
    assert isinstance(wrapped, pl.LightningDataModule)
    assert wrapped.data is dm
    train = wrapped.train_dataloader()  # told its epoch by the trainer's current_epoch
    assert isinstance(train, LightningTrainLoader)
    assert train.loader is dm.train_dataloader()
    assert wrapped.train_dataloader() is train
    assert wrapped.state_dict() == dm.state_dict()
    assert repr(wrapped).endswith(".to_lightning()")


def test_to_lightning_without_lightning_says_how_to_install_it(monkeypatch):
    import sys

    import loaderkit.datamodule as datamodule

    datamodule._lightning_class.cache_clear()
    for name in ("lightning.pytorch", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it raises ImportError
    try:
        with pytest.raises(ImportError, match=r"needs Lightning.*pip install lightning"):
            DataModule(_plan()).to_lightning()
    finally:
        monkeypatch.undo()
        datamodule._lightning_class.cache_clear()
    assert isinstance(DataModule(_plan()).to_lightning(), pl.LightningDataModule)
