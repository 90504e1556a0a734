"""with_curriculum end to end: eligible sets grow, resume is exact, files round-trip."""

from __future__ import annotations

import numpy as np
import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.testing import assert_resumable, assert_worker_invariant, collect

pytestmark = pytest.mark.timeout(180)

N = 100
SAMPLES = [{"idx": i, "hardness": float((i * 37) % N)} for i in range(N)]
HARDNESS = np.array([s["hardness"] for s in SAMPLES])
BASE = DataLoaderBuilder().with_dataset(SAMPLES, name="train").with_batch_size(10)


def half_then_all(epoch):
    return 0.5 if epoch < 2 else 1.0


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]


def _easiest(k: int) -> set[int]:
    return {int(i) for i in np.argsort(HARDNESS, kind="stable")[:k]}


def test_by_epoch_the_eligible_set_grows_and_reaches_everything():
    loader = BASE.with_curriculum("hardness", horizon=4, start=0.25).compile().build()
    previous: set[int] = set()
    for epoch in range(6):
        loader.set_epoch(epoch)
        ids = _ids(collect(loader))
        assert len(ids) == len(set(ids))  # each eligible sample once
        seen = set(ids)
        assert seen == _easiest(len(seen))  # only the easiest
        assert previous <= seen
        previous = seen
    assert previous == set(range(N))


def test_by_step_batches_draw_from_the_easiest():
    loader = (
        BASE.with_curriculum(HARDNESS, "discrete", by="step", steps=[(5, 0.2), (15, 0.5)])
        .compile()
        .build()
    )
    batches = collect(loader) + collect(loader)
    for step, batch in enumerate(batches):
        ids = [int(i) for i in batch["idx"]]
        pool = 20 if step < 5 else 50 if step < 15 else N
        assert len(set(ids)) == len(ids)
        assert set(ids) <= _easiest(pool)


@pytest.mark.parametrize(
    "builder",
    [
        BASE.with_curriculum("hardness", horizon=3),
        BASE.with_curriculum(HARDNESS, "root", horizon=5, degree=3.0, by="step"),
        BASE.with_curriculum("hardness", half_then_all),
    ],
    ids=["linear", "root-step", "function"],
)
def test_curricula_round_trip_resume_and_ignore_workers(tmp_path, builder):
    plan = builder.compile()
    path = tmp_path / "p.json"
    plan.save(path)
    again = LoaderPlan.load(path, bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert "easiest first" in plan.explain()
    assert_resumable(plan, epoch=1, at=[0, 3])
    assert_worker_invariant(plan.to_builder().with_workers(2).compile(), workers=(0, 2))
    assert "eligible" in plan.build().explain()


def test_a_function_schedule_must_return_a_competence():
    plan = BASE.with_curriculum("hardness", lambda epoch: 0).compile()
    with pytest.raises(lk.PlanError, match="competence in"):
        collect(plan.build())


@pytest.mark.parametrize(
    ("make", "paths"),
    [
        (lambda: BASE.with_curriculum("hardnes", horizon=2).compile(), ("curriculum.difficulty",)),
        (lambda: BASE.with_curriculum("hardness"), ("curriculum.horizon",)),
        (lambda: BASE.with_curriculum("hardness", horizon=0), ("curriculum.horizon",)),
        (lambda: BASE.with_curriculum("hardness", "cosine", horizon=2), ("curriculum.schedule",)),
        (lambda: BASE.with_curriculum("hardness", horizon=2, by="batch"), ("curriculum.by",)),
        (lambda: BASE.with_curriculum("hardness", horizon=2, start=0), ("curriculum.start",)),
        (lambda: BASE.with_curriculum("hardness", "discrete"), ("curriculum.steps",)),
        (
            lambda: BASE.with_curriculum("hardness", "discrete", steps=[(2, 1.5)]),
            ("curriculum.steps[0]",),
        ),
        (
            lambda: BASE.with_curriculum(np.array([np.nan] * N), horizon=2),
            ("curriculum.difficulty",),
        ),
        (
            lambda: (
                BASE.with_curriculum("hardness", horizon=2, by="step")
                .with_bucketing(np.ones(N, dtype=np.int64))
                .compile()
            ),
            ("curriculum.by",),
        ),
    ],
)
def test_bad_curricula_name_their_paths(make, paths):
    with pytest.raises(lk.PlanError) as err:
        make()
    assert err.value.paths == paths


def test_curriculum_fields_are_stream_fields():
    prints = {
        BASE.compile().fingerprint,
        BASE.with_curriculum("hardness", horizon=3).compile().fingerprint,
        BASE.with_curriculum("hardness", horizon=4).compile().fingerprint,
        BASE.with_curriculum("hardness", horizon=3, by="step").compile().fingerprint,
        BASE.with_curriculum("hardness", horizon=3, start=0.5).compile().fingerprint,
        BASE.with_curriculum("hardness", "root", horizon=3).compile().fingerprint,
        BASE.with_curriculum(HARDNESS, horizon=3).compile().fingerprint,
        BASE.with_curriculum("hardness", half_then_all).compile().fingerprint,
    }
    assert len(prints) == 8


def _explained(loader, label: str) -> str:
    """The line of ``loader.explain()`` that reports ``label`` for the resolved epoch."""
    lines = loader.explain().splitlines()
    (line,) = [line for line in lines if line.startswith(f"  {label}") and "this rank" in line]
    return line


def test_explain_reports_the_epoch_the_loader_is_at_or_starts_after_a_resume():
    # issue 29: after loading a state taken when epoch 0 ended, the loader starts epoch 1, and
    # explain() said "epoch 0"; the eligible count and batches differ per epoch here
    plan = BASE.with_curriculum("hardness", horizon=4, start=0.25).compile()
    first = plan.build()
    assert "epoch 0: 25 of 100 samples eligible, 3 batches" in _explained(first, "curriculum")
    collect(first)
    ended = first.state_dict()
    resumed = plan.build()
    resumed.load_state_dict(ended)
    line = _explained(resumed, "curriculum")
    ids = _ids(collect(resumed))  # what the next pass (epoch 1) delivers
    assert f"epoch 1 (next pass): {len(ids)} of 100 samples eligible" in line
    assert len(ids) != 25

    for stage in ("mid-epoch state", "pass in progress"):  # at epoch 1: no "next pass"
        loader = plan.build()
        loader.set_epoch(1)
        batches = iter(loader)
        next(batches)
        if stage == "mid-epoch state":
            state = loader.state_dict()
            loader = plan.build()
            loader.load_state_dict(state)
        assert f"epoch 1: {len(ids)} of 100 samples eligible" in _explained(loader, "curriculum")


def test_explain_reports_a_ranks_next_epoch_after_a_resume():
    plan = BASE.with_distributed(world_size=2, rank=0).compile()
    first = plan.build()
    collect(first)
    resumed = plan.build()
    resumed.load_state_dict(first.state_dict())
    assert _explained(resumed, "ranks").startswith("  ranks       epoch 1 (next pass): 5 batches")
    resumed.set_epoch(0)
    assert _explained(resumed, "ranks").startswith("  ranks       epoch 0: 5 batches")
