"""Batch contracts at run time: each check passing and failing, every=N, plan.check()."""

from __future__ import annotations

import multiprocessing
import re

import numpy as np
import pytest
import torch

from loaderkit import DataError, DataLoaderBuilder
from loaderkit.checks import CheckReport
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(240)


def make_samples(n: int = 12, **bad: tuple[int, object]) -> list[dict[str, object]]:
    """Sample i: x = [i / 100, 0.5] (float32), label = i % 3; ``bad={key: (index, value)}``."""
    samples: list[dict[str, object]] = []
    for i in range(n):
        sample: dict[str, object] = {
            "x": np.array([i / 100, 0.5], dtype=np.float32),
            "label": i % 3,
        }
        for key, (index, value) in bad.items():
            if index == i:
                sample[key] = value
        samples.append(sample)
    return samples


GOOD = make_samples()


def builder(samples: list[dict[str, object]] = GOOD, **checks: object) -> DataLoaderBuilder:
    plan = DataLoaderBuilder().with_dataset(samples).with_batch_size(4)
    return plan.with_checks(**checks) if checks else plan


def failure(plan_builder: DataLoaderBuilder) -> DataError:
    with pytest.raises(DataError) as info:
        collect(plan_builder.compile().build())
    return info.value


def assert_names(error: DataError, key: str, check: str, batch: int, where: str) -> None:
    text = str(error)
    assert text.startswith(f"batch check failed: {key!r} ({check}) in epoch 0, batch {batch}: ")
    assert where in text, text
    assert error.batch_index == batch


# -- each kind: a passing and a failing batch ---------------------------------------------------


def test_keys():
    assert len(collect(builder(keys=["x", "label"]).compile().build())) == 3
    error = failure(builder(keys=["x", "lable"]))
    assert_names(error, "lable", "keys", 0, "is missing; the batch has x, label; did you mean")
    assert "dataset samples 0, 1, 2, 3" in str(error)


def test_dtypes():
    assert collect(builder(dtypes={"x": "float32", "label": "long"}).compile().build())
    error = failure(builder(dtypes={"x": "float64"}))
    assert_names(error, "x", "dtypes", 0, "has dtype float32, expected float64")
    assert ".to(torch.float64)" in str(error)


def test_shapes_bind_named_dims_across_keys():
    ok = builder(shapes={"x": ["B", 2], "label": ["B"]}).compile().build()
    assert len(collect(ok)) == 3
    assert collect(builder(shapes={"x": ["*", "..."], "label": ["..."]}).compile().build())
    error = failure(builder(shapes={"x": ["B", "D"], "label": ["D"]}))
    assert_names(error, "label", "shapes", 0, "has shape [4], expected [D]")
    assert "dim 0 (D) is 4 but D is 2 in 'x' (dim 1)" in str(error)
    error = failure(builder(shapes={"x": ["B", 3]}))
    assert "has shape [4, 2], expected [B, 3]: dim 1 is 2, expected 3" in str(error)
    error = failure(builder(shapes={"x": ["B"]}))
    assert "it has 2 dims, 1 expected" in str(error)


def test_finite_names_the_positions_and_samples():
    nan = np.array([0.0, np.nan], dtype=np.float32)
    samples = make_samples(x=(6, nan))
    assert collect(builder(finite=["x", "label"]).compile().build())  # batch 1 is not checked
    error = failure(builder(samples, finite=["x"], every=1))
    assert_names(error, "x", "finite", 1, "holds 1 NaN or Inf values, the first nan at [2, 1]")
    assert "batch positions 2 of 4 (dataset samples 6)" in str(error)
    assert error.sample_index == 6


