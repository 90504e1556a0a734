"""A bare loaderkit loader through ``accelerator.prepare()`` against torch's prepared DataLoader.

Issue 21: ``prepare()`` hands a loaderkit loader back unchanged, so Accelerate's
``GradientState`` heard nothing of where its passes end. Every test here runs the real
Accelerate twice in lockstep, on the same data: through torch's ``DataLoader`` prepared by
Accelerate (the reference, never a hand-written sequence) and through a loaderkit loader
prepared by Accelerate, recording per step the batch, ``accelerator.sync_gradients``,
``gradient_state.end_of_dataloader``, ``remainder`` and what ``gather_for_metrics`` returns.
They must be equal (``remainder`` where it means the same: see each test).

Then checkpoints: ``register_for_checkpointing`` + ``save_state`` / ``load_state`` at every
kind of place, resumed in a new accelerator and loader, against an uninterrupted run.

Run as a script under torchrun (``python -m torch.distributed.run ... OUT_DIR``), each rank
records both loaders on its part of the data and writes ``OUT_DIR/flags-rank<r>.json``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from lk_torchrun import LAUNCH_TIMEOUT, torchrun
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.integrations.accelerate import AcceleratedLoader

pytestmark = pytest.mark.timeout(120)

Step = tuple[list[int], bool, bool, int, list[int]]
"""After a step: the batch's sample ids, ``sync_gradients``, ``end_of_dataloader``,
``remainder`` and what ``gather_for_metrics`` made of the ids."""


class Rows(Dataset[dict[str, int]]):
    """Samples ``{"idx": i}`` for i in [0, n); those in ``bad`` raise ``ValueError``."""

    def __init__(self, n: int, bad: frozenset[int] = frozenset()) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, int]:
        if i in self.bad:
            raise ValueError(f"sample {i}")
        return {"idx": i}


class Split(IterableDataset[dict[str, int]]):
    """The stream ``{"idx": i}``, i in [0, n); each worker reads elements ``worker::workers``.

    It splits itself by worker and says so, so that torch's DataLoader and a loaderkit
    stream read it into the same batches.
    """

    splits_by_worker = True

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[dict[str, int]]:
        info = get_worker_info()
        first, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(first, self.n, step):
            yield {"idx": i}


class FailOn:
    """A transform raising ``ValueError`` on the samples in ``bad`` (the stream's skip case)."""

    def __init__(self, bad: frozenset[int]) -> None:
        self.bad = bad

    def __call__(self, sample: dict[str, int]) -> dict[str, int]:
        if sample["idx"] in self.bad:
            raise ValueError(f"sample {sample['idx']}")
        return sample


def _plan(
    kind: str, n: int, workers: int, *, bad: frozenset[int] = frozenset(), distributed: bool = False
) -> LoaderPlan:
    data = Rows(n, bad) if kind == "map" else Split(n)
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(3).with_workers(workers)
    if kind == "stream" and bad:
        builder = builder.with_transform(FailOn(bad))
    if bad:
        builder = builder.with_error_policy("skip")
    if distributed:
        builder = builder.with_distributed()
    return builder.compile()


def _reference(kind: str, n: int, workers: int) -> DataLoader[Any]:
    data = Rows(n) if kind == "map" else Split(n)
    return DataLoader(data, batch_size=3, num_workers=workers)


def _ids(batch: dict[str, torch.Tensor]) -> list[int]:
    return [int(i) for i in batch["idx"]]


def _reset() -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()


@pytest.fixture
def accelerate() -> Iterator[None]:
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    _reset()
    yield
    _reset()


def _step(accelerator: Any, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> Step:
    """One (empty) accumulation step on ``batch``: what Accelerate makes of its place."""
    with accelerator.accumulate(model):
        pass
    state = accelerator.gradient_state
    gathered = accelerator.gather_for_metrics(batch["idx"]).tolist()
    sync, end = accelerator.sync_gradients, state.end_of_dataloader
    return _ids(batch), sync, end, state.remainder, gathered


def _record(accelerator: Any, loader: Any, epochs: int = 2) -> list[Step]:
    """Each step of ``epochs`` passes of ``loader``."""
    model = torch.nn.Linear(1, 1)
    steps: list[Step] = []
    for _ in range(epochs):
        steps += [_step(accelerator, model, batch) for batch in loader]
        assert not accelerator.gradient_state.in_dataloader  # the pass left the state
    return steps


def _both(ga: int, reference: Any, loader: Any) -> tuple[list[Step], list[Step]]:
    """The steps of the prepared torch DataLoader, then those of the prepared loader."""
    from accelerate import Accelerator

    _reset()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ga)
    expected = _record(accelerator, accelerator.prepare(reference))
    _reset()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=ga)
    got = _record(accelerator, accelerator.prepare(loader))
    return expected, got


