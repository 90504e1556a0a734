"""transformers.Trainer trains on a loaderkit loader and resumes from its checkpoints exactly.

A tiny model records the sample ids of every batch it is given; an interrupted run resumed
with ``train(resume_from_checkpoint=...)`` must see the rest of the uninterrupted run's
batches and end with its weights.

The two-rank test (marked ``slow``) launches this file as a script under torchrun (gloo on
127.0.0.1, a free port, a timeout): ``python -m torch.distributed.run ...
test_integrations_transformers.py OUT_DIR``; each rank writes ``OUT_DIR/rank<r>.json``.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import torch
from lk_torchrun import LAUNCH_TIMEOUT, torchrun

from loaderkit import DataLoaderBuilder

pytest.importorskip("transformers", reason="transformers is in the test extra")
pytest.importorskip("accelerate", reason="Accelerate is in the test extra")

from lk_testdata import unchanged
from transformers import Trainer, TrainingArguments

from loaderkit.integrations.transformers import LoaderkitTrainer

pytestmark = [pytest.mark.timeout(300), pytest.mark.filterwarnings("ignore")]

N = 28  # 7 batches of 4 per epoch: with 3 accumulation steps, windows of 3, 3 and 1


def _plan(workers: int = 0):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 3, generator=g)
    data = {"idx": torch.arange(N), "x": x, "labels": x.sum(1, keepdim=True)}
    builder = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(9)
        .with_workers(workers)
    )
    return (builder.with_transform(unchanged) if workers else builder).compile()


class Recorder(torch.nn.Module):
    """A linear regression that records the ids of every batch in its forward."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 1)
        self.seen: list[list[int]] = []
        self.evaluated: list[list[int]] = []

    def forward(self, x, labels, idx):
        (self.seen if self.training else self.evaluated).append([int(i) for i in idx])
        return {"loss": torch.nn.functional.mse_loss(self.lin(x), labels)}


@pytest.fixture(autouse=True)
def _quiet():
    for name in ("transformers", "accelerate"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _args(folder: Path, **kwargs) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(folder),
        num_train_epochs=3,
        gradient_accumulation_steps=3,
        learning_rate=0.1,
        lr_scheduler_type="constant",
        logging_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
        data_seed=0,
        disable_tqdm=True,
        **kwargs,
    )


def _train(folder: Path, resume: str | None = None, workers: int = 0, **kwargs) -> Recorder:
    model = Recorder()
    loader = _plan(workers).build()
    trainer = LoaderkitTrainer(model=model, args=_args(folder, **kwargs), train_loader=loader)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train(resume_from_checkpoint=resume)
    finally:
        loader.close()
    return model


def _epochs(epochs) -> list[list[int]]:
    loader = _plan().build()
    out = []
    for epoch in epochs:
        loader.set_epoch(epoch)
        out += [[int(i) for i in batch["idx"]] for batch in loader]
    return out


def test_training_reads_the_plans_epochs(tmp_path: Path):
    model = _train(tmp_path, save_strategy="no", workers=2)
    assert model.seen == _epochs([0, 1, 2])


