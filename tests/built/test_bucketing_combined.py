"""Bucketing combined with sampling weights, a per-epoch curriculum or a mixture.

The combined sampler chooses each epoch's samples; bucketing groups them by length. So a
combined loader delivers the same multiset of samples per epoch as the sampler alone, with
far less padding, and keeps every loader property: reproducible, resumable, worker-invariant,
dealt evenly to ranks.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import (
    assert_batches_equal,
    assert_elastic,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(240)

N = 600


def make_samples(n: int, seed: int, low: int = 16, high: int = 512, first: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "input_ids": np.arange(int(rng.integers(low, high + 1)), dtype=np.int64),
            "idx": first + i,
            "w": float(1 + i % 4),
            "hardness": float((i * 37) % n),
        }
        for i in range(n)
    ]


SAMPLES = make_samples(N, seed=0)
WIKI = make_samples(400, seed=1, first=0)
CODE = make_samples(150, seed=2, low=64, high=600, first=10_000)


def sample_length(sample: dict) -> int:
    return len(sample["input_ids"])


def grow_code(epoch: int) -> dict[str, float]:
    return {"wiki": 1.0, "code": float(epoch + 1)}


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]


def waste(batches) -> float:
    real = padded = 0
    for batch in batches:
        mask = batch["attention_mask"]
        real += int(mask.sum())
        padded += mask.numel()
    return 1 - real / padded


def base() -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(SAMPLES, name="train")
        .with_batch_size(16)
        .with_seed(5)
        .with_collator("text")
    )


def mixture(**kw) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_mixture({"wiki": WIKI, "code": CODE}, **kw)
        .with_batch_size(16)
        .with_shuffle()
        .with_seed(5)
        .with_collator("text")
    )


# every sampler that bucketing groups, as (name, the plan without bucketing)
SAMPLERS = {
    "weights": lambda: base().with_sampling_weights("w"),
    "weights-noreplace": lambda: base().with_sampling_weights(
        sample_length, replacement=False, num_samples=450
    ),
    "weights-many-draws": lambda: base().with_sampling_weights(
        np.arange(1.0, N + 1), num_samples=900
    ),
    "curriculum": lambda: base().with_curriculum("hardness", horizon=3, start=0.3),
    "curriculum-fn": lambda: base().with_curriculum("hardness", lambda e: 0.5 if e < 1 else 1.0),
    "mixture-weighted": lambda: mixture(),
    "mixture-fixed-weights": lambda: mixture(weights={"wiki": 1, "code": 3}, num_samples=500),
    "mixture-weight-fn": lambda: mixture(weights=grow_code),
    "mixture-weight-table": lambda: mixture(weights=[(1, [1, 0]), (2, [1, 1])]),
    "mixture-fixed-by-step": lambda: mixture(weights=[2, 1], by="step"),
    "round_robin": lambda: mixture(mode="round_robin"),
    "max_size_cycle": lambda: mixture(mode="max_size_cycle"),
    "min_size": lambda: mixture(mode="min_size"),
}


MIXTURES = {name for name in SAMPLERS if name.startswith("mixture")} | {
    "round_robin",
    "max_size_cycle",
    "min_size",
}


def bucketed(name: str, builder: DataLoaderBuilder | None = None, **kw) -> DataLoaderBuilder:
    """The sampler's epochs grouped in length buckets (mixtures: lengths from a function)."""
    length = sample_length if name in MIXTURES else "input_ids"
    return (builder or SAMPLERS[name]()).with_bucketing(length, **kw)


def budgeted(name: str, budget: int = 8_192) -> DataLoaderBuilder:
    """The sampler's batches sized by a token budget (no fixed batch size)."""
    return bucketed(name, SAMPLERS[name]().with_batch_size(1), max_tokens=budget)


def epochs(loader, count: int = 3) -> list[list]:
    out = []
    for epoch in range(count):
        loader.set_epoch(epoch)
        out.append(collect(loader))
    return out


# -- every combination: the sampler's samples, grouped by length --------------------------------


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_the_epoch_holds_the_samplers_multiset_with_much_less_padding(name):
    alone = epochs(SAMPLERS[name]().compile().build())
    grouped = epochs(bucketed(name).compile().build())
    for epoch, (plain, mine) in enumerate(zip(alone, grouped, strict=True)):
        assert Counter(_ids(mine)) == Counter(_ids(plain)), f"epoch {epoch}"
        assert len(mine) == len(plain)  # fixed size: the same number of batches
        sizes = [len(b["idx"]) for b in mine]
        assert sum(size != 16 for size in sizes) <= 1  # one partial batch, anywhere (shuffled)
        assert waste(mine) < 0.5 * waste(plain), f"epoch {epoch}"
    assert waste([b for e in grouped for b in e]) < 0.2
    assert waste([b for e in alone for b in e]) > 0.3


