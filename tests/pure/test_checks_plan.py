"""Batch contracts in the plan layer: with_checks, the [checks] table, bad contracts."""

from __future__ import annotations

import subprocess
import sys

import attrs
import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError, PlanTypeError
from loaderkit.plan.sections.checks import ChecksSpec, ClassCheck, LabelPadCheck

SAMPLES = [{"input_ids": [1, 2, 3], "label": i % 3} for i in range(10)]

CONTRACT = {
    "keys": ["input_ids", "attention_mask", "labels"],
    "dtypes": {"input_ids": "long", "labels": "torch.int64"},
    "shapes": {"input_ids": ["B", "T"], "labels": ["B", "T"], "pixels": ["B", 3, "*", "..."]},
    "finite": ["pixels"],
    "ranges": {"pixels": [0.0, 1.0], "input_ids": [0, None], "score": {"high": 5}},
    "label_pad": {"mode": "only_pad"},
    "classes": {"label": 3, "tags": {"n": 9, "ignore_index": -100}, "onehot": {"one_hot": 4}},
    "every": 50,
}


def base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(SAMPLES, name="train").with_batch_size(4)


def test_with_checks_builds_the_spec():
    plan = base().with_checks(**CONTRACT).compile()
    spec = plan.checks
    assert spec == ChecksSpec(
        keys=("input_ids", "attention_mask", "labels"),
        dtypes=(("input_ids", "int64"), ("labels", "int64")),
        shapes=(
            ("input_ids", ("B", "T")),
            ("labels", ("B", "T")),
            ("pixels", ("B", 3, "*", "...")),
        ),
        finite=("pixels",),
        ranges=(("pixels", 0.0, 1.0), ("input_ids", 0, None), ("score", None, 5)),
        label_pad=LabelPadCheck(mode="only_pad"),
        classes=(
            ClassCheck("label", 3),
            ClassCheck("tags", 9, ignore_index=-100),
            ClassCheck("onehot", 4, one_hot=True),
        ),
        every=50,
    )
    assert spec.kinds == ("keys", "dtypes", "shapes", "finite", "ranges", "label_pad", "classes")


def test_label_pad_true_takes_the_defaults():
    spec = base().with_checks(label_pad=True).compile().checks
    assert spec is not None
    assert spec.label_pad == LabelPadCheck("labels", "attention_mask", -100, "strict")


def test_with_checks_replaces_and_leaves_the_old_builder_alone():
    first = base().with_checks(keys=["a"])
    second = first.with_checks(finite=["x"])
    assert first.compile().checks == ChecksSpec(keys=("a",))
    assert second.compile().checks == ChecksSpec(finite=("x",))


def test_checks_never_change_the_fingerprint():
    plain = base().compile()
    checked = base().with_checks(**CONTRACT).compile()
    assert checked.fingerprint == plain.fingerprint
    assert checked != plain  # the plans differ, their batches do not
    assert checked.diff(plain)[0].startswith("checks")


def test_the_builder_repr_and_to_builder():
    builder = base().with_checks(keys=["x"], ranges={"x": [0, None]}, every=2)
    assert repr(builder).endswith(".with_checks(keys=['x'], ranges={'x': {'low': 0}}, every=2)")
    plan = builder.compile()
    assert plan.to_builder() == builder
    assert plan.to_builder().compile() == plan


def test_explain_shows_the_contract():
    text = base().with_checks(**CONTRACT).compile().explain()
    line = next(line for line in text.splitlines() if line.startswith("  checks"))
    assert line == (
        "  checks      keys (3), dtypes (2), shapes (3), finite (1), ranges (3), label_pad "
        "(only_pad), classes (3) on the first batch of each iteration and batches 0, 50, "
        "100, ... of each epoch; a violation raises DataError"
    )
    every = base().with_checks(keys=["x"], every=1).compile().explain()
    assert "keys (1) on every batch;" in every
    assert "checks" not in base().compile().explain()


