"""The rules of docs/security.md, one by one: references, trust, plugins, paths and bounds."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit import registry as reg
from loaderkit._limits import LIMITS
from loaderkit._validate import check_plain_tree
from loaderkit.plan.workers import check_fits_machine

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def no_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reg, "_trusted", set())


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module that writes a file when imported, with a class holding a property."""
    name = "lk_canary_rules"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            import os
            from pathlib import Path
            Path({str(tmp_path / "imported")!r}).write_text("yes")

            def collate(batch):
                return batch

            class Holder:
                @property
                def boom(self):
                    Path({str(tmp_path / "property")!r}).write_text("yes")

                @staticmethod
                def static(batch):
                    return batch

            instance = Holder()
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _plan_dict(**changes: object) -> dict[str, object]:
    data = DataLoaderBuilder().with_dataset(list(range(8)), name="train").compile().to_dict()
    data.update(changes)
    return data


# -- references ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("loaderkit.plan.workers:os.system", "'os' is a module"),
        ("loaderkit.registry:importlib.import_module", "'importlib' is a module"),
        ("loaderkit.plan.serde:json.loads", "'json' is a module"),
        ("loaderkit.datasets.paths:os.system", "'os' is a module"),
        ("os:system", "defined in 'posix'"),
        ("os.path:join", "defined in 'posixpath'"),
        ("loaderkit.registry:_trusted", "'_trusted' is a set"),
    ],
)
def test_references_never_reach_what_a_module_imports(ref: str, why: str) -> None:
    with pytest.raises((LookupError, PermissionError)) as err:
        reg.resolve_ref(ref, allow_imports=True)
    assert why in str(err.value)


@pytest.mark.parametrize(
    "ref", ["a:b:c", ":x", "x:", "a..b:c", "a:<lambda>", "a b:c", "a:b()", ".a:b", "x" * 600]
)
def test_malformed_references_are_refused_before_any_import(ref: str) -> None:
    with pytest.raises(LookupError, match="is not a 'module:qualname' reference"):
        reg.resolve_ref(ref, allow_imports=True)


def test_loaderkit_objects_resolve_only_when_registered(no_trust: None) -> None:
    from loaderkit.collators import collators

    factory = collators.get("default").factory
    ref = f"{factory.__module__}:{factory.__qualname__}"
    assert reg.resolve_ref(ref) is factory  # registered: reachable
    for ref in ("loaderkit.registry:callable_ref", "loaderkit.registry:Registry.register"):
        with pytest.raises(PermissionError, match="does not register"):
            reg.resolve_ref(ref)
    assert reg.resolve_ref("loaderkit.registry:callable_ref", allow_imports=True) is (
        reg.callable_ref
    )  # allow_imports is explicit trust of any module, loaderkit's included
    assert reg.trusted_modules() == frozenset()


def test_an_untrusted_module_is_not_imported(canary: str, tmp_path: Path, no_trust: None) -> None:
    with pytest.raises(PermissionError, match="is not trusted"):
        reg.resolve_ref(f"{canary}:collate")
    assert canary not in sys.modules and not (tmp_path / "imported").exists()
    data = _plan_dict(collator={"ref": f"{canary}:collate"})
    inspected = LoaderPlan.from_dict(data, require_bindings=False)
    assert not inspected.bound
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, bindings={"train": list(range(8))})
    assert err.value.paths == ("collator.ref",)
    assert canary not in sys.modules and not (tmp_path / "imported").exists()


def test_trusted_references_walk_classes_statically(canary: str, tmp_path: Path) -> None:
    lk.trust_modules(canary)
    try:
        assert callable(reg.resolve_ref(f"{canary}:collate"))
        assert callable(reg.resolve_ref(f"{canary}:Holder.static"))
        with pytest.raises(LookupError, match="is a property"):
            reg.resolve_ref(f"{canary}:Holder.boom")
        assert not (tmp_path / "property").exists()  # the property never ran
        with pytest.raises(LookupError, match="'instance' is a Holder, not a class"):
            reg.resolve_ref(f"{canary}:instance.static")
        with pytest.raises(LookupError, match="is a module"):
            reg.resolve_ref(f"{canary}:os.system")
        with pytest.raises(LookupError, match="defined in 'pathlib'"):
            reg.resolve_ref(f"{canary}:Path")
    finally:
        reg._trusted.discard(canary)


