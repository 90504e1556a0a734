"""with_sampling_weights end to end: plans, files, frequencies, determinism, ranks."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.testing import assert_elastic, assert_resumable, assert_worker_invariant, collect

pytestmark = pytest.mark.timeout(180)

SAMPLES = [{"idx": i, "w": float(1 + i % 4)} for i in range(200)]
WEIGHTS = np.array([s["w"] for s in SAMPLES])
BASE = DataLoaderBuilder().with_dataset(SAMPLES, name="train").with_batch_size(10)


def sample_weight(sample):
    return sample["w"]


def _ids(batches) -> list[int]:
    return [int(i) for b in batches for i in b["idx"]]


@pytest.mark.parametrize(
    "builder",
    [
        BASE.with_sampling_weights("w"),
        BASE.with_sampling_weights(WEIGHTS, num_samples=500),
        BASE.with_sampling_weights(sample_weight, replacement=False),
    ],
    ids=["column", "array", "function"],
)
def test_weighted_plans_round_trip_and_build(tmp_path, builder):
    plan = builder.compile()
    path = tmp_path / "p.toml"
    plan.save(path)
    again = LoaderPlan.load(path, bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert "weighted by" in plan.explain()
    loader = plan.build()
    ids = _ids(collect(loader))
    expected = plan.sampling_weights.num_samples or 200
    assert len(ids) == expected
    if not plan.sampling_weights.replacement:
        assert sorted(ids) == list(range(200))


def test_frequencies_follow_the_weights():
    loader = BASE.with_sampling_weights(WEIGHTS, num_samples=40_000).compile().build()
    counts = collections.Counter(_ids(collect(loader)))
    by_weight = collections.defaultdict(int)
    for i, c in counts.items():
        by_weight[WEIGHTS[i]] += c
    total = sum(by_weight.values())
    for w, c in by_weight.items():
        expected = w * 50 / WEIGHTS.sum()
        assert abs(c / total - expected) < 0.01


def test_zero_weights_are_never_drawn():
    weights = WEIGHTS.copy()
    weights[::2] = 0
    loader = BASE.with_sampling_weights(weights, num_samples=2_000).compile().build()
    assert all(i % 2 == 1 for i in _ids(collect(loader)))


def test_weighted_loaders_are_reproducible_resumable_and_worker_invariant():
    plan = BASE.with_sampling_weights("w", num_samples=300).with_seed(5).with_workers(2).compile()
    assert_worker_invariant(plan, workers=(0, 2))
    assert_resumable(plan.to_builder().with_workers(0).compile(), at=[0, 7, 30])
    a, b = plan.build(), plan.build()
    first = _ids(collect(a))
    assert first == _ids(collect(b))
    assert first != _ids(collect(a))  # the next epoch draws again


def test_ranks_get_the_same_number_of_batches_and_the_global_draws():
    base = BASE.with_sampling_weights(sample_weight, replacement=False)
    per_rank = [
        collect(base.with_distributed(world_size=3, rank=r).compile().build()) for r in range(3)
    ]
    assert len({len(b) for b in per_rank}) == 1
    ids = [i for b in per_rank for i in _ids(b)]
    single = _ids(collect(base.compile().build()))
    assert set(ids) == set(single)  # all draws, and only the wrapped tail twice
    assert_elastic(base.with_batch_size(12).compile(), world_sizes=(1, 2, 3, 4))


@pytest.mark.parametrize(
    ("make", "paths"),
    [
        (lambda: BASE.with_sampling_weights("v").compile(), ("sampling_weights.weights",)),
        (lambda: BASE.with_sampling_weights(np.array([1.0, -1.0])), ("sampling_weights.weights",)),
        (lambda: BASE.with_sampling_weights(np.zeros(200)), ("sampling_weights.weights",)),
        (lambda: BASE.with_sampling_weights(np.array([np.nan])), ("sampling_weights.weights",)),
        (lambda: BASE.with_sampling_weights(np.ones(3)).compile(), ("sampling_weights.weights",)),
        (lambda: BASE.with_sampling_weights("w", num_samples=0), ("sampling_weights.num_samples",)),
        (
            lambda: BASE.with_sampling_weights("w", replacement="no"),
            ("sampling_weights.replacement",),
        ),
        (
            lambda: BASE.with_sampling_weights("w", replacement=False, num_samples=201).compile(),
            ("sampling_weights.num_samples",),
        ),
        (
            lambda: BASE.with_sampling_weights("w").with_curriculum("w", horizon=2).compile(),
            ("curriculum",),
        ),
        (lambda: DataLoaderBuilder().with_dataset([1], name="weights"), ("dataset.name",)),
    ],
)
def test_bad_weights_name_their_paths(make, paths):
    with pytest.raises(lk.PlanError) as err:
        make()
    assert err.value.paths == paths


def test_weights_are_stream_fields():
    prints = {
        BASE.compile().fingerprint,
        BASE.with_sampling_weights("w").compile().fingerprint,
        BASE.with_sampling_weights(WEIGHTS).compile().fingerprint,
        BASE.with_sampling_weights(WEIGHTS + 1).compile().fingerprint,
        BASE.with_sampling_weights("w", replacement=False).compile().fingerprint,
        BASE.with_sampling_weights("w", num_samples=7).compile().fingerprint,
    }
    assert len(prints) == 6


@pytest.mark.parametrize(
    ("call", "path"),
    [
        (lambda b: b.with_sampling_weights("w"), "sampling_weights"),
        (lambda b: b.with_curriculum("w", horizon=2), "curriculum"),
    ],
)
def test_a_key_on_samples_that_are_not_mappings_is_a_plan_error_with_the_fix(call, path) -> None:
    """A key names nothing on int samples: a PlanError that shows a function, not a TypeError."""
    plan = call(DataLoaderBuilder().with_dataset([0, 1, 2]).with_batch_size(2)).compile()
    with pytest.raises(lk.PlanError, match=rf"^{path}\.\w+: 'w' names a key, but the samples"):
        plan.build()