def test_to_dict_holds_the_arguments_with_checks_takes():
    plan = base().with_checks(**CONTRACT).compile()
    table = plan.to_dict()["checks"]
    assert table == {
        "keys": ["input_ids", "attention_mask", "labels"],
        "dtypes": {"input_ids": "int64", "labels": "int64"},
        "shapes": {
            "input_ids": ["B", "T"],
            "labels": ["B", "T"],
            "pixels": ["B", 3, "*", "..."],
        },
        "finite": ["pixels"],
        "ranges": {
            "pixels": {"low": 0.0, "high": 1.0},
            "input_ids": {"low": 0},
            "score": {"high": 5},
        },
        "label_pad": {
            "labels": "labels",
            "mask": "attention_mask",
            "ignore_index": -100,
            "mode": "only_pad",
        },
        "classes": {"label": 3, "tags": {"n": 9, "ignore_index": -100}, "onehot": {"one_hot": 4}},
        "every": 50,
    }
    assert base().with_checks(**table).compile() == plan


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_plan_files_round_trip_with_checks(tmp_path, suffix):
    plan = base().with_checks(**CONTRACT).compile()
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    again = LoaderPlan.load(path, bindings={"train": SAMPLES})
    assert again == plan
    assert again.checks == plan.checks
    assert again.fingerprint == plan.fingerprint
    if suffix == ".toml":
        assert "[checks]" in path.read_text()


def test_dotted_keys_survive_toml(tmp_path):
    plan = base().with_checks(dtypes={"a.b": "float32"}, classes={"0": 2}).compile()
    path = tmp_path / "plan.toml"
    plan.save(path)
    assert LoaderPlan.load(path, bindings={"train": SAMPLES}) == plan


def test_loading_revalidates_the_checks_table():
    data = base().with_checks(keys=["x"]).compile().to_dict()
    data["checks"] = {
        "keys": "x",
        "dtypes": {"x": "flaot32"},
        "every": 0,
        "shapez": {},
    }
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"train": SAMPLES})
    assert info.value.paths == ("checks.shapez", "checks.keys")
    assert "did you mean 'shapes'" in str(info.value)
    del data["checks"]["shapez"]
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"train": SAMPLES})
    assert info.value.paths == ("checks.keys",)
    data["checks"]["keys"] = ["x"]
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"train": SAMPLES})
    assert info.value.paths == ("checks.dtypes.x",)


def test_a_checks_value_that_is_not_a_table_is_refused():
    data = base().compile().to_dict()
    data["checks"] = ["input_ids"]
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"train": SAMPLES})
    assert info.value.paths == ("checks",)
    assert "must be a table" in str(info.value)


def test_an_empty_checks_table_is_refused():
    data = base().compile().to_dict()
    data["checks"] = {"every": 3}
    with pytest.raises(PlanError, match="holds no check") as info:
        LoaderPlan.from_dict(data, bindings={"train": SAMPLES})
    assert info.value.paths == ("checks",)


def test_a_hand_made_empty_contract_is_refused_by_the_rules():
    plan = base().compile()
    with pytest.raises(PlanError) as info:
        attrs.evolve(plan, checks=ChecksSpec(every=2))
    assert info.value.paths == ("checks",)