def test_trust_modules_refuses_what_is_not_a_module_name() -> None:
    for bad in ("", ".rel", "a b", "a..b", "a:b", 3):
        with pytest.raises(ValueError, match="absolute dotted module names"):
            lk.trust_modules(bad)  # type: ignore[arg-type]


# -- plugins are imported only to build --------------------------------------------------------


def test_plugins_are_known_by_name_without_being_imported() -> None:
    from loaderkit.registry import Registry

    group = Registry("dataset", entry_point_group="loaderkit.datasets")
    assert "demo_text" in group and "demo_text" in group.names()
    assert group.loaded("demo_text") is None  # nothing imported to answer
    entry = group.get("demo_text")
    assert entry.origin.startswith("entry point loaderkit.demo")
    assert group.loaded("demo_text") is entry


# -- paths ----------------------------------------------------------------------------------------


def test_a_cache_folder_outside_the_plan_file_is_refused_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "plans"
    folder.mkdir()
    for path in ("../escape", str(tmp_path / "elsewhere"), "~/lk-cache"):
        data = _plan_dict(cache={"storage": "disk", "path": path})
        (folder / "p.json").write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(PlanError) as err:
            LoaderPlan.load(folder / "p.json", require_bindings=False)
        assert err.value.paths == ("cache.path",)
        assert "allow_external_paths=True" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plans"]
    data = _plan_dict(cache={"storage": "disk", "path": "cache"})
    (folder / "p.json").write_text(json.dumps(data), encoding="utf-8")
    plan = LoaderPlan.load(folder / "p.json", require_bindings=False)
    assert plan.cache is not None and plan.cache.path == str(folder / "cache")
    assert not (folder / "cache").exists()  # reading creates no folder
    outside = LoaderPlan.load(folder / "p.json", require_bindings=False, allow_external_paths=True)
    assert outside == plan


def test_save_writes_the_cache_folder_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plans").mkdir()
    plan = (
        DataLoaderBuilder()
        .with_dataset(list(range(8)), name="train")
        .with_workers(1)
        .with_cache("disk", path="plans/cache")
        .compile()
    )
    plan.save(tmp_path / "plans" / "p.json")
    saved = json.loads((tmp_path / "plans" / "p.json").read_text(encoding="utf-8"))
    assert saved["cache"]["path"] == "cache"
    again = LoaderPlan.load(tmp_path / "plans" / "p.json", bindings={"train": list(range(8))})
    assert again.cache is not None and again.cache.path == str(tmp_path / "plans" / "cache")
    assert again.fingerprint == plan.fingerprint


# -- bounds ---------------------------------------------------------------------------------------


def test_the_security_page_lists_every_bound_as_declared() -> None:
    text = (DOCS / "security.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([\d,]+) \| (.+?) \|$", text, flags=re.MULTILINE)
    assert [(n, int(b.replace(",", "")), d) for n, b, d in rows] == LIMITS.rows()


