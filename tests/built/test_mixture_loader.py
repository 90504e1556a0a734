"""with_mixture end to end: modes, weights and their schedules, source ids, resume, workers."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import (
    assert_batches_equal,
    assert_elastic,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(240)

WIKI = {"x": torch.arange(0, 30)}
CODE = {"x": torch.arange(1000, 1010)}
MATH = {"x": torch.arange(2000, 2005)}


def source_of(value: int) -> str:
    return "wiki" if value < 1000 else "code" if value < 2000 else "math"


def values(batches) -> list[int]:
    return [int(v) for b in batches for v in b["x"]]


def builder(**kw) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_mixture({"wiki": WIKI, "code": CODE}, **kw)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(7)
    )


def weights_by_epoch(epoch: int) -> dict[str, float]:
    return {"wiki": 1.0, "code": 0.0} if epoch == 0 else {"wiki": 0.0, "code": 1.0}


def test_round_robin_reads_every_sample_once_alternating():
    got = values(collect(builder(mode="round_robin").compile().build()))
    assert sorted(got) == list(range(30)) + list(range(1000, 1010))
    head = [source_of(v) for v in got[:20]]
    assert head == ["wiki", "code"] * 10
    assert all(source_of(v) == "wiki" for v in got[20:])


def test_max_size_cycle_and_min_size_lengths():
    longest = values(collect(builder(mode="max_size_cycle").compile().build()))
    assert len(longest) == 60
    counts = Counter(source_of(v) for v in longest)
    assert counts == {"wiki": 30, "code": 30}
    assert sorted(v for v in longest if v < 1000) == list(range(30))
    assert Counter(v for v in longest if v >= 1000) == dict.fromkeys(range(1000, 1010), 3)
    shortest = values(collect(builder(mode="min_size").compile().build()))
    assert len(shortest) == 20
    assert sorted(v for v in shortest if v >= 1000) == list(range(1000, 1010))


def test_sequential_batches_do_not_mix_sources():
    batches = collect(builder(mode="sequential").compile().build())
    assert len(batches) == 8 + 3
    kinds = [{source_of(int(v)) for v in b["x"]} for b in batches]
    assert all(len(k) == 1 for k in kinds)
    assert [k.pop() for k in kinds] == ["wiki"] * 8 + ["code"] * 3


def test_weighted_frequencies_follow_the_weights():
    plan = (
        DataLoaderBuilder()
        .with_mixture(
            {"wiki": WIKI, "code": CODE, "math": MATH},
            weights={"wiki": 0.5, "code": 0.3, "math": 0.2},
            num_samples=20_000,
        )
        .with_batch_size(100)
        .with_shuffle()
        .compile()
    )
    counts = Counter(source_of(v) for v in values(collect(plan.build())))
    n = 20_000
    for name, p in {"wiki": 0.5, "code": 0.3, "math": 0.2}.items():
        sd = (n * p * (1 - p)) ** 0.5
        assert abs(counts[name] - n * p) < 5 * sd, counts


def test_stratified_batches_match_the_weights_exactly():
    plan = (
        DataLoaderBuilder()
        .with_mixture(
            {"wiki": WIKI, "code": CODE, "math": MATH},
            weights=[0.5, 0.3, 0.2],
            stratified=True,
            num_samples=1000,
            source_key="source",
        )
        .with_batch_size(10)
        .compile()
    )
    for batch in collect(plan.build()):
        assert Counter(batch["source"].tolist()) == {0: 5, 1: 3, 2: 2}
        assert [source_of(int(v)) for v in batch["x"]] == [
            ["wiki", "code", "math"][i] for i in batch["source"].tolist()
        ]


def test_source_ids_follow_every_sample():
    plan = builder(source_key="source").compile()
    for batch in collect(plan.build()):
        assert batch["source"].dtype == torch.int64
        expected = [0 if v < 1000 else 1 for v in batch["x"].tolist()]
        assert batch["source"].tolist() == expected


def test_source_ids_need_dict_batches():
    plan = (
        DataLoaderBuilder()
        .with_mixture({"a": torch.arange(4), "b": torch.arange(3)}, source_key="source")
        .with_batch_size(2)
        .compile()
    )
    with pytest.raises(DataError, match="adds the source ids to dict batches"):
        collect(plan.build())


def test_weights_follow_an_epoch_schedule_and_set_epoch():
    loader = builder(weights=weights_by_epoch).compile().build()
    assert {source_of(v) for v in values(collect(loader))} == {"wiki"}
    assert {source_of(v) for v in values(collect(loader))} == {"code"}
    loader.set_epoch(0)
    assert {source_of(v) for v in values(collect(loader))} == {"wiki"}


def test_weights_follow_a_step_table():
    table = [(3, {"wiki": 1, "code": 0}), (6, {"wiki": 0, "code": 1}), (7, [1, 1])]
    loader = builder(weights=table, by="step").compile().build()
    batches = collect(loader) + collect(loader)  # 10 steps per epoch, 20 steps
    for step, batch in enumerate(batches):
        kinds = {source_of(int(v)) for v in batch["x"]}
        if step < 3:
            assert kinds == {"wiki"}
        elif step < 6:
            assert kinds == {"code"}
    later = Counter(source_of(v) for v in values(batches[6:]))
    assert later["wiki"] > 10
    assert later["code"] > 10


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"mode": "round_robin"},
        {"mode": "max_size_cycle"},
        {"mode": "sequential"},
        {"weights": [1, 3], "stratified": True},
        {"weights": [(4, [1, 0]), (8, [1, 1])], "by": "step"},
    ],
)
def test_mixtures_are_reproducible_and_resumable(kw):
    plan = builder(**kw).compile()
    assert_reproducible(plan)
    assert_resumable(plan, epoch=1)


@pytest.mark.parametrize("kw", [{"mode": "round_robin"}, {"weights": [1, 3], "stratified": True}])
def test_mixtures_are_worker_invariant(kw):
    plan = builder(**kw, source_key="source").with_workers(0).compile()
    assert_worker_invariant(plan, workers=(0, 2), epochs=2)


def test_a_source_keeps_its_order_when_another_is_added():
    one = values(collect(builder(mode="round_robin").compile().build()))
    three = (
        DataLoaderBuilder()
        .with_mixture({"wiki": WIKI, "code": CODE, "math": MATH}, mode="round_robin")
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(7)
        .compile()
    )
    both = values(collect(three.build()))
    assert [v for v in one if v < 1000] == [v for v in both if v < 1000]


@settings(max_examples=15, deadline=None)
@given(
    mode=st.sampled_from(["weighted", "round_robin", "max_size_cycle", "min_size", "sequential"]),
    global_batch=st.sampled_from([4, 6, 12]),
    stratified=st.booleans(),
)
def test_mixture_global_batches_do_not_depend_on_the_world_size(mode, global_batch, stratified):
    kw = {"weights": [1, 3], "stratified": True} if stratified and mode == "weighted" else {}
    assert_elastic(
        builder(mode=mode, **kw).with_batch_size(global_batch).compile(), world_sizes=(1, 2, 3)
    )


def test_a_mixture_plan_file_builds_the_same_batches(tmp_path):
    plan = builder(weights=weights_by_epoch, source_key="source").compile()
    path = tmp_path / "mix.toml"
    plan.save(path)
    again = LoaderPlan.load(path, bindings=plan.bindings)
    assert_batches_equal(collect(plan.build()), collect(again.build()))


def test_a_bad_weight_function_is_named_at_its_epoch():
    def broken(epoch: int) -> list[float]:
        return [1.0, 1.0] if epoch == 0 else [1.0, -2.0]

    loader = builder(weights=broken).compile().build()
    collect(loader)
    with pytest.raises(
        PlanError, match=r"mixture.weights: the weight function returned .* epoch 1"
    ):
        collect(loader)


def test_errors_name_the_source_of_a_bad_sample():
    class Broken:
        def __len__(self) -> int:
            return 3

        def __getitem__(self, i: int) -> dict[str, int]:
            if i == 2:
                raise KeyError("corrupt")
            return {"x": i}

    plan = (
        DataLoaderBuilder()
        .with_mixture({"good": [{"x": 9}] * 4, "bad": Broken()}, mode="sequential")
        .with_batch_size(4)
        .compile()
    )
    with pytest.raises(DataError, match=r"sample 6 \(source 'bad', its sample 2\)") as info:
        collect(plan.build())
    assert info.value.sample_index == 6


def test_explain_of_the_loader_mentions_the_mixture():
    text = builder(weights=[1, 1]).compile().build().explain()
    assert "mixture     2 sources: 'wiki' 30 (p=0.5), 'code' 10 (p=0.5)" in text


def test_sources_hear_set_epoch():
    class Steered:
        def __init__(self) -> None:
            self.epochs: list[int] = []

        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> dict[str, int]:
            return {"x": i, "epoch": self.epochs[-1] if self.epochs else -1}

        def set_epoch(self, epoch: int) -> None:
            self.epochs.append(epoch)

    steered = Steered()
    loader = (
        DataLoaderBuilder()
        .with_mixture({"a": steered, "b": [{"x": 7, "epoch": -1}] * 4}, mode="round_robin")
        .with_batch_size(8)
        .compile()
        .build()
    )
    loader.set_epoch(3)
    batch = collect(loader)[0]
    assert set(np.asarray(batch["epoch"])[np.asarray(batch["x"]) != 7].tolist()) == {3}