def test_ranges():
    samples = make_samples(x=(9, np.array([0.0, 7.5], dtype=np.float32)))
    assert collect(builder(ranges={"x": [0, 1], "label": [0, None]}, every=1).compile().build())
    error = failure(builder(samples, ranges={"x": [0, 1]}, every=1))
    assert_names(error, "x", "ranges", 2, "holds 1 values outside [0, 1], the first 7.5 at [1, 1]")
    assert "(min 0, max 7.5)" in str(error)
    assert "batch positions 1 of 4 (dataset samples 9)" in str(error)
    open_ended = failure(builder(ranges={"label": [None, 1]}))
    assert "outside (-inf, 1], the first 2 at [2]" in str(open_ended)
    assert "batch positions 2 of 4 (dataset samples 2)" in str(open_ended)


def test_nan_is_outside_every_range():
    samples = make_samples(x=(0, np.array([np.nan, 0.0], dtype=np.float32)))
    error = failure(builder(samples, ranges={"x": [None, 100]}))
    assert "the first nan at [0, 0]" in str(error)


TEXT = [{"input_ids": list(range(1, 3 + i % 5))} for i in range(12)]


def text_builder(**options: object) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(TEXT)
        .with_batch_size(4)
        .with_collator("causal_lm", pad_token_id=0, **options)
    )


def test_label_pad_strict_and_only_pad():
    assert collect(text_builder().with_checks(label_pad=True, every=1).compile().build())
    # shifted labels are -100 at the last real token: strict fails, only_pad holds
    shifted = text_builder(shift=True)
    error = failure(shifted.with_checks(label_pad=True))
    assert_names(
        error,
        "labels",
        "label_pad",
        0,
        "labels is -100 exactly where attention_mask is 0 does not hold at 4 positions, "
        "the first [0, 1]: label -100 where attention_mask is not 0",
    )
    assert "batch positions 0, 1, 2, 3 of 4 (dataset samples 0, 1, 2, 3)" in str(error)
    assert "label_pad={'mode': 'only_pad'}" in str(error)
    only_pad = {"mode": "only_pad"}
    assert collect(shifted.with_checks(label_pad=only_pad, every=1).compile().build())
    # labels padded with 0 break both modes
    zero_pad = text_builder(label_pad_token_id=0).with_checks(label_pad=only_pad)
    error = failure(zero_pad)
    assert "label 0 where attention_mask is 0" in str(error)
    assert "batch positions 0, 1, 2 of 4 (dataset samples 0, 1, 2)" in str(error)


def test_label_pad_needs_matching_shapes():
    error = failure(text_builder().with_checks(label_pad={"mask": "input_ids", "labels": "x"}))
    assert_names(error, "x", "label_pad", 0, "is missing")
    samples = make_samples()
    error = failure(builder(samples, label_pad={"labels": "x", "mask": "label"}))
    assert "has shape [4, 2] but 'label' has [4]" in str(error)


def test_classes_index_ranges():
    assert collect(builder(classes={"label": 3}, every=1).compile().build())
    error = failure(builder(classes={"label": 2}))
    assert_names(error, "label", "classes", 0, "holds 1 class ids outside [0, 2), the first 2 at")
    assert "batch positions 2 of 4 (dataset samples 2)" in str(error)
    samples = make_samples(label=(5, -100))
    with_ignore = {"label": {"n": 3, "ignore_index": -100}}
    assert collect(builder(samples, classes=with_ignore, every=1).compile().build())
    error = failure(builder(samples, classes={"label": 3}, every=1))
    assert "the first -100 at [1]" in str(error)
    assert "dataset samples 5" in str(error)
    error = failure(builder(classes={"x": 3}))
    assert "has dtype float32; class ids are integers" in str(error)


