"""Lightning checkpoints resume exactly: every way a checkpoint is taken, every way to resume.

Issue 21. The oracle is Lightning itself: each case makes three real ``Trainer.fit`` runs,
each with a fresh model (seeded init, SGD) and a fresh loader or data module:

- the uninterrupted run;
- the same run killed right after its checkpoint was written (the checkpointing callback
  raises, as a preempted job dies);
- a run resumed from that checkpoint (``fit(..., ckpt_path=...)``).

The sample ids the killed run and the resumed run trained on, together, must be the
uninterrupted run's, and the resumed run must end with the uninterrupted run's weights.

The matrix: {the loader passed as it is, ``for_lightning(loader, trainer)``,
``DataModule.to_lightning()``} x {a checkpoint by ``every_n_train_steps`` inside an epoch and
at its last batch, by ``every_n_epochs`` (without and with validation), when validation ends
(``save_on_train_epoch_end=False``), from an ``on_train_epoch_end`` callback calling
``trainer.save_checkpoint``, ``last.ckpt``} x {resumed with ``max_epochs``, ``max_steps``} x
{0, 2 workers}, for map-style loaders and for streamed ones (``for_lightning(stream)``).

Every case is exact (docs/integrations.md, "Lightning", says what the loaders read from the
trainer for the two restarts where Lightning's own calls are not enough). The default run has
every case with 0 workers and a few with 2; the rest is marked ``slow``.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from lk_testdata import unchanged

from loaderkit import DataLoaderBuilder, DataModule
from loaderkit.integrations.lightning import for_lightning

pl = pytest.importorskip("lightning.pytorch", reason="Lightning is in the test extra")

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

N, BATCH, EPOCHS = 40, 4, 3
PER_EPOCH = N // BATCH
STEPS = EPOCHS * PER_EPOCH
_X = torch.linspace(-1.0, 1.0, N)[:, None]
DATA = {"idx": torch.arange(N), "x": _X, "y": 3 * _X + 0.5 + torch.sin(7 * _X)}
VAL = {"idx": torch.arange(100, 112), "x": torch.zeros(12, 1), "y": torch.zeros(12, 1)}

KINDS = (
    "steps-mid-epoch",  # ModelCheckpoint(every_n_train_steps=13): 3 batches into epoch 1
    "steps-epoch-end",  # ModelCheckpoint(every_n_train_steps=10): epoch 0's last batch
    "every-n-epochs",  # ModelCheckpoint(every_n_epochs=1), no validation: train epoch end
    "every-n-epochs-val",  # the same with a validation loop (run before the epoch's end)
    "validation-end",  # ModelCheckpoint(save_on_train_epoch_end=False): when validation ends
    "on-train-epoch-end",  # a callback's on_train_epoch_end calls trainer.save_checkpoint
    "last-ckpt",  # ModelCheckpoint(save_last=True): last.ckpt after epoch 1
)
_VALIDATED = ("every-n-epochs-val", "validation-end")  # with a validation loader
HOWS = ("direct", "trainer", "datamodule")  # trainer: for_lightning(loader, trainer)
LIMITS = ("max_epochs", "max_steps")
KILLED_AFTER = {  # the batches the killed run trained
    "steps-mid-epoch": PER_EPOCH + 3,
    "steps-epoch-end": PER_EPOCH,
    "every-n-epochs": PER_EPOCH,
    "every-n-epochs-val": PER_EPOCH,
    "validation-end": PER_EPOCH,
    "on-train-epoch-end": PER_EPOCH,
    "last-ckpt": 2 * PER_EPOCH,
}


class Case(NamedTuple):
    """One cell of the matrix."""

    how: str
    kind: str
    limit: str
    workers: int
    stream: bool = False


class _KilledError(Exception):
    """The run dies right after a checkpoint was written."""


class Model(pl.LightningModule):
    """A seeded one-``Linear`` model recording the sample ids it trains and validates on."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(1, 1)
        self.train_ids: list[list[int]] = []
        self.val_ids: list[list[int]] = []

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.train_ids.append(batch["idx"].flatten().tolist())
        return torch.nn.functional.mse_loss(self.lin(batch["x"]), batch["y"])

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self.val_ids.append(batch["idx"].flatten().tolist())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def weights(self) -> list[torch.Tensor]:
        return [p.detach().clone() for p in self.parameters()]


class _KillingCheckpoint(pl.callbacks.ModelCheckpoint):
    """A ``ModelCheckpoint`` whose run dies once it has saved at ``kill_after`` steps.

    Checked at the end of each hook it saves in, so every file of that save is written.
    """

    def __init__(self, kill_after: int, **options: Any) -> None:
        super().__init__(**options)
        self.kill_after = kill_after
        self.saved_at: set[int] = set()  # the global steps of the saves (last.ckpt and others)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
        self.saved_at.add(trainer.global_step)
        super().on_save_checkpoint(trainer, pl_module, checkpoint)

    def _kill_if_saved(self) -> None:
        if len(self.saved_at) >= self.kill_after:
            raise _KilledError

    def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
        super().on_train_batch_end(*args, **kwargs)
        self._kill_if_saved()

    def on_train_epoch_end(self, *args: Any, **kwargs: Any) -> None:
        super().on_train_epoch_end(*args, **kwargs)
        self._kill_if_saved()

    def on_validation_end(self, *args: Any, **kwargs: Any) -> None:
        super().on_validation_end(*args, **kwargs)
        self._kill_if_saved()


