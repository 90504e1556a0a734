"""Accelerate drives loaderkit loaders exactly: prepare, accumulate, skip, checkpoints, 2 ranks.

Every test compares with an uninterrupted run (the batches, the gradient-sync flags or the
final weights). The two-process runs launch this file as a script under torchrun (gloo on
127.0.0.1, a free port) with a timeout, so a hang fails instead of stalling.

Run as a script: ``python -m torch.distributed.run ... test_integrations_accelerate.py MODE
OUT_DIR`` with MODE ``save`` (two epochs, a checkpoint in the middle) or ``resume`` (from that
checkpoint to the end); each rank writes
``OUT_DIR/<mode>-rank<r>.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lk_testdata import unchanged
from lk_torchrun import LAUNCH_TIMEOUT, torchrun

from loaderkit import DataLoaderBuilder
from loaderkit.integrations.accelerate import (
    AcceleratedLoader,
    SkippedLoader,
    skip_first_batches,
)

N = 54
GA = 4  # gradient accumulation steps


def _data() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, 4, generator=g)
    return {"idx": torch.arange(N), "x": x, "y": x.sum(1, keepdim=True)}


def _plan(batch_size: int = 9, workers: int = 0, distributed: bool = False):
    builder = (
        DataLoaderBuilder()
        .with_dataset(_data())
        .with_batch_size(batch_size)
        .with_shuffle()
        .with_seed(3)
        .with_workers(workers)
    )
    if workers:
        builder = builder.with_transform(unchanged)
    if distributed:
        builder = builder.with_distributed()
    return builder.compile()


def _ids(batch) -> list[int]:
    return [int(i) for i in batch["idx"]]


def _reset_accelerate() -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def _train(accelerator, model, optimizer, loader, epochs, record, stop_after=None, save=None):
    """Accumulating SGD steps over ``epochs``; records (ids, sync flag) per batch.

    Stops after ``stop_after`` batches in all (then returns True). ``save``: ``(n, folder)``,
    ``accelerator.save_state(folder)`` after the ``n``-th batch, and training goes on.
    """
    seen = 0
    for epoch in epochs:
        if epoch != epochs[0]:
            loader.set_epoch(epoch)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            record.append((_ids(batch), accelerator.sync_gradients))
            seen += 1
            if save is not None and seen == save[0]:
                accelerator.save_state(str(save[1]))
            if stop_after is not None and seen == stop_after:
                return True
    return False


# -- in one process ----------------------------------------------------------------------------


@pytest.fixture
def accelerate():
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    _reset_accelerate()
    yield
    _reset_accelerate()


def test_prepare_hands_the_loader_back_unchanged(accelerate):
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = _plan().build()
    wrapped = AcceleratedLoader(_plan().build())
    _, _, same, same_wrapped = accelerator.prepare(model, optimizer, loader, wrapped)
    assert same is loader
    assert same_wrapped is wrapped


def _sync_flags(loader, accelerator, epochs: int) -> list[bool]:
    model = torch.nn.Linear(4, 1)
    flags = []
    for _ in range(epochs):
        for _batch in loader:
            with accelerator.accumulate(model):
                pass
            flags.append(accelerator.sync_gradients)
    return flags


def test_accumulate_syncs_the_last_partial_window_of_every_epoch(accelerate):
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=GA)
    reference = accelerator.prepare(DataLoader(TensorDataset(torch.arange(N)), batch_size=9))
    expected = _sync_flags(reference, accelerator, 2)
    assert expected == [False, False, False, True, False, True] * 2  # 6 batches, GA 4

    for loader in (_plan().build(), AcceleratedLoader(_plan().build())):  # issue 21: both
        assert len(loader) == 6
        assert _sync_flags(accelerator.prepare(loader), accelerator, 2) == expected
        assert not accelerator.gradient_state.in_dataloader  # removed once the pass ended


def test_the_wrapper_yields_the_loaders_batches_and_passes():
    loader = _plan(workers=2).build()
    wrapped = AcceleratedLoader(_plan(workers=2).build())
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    try:
        for epoch in range(2):
            loader.set_epoch(epoch)
            expected = [_ids(b) for b in loader]
            assert [_ids(b) for b in wrapped] == expected  # the next pass: epoch 0, then 1
    finally:
        loader.close()
        wrapped.close()


def test_a_mid_pass_state_counts_only_the_batches_yielded(accelerate):
    wrapped = AcceleratedLoader(_plan().build())
    batches = iter(wrapped)
    first = [_ids(next(batches)) for _ in range(2)]
    state = wrapped.state_dict()
    assert state["batches_delivered"] == 2
    rest = [_ids(b) for b in batches]
    resumed = AcceleratedLoader(_plan().build())
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert [_ids(b) for b in resumed] == rest
    reference = _plan().build()
    assert first + rest == [_ids(b) for b in reference]


@pytest.mark.parametrize("wrap", [False, True])
def test_skip_first_batches_starts_the_next_pass_later(accelerate, wrap):
    reference = _plan().build()
    reference.set_epoch(1)
    epoch1 = [_ids(b) for b in reference]

    loader = _plan().build()
    loader.set_epoch(1)
    target = AcceleratedLoader(loader) if wrap else loader
    skipped = skip_first_batches(target, 4)
    assert isinstance(skipped, AcceleratedLoader if wrap else SkippedLoader)
    assert len(skipped) == 2
    assert [_ids(b) for b in skipped] == epoch1[4:]
    loader.set_epoch(2)  # later epochs: the loader itself, whole
    reference.set_epoch(2)
    assert [_ids(b) for b in target] == [_ids(b) for b in reference]


def test_skip_first_batches_follows_the_iteration_rule():
    from loaderkit import ResumeError

    reference = _plan().build()
    epochs = []
    for epoch in range(4):
        reference.set_epoch(epoch)
        epochs.append([_ids(b) for b in reference])
    loader = _plan().build()
    assert [_ids(b) for b in skip_first_batches(loader, 5)] == epochs[0][5:]  # a fresh loader
    assert [_ids(b) for b in skip_first_batches(loader, 1)] == epochs[1][1:]  # the next pass
    batches = iter(loader)
    next(batches)  # a pass of epoch 2 given up after one batch: the next pass is epoch 3
    assert [_ids(b) for b in skip_first_batches(loader, 2)] == epochs[3][2:]

    loader.set_epoch(0)
    batches = iter(loader)
    first = [_ids(next(batches)) for _ in range(2)]
    assert first == epochs[0][:2]
    state = loader.state_dict()  # 2 batches of epoch 0 delivered
    for skip, rest in ((1, epochs[0][3:]), (4, [])):
        resumed = _plan().build()
        resumed.load_state_dict(state)
        assert [_ids(b) for b in skip_first_batches(resumed, skip)] == rest  # from there
    resumed.load_state_dict(state)
    with pytest.raises(ResumeError, match="has 6"):
        list(skip_first_batches(resumed, 5))


def test_skip_first_batches_of_a_stream_reads_and_drops_them():
    from torch.utils.data import IterableDataset

    class Numbers(IterableDataset):
        def __iter__(self):
            for i in range(30):
                yield {"idx": i}

    plan = DataLoaderBuilder().with_dataset(Numbers()).with_batch_size(4).compile()
    full = [_ids(b) for b in plan.build()]
    assert [_ids(b) for b in skip_first_batches(plan.build(), 3)] == full[3:]


def test_accelerates_own_skip_first_batches_names_the_loaderkit_one(accelerate):
    from accelerate import skip_first_batches as accelerate_skip

    for loader in (_plan().build(), AcceleratedLoader(_plan().build())):
        with pytest.raises(AttributeError, match=r"loaderkit\.integrations\.accelerate"):
            accelerate_skip(loader, 2)


def test_the_wrappers_refuse_what_is_not_a_loaderkit_loader():
    with pytest.raises(TypeError, match=r"plan\.build\(\)"):
        AcceleratedLoader([1, 2, 3])
    with pytest.raises(ValueError, match="num_batches must be an int >= 0"):
        skip_first_batches(_plan().build(), -1)
    with pytest.raises(TypeError, match=r"skip_first_batches\(loader, n\)"):
        SkippedLoader(AcceleratedLoader(_plan().build()), 1)


def test_save_state_and_load_state_continue_training_exactly(accelerate, tmp_path: Path):
    from accelerate import Accelerator

    def setup():
        _reset_accelerate()
        torch.manual_seed(0)
        accelerator = Accelerator(cpu=True, gradient_accumulation_steps=GA)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        loader = AcceleratedLoader(_plan(batch_size=8).build())  # 7 batches: 4 + 3 per epoch
        model, optimizer = accelerator.prepare(model, optimizer)
        accelerator.register_for_checkpointing(loader)
        return accelerator, model, optimizer, loader

    accelerator, model, optimizer, loader = setup()
    full: list = []
    _train(accelerator, model, optimizer, loader, [0, 1, 2], full)
    weights = [p.detach().clone() for p in model.parameters()]

    accelerator, model, optimizer, loader = setup()
    first: list = []
    assert _train(accelerator, model, optimizer, loader, [0, 1, 2], first, stop_after=7 + 4)
    accelerator.save_state(str(tmp_path / "ckpt"))  # epoch 1, after a sync

    accelerator, model, optimizer, loader = setup()
    accelerator.load_state(str(tmp_path / "ckpt"))
    rest: list = []
    _train(accelerator, model, optimizer, loader, [1, 2], rest)  # the pass resumes epoch 1
    assert first + rest == full
    assert [flag for _, flag in full[:7]] == [False] * 3 + [True] + [False] * 2 + [True]
    for got, want in zip(model.parameters(), weights, strict=True):
        assert torch.equal(got.detach(), want)


# -- two processes under torchrun ---------------------------------------------------------------


def _launch(mode: str, out: Path) -> list[dict]:
    reports = [str(out / f"{mode}-rank{r}.json") for r in range(2)]
    return torchrun(__file__, mode, out, reports=reports, env={"ACCELERATE_USE_CPU": "true"})


@pytest.mark.distributed
@pytest.mark.timeout(2 * LAUNCH_TIMEOUT + 30)
def test_two_ranks_accumulate_checkpoint_and_resume_exactly(tmp_path: Path):
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    full = _launch("save", tmp_path)  # uninterrupted, with a checkpoint mid-epoch 1
    rest = _launch("resume", tmp_path)
    per_epoch = 9  # 54 samples, 3 per rank and batch: 9 global batches of 6
    flags = [False] * 3 + [True] + [False] * 3 + [True, True]
    for rank in range(2):
        assert [f for _, f in full[rank]["record"]] == flags * 2
        first = full[rank]["record"][: per_epoch + 4]
        assert first + rest[rank]["record"] == full[rank]["record"]
        assert rest[rank]["weights"] == pytest.approx(full[rank]["weights"], abs=0, rel=1e-6)
    assert full[0]["weights"] == full[1]["weights"]  # DDP kept the ranks in sync
    for epoch in range(2):  # the ranks together read every sample once per epoch
        ids = [
            i
            for rank in range(2)
            for batch, _ in full[rank]["record"][epoch * per_epoch : (epoch + 1) * per_epoch]
            for i in batch
        ]
        assert sorted(ids) == list(range(N))


def _rank_main(mode: str, out: Path) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=GA)
    assert accelerator.num_processes == 2, accelerator.state
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    loader = AcceleratedLoader(_plan(batch_size=3, distributed=True).build())
    accelerator.register_for_checkpointing(loader)
    record: list = []
    ckpt = out / "ckpt"
    if mode == "resume":
        accelerator.load_state(str(ckpt))
        _train(accelerator, model, optimizer, loader, [1], record)
    else:  # after 4 batches of epoch 1 (9 per epoch), a sync: save, and go on
        _train(accelerator, model, optimizer, loader, [0, 1], record, save=(9 + 4, ckpt))
    weights = [
        v for p in accelerator.unwrap_model(model).parameters() for v in p.flatten().tolist()
    ]
    report = {"record": record, "weights": weights}
    rank = accelerator.process_index
    (out / f"{mode}-rank{rank}.json").write_text(json.dumps(report))
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    _rank_main(sys.argv[1], Path(sys.argv[2]))


def test_accumulate_syncs_at_the_end_of_a_stream(accelerate):
    from accelerate import Accelerator
    from torch.utils.data import IterableDataset

    class Numbers(IterableDataset):
        def __iter__(self):
            for i in range(22):  # 6 batches of 4, the last of 2
                yield {"idx": torch.tensor([i])}

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=GA)
    plan = DataLoaderBuilder().with_dataset(Numbers()).with_batch_size(4).with_workers(2)
    loader = AcceleratedLoader(plan.compile().build())
    try:
        assert _sync_flags(loader, accelerator, 2) == [False, False, False, True, False, True] * 2
    finally:
        loader.close()


def test_importing_loaderkit_and_its_integrations_imports_no_training_stack():
    code = (
        "import sys, torch, loaderkit, loaderkit.integrations, loaderkit.integrations.accelerate, "
        "loaderkit.integrations.lightning\n"
        "plan = loaderkit.DataLoaderBuilder().with_dataset({'x': torch.arange(5)}).compile()\n"
        "assert len(list(plan.build())) == 5  # a pass looks for Accelerate, never imports it\n"
        "print([m for m in ('accelerate', 'transformers', 'lightning', 'pytorch_lightning') "
        "if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"