def test_classes_one_hot():
    rows = [np.eye(3, dtype=np.float32)[i % 3] for i in range(8)]
    rows[5] = np.array([1, 1, 0], dtype=np.float32)
    samples = [{"y": row} for row in rows]
    plan = DataLoaderBuilder().with_dataset(samples[:4]).with_batch_size(4)
    assert collect(plan.with_checks(classes={"y": {"one_hot": 3}}).compile().build())
    bad = DataLoaderBuilder().with_dataset(samples).with_batch_size(4)
    error = failure(bad.with_checks(classes={"y": {"one_hot": 3}}, every=1))
    assert_names(error, "y", "classes", 1, "has 1 rows that do not hold exactly one 1")
    assert "batch positions 1 of 4 (dataset samples 5)" in str(error)
    error = failure(bad.with_checks(classes={"y": {"one_hot": 4}}))
    assert "has last dim 3; one-hot rows of 4 classes need a last dim of 4" in str(error)
    twos = [{"y": row * 2} for row in rows[:4]]
    error = failure(
        DataLoaderBuilder().with_dataset(twos).with_checks(classes={"y": {"one_hot": 3}})
    )
    assert "values other than 0 and 1, the first 2 at [0, 0]" in str(error)


def test_tuple_and_nested_batches():
    pairs = [(np.array([i, 0], dtype=np.int64), i % 2) for i in range(8)]
    plan = (
        DataLoaderBuilder()
        .with_dataset(pairs)
        .with_batch_size(4)
        .with_checks(keys=["0", "1"], shapes={"0": ["B", 2], "1": ["B"]}, classes={"1": 2})
    )
    assert len(collect(plan.compile().build())) == 2
    error = failure(plan.with_checks(keys=["2"]))
    assert "'2' (keys)" in str(error)
    assert "the batch has 0, 1" in str(error)

    def nest(samples):
        return {"inputs": {"x": torch.stack([torch.as_tensor(s["x"]) for s in samples])}}

    nested = DataLoaderBuilder().with_dataset(GOOD).with_batch_size(4).with_collator(nest)
    report = nested.with_checks(dtypes={"inputs.x": "float32"}).compile().check()
    assert report.layout == (("inputs.x", "float32", "[4, 2]"),)
    error = failure(nested.with_checks(keys=["inputs.y"]))
    assert "the batch has inputs.x; did you mean 'inputs.x'?" in str(error)


def test_a_shuffled_batch_names_its_own_samples():
    samples = make_samples(x=(7, np.array([np.inf, 0], dtype=np.float32)))
    plan = builder(samples, finite=["x"], every=1).with_shuffle().with_seed(3).compile()
    loader = plan.build()
    with pytest.raises(DataError) as info:
        collect(loader)
    batch = info.value.batch_index
    assert batch is not None
    indices = loader.batch_indices(0, batch)
    position = indices.index(7)
    assert f"batch positions {position} of 4 (dataset samples 7)" in str(info.value)
    assert info.value.sample_index == 7


# -- when checks run ----------------------------------------------------------------------------


def batches_checked(every: int | None, bad_batch: int, n: int = 40) -> bool:
    """Whether a NaN in batch ``bad_batch`` (of 10) is caught in one epoch."""
    nan = np.array([np.nan, 0.0], dtype=np.float32)
    samples = make_samples(n, x=(bad_batch * 4, nan))
    loader = builder(samples, finite=["x"], every=every).compile().build()
    try:
        collect(loader)
    except DataError as error:
        assert error.batch_index == bad_batch
        return True
    return False


@pytest.mark.parametrize(
    ("every", "caught"),
    [
        (None, [0]),
        (1, list(range(10))),
        (3, [0, 3, 6, 9]),
        (20, [0]),
    ],
)
def test_every_n_checks_the_first_batch_and_multiples_of_n(every, caught):
    assert [b for b in range(10) if batches_checked(every, b)] == caught


def test_the_first_batch_of_every_iteration_is_checked():
    nan = np.array([np.nan, 0.0], dtype=np.float32)
    samples = make_samples(x=(5, nan))  # in batch 1 of every epoch
    loader = builder(samples, finite=["x"]).compile().build()
    first = iter(loader)
    next(first)
    state = loader.state_dict()  # one batch delivered
    assert len(collect(builder(samples).compile().build())) == 3
    loader.load_state_dict(state)
    with pytest.raises(DataError, match=r"epoch 0, batch 1"):
        next(iter(loader))  # a resumed iterator checks the first batch it delivers
    assert loader.batches_delivered == 2  # the failed batch is consumed, as any DataError's
    again = iter(loader)
    assert next(again) is not None  # the interrupted pass goes on after it: batch 2
    assert loader.batches_delivered == 3