@pytest.mark.parametrize("name", ["weights", "weights-noreplace", "curriculum", "round_robin"])
def test_under_a_token_budget_the_multiset_is_kept_and_the_budget_never_exceeded(name):
    alone = epochs(SAMPLERS[name]().compile().build(), 2)
    grouped = epochs(budgeted(name).compile().build(), 2)
    for plain, mine in zip(alone, grouped, strict=True):
        assert Counter(_ids(mine)) == Counter(_ids(plain))
        sizes = set()
        for batch in mine:
            rows, width = batch["input_ids"].shape
            assert rows * width <= 8_192
            sizes.add(rows)
        assert len(sizes) > 1  # the budget sizes the batches


def test_drop_last_drops_only_the_last_partial_batch():
    full = collect(bucketed("weights").compile().build())
    kept = collect(bucketed("weights").with_batch_size(16, drop_last=True).compile().build())
    assert len(kept) == N // 16 and all(len(b["idx"]) == 16 for b in kept)
    assert len(full) == -(-N // 16)
    dropped = Counter(_ids(full)) - Counter(_ids(kept))
    assert sum(dropped.values()) == N % 16


def test_weighted_draws_follow_the_weights():
    loader = base().with_sampling_weights("w", num_samples=20_000).with_bucketing("input_ids")
    counts = Counter(_ids(collect(loader.compile().build())))
    weights = np.array([s["w"] for s in SAMPLES])
    by_weight = {w: sum(counts[i] for i in range(N) if weights[i] == w) for w in (1, 2, 3, 4)}
    total = sum(by_weight.values())
    for w, got in by_weight.items():
        expected = w * (weights == w).sum() / weights.sum()
        assert abs(got / total - expected) < 0.02


def test_zero_weight_samples_longer_than_the_budget_are_never_drawn_so_allowed():
    samples = make_samples(200, seed=3, high=100)
    samples[7] = {**samples[7], "input_ids": np.arange(5_000)}
    weights = np.ones(200)
    weights[7] = 0.0
    builder = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_sampling_weights(weights)
        .with_bucketing("input_ids", max_tokens=1_000)
        .with_collator("text")
    )
    ids = _ids(collect(builder.compile().build()))
    assert 7 not in ids and len(ids) == 200
    weights[7] = 1.0
    with pytest.raises(Exception, match="sample 7 has length 5000"):
        builder.with_sampling_weights(weights).compile().build()


def test_the_curriculum_grows_and_each_epoch_is_bucketed():
    loader = bucketed("curriculum").compile().build()
    hardness = np.array([s["hardness"] for s in SAMPLES])
    easiest = np.argsort(hardness, kind="stable")
    sizes = []
    for epoch in range(4):
        loader.set_epoch(epoch)
        ids = _ids(collect(loader))
        assert len(ids) == len(set(ids))
        assert set(ids) == {int(i) for i in easiest[: len(ids)]}
        sizes.append(len(ids))
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1] == N
    loader.set_epoch(0)
    text = loader.explain()
    assert "curriculum  difficulties:" in text
    assert f"{sizes[0]} of {N} samples eligible" in text
    assert f"{sizes[0]} eligible samples in" in text


def test_mixture_sources_keep_their_ids_and_lengths_come_from_each_source():
    plan = bucketed("round_robin").compile()
    loader = plan.build()
    ids = _ids(collect(loader))
    assert sorted(ids) == list(range(400)) + list(range(10_000, 10_150))
    cost = loader.lengths_cost  # measured (or cached) source by source
    assert cost.startswith("'wiki': ") and "; 'code': " in cost and "sample_length" in cost
    # a column works too when every source has it, and gives the same batches
    by_column = mixture(mode="round_robin").with_bucketing("input_ids").compile().build()
    assert _ids(collect(by_column)) == ids


def test_mixture_precomputed_lengths_cover_the_whole_mixture():
    lengths = np.array([sample_length(s) for s in WIKI + CODE])
    plan = mixture(mode="round_robin").with_bucketing(lengths).compile()
    by_fn = bucketed("round_robin").compile()
    assert _ids(collect(plan.build())) == _ids(collect(by_fn.build()))
    with pytest.raises(PlanError) as err:
        mixture(mode="round_robin").with_bucketing(lengths[:-1]).compile()
    assert err.value.paths == ("bucketing.length",)
    assert "550 samples" in str(err.value)


def test_a_column_missing_from_one_source_is_named():
    other = [{"tokens": np.arange(5), "idx": i} for i in range(20)]
    with pytest.raises(PlanError) as err:
        (
            DataLoaderBuilder()
            .with_mixture({"wiki": WIKI, "other": other}, mode="round_robin")
            .with_bucketing("input_ids")
            .with_collator("text")
            .compile()
        )
    assert err.value.paths == ("bucketing.length",)
    message = err.value.problems[0].message
    assert "column 'input_ids' is not in mixture source 'other'" in message
    assert "every source needs it" in message


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("weights", "weighted draws (see sampling) grouped in length buckets"),
        ("curriculum", "eligible easiest samples, shuffled (see curriculum), grouped in length"),
        ("round_robin", "mixed from the sources (see mixture), each source shuffled, grouped in"),
    ],
)
def test_explain_says_what_is_bucketed(name, words):
    plan = bucketed(name).compile()
    assert words in plan.explain()
    text = plan.build().explain()
    assert "bucketing   lengths:" in text and "padding" in text


