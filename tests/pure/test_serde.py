"""Plans as data: dict, JSON and TOML round trips; loading refuses what it cannot trust."""

from __future__ import annotations

import json
import pickle
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.plan.sections import FILE_KEYS as SECTIONS
from loaderkit.testing import plans
from loaderkit.testing.strategies import BUILDER_CALLS


@given(plans())
def test_from_dict_of_to_dict_is_the_same_plan(plan):
    data, default = plan.to_dict(), DataLoaderBuilder().with_dataset([0]).compile().to_dict()
    for section in SECTIONS:  # `pytest --hypothesis-show-statistics` shows which were drawn
        if section in data and data[section] != default.get(section):
            event(f"section {section} set")
    again = LoaderPlan.from_dict(plan.to_dict(), bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert json.loads(json.dumps(plan.to_dict())) == plan.to_dict()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans())
@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_files_round_trip(tmp_path, suffix, plan):
    if plan.cache is not None and plan.cache.path is not None:
        # a file names folders inside its own (a relative path is read against the file's
        # folder): keep the disk cache there
        cache = plan.cache
        plan = (
            plan.to_builder()
            .with_cache(
                "disk", stage=cache.stage, path=tmp_path / "cache", max_bytes=cache.max_bytes
            )
            .compile()
        )
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    again = LoaderPlan.load(path, bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint


def _assert_round_trips(plan: LoaderPlan, folder: Path) -> None:
    """``from_dict(to_dict())`` and a save and load as JSON and TOML give the same plan."""
    again = LoaderPlan.from_dict(plan.to_dict(), bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert again.to_dict() == plan.to_dict()
    if plan.cache is not None and plan.cache.path is not None:  # inside the files' folder
        cache = plan.cache
        plan = (
            plan.to_builder()
            .with_cache("disk", stage=cache.stage, path=folder / "cache", max_bytes=cache.max_bytes)
            .compile()
        )
    for suffix in (".json", ".toml"):
        path = folder / f"plan{suffix}"
        plan.save(path)
        loaded = LoaderPlan.load(path, bindings=plan.bindings)
        assert loaded == plan
        assert loaded.fingerprint == plan.fingerprint


def test_a_collator_option_of_none_saves_as_toml(tmp_path):
    # TOML has no null: a None is written as the table {none = true} and read back as None
    plan = DataLoaderBuilder().with_dataset([0]).with_collator("vision", normalize=None).compile()
    plan.save(tmp_path / "plan.toml")
    text = (tmp_path / "plan.toml").read_text()
    assert "[collator.options.normalize]\nnone = true\n" in text
    assert LoaderPlan.load(tmp_path / "plan.toml", bindings=plan.bindings) == plan
    hand = text.replace("[collator.options.normalize]\nnone = true\n", "")
    hand = hand.replace(
        'name = "vision"\n', 'name = "vision"\noptions = { normalize = { none = true } }\n'
    )
    (tmp_path / "hand.toml").write_text(hand)
    assert LoaderPlan.load(tmp_path / "hand.toml", bindings=plan.bindings) == plan


def test_a_none_nested_in_options_saves_as_toml(tmp_path):
    vision = {"name": "vision", "options": {"normalize": None}}
    plan = (
        DataLoaderBuilder()
        .with_dataset([0])
        .with_collator("multimodal", collators={"pixel_values": vision})
        .compile()
    )
    plan.save(tmp_path / "plan.toml")
    assert LoaderPlan.load(tmp_path / "plan.toml", bindings=plan.bindings) == plan


def test_a_table_that_reads_as_none_in_toml_is_refused_at_save(tmp_path):
    def factory(*, table=None):
        return list

    lk.register_collator("test-none-table", factory)
    try:
        plan = (
            DataLoaderBuilder()
            .with_dataset([0])
            .with_collator("test-none-table", table={"none": True})
            .compile()
        )
        with pytest.raises(PlanError) as err:
            plan.save(tmp_path / "plan.toml")
        assert err.value.paths == ("collator.options.table",)
        assert "save the plan as .json" in str(err.value)
        assert not (tmp_path / "plan.toml").exists()
        plan.save(tmp_path / "plan.json")  # JSON has null: the table stays a table
        assert LoaderPlan.load(tmp_path / "plan.json", bindings=plan.bindings) == plan
    finally:
        lk.collators.unregister("test-none-table")


# the calls that end each drawn chain: with_max_length needs a collator that has a max_length
ENDING = {m: (m,) for m in BUILDER_CALLS if m != "without"}
ENDING["with_max_length"] = ("with_collator", "with_max_length")
ENDING["without"] = ("with_cache", "with_checks", "without")


@pytest.mark.parametrize("method", sorted(ENDING))
@settings(suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data())
def test_every_section_round_trips_through_dicts_and_files(method, data):
    """The round trips with each ``with_*`` method (and ``without``) called in every chain."""
    plan = data.draw(plans(include=ENDING[method]), label="plan")
    with tempfile.TemporaryDirectory() as folder:
        _assert_round_trips(plan, Path(folder))


def _plan() -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(list(range(10)), name="train")
        .with_batch_size(4)
        .with_shuffle()
        .compile()
    )


def test_a_missing_binding_is_named():
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(_plan().to_dict())
    assert err.value.paths == ("dataset",)
    assert "'train'" in str(err.value) and "bindings=" in str(err.value)


def test_unbound_plans_explain_and_diff_but_do_not_build():
    plan = LoaderPlan.from_dict(_plan().to_dict(), require_bindings=False)
    assert not plan.bound
    assert plan.fingerprint == _plan().fingerprint
    assert "unbound" in plan.explain()
    assert plan.diff(_plan()) == []


def test_a_binding_of_another_dataset_is_refused():
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(_plan().to_dict(), bindings={"train": list(range(9))})
    assert err.value.paths == ("dataset",)
    assert "9 samples given" in str(err.value) and "10 samples expected" in str(err.value)


class IndexDataset:
    """A map-style dataset of its indices (a class of this module, by ``module.qualname``)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


def test_a_binding_of_a_same_named_class_from_elsewhere_names_both_types():
    # the issue-29 case: the plan's class from a module, the bound one defined in __main__
    plan = DataLoaderBuilder().with_dataset(IndexDataset(1000)).with_batch_size(10).compile()
    in_main = type("IndexDataset", (IndexDataset,), {"__module__": "__main__"})
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(plan.to_dict(), bindings={"dataset": in_main(1000)})
    (problem,) = err.value.problems
    assert problem.path == "dataset"
    assert (
        "torch_map __main__.IndexDataset of 1000 samples given, "
        f"torch_map {__name__}.IndexDataset of 1000 samples expected" in problem.message
    )


def test_a_mismatch_shows_each_field_that_differs_on_both_sides():
    from loaderkit.plan.sections.dataset import describe_recorded
    from loaderkit.plan.specs import DatasetSpec

    base = DatasetSpec("d", "hf", "datasets.Dataset", 10, "abc", ("x",), ("Value",))
    same = describe_recorded(base, base)
    assert same == "hf Dataset of 10 samples, identity abc"
    other = DatasetSpec("d", "hf", "datasets.Dataset", 10, None, ("x", "y"), ("Value",))
    assert describe_recorded(base, other) == "hf Dataset of 10 samples, identity abc, columns ['x']"
    assert describe_recorded(other, base) == (
        "hf Dataset of 10 samples, no identity, columns ['x', 'y']"
    )
    assert describe_recorded(base, other) != describe_recorded(other, base)


def test_unused_bindings_are_refused_with_a_suggestion():
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(_plan().to_dict(), bindings={"trian": list(range(10))})
    assert set(err.value.paths) == {"dataset", "bindings"}
    assert "did you mean 'train'" in str(err.value)


def test_unknown_keys_are_refused_with_did_you_mean():
    data = _plan().to_dict()
    data["batchs"] = {}
    data["order"]["seeed"] = 3
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert set(err.value.paths) == {"batchs", "order.seeed"}
    assert "did you mean 'batch'" in str(err.value)
    assert "did you mean 'seed'" in str(err.value)


def test_all_problems_of_a_file_are_reported_at_once():
    data = _plan().to_dict()
    data["batch"]["batch_size"] = 0
    data["workers"] = {"num_workers": -1}
    data["device"] = "gpu"
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert set(err.value.paths) == {"batch.batch_size", "workers.num_workers", "device"}


def test_schema_version_is_required_and_checked():
    data = _plan().to_dict()
    bindings = {"train": list(range(10))}
    del data["schema_version"]
    with pytest.raises(PlanError, match="schema_version: missing"):
        LoaderPlan.from_dict(data, bindings=bindings)
    data["schema_version"] = lk.SCHEMA_VERSION + 1
    with pytest.raises(PlanError, match="newer loaderkit"):
        LoaderPlan.from_dict(data, bindings=bindings)


def test_module_refs_are_not_imported_unless_trusted_or_allowed():
    data = _plan().to_dict()
    data["collator"] = {"ref": "json:dumps"}
    bindings = {"train": list(range(10))}
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings=bindings)
    assert err.value.paths == ("collator.ref",)
    assert "allow_imports=True" in str(err.value)
    plan = LoaderPlan.from_dict(data, bindings=bindings, allow_imports=True)
    assert plan.collator.name == "json:dumps"
    assert plan.bindings is not None and plan.bindings["json:dumps"] is json.dumps


def test_loading_never_imports_an_untrusted_module(tmp_path):
    import subprocess
    import sys

    plan_file = tmp_path / "p.json"
    data = _plan().to_dict()
    data["transform"] = {"ref": "antigravity:geohash", "accepts_rng": False}
    plan_file.write_text(json.dumps(data))
    load = f"loaderkit.LoaderPlan.load({str(plan_file)!r}, bindings={{'train': list(range(10))}})"
    code = (
        "import sys, loaderkit\n"
        "try:\n"
        f"    {load}\n"
        "except loaderkit.PlanError as e:\n"
        "    print(e.paths)\n"
        "print('antigravity' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["('transform.ref',)", "False"]


def test_trusted_modules_resolve_without_allow_imports(monkeypatch):
    from loaderkit import registry

    monkeypatch.setattr(registry, "_trusted", set())
    data = _plan().to_dict()
    data["transform"] = {
        "ref": "loaderkit.testing.strategies:sample_transform",
        "accepts_rng": False,
    }
    # loaderkit's own namespace is no loophole: only what it registers resolves by default
    with pytest.raises(PlanError, match="which loaderkit does not register"):
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert "loaderkit" not in registry.trusted_modules()
    lk.trust_modules("loaderkit.testing")
    plan = LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    from loaderkit.testing.strategies import sample_transform

    assert plan.bindings is not None
    assert plan.bindings["loaderkit.testing.strategies:sample_transform"] is sample_transform
    assert registry.trusted_modules() == {"loaderkit.testing"}


def test_bad_files_name_the_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("schema_version = [")
    for where, words, load in [
        (path, "file: is not valid TOML", lambda: LoaderPlan.load(path)),
        (
            tmp_path / "p.yaml",
            r"end in .json or .toml",
            lambda: LoaderPlan.load(tmp_path / "p.yaml"),
        ),
        (tmp_path / "m.json", "file: cannot be read", lambda: LoaderPlan.load(tmp_path / "m.json")),
        (tmp_path / "p.txt", r"end in .json or .toml", lambda: _plan().save(tmp_path / "p.txt")),
    ]:
        with pytest.raises(PlanError) as err:
            load()
        assert err.value.file == str(where)
        assert str(err.value).startswith(f"{where}: file: ")
        assert words in str(err.value)


@pytest.mark.parametrize(
    ("edit", "paths"),
    [
        (lambda d: d["batch"].update(batchsize=3), ("batch.batchsize",)),  # an unknown key
        (lambda d: d["batch"].update(batch_size=0), ("batch.batch_size",)),  # a bad value
        (
            lambda d: d["order"].update(seed=-1) or d["workers"].update(num_workers=-2),
            ("order.seed", "workers.num_workers"),
        ),
    ],
)
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_every_problem_of_a_plan_file_names_the_file(tmp_path, edit, paths, suffix):
    data = _plan().to_dict()
    edit(data)
    path = tmp_path / f"plan{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        import tomli_w

        path.write_text(tomli_w.dumps(data))
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(path, bindings={"train": list(range(10))})
    assert sorted(err.value.paths) == sorted(paths)
    assert err.value.file == str(path)
    assert str(err.value).startswith(f"{path}: ")
    with pytest.raises(PlanError) as direct:  # the same data, not from a file: no file named
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert direct.value.file is None
    assert str(path) not in str(direct.value)


def test_a_plan_error_from_a_file_pickles_with_its_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("schema_version = [")
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(path)
    again = pickle.loads(pickle.dumps(err.value))
    assert again.file == str(path)
    assert str(again) == str(err.value)
    assert again.problems == err.value.problems


def test_a_plan_file_name_with_control_characters_is_shown_escaped(tmp_path):
    path = tmp_path / "p\x1b[31m.toml"
    path.write_text("schema_version = [")
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(path)
    assert err.value.file == str(path)
    assert "\x1b" not in str(err.value)  # no raw escape reaches a terminal
    assert str(err.value).startswith(str(path).replace("\x1b", "\\x1b") + ": file: ")


def test_the_documented_example_file_loads(tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "docs" / "example-plan.toml"
    plan = LoaderPlan.load(example, require_bindings=False)
    assert plan.dataset.binding == "train"
    assert plan.batch.batch_size == 32
    assert plan.workers.num_workers == 4


def test_diff_lists_flattened_changes():
    a = _plan()
    b = a.to_builder().with_batch_size(8, drop_last=True).with_workers(2).compile()
    assert a.diff(b) == [
        "batch.batch_size: 4 -> 8",
        "batch.drop_last: False -> True",
        "workers.num_workers: 0 -> 2",
    ]
    assert a.diff(a) == []


@pytest.mark.parametrize(
    ("mutate", "paths"),
    [
        (
            lambda d: (
                d["collator"].update(ref="json:dumps", options={"a": 1})
                or d["collator"].pop("name")
            ),
            ("collator.options",),
        ),
        (
            lambda d: d.update(transform={"ref": "json:dumps", "accepts_rng": "no"}),
            ("transform.accepts_rng",),
        ),
        (lambda d: d["dataset"].pop("binding"), ("dataset.binding",)),
        (lambda d: d.update(distributed={"enabled": False, "rank": 0}), ("distributed.enabled",)),
        (lambda d: d["dataset"].update(kind="stream"), ("dataset.kind",)),
    ],
)
def test_bad_plan_files_name_their_paths(mutate, paths):
    data = _plan().to_dict()
    mutate(data)
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))}, allow_imports=True)
    assert err.value.paths[: len(paths)] == paths


def test_a_plan_without_batching_round_trips_and_says_so(tmp_path):
    rows = list(range(10))
    plan = DataLoaderBuilder().with_dataset(rows, name="train").with_batch_size(None).compile()
    assert plan.to_dict()["batch"] == {"batched": False}
    _assert_round_trips(plan, tmp_path)
    assert LoaderPlan.load(tmp_path / "plan.toml", bindings=plan.bindings).batch.batched is False
    assert "batched = false" in (tmp_path / "plan.toml").read_text()
    assert plan.to_builder().compile() == plan
    one = plan.to_builder().with_batch_size(1).compile()
    assert plan.diff(one) == [
        "batch.batch_size: <unset> -> 1",
        "batch.batched: False -> <unset>",
        "batch.drop_last: <unset> -> False",
    ]


@pytest.mark.parametrize(
    ("table", "path", "words"),
    [
        ({"batched": False, "batch_size": 4}, "batch.batch_size", "drop batch_size"),
        ({"batched": False, "schedule": [[1, 2]]}, "batch.schedule", "batched = false"),
        ({"batched": "no"}, "batch.batched", "got str"),
        ({"batched": False, "drop_last": True}, "batch.drop_last", "no partial batch to drop"),
    ],
)
def test_a_bad_batched_table_names_its_field_and_the_fix(table, path, words):
    data = DataLoaderBuilder().with_dataset(list(range(10)), name="train").compile().to_dict()
    data["batch"] = table
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert err.value.paths == (path,)
    assert words in str(err.value)


def test_a_plan_must_be_a_mapping():
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict([1, 2])  # type: ignore[arg-type]
    assert err.value.paths == ("plan",)


def test_a_distributed_table_shards():
    data = _plan().to_dict()
    data["distributed"] = {"world_size": 2, "rank": 1}
    plan = LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert plan.distributed.enabled
    assert (plan.distributed.world_size, plan.distributed.rank) == (2, 1)


def test_bound_callables_keep_their_label_through_files(tmp_path):
    def my_collate(samples):
        return samples

    plan = _plan().to_builder().with_collator(my_collate).compile()
    path = tmp_path / "p.json"
    plan.save(path)
    again = LoaderPlan.load(
        path, bindings={"train": plan.bindings["train"], "collator": my_collate}
    )
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert "my_collate" in again.collator.label


def test_a_file_binding_two_things_to_one_name_is_refused():
    data = _plan().to_dict()
    data["collator"] = {"binding": "train"}
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(10))})
    assert "collator" in err.value.paths


def test_a_relative_cache_folder_is_resolved_at_save(tmp_path, monkeypatch):
    # documented in plan-format.md: a file names folders inside its own, as seen from the file
    monkeypatch.chdir(tmp_path)
    plan = DataLoaderBuilder().with_dataset([0, 1]).with_cache("disk", path="cache").compile()
    plan.save("plan.toml")
    assert 'path = "cache"' in (tmp_path / "plan.toml").read_text()
    loaded = LoaderPlan.load("plan.toml", bindings=plan.bindings)
    assert loaded.cache is not None and loaded.cache.path == str(tmp_path / "cache")
    (tmp_path / "plans").mkdir()
    plan.save("plans/plan.json")  # the folder is outside plans/: written absolute
    with pytest.raises(PlanError) as err:
        LoaderPlan.load("plans/plan.json", bindings=plan.bindings)
    assert err.value.paths == ("cache.path",)
    trusted = LoaderPlan.load("plans/plan.json", bindings=plan.bindings, allow_external_paths=True)
    assert trusted == loaded