def test_checks_change_neither_batches_nor_fingerprint():
    plain = builder().with_shuffle().compile()
    checked = builder(keys=["x"], finite=["x"], every=1).with_shuffle().compile()
    assert checked.fingerprint == plain.fingerprint
    assert_batches_equal(collect(checked.build()), collect(plain.build()))
    loader = checked.build()
    next(iter(loader))
    plain.build().load_state_dict(loader.state_dict())  # same stream: the state fits


# -- plan.check() -------------------------------------------------------------------------------


def test_plan_check_reports_what_passed():
    report = (
        builder(
            keys=["x", "label"],
            dtypes={"x": "float32"},
            shapes={"x": ["B", 2], "label": ["B"]},
            finite=["x"],
            ranges={"x": [0, 1]},
            classes={"label": 3},
        )
        .compile()
        .check()
    )
    assert isinstance(report, CheckReport)
    assert (report.epoch, report.batch_index, report.samples) == (0, 0, (0, 1, 2, 3))
    assert str(report) == (
        "batch checks passed on epoch 0, batch 0 (4 samples: 0, 1, 2, 3)\n"
        "  keys       x, label: present\n"
        "  dtypes     x float32\n"
        "  shapes     x [B, 2], label [B]: B=4\n"
        "  finite     x: no NaN or Inf\n"
        "  ranges     x in [0, 1] (min 0, max 0.5)\n"
        "  classes    label in [0, 3) (min 0, max 2)\n"
        "the batch:\n"
        "  x      float32  [4, 2]\n"
        "  label  int64    [4]"
    )


def test_plan_check_without_checks_shows_the_batch():
    text = str(builder().compile().check())
    assert text.startswith("no batch checks in this plan (add them with with_checks); loaded")


def test_plan_check_raises_for_a_bad_first_batch():
    samples = make_samples(x=(2, np.array([np.inf, 0], dtype=np.float32)))
    with pytest.raises(DataError, match=r"'x' \(finite\) in epoch 0, batch 0"):
        builder(samples, finite=["x"]).compile().check()


def test_loader_check_leaves_the_cursor_alone():
    loader = builder(keys=["x"]).compile().build()
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert loader.check().batch_index == 0
    assert loader.state_dict() == state
    with pytest.raises(RuntimeError, match="superseded"):
        next(iterator)  # checking supersedes the open pass: it takes nothing from it
    loader.load_state_dict(state)
    assert len(collect(loader)) == 1  # the epoch goes on after its second batch
    fresh = builder(keys=["x"]).compile().build()
    fresh.check()
    assert len(collect(fresh)) == 3  # a check is not a pass: the first pass is epoch 0, whole
    assert fresh.epoch == 0


def test_plan_check_with_workers_stops_them_and_agrees():
    samples = make_samples(x=(1, np.array([np.nan, 0], dtype=np.float32)))
    good = builder(keys=["x"], ranges={"x": [0, 1]})
    bad = builder(samples, finite=["x"])
    before = set(multiprocessing.active_children())
    in_process = good.compile().check()
    assert good.with_workers(2).compile().check() == in_process
    assert set(multiprocessing.active_children()) <= before
    with pytest.raises(DataError) as here:
        bad.compile().check()
    with pytest.raises(DataError) as there:
        bad.with_workers(2).compile().check()
    assert str(there.value) == str(here.value)
    assert set(multiprocessing.active_children()) <= before


def test_iterating_with_workers_raises_the_same_error():
    samples = make_samples(x=(9, np.array([2.0, 0], dtype=np.float32)))
    plan = builder(samples, ranges={"x": [0, 1]}, every=1)
    errors = []
    for workers in (0, 2):
        with (
            plan.with_workers(workers).compile().build() as loader,
            pytest.raises(DataError) as info,
        ):
            collect(loader)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert re.search(r"batch 2: .*dataset samples 9", errors[0])
