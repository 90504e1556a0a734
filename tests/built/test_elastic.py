"""Elastic resume: a state saved at one world size continues the global stream at another."""

from __future__ import annotations

import json

import pytest
import torch

from loaderkit import DataLoaderBuilder, ResumeError
from loaderkit.testing import global_batches

pytestmark = pytest.mark.timeout(240)

ROWS = [
    {"idx": i, "input_ids": [1] * (1 + (i * 7) % 50), "w": 1.0 + i % 3, "h": float(i % 10)}
    for i in range(103)
]
GLOBAL = 12


def ids(samples: list[dict]) -> dict[str, torch.Tensor]:
    """Only the sample ids: the test compares which samples each global batch holds."""
    return {"idx": torch.tensor([s["idx"] for s in samples])}


def base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(ROWS).with_shuffle().with_seed(4).with_collator(ids)


SAMPLERS = {
    "plain": lambda b: b,
    "bucketing": lambda b: b.with_bucketing("input_ids"),
    "weights": lambda b: b.with_sampling_weights("w"),
    "curriculum": lambda b: b.with_curriculum("h", horizon=3, start=0.5),
    "curriculum-step": lambda b: b.with_curriculum("h", horizon=20, by="step"),
    "bucketed weights": lambda b: b.with_sampling_weights("w").with_bucketing("input_ids"),
    "mixture": lambda b: (
        DataLoaderBuilder()
        .with_mixture({"a": ROWS, "b": ROWS[:40]}, weights=[3, 1], stratified=True)
        .with_shuffle()
        .with_collator(ids)
    ),
}


def ranks(name: str, world: int) -> list:
    builder = SAMPLERS[name](base()).with_batch_size(GLOBAL // world)
    return [
        builder.with_distributed(world_size=world, rank=r).compile().build() for r in range(world)
    ]


def run(loaders: list, steps: int | None = None) -> list[list[int]]:
    """Global batches (sample ids in rank order) of the next ``steps`` steps (all: None)."""
    iterators = [iter(loader) for loader in loaders]
    out = []
    while steps is None or len(out) < steps:
        parts = [next(it, None) for it in iterators]  # every rank's pass starts, even if empty
        if any(part is None for part in parts):
            break
        out.append([int(i) for part in parts for i in part["idx"]])
    return out


@pytest.mark.parametrize("name", list(SAMPLERS))
@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 4), (4, 2), (3, 2)])
def test_a_state_saved_at_one_world_size_continues_at_another(name, before, after):
    reference = run(ranks(name, 1))
    first = ranks(name, before)
    done = run(first, steps=3)
    state = json.loads(json.dumps(first[before - 1].state_dict()))  # any rank's state
    second = ranks(name, after)
    for loader in second:
        loader.load_state_dict(state)
    rest = run(second)
    got = done + rest
    assert len(got) == len(reference)
    for s, (want, have) in enumerate(zip(reference, got, strict=True)):
        if len(want) == GLOBAL:
            assert have == want, f"global batch {s}"
        else:  # the last, partial one: completed by wrapping around on several ranks
            assert have[: len(want)] == want


def test_the_next_epoch_after_an_elastic_resume_is_the_same():
    first = ranks("weights", 2)
    run(first)  # the whole epoch 0
    state = first[0].state_dict()
    assert (state["epoch"], state["batches_delivered"]) == (0, len(first[0]))  # complete
    assert state["pass_ended"]  # taken after the loop: the next pass is epoch 1, whole
    second = ranks("weights", 3)
    for loader in second:
        loader.load_state_dict(state)
    single = ranks("weights", 1)[0]
    single.set_epoch(1)
    want = global_batches(single.plan, 1, epoch=1)
    assert run(second)[:-1] == want[:-1]
    state["pass_ended"] = False  # as if taken at the last batch, inside the loop
    third = ranks("weights", 3)
    for loader in third:
        loader.load_state_dict(state)
    assert run(third) == []  # the rest of epoch 0: nothing
    assert run(third)[:-1] == want[:-1]


def test_another_global_batch_is_refused_with_the_fix():
    state = ranks("plain", 2)[0].state_dict()
    other = base().with_batch_size(8).with_distributed(world_size=1, rank=0).compile().build()
    with pytest.raises(ResumeError, match=r"global batch of 12 samples; this loader has 1 rank"):
        other.load_state_dict(state)
    with pytest.raises(ResumeError, match=r"with_batch_size\(12\)"):
        other.load_state_dict(state)
    other.load_state_dict(state, strict=False)  # the position fits: accepted on request


def test_a_stream_tied_to_the_world_size_is_refused():
    budget = base().with_bucketing("input_ids", max_tokens=400)
    two = budget.with_distributed(world_size=2, rank=0).compile().build()
    four = budget.with_distributed(world_size=4, rank=0).compile().build()
    with pytest.raises(ResumeError, match="a token budget is per rank"):
        four.load_state_dict(two.state_dict())


def test_another_plan_at_another_world_size_is_refused_with_the_differences():
    state = ranks("plain", 2)[0].state_dict()
    reseeded = base().with_seed(5).with_batch_size(4).with_distributed(world_size=3, rank=0)
    with pytest.raises(ResumeError, match="the plans differ") as error:
        reseeded.compile().build().load_state_dict(state)
    assert "order.seed: 4 -> 5" in str(error.value)


def test_a_state_records_the_global_stream():
    loader = ranks("plain", 3)[1]
    state = loader.state_dict()
    assert state["global_batch_size"] == GLOBAL
    assert state["global_fingerprint"] == ranks("plain", 2)[0].global_fingerprint
    assert state["global_fingerprint"] == ranks("plain", 1)[0].global_fingerprint
