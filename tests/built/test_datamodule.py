"""DataModule: the loaders of a run, called the way Lightning calls a data module."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from loaderkit import DataLoaderBuilder, DataModule, LoaderPlan, PlanError, ResumeError
from loaderkit.datamodule import EvalLoader
from loaderkit.order.split import split_parts
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(240)

N = 50
DATA = {"x": torch.arange(N), "label": torch.tensor([i % 2 for i in range(N)])}


def noisy(sample: dict, rng: np.random.Generator) -> dict:
    return {**sample, "noise": float(rng.normal())}


def train_plan(**split) -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(DATA)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(11)
        .with_transform(noisy)
        .with_split(**(split or {"val": 0.2, "test": 0.1}))
        .compile()
    )


def xs(batches) -> list[int]:
    return [int(v) for batch in batches for v in batch["x"]]


class HandLoop:
    """A plain training loop over a data module, calling its hooks in Lightning's order.

    prepare_data, setup("fit"), load_state_dict (when resuming), train_dataloader,
    val_dataloader, a sanity check of ``sanity`` val batches, then per epoch: the train
    batches (``limit`` of them, or all, the ``for`` loop run to its end), a full validation
    pass, a checkpoint (``state_dict``) after the loop; finally teardown("fit").

    Not a model of Lightning's resume: Lightning sets the epoch through ``loader.sampler``,
    never runs a pass of a loader with a length to its end (it stops by count), and reloads
    a loader's state only when it restarts inside an epoch. Those are pinned with Lightning
    itself in test_lightning_checkpoints.py.
    """

    def __init__(self, epochs: int, sanity: int = 2, limit: int | None = None) -> None:
        self.epochs, self.sanity, self.limit = epochs, sanity, limit
        self.calls: list[str] = []
        self.train: list[list[int]] = []
        self.val: list[list[int]] = []
        self.checkpoints: list[dict] = []

    def fit(self, dm: DataModule, ckpt: dict | None = None) -> None:
        self.calls.append("prepare_data")
        dm.prepare_data()
        self.calls.append("setup")
        dm.setup(stage="fit")
        if ckpt is not None:
            self.calls.append("load_state_dict")
            dm.load_state_dict(json.loads(json.dumps(ckpt)))
        self.calls.append("train_dataloader")
        train = dm.train_dataloader()
        self.calls.append("val_dataloader")
        val = dm.val_dataloader()
        list(itertools.islice(iter(val), self.sanity))  # the sanity check stops early
        for _ in range(self.epochs):
            self.train.append(xs(itertools.islice(iter(train), self.limit)))
            self.val.append(xs(val))
            self.checkpoints.append(dm.state_dict())
        self.calls.append("teardown")
        dm.teardown(stage="fit")


def test_a_fit_loop_trains_on_train_and_validates_on_all_of_val_every_epoch():
    plan = train_plan()
    parts = split_parts(N, 11, 0.2, 0.1)
    trainer = HandLoop(epochs=3)
    dm = DataModule(plan)
    trainer.fit(dm)
    assert trainer.calls == [
        "prepare_data",
        "setup",
        "train_dataloader",
        "val_dataloader",
        "teardown",
    ]
    for epoch in trainer.train:
        assert sorted(epoch) == parts["train"].tolist()
    assert trainer.train[0] != trainer.train[1]  # shuffled per epoch
    # every validation pass is the whole val part, in dataset order, despite the sanity check
    assert trainer.val == [parts["val"].tolist()] * 3


def test_val_and_test_come_from_for_eval_of_the_train_plan():
    dm = DataModule(train_plan())
    val, test = dm.val_dataloader(), dm.test_dataloader()
    assert isinstance(val, EvalLoader) and isinstance(test, EvalLoader)
    assert val.split == "val" and test.split == "test"
    assert val.plan == train_plan().for_eval()
    assert val.plan.transform is None  # the random transform is off for evaluation
    batches = collect(test)
    assert xs(batches) == split_parts(N, 11, 0.2, 0.1)["test"].tolist()
    assert "noise" not in batches[0]
    assert len(test) == 2


def test_loaders_are_built_once():
    dm = DataModule(train_plan())
    assert dm.train_dataloader() is dm.train_dataloader()
    assert dm.val_dataloader() is dm.val_dataloader()
    assert dm.test_dataloader() is dm.test_dataloader()


def test_a_checkpoint_continues_the_train_stream_exactly():
    reference = HandLoop(epochs=3, limit=None)
    reference.fit(DataModule(train_plan()))
    # a run stopped after epoch 1, then resumed from its checkpoint
    first = HandLoop(epochs=1)
    first.fit(DataModule(train_plan()))
    resumed = HandLoop(epochs=3)
    resumed.fit(DataModule(train_plan()), ckpt=first.checkpoints[-1])
    assert "load_state_dict" in resumed.calls
    # the checkpoint was taken after epoch 0's loop ended: the resumed pass is epoch 1, whole
    # (torchdata StatefulDataLoader's habit), then epoch 2 (this loop runs its 3 passes anyway)
    assert first.train + resumed.train[:2] == reference.train
    assert resumed.val == reference.val


def test_a_mid_epoch_state_resumes_at_the_next_batch():
    dm = DataModule(train_plan())
    loader = dm.train_dataloader()
    iterator = iter(loader)
    taken = list(itertools.islice(iterator, 4))
    state = json.loads(json.dumps(dm.state_dict()))
    assert state["loaderkit_datamodule"] == 1
    assert state["train"]["split"] == "train"
    assert state["train"]["batches_delivered"] == 4
    rest = list(iterator)  # the kept iterator goes on with its pass
    again = DataModule(train_plan())
    again.load_state_dict(state)  # before train_dataloader(), as Lightning does
    assert_batches_equal(rest, collect(again.train_dataloader()), label="resumed")
    full = collect(DataModule(train_plan()).train_dataloader())
    assert_batches_equal(full, taken + rest)


def test_states_of_other_plans_or_kinds_are_refused():
    dm = DataModule(train_plan())
    other = DataModule(train_plan(val=0.3))
    with pytest.raises(ResumeError, match="another plan"):
        other.load_state_dict(dm.state_dict())
    with pytest.raises(ResumeError, match="DataModule state"):
        dm.load_state_dict(dm.train_dataloader().state_dict())
    with pytest.raises(ResumeError, match="format 7"):
        dm.load_state_dict({"loaderkit_datamodule": 7, "train": {}})


def test_set_epoch_moves_the_train_loader():
    dm = DataModule(train_plan())
    reference = DataModule(train_plan()).train_dataloader()
    collect(reference)
    second = collect(reference)
    dm.set_epoch(1)
    assert dm.train_dataloader().epoch == 1
    assert_batches_equal(second, collect(dm.train_dataloader()))
    state = dm.state_dict()["train"]
    assert (state["epoch"], state["batches_delivered"]) == (1, len(dm.train_dataloader()))


def test_given_plans_read_their_own_part_or_whole_dataset():
    other = {"x": torch.arange(100, 110)}
    val_plan = DataLoaderBuilder().with_dataset(other).with_batch_size(5).compile()
    dm = DataModule(train_plan(val=0.2), val=val_plan, predict=train_plan().for_eval())
    assert xs(dm.val_dataloader()) == list(range(100, 110))
    assert xs(dm.predict_dataloader()) == split_parts(N, 11, 0.2, 0.1)["test"].tolist()
    with pytest.raises(PlanError) as info:
        dm.test_dataloader()  # no test plan, and the train plan's split has no test part
    assert info.value.problems[0].path == "datamodule.test"
    assert "with_split(test=...)" in str(info.value)


def test_missing_loaders_and_bad_plans_say_what_to_pass():
    plain = DataLoaderBuilder().with_dataset(DATA).compile()
    dm = DataModule(plain)
    for stage in ("val", "test", "predict"):
        with pytest.raises(PlanError) as info:
            getattr(dm, f"{stage}_dataloader")()
        assert info.value.problems[0].path == f"datamodule.{stage}"
    with pytest.raises(PlanError, match="must be a LoaderPlan") as info:
        DataModule(DataLoaderBuilder().with_dataset(DATA))
    assert info.value.problems[0].path == "datamodule.train"
    with pytest.raises(PlanError, match="LoaderPlan or None"):
        DataModule(plain, val="val")


def test_teardown_stops_workers_and_the_loaders_stay_usable():
    plan = train_plan().to_builder().with_workers(2).compile()
    dm = DataModule(plan)
    first = collect(dm.train_dataloader(), 2)
    list(itertools.islice(iter(dm.val_dataloader()), 1))  # a pass cut short, with workers
    val = xs(dm.val_dataloader())
    assert val == split_parts(N, 11, 0.2, 0.1)["val"].tolist()
    dm.teardown("fit")
    assert dm.train_dataloader()._torch_loader is None
    assert val == xs(dm.val_dataloader())
    plain = DataModule(train_plan())
    assert_batches_equal(first, collect(plain.train_dataloader(), 2))
    dm.teardown()