@pytest.mark.parametrize(
    ("section", "value", "path"),
    [
        ("workers", {"num_workers": LIMITS.num_workers + 1}, "workers.num_workers"),
        ("workers", {"num_workers": 2, "prefetch_factor": 10**9}, "workers.prefetch_factor"),
        ("workers", {"num_workers": 200, "prefetch_factor": 200}, "workers.prefetch_factor"),
        ("workers", {"num_workers": 1, "timeout": 10.0**9}, "workers.timeout"),
        ("device", "cuda:99999999999999999999", "device"),
        ("device", f"cuda:{LIMITS.device_index + 1}", "device"),
        ("batch", {"batch_size": LIMITS.batch_size + 1}, "batch.batch_size"),
        ("batch", {"batch_size": 10**5000}, "batch.batch_size"),
        ("max_length", {"value": 2**40}, "max_length"),
    ],
)
def test_every_number_has_a_bound(section: str, value: object, path: str) -> None:
    data = _plan_dict(**{section: value})
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, require_bindings=False)
    assert path in err.value.paths, err.value
    assert re.search(r"<= [\d,]+|more than the bound of [\d,]+", str(err.value))


def test_the_bounds_hold_for_the_builder_too() -> None:
    base = DataLoaderBuilder().with_dataset(list(range(8)))
    with pytest.raises(PlanError, match="must be <= 256"):
        base.with_workers(10**9)
    with pytest.raises(PlanError, match="device index must be <= 1023"):
        base.with_device("cuda:5000")


def test_the_whole_tree_is_checked_without_recursion() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(200_000):
        node["a"] = {}
        node = node["a"]  # type: ignore[assignment]
    with pytest.raises(PlanError, match=f"nested more than {LIMITS.depth} levels"):
        LoaderPlan.from_dict({"schema_version": 1, "dataset": deep})
    with pytest.raises(PlanError, match="more than 100,000 values"):
        check_plain_tree({"x": list(range(LIMITS.values + 1))})
    with pytest.raises(PlanError, match="keys must be strings"):
        check_plain_tree({"x": {1: 2}})
    with pytest.raises(PlanError, match="must be plain data"):
        check_plain_tree({"x": object()})
    problems = check_plain_tree({"x": float("nan"), "y": "s" * (LIMITS.string_chars + 1)})
    assert sorted(p.path for p in problems) == ["x", "y"]


def test_value_problems_are_reported_with_every_other_problem() -> None:
    data = _plan_dict(device="cuda:99999", order={"seed": -1, "shuffle": "yes"})
    data["batch"] = {"batch_size": 2**70}
    with pytest.raises(PlanError) as err:
        LoaderPlan.from_dict(data, require_bindings=False)
    assert set(err.value.paths) >= {"batch.batch_size", "device", "order.seed"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe not utf-8", "is not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nests arrays or tables too deeply"),
        (b'{"schema_version": ' + b"9" * 5000 + b"}", "unbroken run of more than 4,096 digits"),
        (b"[1, 2]", "must hold a table of sections"),
    ],
)
def test_unreadable_json_files_are_plan_errors(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(content)
    with pytest.raises(PlanError, match=message) as err:
        LoaderPlan.load(path, require_bindings=False)
    assert err.value.paths == ("file",)


def test_deep_and_huge_toml_files_are_plan_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("x = " + "[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(path, require_bindings=False)
    assert err.value.paths == ("file",)
    path.write_text("schema_version = " + "9" * 5000, encoding="utf-8")
    with pytest.raises(PlanError, match="unbroken run") as err:
        LoaderPlan.load(path, require_bindings=False)
    with path.open("wb") as handle:
        handle.write(b"# " + b"x" * (LIMITS.file_bytes + 10) + b"\n")
    with pytest.raises(PlanError, match="larger than 1,048,576 bytes"):
        LoaderPlan.load(path, require_bindings=False)


def test_build_refuses_more_workers_than_the_machine_holds() -> None:
    check_fits_machine(LIMITS.workers_per_cpu * 2, cpus=2)
    with pytest.raises(PlanError, match="on a machine with 2 usable CPUs; at most 16") as err:
        check_fits_machine(LIMITS.workers_per_cpu * 2 + 1, cpus=2)
    assert err.value.paths == ("workers.num_workers",)
    plan = DataLoaderBuilder().with_dataset(list(range(8))).with_workers(256).compile()
    assert "256" in plan.explain()  # explaining is not building: no machine check
