"""Dataset sources: plans that name a registered factory and rebuild their dataset on load."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

import loaderkit
import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.datasets.files import format_of
from loaderkit.registry import UnknownNameError

CALLS: list[dict[str, object]] = []


def rows(n: int = 5, scale: int = 1) -> list[dict[str, int]]:
    """Rows {"x": i * scale}."""
    CALLS.append({"n": n, "scale": scale})
    return [{"x": i * scale} for i in range(n)]


def lines(path: str | list[str]) -> list[dict[str, str]]:
    """One sample per line of the text files."""
    paths = [path] if isinstance(path, str) else path
    out = []
    for name in paths:
        with open(name, encoding="utf-8") as fh:
            out.extend({"line": line.rstrip("\n")} for line in fh)
    return out


@pytest.fixture(autouse=True)
def registered():
    lkd.register("test-rows", rows)
    lkd.register("test-lines", lines, paths=("path",))
    CALLS.clear()
    yield
    lkd.factories.unregister("test-rows")
    lkd.factories.unregister("test-lines")


def _plan(ds: object) -> LoaderPlan:
    return DataLoaderBuilder().with_dataset(ds, name="train").with_batch_size(2).compile()


# -- load() and what a dataset remembers ---------------------------------------------------------


def test_load_calls_the_factory_and_the_dataset_remembers_its_source():
    ds = lkd.load("test-rows", n=3, scale=2)
    assert list(ds) == [{"x": 0}, {"x": 2}, {"x": 4}]
    assert isinstance(ds, list)
    source = lkd.source_of(ds)
    assert (source.name, dict(source.options)) == ("test-rows", {"n": 3, "scale": 2})
    assert loaderkit.register_dataset is lkd.register
    assert CALLS == [{"n": 3, "scale": 2}]


def test_a_changed_or_derived_dataset_forgets_its_source():
    ds = lkd.load("test-rows", n=3)
    assert lkd.source_of(list(ds)) is None  # a copy
    ds.append({"x": 9})  # changed in place: its length says so
    assert lkd.source_of(ds) is None
    tokens = lkd.load("tokens", n=4)
    assert lkd.source_of(tokens) is not None
    assert lkd.source_of(object()) is None


def test_the_plan_records_the_source_and_explain_and_repr_name_it():
    ds = lkd.load("test-rows", n=4)
    plan = _plan(ds)
    assert plan.dataset.source == lkd.source_of(ds)
    assert "made by test-rows(n=4)" in plan.explain()
    assert plan.to_dict()["dataset"]["source"] == {"name": "test-rows", "options": {"n": 4}}
    builder = DataLoaderBuilder().with_dataset(ds, name="train")
    assert "with_dataset(loaderkit.datasets.load('test-rows', n=4), name='train')" in repr(builder)


# -- save / load without bindings ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_save_then_load_without_bindings_calls_the_factory_again(tmp_path, suffix):
    ds = lkd.load("test-rows", n=5, scale=3)
    plan = _plan(ds)
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    CALLS.clear()
    again = LoaderPlan.load(path)
    assert CALLS == [{"n": 5, "scale": 3}]
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    assert again.bound
    assert list(again.bindings["train"]) == list(ds)
    assert again.dataset.source == plan.dataset.source


def test_from_dict_rebuilds_too_and_mixture_sources_rebuild_each(tmp_path):
    a = lkd.load("test-rows", n=4)
    b = lkd.load("test-rows", n=6, scale=10)
    plan = DataLoaderBuilder().with_mixture({"a": a, "b": b}).with_batch_size(2).compile()
    assert [s.source.options["n"] for s in plan.mixture.sources] == [4, 6]
    data = plan.to_dict()
    assert data["mixture"]["sources"][1]["source"]["options"] == {"n": 6, "scale": 10}
    again = LoaderPlan.from_dict(data)
    assert again == plan and again.bound
    assert list(again.bindings["b"]) == list(b)
    plan.save(tmp_path / "mix.toml")
    assert LoaderPlan.load(tmp_path / "mix.toml") == plan


def test_bindings_given_explicitly_win_over_the_source(tmp_path):
    plan = _plan(lkd.load("test-rows", n=3))
    plan.save(tmp_path / "p.toml")
    CALLS.clear()
    mine = [{"x": 7}, {"x": 8}, {"x": 9}]
    again = LoaderPlan.load(tmp_path / "p.toml", bindings={"train": mine})
    assert CALLS == []
    assert again.bindings["train"] is mine
    assert again == plan  # the source stays recorded
    with pytest.raises(PlanError, match="90 samples given"):
        LoaderPlan.load(tmp_path / "p.toml", bindings={"train": [{"x": 0}] * 90})


def test_inspecting_without_bindings_calls_no_factory(tmp_path):
    plan = _plan(lkd.load("test-rows", n=3))
    plan.save(tmp_path / "p.toml")
    CALLS.clear()
    unbound = LoaderPlan.load(tmp_path / "p.toml", require_bindings=False)
    assert CALLS == []
    assert not unbound.bound
    assert unbound == plan and unbound.fingerprint == plan.fingerprint


def test_a_factory_that_now_makes_other_data_is_a_clear_error():
    plan = _plan(lkd.load("test-rows", n=3))
    data = plan.to_dict()
    data["dataset"]["length"] = 4  # as if the factory made 4 samples when the plan was made
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data)
    (problem,) = err.value.problems
    assert problem.path == "dataset"
    assert "made by test-rows(n=3)" in problem.message
    assert "3 samples made" in problem.message and "4 samples expected" in problem.message
    assert "compile a new plan" in problem.message


def test_a_factory_that_fails_names_the_source(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    plan = _plan(lkd.load("test-lines", path=str(tmp_path / "a.txt")))
    plan.save(tmp_path / "p.json")
    (tmp_path / "a.txt").unlink()
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(tmp_path / "p.json")
    (problem,) = err.value.problems
    assert problem.path == "dataset.source"
    assert problem.message.startswith(f"test-lines(path={str(tmp_path / 'a.txt')!r}) failed:")
    assert "FileNotFoundError" in problem.message


# -- names, options and trust ---------------------------------------------------------------------


def test_an_unknown_factory_suggests_the_closest_name():
    with pytest.raises(
        UnknownNameError, match=r"unknown dataset 'test-rowz'; did you mean 'test-rows'\?"
    ):
        lkd.load("test-rowz")
    data = _plan(lkd.load("test-rows", n=2)).to_dict()
    data["dataset"]["source"]["name"] = "test-rowz"
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data)
    (problem,) = err.value.problems
    assert problem.path == "dataset.source.name"
    assert "did you mean 'test-rows'?" in problem.message
    assert "register_dataset('test-rowz')" in problem.message


def test_bad_options_are_named_with_the_fix():
    with pytest.raises(PlanError) as err:
        lkd.load("test-rows", n=object())
    (problem,) = err.value.problems
    assert problem.path == "dataset.source.options.n"
    assert "must be plain data" in problem.message
    with pytest.raises(PlanError) as err:
        lkd.load("test-rows", sacle=3)
    (problem,) = err.value.problems
    assert problem.path == "dataset.source.options.sacle"
    assert "'test-rows' does not take option 'sacle'; did you mean 'scale'?" in problem.message
    assert "it accepts: n, scale" in problem.message
    with pytest.raises(
        PlanError, match=r"dataset.source.options.path: 'test-lines' needs option 'path'"
    ):
        lkd.load("test-lines")

    data = _plan(lkd.load("test-rows", n=2)).to_dict()
    data["dataset"]["source"]["options"] = {"n": 2, "scal": 1}
    data["dataset"]["source"]["option"] = {}
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data)
    problems = {p.path: p.message for p in err.value.problems}
    assert "did you mean 'options'?" in problems["dataset.source.option"]
    assert "did you mean 'scale'?" in problems["dataset.source.options.scal"]


def test_a_source_table_needs_exactly_one_of_name_or_ref():
    data = _plan(lkd.load("test-rows", n=2)).to_dict()
    data["dataset"]["source"] = {"options": {}}
    with pytest.raises(PlanError, match=r"dataset.source: needs exactly one of 'name'"):
        LoaderPlan.from_dict(data)
    data["dataset"]["source"] = {"name": "pkg.mod:make"}
    with pytest.raises(
        PlanError, match=r"dataset.source.name: 'pkg.mod:make' is a 'module:qualname'"
    ):
        LoaderPlan.from_dict(data)
    data["dataset"]["source"] = "test-rows"
    with pytest.raises(PlanError, match=r"dataset.source: must be a table"):
        LoaderPlan.from_dict(data)


def test_the_builtin_token_factory_checks_its_values():
    with pytest.raises(
        PlanError, match=r"dataset.source.options.n: must be an int >= 0 \(got -1\)"
    ):
        lkd.load("tokens", n=-1)
    with pytest.raises(PlanError, match="make min_length <= max_length"):
        lkd.load("tokens", min_length=9, max_length=3)
    ds = lkd.load("tokens", n=3, min_length=2, max_length=4, seed=5)
    again = lkd.load("tokens", n=3, min_length=2, max_length=4, seed=5)
    assert [ds[i] for i in range(3)] == [again[i] for i in range(3)]
    assert all(2 <= len(ds[i]["input_ids"]) <= 4 for i in range(3))
    with pytest.raises(IndexError):
        ds[3]


def test_untrusted_refs_are_refused_and_their_module_is_not_imported(tmp_path, monkeypatch):
    module = "lk_untrusted_source_mod"
    (tmp_path / f"{module}.py").write_text(
        textwrap.dedent(
            """
            def make(n=3):
                return [{"x": i} for i in range(n)]
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ds = lkd.load(f"{module}:make", n=2)  # your own code: imported as written
    plan = _plan(ds)
    assert plan.to_dict()["dataset"]["source"] == {"ref": f"{module}:make", "options": {"n": 2}}
    plan.save(tmp_path / "p.toml")
    del sys.modules[module]
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(tmp_path / "p.toml")
    (problem,) = err.value.problems
    assert problem.path == "dataset.source.ref"
    assert "registered name" in problem.message and "register_dataset" in problem.message
    assert module not in sys.modules
    # not even trust makes a file call an import path: a dataset source is a registered name
    with pytest.raises(PlanError, match="registered name"):
        LoaderPlan.load(tmp_path / "p.toml", allow_imports=True)
    assert module not in sys.modules
    again = LoaderPlan.load(tmp_path / "p.toml", bindings={"train": ds})
    assert again == plan and list(again.bindings["train"]) == [{"x": 0}, {"x": 1}]