class _SaveAtEpochEnd(pl.Callback):
    """Saves ``path`` from ``on_train_epoch_end`` (the first epoch), and the run dies."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        trainer.save_checkpoint(self.path)
        raise _KilledError


def _checkpointing(kind: str, folder: Path) -> tuple[pl.Callback, Path | None]:
    """The callback that saves (and kills) for ``kind``, and the file to resume from."""
    steps = {"steps-mid-epoch": PER_EPOCH + 3, "steps-epoch-end": PER_EPOCH}
    if kind in steps:
        every = steps[kind]
        return _KillingCheckpoint(1, dirpath=folder, every_n_train_steps=every, save_top_k=-1), None
    if kind in ("every-n-epochs", "every-n-epochs-val"):
        return _KillingCheckpoint(1, dirpath=folder, every_n_epochs=1, save_top_k=-1), None
    if kind == "validation-end":
        options = {"every_n_epochs": 1, "save_on_train_epoch_end": False, "save_top_k": -1}
        return _KillingCheckpoint(1, dirpath=folder, **options), None
    if kind == "on-train-epoch-end":
        return _SaveAtEpochEnd(folder / "hook.ckpt"), folder / "hook.ckpt"
    assert kind == "last-ckpt"
    last = _KillingCheckpoint(2, dirpath=folder, save_last=True)
    return last, folder / "last.ckpt"


# -- data ------------------------------------------------------------------------------------


class _Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """The DATA samples as a stream (no length, no random access)."""

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for i in range(N):
            yield {key: value[i] for key, value in DATA.items()}


def _plan(workers: int, stream: bool) -> Any:
    source: Any = _Stream() if stream else DATA
    builder = DataLoaderBuilder().with_dataset(source).with_batch_size(BATCH).with_seed(5)
    if not stream:
        builder = builder.with_transform(unchanged)
    builder = builder.with_shuffle(buffer_size=8) if stream else builder.with_shuffle()
    return builder.with_workers(workers).compile()


def _val_plan() -> Any:
    return DataLoaderBuilder().with_dataset(VAL).with_batch_size(4).compile().for_eval()


_BUILT: list[Any] = []


def _build(plan: Any) -> Any:
    loader = plan.build()
    _BUILT.append(loader)
    return loader


@pytest.fixture(autouse=True)
def _close_loaders() -> Any:
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    yield
    while _BUILT:
        _BUILT.pop().close()


def _data(case: Case, trainer: Any) -> dict[str, Any]:
    """Fresh loaders (or a fresh data module) for one run of ``case``."""
    plan = _plan(case.workers, case.stream)
    validate = case.kind in _VALIDATED
    if case.how == "datamodule":
        dm = DataModule(plan, val=_val_plan() if validate else None)
        return {"datamodule": dm.to_lightning()}
    loader = _build(plan)
    train = for_lightning(loader, trainer) if case.how == "trainer" else for_lightning(loader)
    data = {"train_dataloaders": train}
    if validate:
        data["val_dataloaders"] = _build(_val_plan())
    return data


def _fit(
    case: Case,
    model: Model,
    callbacks: list[Any],
    ckpt: Path | None = None,
    **options: Any,
) -> Model:
    limit = {"max_epochs": EPOCHS} if case.limit == "max_epochs" else {"max_steps": STEPS}
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        # no default ModelCheckpoint (it would write to the working directory)
        enable_checkpointing=any(isinstance(c, pl.callbacks.Checkpoint) for c in callbacks),
        callbacks=callbacks,
        **limit,
        **options,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = None if ckpt is None else str(ckpt)
        trainer.fit(model, **_data(case, trainer), ckpt_path=path)
    return model


_FULL: dict[Case, Model] = {}


def _uninterrupted(case: Case) -> Model:
    """The run without a checkpoint (one per data set-up, shared by the checkpoint kinds)."""
    key = case._replace(kind="val" if case.kind in _VALIDATED else "")
    if key not in _FULL:
        full = _FULL[key] = _fit(case, Model(), [])
        assert len(full.train_ids) == STEPS
        epochs = [full.train_ids[e * PER_EPOCH : (e + 1) * PER_EPOCH] for e in range(EPOCHS)]
        for epoch in epochs:  # every epoch reads every sample once, each in its own order
            assert sorted(itertools.chain(*epoch)) == list(range(N))
        assert epochs[0] != epochs[1] != epochs[2]
    return _FULL[key]


def check_resume(case: Case, folder: Path) -> None:
    """Kill a run at its checkpoint, resume it, and compare with the uninterrupted run."""
    full = _uninterrupted(case)
    callback, path = _checkpointing(case.kind, folder)
    killed = Model()
    with pytest.raises(_KilledError):
        _fit(case, killed, [callback])
    if path is None:
        (path,) = folder.glob("*.ckpt")
    rest = _fit(case, Model(), [], ckpt=path)
    assert len(killed.train_ids) == KILLED_AFTER[case.kind]
    assert killed.train_ids + rest.train_ids == full.train_ids
    for resumed, expected in zip(rest.weights(), full.weights(), strict=True):
        assert torch.equal(resumed, expected)


def _param(case: Case, slow: bool = False) -> Any:
    marks = [pytest.mark.slow] if slow else []
    name = f"{case.how}-{case.kind}-{case.limit}-w{case.workers}"
    return pytest.param(case, marks=marks, id=name + ("-stream" if case.stream else ""))


def _matrix(workers: int, stream: bool = False) -> list[Case]:
    hows = ("direct", "datamodule") if stream else HOWS
    return [
        Case(how, kind, limit, workers, stream)
        for how, kind, limit in itertools.product(hows, KINDS, LIMITS)
    ]


_DEFAULT_TWO_WORKERS = {
    *(
        Case(how, kind, limit, 2)
        for how in ("direct", "datamodule")
        for kind, limit in (
            ("steps-mid-epoch", "max_steps"),
            ("every-n-epochs", "max_epochs"),
            ("every-n-epochs-val", "max_epochs"),
            ("validation-end", "max_steps"),
        )
    ),
    Case("datamodule", "steps-mid-epoch", "max_epochs", 2, stream=True),
}
CASES = [
    *(_param(case) for case in _matrix(0)),
    *(_param(case, slow=case not in _DEFAULT_TWO_WORKERS) for case in _matrix(2)),
    *(_param(case) for case in _matrix(0, stream=True)),
    *(_param(case, slow=case not in _DEFAULT_TWO_WORKERS) for case in _matrix(2, stream=True)),
]


@pytest.mark.parametrize("case", CASES)
def test_a_checkpoint_resumes_exactly(case: Case, tmp_path: Path) -> None:
    check_resume(case, tmp_path)


@pytest.mark.parametrize("how", ["direct", "datamodule"])
def test_a_stream_cut_short_by_limit_train_batches_is_not_rewound(how: str) -> None:
    """A pass Lightning cuts short after batches it trained gives nothing back.

    The stream wrapper gives back a batch Lightning read ahead and dropped untrained (the
    finished epoch re-entered after a restart); the batches of a pass cut short by
    ``limit_train_batches`` were all trained, so the next epoch starts afresh after them.
    """
    case = Case(how, "", "max_epochs", 0, stream=True)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        max_epochs=EPOCHS,
        limit_train_batches=4,
    )
    model = Model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, **_data(case, trainer))
    expected = []
    for epoch in range(EPOCHS):
        loader = _build(_plan(0, stream=True))
        loader.set_epoch(epoch)
        expected += [batch["idx"].tolist() for batch in itertools.islice(loader, 4)]
    assert model.train_ids == expected


LIMITED = 4  # limit_train_batches: each epoch ends after 4 of its 10 batches


@pytest.mark.parametrize(
    ("how", "every", "workers"),
    [
        pytest.param(how, every, workers, id=f"{how}-every{every}-w{workers}", marks=marks)
        for how in ("direct", "datamodule")
        for every, workers, marks in (
            (2, 0, ()),  # inside epoch 0
            (4, 0, ()),  # epoch 0's last batch under the limit
            (6, 0, ()),  # inside epoch 1
            (8, 0, ()),  # epoch 1's last batch under the limit
            (6, 2, () if how == "datamodule" else (pytest.mark.slow,)),
            (8, 2, (pytest.mark.slow,)),
        )
    ],
)
def test_a_stream_cut_short_by_limit_train_batches_resumes_exactly(
    how: str, every: int, workers: int, tmp_path: Path
) -> None:
    """With ``limit_train_batches`` Lightning reads no batch ahead and ends epochs early.

    The wrapper's state is then after every delivered batch (Lightning's count of the batches
    taken says so), and a state loaded at the end of a cut-short epoch starts the next
    epoch Lightning names rather than the rest of its own.
    """
    case = Case(how, "", "max_epochs", workers, stream=True)
    full = _fit(case, Model(), [], limit_train_batches=LIMITED)
    assert len(full.train_ids) == EPOCHS * LIMITED
    killing = _KillingCheckpoint(1, dirpath=tmp_path, every_n_train_steps=every, save_top_k=-1)
    killed = Model()
    with pytest.raises(_KilledError):
        _fit(case, killed, [killing], limit_train_batches=LIMITED)
    (path,) = tmp_path.glob("*.ckpt")
    rest = _fit(case, Model(), [], ckpt=path, limit_train_batches=LIMITED)
    assert len(killed.train_ids) == every
    assert killed.train_ids + rest.train_ids == full.train_ids
    for resumed, expected in zip(rest.weights(), full.weights(), strict=True):
        assert torch.equal(resumed, expected)