# n: batches of 3 per epoch, the same for both kinds and 0 or 2 workers (2 workers: each reads
# every other element and batches its own): 4 (a multiple of both accumulation steps), 5 (of
# neither), 6 (a multiple of 2, not of 4)
BATCHES = {12: 4, 13: 5, 17: 6}


@pytest.mark.parametrize("n", sorted(BATCHES))
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["map", "stream"])
def test_a_bare_prepared_loader_syncs_where_a_prepared_torch_dataloader_does(
    accelerate: None, kind: str, workers: int, n: int
) -> None:
    loader = _plan(kind, n, workers).build()
    try:
        for ga in (2, 4):
            expected, got = _both(ga, _reference(kind, n, workers), loader)
            assert len(expected) == 2 * BATCHES[n]
            if kind == "stream":  # Accelerate's dispatcher: -1, then the last batch's size
                assert {step[3] for step in got} == {0}  # nothing repeated: nothing to cut
                got = [
                    (*step[:3], want[3], step[4]) for step, want in zip(got, expected, strict=True)
                ]
            assert got == expected
            assert [step[2] for step in got].count(True) == 2  # the reference's epoch ends
    finally:
        loader.close()


@pytest.mark.parametrize("kind", ["map", "stream"])
def test_the_skip_policy_ends_the_pass_at_its_last_delivered_batch(
    accelerate: None, kind: str
) -> None:
    """Batches every sample of which was skipped are not delivered: the pass ends earlier.

    The last two batches of 3 (samples 15-19 of 20) fail whole, one more in the middle in
    part. The reference is torch's DataLoader over the batches the loader delivers without
    Accelerate; with Accelerate the loader reads ahead to find its last batch, but its
    ``state_dict()`` after each step is the same as without Accelerate.
    """
    from accelerate import Accelerator

    bad = frozenset({4, 15, 16, 17, 18, 19})
    plan = _plan(kind, 20, 0, bad=bad)
    alone, states = [], []
    with plan.build() as loader:  # no GradientState yet: the loader does not join
        for _ in range(2):
            for batch in loader:
                alone.append(_ids(batch))
                states.append(loader.state_dict())
    groups = alone[: len(alone) // 2]
    assert groups[-1] == [12, 13, 14] and [3, 5] in groups  # the tail was skipped whole

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    reference = DataLoader(Rows(20), batch_sampler=groups)
    expected = _record(accelerator, accelerator.prepare(reference))
    _reset()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    got: list[Step] = []
    model = torch.nn.Linear(1, 1)
    with plan.build() as loader:
        for _ in range(2):
            for batch in loader:
                got.append(_step(accelerator, model, batch))
                assert loader.state_dict() == states[len(got) - 1]  # the look-ahead not counted
    assert {step[3] for step in got} == {0}  # one process: nothing repeated (torch's: -1)
    assert [(*step[:3], step[4]) for step in got] == [(*s[:3], s[4]) for s in expected]
    assert [step[2] for step in got].count(True) == 2


def test_remainder_is_what_gather_for_metrics_needs(accelerate: None) -> None:
    """Fixed-size batches: Accelerate's ``len % total batch size``; else 0, or -1 if unknown.

    Fixed-size batches against torch's prepared DataLoader (0 with ``drop_last``, where
    torch's says -1: nothing to cut either way); two ranks simulated in this process
    (``with_distributed(world_size=2, rank=0)``): ``n % (2 x batch_size)``; weighted
    sampling on one process repeats nothing (0), on two ranks it does, somewhere (-1).
    """
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    for drop_last, n in ((False, 13), (False, 12), (True, 13)):
        reference = accelerator.prepare(DataLoader(Rows(n), batch_size=3, drop_last=drop_last))
        plan = _plan("map", n, 0).to_builder().with_batch_size(3, drop_last=drop_last)
        seen = {step[3] for step in _record(accelerator, plan.compile().build(), 1)}
        want = {step[3] for step in _record(accelerator, reference, 1)}
        assert seen == ({0} if drop_last else want) and want == ({-1} if drop_last else {n % 3})
    two_ranks = _plan("map", 13, 0).to_builder().with_distributed(world_size=2, rank=0)
    assert {s[3] for s in _record(accelerator, two_ranks.compile().build(), 1)} == {13 % 6}
    weighted = _plan("map", 13, 0).to_builder().with_sampling_weights([1.0] * 13)
    assert {s[3] for s in _record(accelerator, weighted.compile().build(), 1)} == {0}
    weighted = weighted.with_distributed(world_size=2, rank=0)
    assert weighted.compile().build().repeated_samples > 0
    assert {s[3] for s in _record(accelerator, weighted.compile().build(), 1)} == {-1}


def test_gradient_state_is_joined_only_once_accelerate_made_it(accelerate: None) -> None:
    """Nothing is registered (or made) without an Accelerator; never twice with the wrapper."""
    from accelerate import Accelerator
    from accelerate.state import GradientState

    loader = _plan("map", 12, 0).build()
    for _batch in loader:  # no GradientState: nothing to tell, nothing made
        assert not GradientState._shared_state
    accelerator = Accelerator(cpu=True)
    state = accelerator.gradient_state
    wrapped = AcceleratedLoader(loader)
    for index, _batch in enumerate(wrapped):
        references = [r for r in state.dataloader_references if r is not None]
        assert len(references) == 1  # the loader's pass, not the wrapper besides
        assert references[0].loader is loader
        assert wrapped.end_of_dataloader == state.end_of_dataloader == (index == 3)
        assert wrapped.remainder == state.remainder == 0
    assert not state.in_dataloader and not wrapped.end_of_dataloader


def test_a_pass_left_early_leaves_the_gradient_state(accelerate: None) -> None:
    """A loop left with ``break`` (the iterator dropped) unregisters its pass at once."""
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    state = accelerator.gradient_state
    outer = accelerator.prepare(DataLoader(Rows(6), batch_size=3))
    inner = _plan("map", 12, 0).build()
    ends = []
    for _ in outer:
        for _batch in inner:
            assert state.active_dataloader.loader is inner
            break
        ends.append(state.end_of_dataloader)  # the outer DataLoader's, again
    assert ends == [False, True]


# -- checkpoints -------------------------------------------------------------------------------

EPOCHS = 2
SAMPLES = 49  # in batches of 8, 7 per epoch (a stream read by 2 workers: 25 -> 4, 24 -> 3)
PER_EPOCH = 7  # windows of 4 and 3 batches with 4 accumulation steps
WHERE = {  # (batches trained when saved, saved inside the loop or after it ended)
    "mid-epoch": (PER_EPOCH + 4, True),
    "epoch-end-inside-loop": (PER_EPOCH, True),
    "after-the-loop-ended": (PER_EPOCH, False),
    "last-step": (EPOCHS * PER_EPOCH, True),
}


def _train_plan(kind: str, workers: int) -> LoaderPlan:
    data: Any = Rows(SAMPLES) if kind == "map" else Split(SAMPLES)
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(8).with_workers(workers)
    buffer = None if kind == "map" else 16  # a stream is shuffled through a buffer
    return builder.with_shuffle(buffer_size=buffer).with_seed(5).compile()  # epochs differ


def _features(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([torch.sin(ids * 0.3), torch.cos(ids * 0.7)], 1).float()
    return x, x.sum(1, keepdim=True) * 2


def _run(
    kind: str,
    workers: int,
    wrap: bool,
    folder: Path,
    *,
    save: tuple[int, bool] | None = None,
    resume: int | None = None,
) -> tuple[list[list[int]], list[torch.Tensor]]:
    """Train (or, with ``resume``, the epochs from ``resume`` after ``load_state``).

    ``save=(k, inside)``: ``save_state`` after the ``k``-th batch (inside the loop) or after
    the loop of the epoch holding it ended, and stop there. Plain epoch loops, no
    ``set_epoch``: the loader's own iteration rule chooses each pass.
    """
    from accelerate import Accelerator

    _reset()
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    built = _train_plan(kind, workers).build()
    loader: Any = AcceleratedLoader(built) if wrap else built
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.register_for_checkpointing(loader)
    if resume is not None:
        accelerator.load_state(str(folder))
    trained: list[list[int]] = []
    try:
        for _epoch in range(resume or 0, EPOCHS):
            for batch in loader:
                with accelerator.accumulate(model):
                    x, y = _features(batch["idx"])
                    accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
                    optimizer.step()
                    optimizer.zero_grad()
                trained.append(_ids(batch))
                if save is not None and save == (len(trained), True):
                    accelerator.save_state(str(folder))
                    return trained, []
            if save is not None and save == (len(trained), False):
                accelerator.save_state(str(folder))
                return trained, []
    finally:
        built.close()
    return trained, [p.detach().clone() for p in model.parameters()]


@pytest.fixture(scope="module")
def uninterrupted() -> dict[tuple[str, int], Any]:
    """The uninterrupted runs, per (kind, workers), made on first use."""
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    runs: dict[tuple[str, int], Any] = {}
    return runs


@pytest.mark.parametrize("where", list(WHERE))
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("wrap", [False, True], ids=["bare", "AcceleratedLoader"])
@pytest.mark.parametrize("kind", ["map", "stream"])
def test_save_state_and_load_state_resume_exactly(
    accelerate: None,
    uninterrupted: dict[tuple[str, int], Any],
    tmp_path: Path,
    kind: str,
    wrap: bool,
    workers: int,
    where: str,
) -> None:
    if (kind, workers) not in uninterrupted:
        uninterrupted[kind, workers] = _run(kind, workers, False, tmp_path)
    full, weights = uninterrupted[kind, workers]
    assert len(full) == EPOCHS * PER_EPOCH
    assert full[:PER_EPOCH] != full[PER_EPOCH:]  # the epochs differ: a mix-up would show
    saved_after, inside = WHERE[where]
    first, _ = _run(kind, workers, wrap, tmp_path, save=(saved_after, inside))
    epoch = (saved_after - 1) // PER_EPOCH + (0 if inside else 1)  # where the user goes on
    rest, resumed = _run(kind, workers, wrap, tmp_path, resume=epoch)
    assert first + rest == full
    for got, want in zip(resumed, weights, strict=True):
        assert torch.equal(got, want)


# -- two processes under torchrun ---------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.timeout(LAUNCH_TIMEOUT + 30)
def test_two_ranks_sync_where_a_prepared_torch_dataloader_does(tmp_path: Path) -> None:
    pytest.importorskip("accelerate", reason="Accelerate is in the test extra")
    reports = [str(tmp_path / f"flags-rank{r}.json") for r in range(2)]
    ranks = torchrun(__file__, tmp_path, reports=reports, env={"ACCELERATE_USE_CPU": "true"})
    for report in ranks:
        for n in TORCHRUN_SIZES:
            expected, got = report[str(n)]["torch"], report[str(n)]["loaderkit"]
            assert got == expected  # batches, sync flags, end_of_dataloader, remainder
            assert [step[2] for step in got].count(True) == 2  # the end of each epoch
    for n in TORCHRUN_SIZES:  # gather_for_metrics cut the repeats: every sample once an epoch
        gathered = ranks[0][str(n)]["loaderkit-gathered"]
        assert gathered == ranks[1][str(n)]["loaderkit-gathered"]
        assert gathered == ranks[0][str(n)]["torch-gathered"]
        assert sorted(gathered) == sorted(list(range(n)) * 2)


TORCHRUN_SIZES = (50, 48)
"""Samples, in batches of 3 on 2 ranks: 9 batches per rank (4 samples repeated to even out
the ranks: ``remainder`` 2) and 8 (none repeated); 4 accumulation steps."""


def _rank_main(out: Path) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    assert accelerator.num_processes == 2, accelerator.state
    report: dict[str, Any] = {}
    for n in TORCHRUN_SIZES:
        report[str(n)] = {}
        reference = accelerator.prepare(DataLoader(Rows(n), batch_size=3))
        loader = accelerator.prepare(_plan("map", n, 0, distributed=True).build())
        assert math.ceil(n / 6) == len(loader)
        for name, batches in (("torch", reference), ("loaderkit", loader)):
            steps = _record(accelerator, batches)
            report[str(n)][name] = [step[:4] for step in steps]
            report[str(n)][f"{name}-gathered"] = [i for step in steps for i in step[4]]
    rank = accelerator.process_index
    (out / f"flags-rank{rank}.json").write_text(json.dumps(report))
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    _rank_main(Path(sys.argv[1]))
