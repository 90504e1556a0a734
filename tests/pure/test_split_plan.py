"""Splits in the plan layer: the split math, builder, rules, files, fingerprint, for_eval."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.order import FeistelPermutation, derive_key
from loaderkit.order.split import allocate, part_size, split_parts, split_sizes
from loaderkit.plan.fingerprint import stream_fields

ROWS = [{"x": i, "label": i % 3} for i in range(40)]


def base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(ROWS).with_batch_size(4).with_shuffle()


def paths(exc: PlanError) -> list[str]:
    return [p.path for p in exc.problems]


# -- the math ----------------------------------------------------------------------------------


def test_fractions_round_up_exactly_and_counts_are_counts():
    assert part_size(0.1, 1000) == 100
    assert part_size(0.7, 10) == 7  # 0.7 * 10 is 7.000000000000001 in floating point
    assert part_size(0.15, 10) == 2  # ceil(1.5)
    assert part_size(0.001, 10) == 1  # any positive fraction takes at least one sample
    assert part_size(3, 10) == 3
    assert part_size(0, 10) == 0
    assert split_sizes(1000, 0.1, 0.2) == (700, 100, 200)
    assert split_sizes(10, 0.25, 0.25) == (4, 3, 3)
    assert split_sizes(10, 4, 0.5) == (1, 4, 5)


def test_the_unstratified_split_follows_the_keyed_permutation():
    n, seed = 50, 7
    order = FeistelPermutation(n, derive_key(seed, "split")).slice(0, n)
    parts = split_parts(n, seed, 10, 5)
    assert parts["test"].tolist() == sorted(order[:5].tolist())
    assert parts["val"].tolist() == sorted(order[5:15].tolist())
    assert parts["train"].tolist() == sorted(order[15:].tolist())


def test_changing_val_never_touches_test_and_a_bigger_val_keeps_the_smaller():
    small, big = split_parts(100, 3, 0.1, 0.2), split_parts(100, 3, 0.3, 0.2)
    assert small["test"].tolist() == big["test"].tolist()
    assert set(small["val"].tolist()) < set(big["val"].tolist())


@given(
    n=st.integers(2, 300),
    seed=st.integers(0, 2**63 - 1),
    val=st.one_of(st.floats(0.01, 0.45), st.integers(0, 5)),
    test=st.one_of(st.floats(0.01, 0.45), st.integers(0, 5)),
    classes=st.integers(1, 6),
)
def test_parts_are_disjoint_cover_and_have_their_sizes(n, seed, val, test, classes):
    train_size, val_size, test_size = split_sizes(n, val, test)
    if train_size < 1:
        return
    labels = np.asarray([(i * 7919) % classes for i in range(n)])
    for given_labels in (None, labels):
        parts = split_parts(n, seed, val, test, given_labels)
        joined = np.concatenate([parts["train"], parts["val"], parts["test"]])
        assert sorted(joined.tolist()) == list(range(n))
        assert [len(parts[k]) for k in ("train", "val", "test")] == [
            train_size,
            val_size,
            test_size,
        ]
        for part in parts.values():
            assert part.tolist() == sorted(part.tolist())
        assert all(
            np.array_equal(parts[k], again)
            for k, again in split_parts(n, seed, val, test, given_labels).items()
        )


@given(
    counts=st.lists(st.integers(1, 60), min_size=1, max_size=8),
    test=st.floats(0.05, 0.4),
    val=st.floats(0.05, 0.4),
    seed=st.integers(0, 1000),
)
def test_stratified_test_is_within_one_of_each_class_quota(counts, test, val, seed):
    labels = np.repeat(np.arange(len(counts)), counts)
    n = len(labels)
    if split_sizes(n, val, test)[0] < 1:
        return
    parts = split_parts(n, seed, val, test, labels)
    n_test = len(parts["test"])
    got = np.bincount(labels[parts["test"]], minlength=len(counts))
    quota = n_test * np.asarray(counts) / n
    assert np.all(np.abs(got - quota) < 1)
    # val is a stratified sample of what test left of each class
    left = np.asarray(counts) - got
    got_val = np.bincount(labels[parts["val"]], minlength=len(counts))
    assert np.all(np.abs(got_val - len(parts["val"]) * left / left.sum()) < 1)


def test_the_largest_remainder_rule():
    counts = np.asarray([14, 6])
    # test 5 of 20: quotas 3.5 and 1.5, tie on the remainders -> the first class
    assert allocate(5, counts, counts).tolist() == [4, 1]
    # val 5 of the 15 test left (10, 5): quotas 3.33 and 1.67 -> the second class
    assert allocate(5, counts - [4, 1], counts - [4, 1]).tolist() == [3, 2]
    # a full class is skipped
    assert allocate(3, np.asarray([1, 1, 1, 1]), np.asarray([1, 1, 0, 1])).tolist() == [1, 1, 0, 1]


def test_one_class_is_the_unstratified_split():
    a = split_parts(30, 1, 0.2, 0.1)
    b = split_parts(30, 1, 0.2, 0.1, ["same"] * 30)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_string_labels_are_classes():
    labels = ["cat", "dog"] * 10
    parts = split_parts(20, 0, 0.5, 0, labels)
    assert sorted(labels[i] for i in parts["val"]) == ["cat"] * 5 + ["dog"] * 5


# -- builder, rules ----------------------------------------------------------------------------


def test_with_split_records_the_split_and_shows_in_the_repr():
    builder = base().with_split(0.2, 5, seed=3, stratify_by="label")
    assert repr(builder).endswith(".with_split(val=0.2, test=5, seed=3, stratify_by='label')")
    plan = builder.compile()
    assert plan.split is not None
    assert (plan.split.val, plan.split.test, plan.split.seed) == (0.2, 5, 3)
    assert repr(base().with_split()).endswith(".with_split(val=0.1, test=0)")
    assert "train 27, val 8, test 5 samples (stratified by 'label'), seed 3" in plan.explain()


def test_explain_counts_the_train_part_batches():
    text = base().with_split(0.25).compile().explain()
    assert "4 samples per batch per rank, drop_last=False -> 8 batches per epoch per rank" in text


@pytest.mark.parametrize(
    ("kwargs", "path", "words"),
    [
        ({"val": 1.0}, "split.val", "must be in (0, 1)"),
        ({"val": -0.2}, "split.val", "must be in (0, 1)"),
        ({"val": float("nan")}, "split.val", "must be in (0, 1)"),
        ({"val": -1}, "split.val", "must be >= 0"),
        ({"val": True}, "split.val", "must be an int"),
        ({"val": "10%"}, "split.val", "must be an int"),
        ({"test": 1.5}, "split.test", "must be in (0, 1)"),
        ({"val": 0, "test": 0}, "split", "both 0"),
        ({"val": 0.6, "test": 0.4}, "split", "leave nothing for train"),
        ({"seed": -1}, "split.seed", "must be >= 0"),
        ({"seed": 2**63}, "split.seed", "must be <= 9,223,372,036,854,775,807"),
        ({"stratify_by": ""}, "split.stratify_by", "non-empty"),
        ({"stratify_by": 1}, "split.stratify_by", "must be a string"),
    ],
)
def test_bad_split_arguments_name_their_path(kwargs, path, words):
    with pytest.raises(PlanError) as info:
        base().with_split(**kwargs)
    assert paths(info.value) == [path]
    assert words in str(info.value)


def test_a_split_that_leaves_train_empty_is_refused_at_compile():
    with pytest.raises(PlanError) as info:
        base().with_split(30, 10).compile()
    assert paths(info.value) == ["split"]
    assert "leaving 0 for train" in str(info.value)
    with pytest.raises(PlanError, match="leaving 0 for train"):
        base().with_split(0.5, 0.49).compile()  # 20 + 20 of 40 (each rounds up)


def test_unknown_stratify_columns_are_refused_with_a_suggestion():
    with pytest.raises(PlanError) as info:
        base().with_split(stratify_by="labels").compile()
    assert paths(info.value) == ["split.stratify_by"]
    assert "did you mean 'label'?" in str(info.value)


def test_splits_of_tuples_of_columns_cannot_stratify():
    columns = (np.zeros((10, 2)), np.arange(10))
    builder = DataLoaderBuilder().with_dataset(columns).with_split(stratify_by="y")
    with pytest.raises(PlanError, match="no named") as info:
        builder.compile()
    assert paths(info.value) == ["split.stratify_by"]


def test_mixtures_cannot_be_split_yet():
    builder = DataLoaderBuilder().with_mixture({"a": ROWS, "b": ROWS}).with_split()
    with pytest.raises(PlanError, match="with_mixture") as info:
        builder.compile()
    assert paths(info.value) == ["split"]


def test_iterable_datasets_cannot_be_split():
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(PlanError, match="iterable") as info:
        DataLoaderBuilder().with_dataset(Stream()).with_split().compile()
    assert "split" in paths(info.value)


def test_drop_last_that_empties_the_train_part_is_refused():
    with pytest.raises(PlanError) as info:
        base().with_batch_size(30, drop_last=True).with_split(0.5).compile()
    assert paths(info.value) == ["batch.drop_last"]
    assert "train part's 20 samples" in str(info.value)


def test_uneven_batches_are_checked_on_every_part():
    builder = (
        base()
        .with_batch_size(4)
        .with_distributed(world_size=2, rank=0, even_batches=False)
        .with_split(0.1)  # 40 samples split evenly over 2 x 4, the 36 of train do not
    )
    with pytest.raises(PlanError) as info:
        builder.compile()
    assert paths(info.value) == ["distributed.even_batches"]
    assert "train part" in str(info.value)


# -- files, fingerprint --------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_split_plans_round_trip_through_files(tmp_path, suffix):
    plan = base().with_split(0.2, 3, seed=9, stratify_by="label").compile()
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    again = LoaderPlan.load(path, bindings={"dataset": ROWS})
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert isinstance(again.split.val, float)
    assert isinstance(again.split.test, int)
    assert plan.to_dict()["split"] == {"val": 0.2, "test": 3, "seed": 9, "stratify_by": "label"}


def test_bad_split_tables_name_their_paths():
    data = base().with_split().compile().to_dict()
    data["split"] = {"val": 2.0, "tset": 0.1}
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"dataset": ROWS})
    assert set(paths(info.value)) == {"split.tset", "split.val"}
    assert "did you mean 'test'?" in str(info.value)


def test_the_split_is_in_the_fingerprint():
    plain = base().compile()
    split = base().with_split(0.2).compile()
    assert "split" in stream_fields(split)
    assert "split" not in stream_fields(plain)
    fingerprints = {
        plain.fingerprint,
        split.fingerprint,
        base().with_split(0.3).compile().fingerprint,
        base().with_split(0.2, seed=1).compile().fingerprint,
        base().with_split(0.2, stratify_by="label").compile().fingerprint,
        base().with_split(8).compile().fingerprint,
    }
    assert len(fingerprints) == 6
    # 0 and 0.0 are both "no part"
    assert base().with_split(0.2, 0.0).compile() == base().with_split(0.2, 0).compile()


# -- for_eval ------------------------------------------------------------------------------------


def weight_of(sample: dict) -> float:
    return 1.0 + sample["x"]


def noisy(sample: dict, rng) -> dict:
    return sample


def plain(sample: dict) -> dict:
    return sample


def test_for_eval_reads_every_sample_once_in_order():
    plan = (
        base()
        .with_batch_size([(1, 4), (2, 8)], drop_last=True)
        .with_sampling_weights(weight_of)
        .with_transform(noisy)
        .with_split(0.25)
        .compile()
    )
    ev = plan.for_eval()
    assert ev.order.shuffle is False
    assert ev.order.seed == plan.order.seed
    assert ev.batch.batch_size == 4
    assert ev.batch.drop_last is False
    assert not ev.batch.scheduled
    assert ev.sampling_weights is None
    assert ev.transform is None
    assert ev.split == plan.split
    assert set(ev.bindings) == {"dataset"}  # the weight and transform functions are dropped
    assert plan.sampling_weights is not None  # the plan itself is unchanged
    assert plan.for_eval(batch_size=32).batch.batch_size == 32


def test_for_eval_keeps_what_is_deterministic_unless_asked():
    plan = base().with_transform(plain).with_bucketing("x").compile()
    ev = plan.for_eval()
    assert ev.transform == plan.transform
    assert ev.bucketing is None
    assert plan.for_eval(keep_bucketing=True).bucketing == plan.bucketing
    noisy_plan = base().with_transform(noisy).compile()
    assert noisy_plan.for_eval(keep_transform=True).transform == noisy_plan.transform


def test_for_eval_drops_curricula_and_length_schedules():
    plan = (
        base()
        .with_curriculum("x", "discrete", steps=[(1, 0.5), (2, 1.0)])
        .with_collator("text", pad_token_id=0)
        .with_max_length([(1, 8), (2, 16)])
        .compile()
    )
    ev = plan.for_eval()
    assert ev.curriculum is None
    assert ev.max_length is not None and ev.max_length.value == 16
    assert ev.collator == plan.collator


def test_for_eval_reads_a_mixture_source_after_source():
    plan = (
        DataLoaderBuilder()
        .with_mixture({"a": ROWS, "b": ROWS[:10]}, weights=[1, 3], num_samples=100)
        .with_batch_size(4)
        .with_shuffle()
        .compile()
    )
    ev = plan.for_eval()
    assert ev.mixture is not None
    assert ev.mixture.mode == "sequential"
    assert ev.mixture.weights is None and ev.mixture.num_samples is None
    assert ev.dataset.length == 50


def test_for_eval_evens_out_sharded_batches():
    plan = (
        base()
        .with_batch_size(4, drop_last=True)
        .with_distributed(world_size=2, rank=1, even_batches=False)
        .compile()
    )
    ev = plan.for_eval()
    assert ev.distributed.even_batches is True
    assert (ev.distributed.world_size, ev.distributed.rank) == (2, 1)


def test_for_eval_needs_a_bound_plan():
    unbound = LoaderPlan.from_dict(base().compile().to_dict(), require_bindings=False)
    with pytest.raises(PlanError) as info:
        unbound.for_eval()
    assert paths(info.value) == ["bindings"]