@pytest.mark.parametrize(
    ("kwargs", "path", "words", "error"),
    [
        ({}, "checks", "holds no check; pass at least one of keys, dtypes", PlanError),
        ({"keys": "input_ids"}, "checks.keys", "must be a list of keys", PlanTypeError),
        ({"keys": ["a", 3]}, "checks.keys[1]", "must be a string (got int 3)", PlanTypeError),
        ({"keys": ["a", "a"]}, "checks.keys[1]", "'a' is listed twice", PlanError),
        ({"keys": ["a..b"]}, "checks.keys[0]", "is not a key path", PlanError),
        ({"keys": [""]}, "checks.keys[0]", "non-empty string", PlanError),
        ({"dtypes": ["int64"]}, "checks.dtypes", "mapping of keys to dtype names", PlanTypeError),
        ({"dtypes": {"x": "flaot32"}}, "checks.dtypes.x", "did you mean 'float32'?", PlanError),
        ({"dtypes": {"x": "str"}}, "checks.dtypes.x", "known: bool, uint8", PlanError),
        ({"dtypes": {"x": 5}}, "checks.dtypes.x", "must be a string", PlanTypeError),
        ({"dtypes": {1: "int64"}}, "checks.dtypes", "must be a string (got int 1)", PlanTypeError),
        ({"shapes": {"x": "BT"}}, "checks.shapes.x", "must be a list of dims", PlanTypeError),
        ({"shapes": {"x": ["B", -1]}}, "checks.shapes.x[1]", "must be >= 0 (got -1)", PlanError),
        ({"shapes": {"x": ["B", 2.5]}}, "checks.shapes.x[1]", "got float 2.5", PlanTypeError),
        ({"shapes": {"x": [True]}}, "checks.shapes.x[0]", "got bool True", PlanTypeError),
        ({"shapes": {"x": ["B T"]}}, "checks.shapes.x[0]", "is not a dim name", PlanError),
        (
            {"shapes": {"x": ["...", "..."]}},
            "checks.shapes.x[1]",
            "'...' may appear once",
            PlanError,
        ),
        ({"finite": "x"}, "checks.finite", "must be a list of keys", PlanTypeError),
        ({"ranges": {"x": [1, 0]}}, "checks.ranges.x", "low 1 is above high 0", PlanError),
        ({"ranges": {"x": [None, None]}}, "checks.ranges.x", "has no bound", PlanError),
        ({"ranges": {"x": [0]}}, "checks.ranges.x", "must be [low, high]", PlanTypeError),
        ({"ranges": {"x": 3}}, "checks.ranges.x", "must be [low, high]", PlanTypeError),
        ({"ranges": {"x": ["a", 1]}}, "checks.ranges.x.low", "must be a number", PlanTypeError),
        ({"ranges": {"x": [0, float("nan")]}}, "checks.ranges.x.high", "finite", PlanError),
        ({"ranges": {"x": {"lo": 0}}}, "checks.ranges.x.lo", "did you mean 'low'", PlanError),
        ({"label_pad": "yes"}, "checks.label_pad", "must be True or a mapping", PlanTypeError),
        (
            {"label_pad": {"mod": "strict"}},
            "checks.label_pad.mod",
            "did you mean 'mode'",
            PlanError,
        ),
        (
            {"label_pad": {"mode": "strikt"}},
            "checks.label_pad.mode",
            "did you mean 'strict'",
            PlanError,
        ),
        (
            {"label_pad": {"ignore_index": "x"}},
            "checks.label_pad.ignore_index",
            "must be an int",
            PlanTypeError,
        ),
        ({"label_pad": {"labels": "m", "mask": "m"}}, "checks.label_pad", "both 'm'", PlanError),
        ({"classes": {"y": 0}}, "checks.classes.y", "must be >= 1 (got 0)", PlanError),
        ({"classes": {"y": "ten"}}, "checks.classes.y", "must be an int", PlanTypeError),
        ({"classes": {"y": {"one_hot": 0}}}, "checks.classes.y.one_hot", "must be >= 1", PlanError),
        (
            {"classes": {"y": {"n": 2, "one_hot": 2}}},
            "checks.classes.y",
            "exactly one of n",
            PlanError,
        ),
        ({"classes": {"y": {}}}, "checks.classes.y", "got none", PlanError),
        (
            {"classes": {"y": {"one_hot": 3, "ignore_index": -1}}},
            "checks.classes.y.ignore_index",
            "not to one-hot",
            PlanError,
        ),
        ({"classes": {"y": {"m": 3}}}, "checks.classes.y.m", "unknown key 'm'", PlanError),
        ({"keys": ["x"], "every": 0}, "checks.every", "must be >= 1 (got 0)", PlanError),
        ({"keys": ["x"], "every": 2.0}, "checks.every", "must be an int", PlanTypeError),
    ],
)
def test_bad_contracts_name_their_path(kwargs, path, words, error):
    with pytest.raises(error) as info:
        base().with_checks(**kwargs)
    assert info.value.paths == (path,)
    assert words in str(info.value)


def test_a_plan_with_checks_never_imports_torch(tmp_path):
    code = f"""
import sys
import loaderkit
plan = (loaderkit.DataLoaderBuilder().with_dataset([{{"x": 1.0}}] * 3, name="t")
        .with_checks(keys=["x"], dtypes={{"x": "float32"}}, ranges={{"x": [0, 1]}}).compile())
plan.save({str(tmp_path / "p.toml")!r})
loaderkit.LoaderPlan.load({str(tmp_path / "p.toml")!r}, bindings={{"t": [{{"x": 1.0}}] * 3}})
plan.explain()
print(sorted(m for m in ("torch", "datasets") if m in sys.modules))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