# 3 optimizer steps per epoch (7 batches, 3 accumulated): step 4 is 3 batches into epoch 1,
# step 3 ends epoch 0, step 9 is the last of the 3 epochs. Each case: (save_strategy, the
# checkpoint's step, batches trained before it).
CHECKPOINTS = {
    "mid-epoch": ("steps", 4, 7 + 3),
    "epoch end by steps": ("steps", 3, 7),
    "epoch end by epochs": ("epoch", 3, 7),
    "last step": ("steps", 9, 21),
}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("where", list(CHECKPOINTS))
def test_resume_from_checkpoint_continues_exactly(tmp_path: Path, where: str, workers: int):
    strategy, step, trained = CHECKPOINTS[where]
    full = _train(tmp_path / "full", save_strategy="no", workers=workers)
    steps = {"max_steps": max(step, 4)} if step < 9 else {}  # stop the first run early
    save = {"save_steps": step} if strategy == "steps" else {}
    first = _train(tmp_path / "run", save_strategy=strategy, workers=workers, **save, **steps)
    checkpoint = tmp_path / "run" / f"checkpoint-{step}"
    assert checkpoint.is_dir()
    rest = _train(tmp_path / "run", resume=str(checkpoint), save_strategy="no", workers=workers)
    assert first.seen[:trained] == full.seen[:trained]
    assert rest.seen == full.seen[trained:]  # nothing lost, nothing trained twice
    for got, want in zip(rest.parameters(), full.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def test_evaluations_read_the_eval_loader_whole(tmp_path: Path):
    eval_plan = _plan().for_eval()
    model = Recorder()
    trainer = LoaderkitTrainer(
        model=model,
        args=_args(tmp_path, save_strategy="no", eval_strategy="epoch"),
        train_loader=_plan().build(),
        eval_loader=eval_plan.build(),
    )
    trainer.train()
    one_pass = [[int(i) for i in batch["idx"]] for batch in eval_plan.build()]
    assert sorted(i for ids in one_pass for i in ids) == list(range(N))
    assert model.evaluated == one_pass * 3  # after each epoch
    assert model.seen == _epochs([0, 1, 2])
    assert "eval_loss" in trainer.evaluate()
    assert model.evaluated == one_pass * 4


def test_the_trainer_refuses_what_is_not_a_loaderkit_loader(tmp_path: Path):
    with pytest.raises(TypeError, match=r"plan\.build\(\)"):
        LoaderkitTrainer(model=Recorder(), args=_args(tmp_path), train_loader=[{"x": 1}])


def test_the_skip_routing_is_undone_after_training(tmp_path: Path):
    import transformers.trainer as module

    before = module.skip_first_batches
    _train(tmp_path, save_strategy="no", max_steps=1)
    assert module.skip_first_batches is before
    assert issubclass(LoaderkitTrainer, Trainer)


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for i in range(N):
            x = torch.randn(3, generator=g)
            yield {"idx": torch.tensor(i), "x": x, "labels": x.sum(0, keepdim=True)}


def test_a_stream_loader_resumes_inside_its_first_epoch(tmp_path: Path):
    # a stream has no length: the Trainer needs max_steps, and on resume skips the trained
    # batches of the epoch by reading them again (no random access)
    plan = (
        DataLoaderBuilder()
        .with_dataset(_Stream())
        .with_batch_size(4)
        .with_shuffle(buffer_size=8)
        .with_seed(9)
        .compile()
    )

    def run(folder: Path, resume: str | None = None, **kwargs) -> Recorder:
        model = Recorder()
        args = _args(folder, max_steps=2, **kwargs)  # 2 steps of 3 batches: 6 of 7
        trainer = LoaderkitTrainer(model=model, args=args, train_loader=plan.build())
        trainer.train(resume_from_checkpoint=resume)
        return model

    full = run(tmp_path / "full", save_strategy="no")
    assert full.seen == [[int(i) for i in b["idx"]] for b in plan.build()][:6]
    run(tmp_path / "run", save_strategy="steps", save_steps=1)
    rest = run(tmp_path / "run", resume=str(tmp_path / "run" / "checkpoint-1"))
    assert rest.seen == full.seen[3:]
    for got, want in zip(rest.parameters(), full.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


# -- two processes under torchrun (slow) -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_TIMEOUT + 30)
def test_two_ranks_train_their_shards_and_resume_exactly(tmp_path: Path):
    reports = torchrun(
        __file__, tmp_path, reports=[str(tmp_path / f"rank{r}.json") for r in range(2)]
    )
    for report in reports:
        # 28 samples, 2 ranks x 2 per batch: 7 batches per rank and epoch; step 4 of 3 per
        # epoch is 3 batches into epoch 1
        assert len(report["full"]) == 3 * 7
        assert report["resumed"] == report["full"][7 + 3 :]
        assert report["resumed_weights"] == pytest.approx(report["full_weights"], rel=1e-6)
    assert reports[0]["full_weights"] == reports[1]["full_weights"]  # DDP kept in sync
    epoch0 = [i for r in reports for ids in r["full"][:7] for i in ids]
    assert sorted(epoch0) == list(range(N))  # the ranks split each epoch


def _rank_main(out: Path) -> None:
    """One rank: an uninterrupted run with a checkpoint at step 4, then a run resumed there."""
    import json

    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 3, generator=g)
    data = {"idx": torch.arange(N), "x": x, "labels": x.sum(1, keepdim=True)}
    plan = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(2)
        .with_shuffle()
        .with_seed(9)
        .with_distributed()
        .compile()
    )
    report: dict = {}
    rank = 0
    for run, resume in (("full", None), ("resumed", str(out / "run" / "checkpoint-4"))):
        model = Recorder()
        args = _args(out / "run", save_strategy="steps" if resume is None else "no", save_steps=4)
        trainer = LoaderkitTrainer(model=model, args=args, train_loader=plan.build())
        trainer.train(resume_from_checkpoint=resume)
        rank = trainer.args.process_index
        report[run] = model.seen
        report[f"{run}_weights"] = [v for p in model.parameters() for v in p.flatten().tolist()]
    (out / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    import sys

    _rank_main(Path(sys.argv[1]))