def test_explain_counts_batches_where_they_are_known():
    text = bucketed("weights-many-draws").compile().explain()
    assert "16 samples per batch per rank, drop_last=False -> 57 batches per epoch per rank" in text
    text = bucketed("max_size_cycle").compile().explain()
    assert "-> 50 batches per epoch per rank" in text  # 2 * 400 positions
    for name in ("curriculum", "round_robin", "weights"):
        text = budgeted(name).compile().explain()
        assert "batches per epoch known when built" in text


# -- loader properties ---------------------------------------------------------------------------

PROPERTY_PLANS = ["weights", "curriculum", "mixture-weight-fn", "min_size"]


@pytest.mark.parametrize("name", PROPERTY_PLANS)
def test_reproducible_and_resumable(name):
    plan = bucketed(name).compile()
    assert_reproducible(plan, epochs=2)
    assert_resumable(plan, at=[0, 3, 11])
    assert_resumable(budgeted(name).compile(), at=[0, 5], epoch=1)


@pytest.mark.parametrize("name", ["weights", "curriculum", "mixture-weight-table"])
def test_worker_invariant(name):
    assert_worker_invariant(bucketed(name).with_workers(2).compile(), workers=(0, 2))


def test_plans_round_trip_through_files(tmp_path):
    for name in ("weights", "curriculum", "round_robin"):
        plan = bucketed(name).compile()
        path = tmp_path / f"{name}.toml"
        plan.save(path)
        loaded = LoaderPlan.load(path, bindings=dict(plan.bindings or {}))
        assert loaded.fingerprint == plan.fingerprint
        assert_batches_equal(collect(plan.build()), collect(loaded.build()))


@pytest.mark.parametrize("name", ["weights-noreplace", "curriculum", "round_robin", "weights"])
def test_fixed_size_global_batches_do_not_depend_on_the_world_size(name):
    # batch 16 is the global batch: 1 x 16, 2 x 8, 4 x 4 give the same global batches
    assert_elastic(bucketed(name).compile(), world_sizes=(1, 2, 4))


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("name", ["weights-noreplace", "curriculum", "round_robin", "weights"])
def test_budget_batches_are_dealt_whole_and_the_last_round_completed(world, name):
    whole = collect(budgeted(name).compile().build())
    per_rank = [
        collect(budgeted(name).with_distributed(world_size=world, rank=r).compile().build())
        for r in range(world)
    ]
    rounds = -(-len(whole) // world)
    assert {len(batches) for batches in per_rank} == {rounds}  # nobody waits
    for r, batches in enumerate(per_rank):  # rank r: batches r, r + W, ... then from the start
        expected = [whole[(j * world + r) % len(whole)] for j in range(rounds)]
        assert_batches_equal(expected, batches, label=f"rank {r}")


# -- what stays refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "path", "words"),
    [
        (
            lambda: base().with_curriculum("hardness", horizon=3, by="step"),
            "curriculum.by",
            "a per-step curriculum cannot be combined with with_bucketing",
        ),
        (
            lambda: mixture(mode="sequential"),
            "mixture.mode",
            "mode='sequential' cannot be combined with with_bucketing",
        ),
        (
            lambda: mixture(stratified=True),
            "mixture.stratified",
            "stratified=True cannot be combined with with_bucketing",
        ),
        (
            lambda: mixture(weights=[(4, [1, 0]), (8, [1, 1])], by="step"),
            "mixture.by",
            "a per-step weight schedule cannot be combined with with_bucketing",
        ),
        (
            lambda: mixture(weights=grow_code, by="step"),
            "mixture.by",
            "use by='epoch'",
        ),
    ],
)
def test_combinations_bucketing_cannot_follow_are_refused_with_a_reason(make, path, words):
    with pytest.raises(PlanError) as err:
        make().with_bucketing(sample_length).compile()
    assert err.value.paths == (path,)
    message = err.value.problems[0].message
    assert words in message
    assert "drop the bucketing with .without('bucketing')" in message  # and the one call


@pytest.mark.parametrize(
    ("make", "path", "words"),
    [
        (
            lambda: base().with_sampling_weights("w").with_curriculum("hardness", horizon=2),
            "curriculum",
            "cannot be combined with with_sampling_weights yet",
        ),
        (
            lambda: mixture(mode="round_robin").with_sampling_weights(np.ones(550)),
            "mixture",
            "cannot be combined with with_sampling_weights yet",
        ),
        (
            lambda: mixture(mode="round_robin").with_curriculum(np.ones(550), horizon=2),
            "mixture",
            "cannot be combined with with_curriculum yet",
        ),
    ],
)
def test_other_pairs_stay_refused_with_or_without_bucketing(make, path, words):
    for builder in (make(), make().with_bucketing(sample_length)):
        with pytest.raises(PlanError) as err:
            builder.compile()
        assert any(p.path == path and words in p.message for p in err.value.problems), err.value