def test_loading_a_plan_file_never_imports_an_unregistered_module(tmp_path):
    code = textwrap.dedent(
        f"""
        import sys
        from loaderkit import LoaderPlan, PlanError
        try:
            LoaderPlan.load({str(tmp_path / "p.json")!r})
        except PlanError as err:
            print([p.path for p in err.problems])
        print("json.tool" in sys.modules, "torch" in sys.modules)
        """
    )
    data = _plan(lkd.load("test-rows", n=2)).to_dict()
    data["dataset"]["source"] = {"ref": "json.tool:main", "options": {}}
    (tmp_path / "p.json").write_text(json.dumps(data), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split("\n")[:2] == ["['dataset.source.ref']", "False False"]


# -- fingerprint and diff -------------------------------------------------------------------------


def test_the_source_is_in_the_fingerprint_and_diff():
    three = _plan(lkd.load("test-rows", n=3))
    scaled = _plan(lkd.load("test-rows", n=3, scale=2))
    plain = _plan(rows(n=3))
    assert len({three.fingerprint, scaled.fingerprint, plain.fingerprint}) == 3
    assert three.diff(scaled) == ["dataset.source.options.scale: <unset> -> 2"]
    assert three.diff(plain) == [
        "dataset.source.name: 'test-rows' -> <unset>",
        "dataset.source.options.n: 3 -> <unset>",
    ]


def test_paths_are_stored_relative_and_follow_the_plan_file_when_moved(tmp_path):
    folder = tmp_path / "a"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "t.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x\n", encoding="utf-8")
    plan = _plan(lkd.load("test-lines", path=[str(folder / "data" / "t.txt"), str(outside)]))
    plan.save(folder / "p.json")
    stored = json.loads((folder / "p.json").read_text(encoding="utf-8"))
    assert stored["dataset"]["source"]["options"]["path"] == ["data/t.txt", str(outside)]
    assert plan.to_dict()["dataset"]["source"]["options"]["path"][0] == str(
        folder / "data" / "t.txt"
    )

    moved = tmp_path / "b"
    shutil.move(folder, moved)
    with pytest.raises(PlanError) as err:  # elsewhere.txt lies outside the file's folder
        LoaderPlan.load(moved / "p.json")
    assert err.value.paths == ("dataset.source.options.path",)
    assert "allow_external_paths=True" in str(err.value)
    again = LoaderPlan.load(moved / "p.json", allow_external_paths=True)
    assert again.fingerprint == plan.fingerprint  # where the files are is not what they hold
    assert list(again.bindings["train"]) == [
        {"line": "one"},
        {"line": "two"},
        {"line": "three"},
        {"line": "x"},
    ]
    assert again.dataset.source.options["path"][0] == str(moved / "data" / "t.txt")
    assert [line.split(":")[0] for line in again.diff(plan)] == ["dataset.source.options.path"]


def test_relative_paths_in_code_resolve_against_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "t.txt").write_text("one\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    ds = lkd.load("test-lines", path="t.txt")
    assert lkd.source_of(ds).options["path"] == str(tmp_path / "t.txt")
    assert lkd.source_of(ds).describe() == "test-lines(path='t.txt')"


def test_from_files_guesses_the_format_or_says_how_to_give_it(tmp_path):
    (tmp_path / "a.weird").write_text("x", encoding="utf-8")
    with pytest.raises(PlanError, match=r"cannot tell the format of 'a.weird'.*pass format="):
        lkd.from_files(tmp_path / "a.weird")
    with pytest.raises(PlanError, match=r"'.*missing.jsonl' is not a file"):
        lkd.from_files(tmp_path / "missing.jsonl")
    (tmp_path / "a.csv").write_text("x\n1\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    with pytest.raises(PlanError, match="mixes formats csv, json"):
        lkd.from_files([tmp_path / "a.csv", tmp_path / "b.jsonl"])
    with pytest.raises(PlanError, match=r"unknown format 'xml'"):
        lkd.from_files(tmp_path / "a.csv", format="xml")
    assert format_of("x/train.jsonl.gz") == "json"
    assert format_of("x/train.parquet") == "parquet"
