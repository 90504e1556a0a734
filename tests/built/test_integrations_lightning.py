"""Lightning's own Trainer drives loaderkit loaders exactly, passed directly or by a DataModule.

Every test compares the sample ids Lightning trained (and validated) on with what the plan
itself gives: ``loader.set_epoch(e)`` then one pass is epoch ``e``. Interrupted runs resume
from Lightning checkpoints (``ckpt_path``) and must continue the uninterrupted run's batches.

The DDP test (marked ``slow``) launches this file as a script under torchrun (gloo on
127.0.0.1, a free port, a timeout): ``python -m torch.distributed.run ...
test_integrations_lightning.py ddp OUT_DIR``; each rank writes ``OUT_DIR/ddp-rank<r>.json``.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch
from lk_testdata import unchanged
from lk_torchrun import LAUNCH_TIMEOUT, torchrun

from loaderkit import DataLoaderBuilder, DataModule
from loaderkit.integrations.lightning import LightningStreamLoader, for_lightning

pl = pytest.importorskip("lightning.pytorch", reason="Lightning is in the test extra")

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N_TRAIN, N_VAL = 60, 50
TRAIN = {"x": torch.arange(N_TRAIN, dtype=torch.float32)}
VAL = {"x": torch.arange(1000, 1000 + N_VAL, dtype=torch.float32)}


def _train_plan(workers: int = 2, split: bool = False):
    builder = (
        DataLoaderBuilder()
        .with_dataset(TRAIN)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(7)
        .with_workers(workers)
    )
    if workers:
        builder = builder.with_transform(unchanged)
    if split:
        builder = builder.with_split(val=0.2)
    return builder.compile()


def _val_plan(workers: int = 2):
    plan = DataLoaderBuilder().with_dataset(VAL).with_batch_size(10).with_workers(workers)
    if workers:
        plan = plan.with_transform(unchanged)
    return plan.with_shuffle().compile().for_eval()


class Recorder(pl.LightningModule):
    """A one-weight model recording the sample ids of every batch it trains and validates on."""

    def __init__(self, validate: bool = True) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.train_ids: list[list[int]] = []
        self.val_ids: list[list[int]] = []
        if not validate:
            self.validation_step = None  # type: ignore[assignment]

    def training_step(self, batch, batch_idx):
        self.train_ids.append([int(v) for v in batch["x"]])
        return self.lin(batch["x"][:, None] / 100).mean()

    def validation_step(self, batch, batch_idx):
        self.val_ids.append([int(v) for v in batch["x"]])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


@pytest.fixture(autouse=True)
def _quiet_lightning():
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)


_BUILT: list = []


def _build(plan, **kwargs):
    """``plan.build()``, closed when the test ends (workers stop now, not at collection)."""
    loader = plan.build(**kwargs)
    _BUILT.append(loader)
    return loader


@pytest.fixture(autouse=True)
def _close_loaders():
    yield
    while _BUILT:
        _BUILT.pop().close()


def _fit(
    model: Recorder,
    *,
    ckpt: str | None = None,
    callbacks: tuple = (),
    **loaders_and_options,
) -> Recorder:
    options = {
        key: loaders_and_options.pop(key)
        for key in list(loaders_and_options)
        if key not in ("train_dataloaders", "val_dataloaders", "datamodule")
    }
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=bool(callbacks),
        callbacks=list(callbacks),
        **options,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, **loaders_and_options, ckpt_path=ckpt)
    return model


def _epochs(loader, epochs, limit: int | None = None) -> list[list[int]]:
    """The ids of the first ``limit`` batches of each epoch in ``epochs``, from the plan."""
    out = []
    for epoch in epochs:
        loader.set_epoch(epoch)
        for i, batch in enumerate(loader):
            if limit is not None and i == limit:
                break
            out.append([int(v) for v in batch["x"]])
    return out


def _one_pass(loader) -> list[list[int]]:
    return [[int(v) for v in batch["x"]] for batch in loader]


def test_loaders_passed_directly_train_epochs_and_validate_on_every_sample():
    plan, val_plan = _train_plan(), _val_plan()
    model = _fit(
        Recorder(),
        train_dataloaders=_build(plan),
        val_dataloaders=_build(val_plan),
        max_epochs=2,
    )  # with Lightning's sanity check: it reads two val batches first
    val = _one_pass(_build(val_plan))
    assert len(val) == 5
    assert model.train_ids == _epochs(_build(plan), [0, 1])
    assert model.val_ids == val[:2] + val + val  # sanity check, then whole passes
    assert sorted(i for ids in model.val_ids[2:7] for i in ids) == list(range(1000, 1050))


def test_limit_train_batches_reads_the_start_of_each_epoch():
    plan, val_plan = _train_plan(), _val_plan()
    model = _fit(
        Recorder(),
        train_dataloaders=_build(plan),
        val_dataloaders=_build(val_plan),
        max_epochs=3,
        limit_train_batches=5,
        limit_val_batches=2,
        num_sanity_val_steps=0,
    )
    assert model.train_ids == _epochs(_build(plan), [0, 1, 2], limit=5)
    assert model.val_ids == _one_pass(_build(val_plan))[:2] * 3


def _checkpoint(folder: Path, at: str, step: int):
    if at == "epoch-end":
        return pl.callbacks.ModelCheckpoint(
            dirpath=folder, every_n_epochs=1, save_on_train_epoch_end=True, save_top_k=-1
        )
    return pl.callbacks.ModelCheckpoint(dirpath=folder, every_n_train_steps=step, save_top_k=-1)


@pytest.mark.parametrize(
    ("how", "at"),
    [
        ("direct", "mid-epoch"),
        ("direct", "epoch-end"),
        ("datamodule", "mid-epoch"),
        ("datamodule", "epoch-end"),
    ],
)
def test_a_checkpoint_resumes_exactly_with_ckpt_path(tmp_path: Path, how: str, at: str):
    plan = _train_plan(workers=2, split=how == "datamodule")
    per_epoch = len(_build(plan))
    stop = per_epoch + 3 if at == "mid-epoch" else per_epoch
    total = 3 * per_epoch

    def data() -> dict:
        if how == "datamodule":
            return {"datamodule": DataModule(plan).to_lightning()}
        return {"train_dataloaders": _build(plan), "val_dataloaders": _build(_val_plan())}

    # resumed by epochs; test_lightning_checkpoints.py has the whole matrix (max_steps too,
    # and where Lightning itself keeps a loader passed as it is from an exact resume)
    full = _fit(Recorder(), max_epochs=3, **data())
    first = _fit(Recorder(), max_steps=stop, callbacks=(_checkpoint(tmp_path, at, stop),), **data())
    (ckpt,) = tmp_path.glob("*.ckpt")
    rest = _fit(Recorder(), max_epochs=3, ckpt=str(ckpt), **data())
    assert len(full.train_ids) == total
    assert len(first.train_ids) == stop
    assert first.train_ids + rest.train_ids == full.train_ids
    loader = _build(plan)
    assert full.train_ids == _epochs(loader, [0, 1, 2])
    val_plan = plan.for_eval() if how == "datamodule" else _val_plan()
    val = _one_pass(_build(val_plan, split="val" if how == "datamodule" else "train"))
    assert rest.val_ids[-len(val) :] == val  # every validation pass is whole


def test_a_datamodule_without_a_val_plan_trains_and_skips_validation():
    plan = _train_plan(workers=0)
    dm = DataModule(plan)
    assert dm.stages == ("train",)
    model = _fit(Recorder(), datamodule=dm.to_lightning(), max_epochs=2)
    assert model.val_ids == []
    assert model.train_ids == _epochs(_build(plan), [0, 1])


def test_a_datamodule_with_a_val_part_validates_after_the_sanity_check():
    plan = _train_plan(workers=2, split=True)
    dm = DataModule(plan, test=_val_plan(workers=0))
    assert dm.stages == ("train", "val", "test")
    model = _fit(Recorder(), datamodule=dm.to_lightning(), max_epochs=2)
    val = _one_pass(_build(plan.for_eval(), split="val"))
    assert model.val_ids == val[:2] + val + val
    assert model.train_ids == _epochs(_build(plan), [0, 1])


def test_only_the_stages_with_a_loader_are_lightning_hooks():
    from lightning.pytorch.utilities.model_helpers import is_overridden

    bare = DataModule(_train_plan(workers=0)).to_lightning()
    full = DataModule(_train_plan(workers=0, split=True), predict=_val_plan(0)).to_lightning()
    for hook in ("val_dataloader", "test_dataloader", "predict_dataloader"):
        assert not is_overridden(hook, bare)
    assert is_overridden("train_dataloader", bare)
    assert is_overridden("val_dataloader", full)
    assert not is_overridden("test_dataloader", full)  # the split has no test part
    assert is_overridden("predict_dataloader", full)


def test_a_plain_datamodule_given_to_fit_says_to_call_to_lightning():
    dm = DataModule(_train_plan(workers=0))
    with pytest.raises(TypeError, match=r"not a LightningDataModule.*dm\.to_lightning\(\)"):
        _fit(Recorder(), datamodule=dm, max_epochs=1)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterator_lightning_only_probes_is_not_a_pass(workers):
    # Lightning's fit loop calls iter() on every loader once, to check that it is iterable,
    # and drops the iterator (_check_dataloader_iterable); the epochs must not shift
    plan = _train_plan(workers)
    loader = _build(plan)
    iter(loader)
    assert _one_pass(loader) == _epochs(_build(plan), [0])
    iter(loader)
    assert _one_pass(loader) == _epochs(_build(plan), [1])

    # a DataModule's state is loaded before that probe: the probe must not use up the resume
    first = _build(plan)
    batches = iter(first)
    taken = [[int(v) for v in next(batches)["x"]] for _ in range(3)]
    resumed = _build(plan)
    resumed.load_state_dict(first.state_dict())
    iter(resumed)
    assert taken + _one_pass(resumed) == _epochs(_build(plan), [0])


class _Stream(torch.utils.data.IterableDataset):
    """A streamed (iterable) source of N_TRAIN samples."""

    def __iter__(self):
        for i in range(N_TRAIN):
            yield {"x": torch.tensor([float(i)])}


def _stream_plan(workers: int = 2):
    builder = DataLoaderBuilder().with_dataset(_Stream()).with_batch_size(4).with_workers(workers)
    return builder.with_shuffle(buffer_size=8).with_seed(7).compile()


@pytest.mark.parametrize("how", ["direct", "datamodule"])
def test_a_stream_loader_trains_epochs_and_resumes_mid_epoch(tmp_path: Path, how: str):
    # Lightning reads a loader without a length one batch ahead: for_lightning() (which
    # to_lightning() applies) keeps that batch out of the checkpointed state
    plan = _stream_plan()

    def data() -> dict:
        if how == "datamodule":
            return {"datamodule": DataModule(plan).to_lightning()}
        return {"train_dataloaders": for_lightning(_build(plan))}

    full = _fit(Recorder(validate=False), max_epochs=3, **data())
    assert full.train_ids == _epochs(_build(plan), [0, 1, 2])
    stop = 15 + 3  # 15 batches per epoch: inside the second
    callbacks = (_checkpoint(tmp_path, "mid-epoch", stop),)
    first = _fit(Recorder(validate=False), max_steps=stop, callbacks=callbacks, **data())
    (ckpt,) = tmp_path.glob("*.ckpt")
    rest = _fit(Recorder(validate=False), max_epochs=3, ckpt=str(ckpt), **data())
    assert first.train_ids + rest.train_ids == full.train_ids


def test_for_lightning_wraps_only_streams():
    loader = _build(_train_plan(workers=0))
    assert for_lightning(loader) is loader
    stream = _build(_stream_plan(workers=0))
    wrapped = for_lightning(stream)
    assert isinstance(wrapped, LightningStreamLoader)
    batches = iter(wrapped)
    next(batches)
    next(batches)  # Lightning trains on batch 0 while it holds batch 1
    assert wrapped.state_dict()["batches_delivered"] == 1
    assert stream.state_dict()["batches_delivered"] == 2
    rest = list(batches)
    assert len(rest) == 13
    assert wrapped.state_dict() == stream.state_dict()  # the pass ended: nothing held


# -- two processes under torchrun: Lightning's DDP strategy (gloo) ------------------------------


def _launch(mode: str, out: Path) -> list[dict]:
    return torchrun(
        __file__, mode, out, reports=[str(out / f"{mode}-rank{r}.json") for r in range(2)]
    )


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_TIMEOUT + 30)
def test_ddp_on_two_ranks_trains_the_global_stream_and_resumes_exactly(tmp_path: Path):
    # slow: about 40 s of Lightning DDP start-up, so it runs with -m slow (nox -s slow)
    reports = _launch("ddp", tmp_path)  # 3 epochs with a checkpoint after step 10; resumed
    per_epoch = 8  # 60 samples, 2 ranks x 4 per batch: 8 batches per rank (the last wraps)
    for report in reports:
        full, rest = report["full"], report["resumed"]
        assert len(full["train"]) == 3 * per_epoch
        assert rest["train"] == full["train"][10:]
        assert rest["weights"] == pytest.approx(full["weights"], rel=1e-6)
    assert reports[0]["full"]["weights"] == reports[1]["full"]["weights"]  # DDP kept in sync
    epoch0 = [i for r in reports for ids in r["full"]["train"][:per_epoch] for i in ids]
    assert set(epoch0) == set(range(N_TRAIN))  # the ranks together read every sample


def _rank_main(mode: str, out: Path) -> None:
    """One rank: an uninterrupted fit with a checkpoint at step 10, then a fit resumed there."""
    import json

    assert mode == "ddp"
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    plan = (
        DataLoaderBuilder()
        .with_dataset(TRAIN)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(7)
        .with_distributed()
        .compile()
    )
    folder = out / "ckpt"
    report = {}
    for run in ("full", "resumed"):
        torch.manual_seed(0)
        model = Recorder(validate=False)
        callbacks = []
        if run == "full":
            callbacks.append(
                pl.callbacks.ModelCheckpoint(
                    dirpath=folder, every_n_train_steps=10, save_top_k=-1, filename="{step}"
                )
            )
        trainer = pl.Trainer(
            accelerator="cpu",
            devices=2,
            strategy="ddp",
            max_epochs=3,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=run == "full",
            callbacks=callbacks,
        )
        ckpt = str(folder / "step=10.ckpt") if run == "resumed" else None
        trainer.fit(model, train_dataloaders=plan.build(), ckpt_path=ckpt)
        report[run] = {
            "train": model.train_ids,
            "weights": [v for p in model.parameters() for v in p.detach().flatten().tolist()],
        }
    (out / f"{mode}-rank{trainer.global_rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    import sys

    _rank_main(sys.argv[1], Path(sys.argv[2]))
