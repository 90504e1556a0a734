"""A plan file is untrusted data (issue 13): hostile plans fail, and do nothing else.

Every case is run through ``LoaderPlan.from_dict`` and ``LoaderPlan.load`` (with the defaults
and with ``require_bindings=False``) and through every command of the ``loaderkit`` CLI
(``explain``, ``validate``, ``validate --data``, ``diff`` both ways, ``bench``), in this
process, under :class:`untrusted_kit.SideEffects`: no module imported, no process started,
no file or folder written, no code compiled and run, the canary module untouched. Each must
end in a ``PlanError`` naming the path and the bound or fix (on the command line: exit 1 and
one ``error:`` line), never a traceback or a hang.

The hand-written hostile files are in ``corpus/``; cases too large or too machine-bound to
keep as files (huge integers, deep nesting, 20 MB, bytes that are not UTF-8, absolute
paths) are written at run time; the references are a matrix of every place a plan file can
hold one and every dangerous target.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from copy import deepcopy
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
from click.testing import CliRunner, Result
from untrusted_kit import CANARY_MODULE, PROBE_MODULE, SideEffects, assert_inert, write_canary

from loaderkit import LoaderPlan, PlanError
from loaderkit import registry as lk_registry
from loaderkit.cli import cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.timeout(60)

CORPUS = Path(__file__).with_name("corpus")

BASE: dict[str, Any] = {
    "schema_version": 1,
    "dataset": {
        "binding": "train",
        "kind": "torch_map",
        "type": "loaderkit.datasets.SyntheticTokens",
        "length": 20,
        "source": {"name": "tokens", "options": {"n": 20}},
    },
    "batch": {"batch_size": 4, "drop_last": False},
}
"""A valid plan whose dataset a registered factory makes: every command runs it."""


@attrs.frozen
class Case:
    """One hostile plan file and what its refusal must name."""

    name: str
    file: Path
    expect: str
    """A text every refusal contains: the path (and, where there is one, the bound)."""
    data: dict[str, Any] | None = attrs.field(default=None, repr=False)
    """The same plan as data for ``from_dict`` (``None``: the file does not parse)."""
    dict_expect: str | None = None
    """What the refusal of ``data`` names, when not ``expect`` (the file's parser refuses)."""
    inspectable: bool = False
    """An untrusted (well-formed) reference: inspection may give an unbound plan."""
    relative: bool = False
    """It names paths: ``from_dict`` without ``base_dir`` has no folder to confine them to."""


@attrs.define
class World:
    """The folders, the valid plan and the side-effect watch of this module."""

    root: Path
    plans: Path
    canary: Path
    valid: Path
    effects: SideEffects

    def write(self, name: str, data: object, suffix: str | None = None) -> Path:
        suffix = suffix or "toml"
        path = self.plans / f"{name}.{suffix}"
        if suffix == "json":
            path.write_text(json.dumps(data))
        else:
            path.write_text(tomli_w.dumps(data))  # type: ignore[arg-type]
        return path


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _commands(file: Path, valid_file: Path) -> list[tuple[str, ...]]:
    plan, valid = str(file), str(valid_file)
    return [
        ("explain", plan),
        ("validate", plan),
        ("validate", "--data", plan),
        ("diff", plan, valid),
        ("diff", valid, plan),
        ("bench", "--batches", "2", "--workers", "0", plan),
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("untrusted")
    plans, canary = root / "plans", root / "canary"
    plans.mkdir()
    canary.mkdir()
    write_canary(canary)
    (root / "x.jsonl").write_text('{"a": 1}\n')  # data outside the plans' folder
    (plans / "inside.jsonl").write_text('{"a": 1}\n')
    valid = plans / "valid.toml"
    valid.write_text(tomli_w.dumps(BASE))
    trusted = set(lk_registry._trusted)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(canary))
        patch.chdir(root)
        lk_registry.trust_modules(PROBE_MODULE)
        import lk_untrusted_probe  # trusted: imported as it would be, before the watch

        assert lk_untrusted_probe.Holder.Inner is not None
        # warm up: what a valid plan and an ordinary mistake import on first use
        benign = plans / "benign.toml"
        benign.write_text(tomli_w.dumps({**BASE, "batch": {"batch_size": 0}}))
        for file in (valid, benign):
            for kwargs in ({}, {"require_bindings": False}):
                with contextlib.suppress(PlanError):
                    LoaderPlan.load(file, **kwargs).explain()
            for args in _commands(file, valid):
                _cli(*args)
        benign.unlink()
        effects = SideEffects(canary, root)
        yield World(root, plans, canary, valid, effects)
        lk_registry._trusted.clear()
        lk_registry._trusted.update(trusted)
    assert CANARY_MODULE not in sys.modules


def _mentions(exc: PlanError, expect: str) -> bool:
    if expect == "file":  # the reader refused the file itself
        return exc.paths == ("file",)
    return any(expect in p.path or expect in p.message for p in exc.problems)


def assert_refused_by_the_api(world: World, case: Case) -> None:
    """from_dict and load, each with the defaults and with require_bindings=False."""
    calls: list[tuple[str, Callable[[], LoaderPlan], bool]] = []
    for kwargs in ({}, {"require_bindings": False}):
        inspect = bool(kwargs)
        data = case.data
        if data is not None:
            calls.append(
                (
                    f"from_dict(base_dir=folder, {kwargs})",
                    lambda kw=kwargs, d=data: LoaderPlan.from_dict(d, base_dir=world.plans, **kw),
                    inspect,
                )
            )
            if not case.relative:
                calls.append(
                    (
                        f"from_dict({kwargs})",
                        lambda kw=kwargs, d=data: LoaderPlan.from_dict(d, **kw),
                        inspect,
                    )
                )
        calls.append(
            (f"load({kwargs})", lambda kw=kwargs: LoaderPlan.load(case.file, **kw), inspect)
        )
    for what, call, inspect in calls:
        label = f"{case.name}: {what}"
        with world.effects.watch(label):
            try:
                plan = call()
            except PlanError as exc:
                expect = case.expect if "load" in what else case.dict_expect or case.expect
                assert _mentions(exc, expect), f"{label}: {exc}"
                assert_inert(str(exc), label)
                continue
        assert inspect and case.inspectable, f"{label}: loaded {plan!r}"
        assert not plan.bound, f"{label}: bound {plan!r}"
        with world.effects.watch(f"{label}: explain"):
            plan.explain()


def assert_refused_by_the_cli(world: World, case: Case) -> None:
    """Every command: exit 1 with one error line naming the path, nothing else done."""
    for args in _commands(case.file, world.valid):
        label = f"{case.name}: loaderkit {' '.join(args[:-1])}"
        with world.effects.watch(label):
            result = _cli(*args)
        assert "Traceback" not in result.output, label
        assert not isinstance(result.exception, AssertionError | KeyboardInterrupt), label
        assert_inert(result.output, label)
        inspecting = "--data" not in args and args[0] != "bench"
        if case.inspectable and inspecting:
            assert result.exit_code in (0, 1), f"{label}: {result.output}"
            assert not result.stderr, f"{label}: {result.stderr}"
            continue
        assert result.exit_code == 1, f"{label}: {result.output}"
        lines = result.stderr.splitlines()
        assert len(lines) == 2, f"{label}: {result.stderr}"
        assert lines[0].startswith("error: ") and lines[1].startswith("hint: "), label
        assert case.expect in lines[0], f"{label}: {lines[0]}"
        if case.expect == "file":
            assert lines[0].startswith(f"error: {case.file}: file: "), f"{label}: {lines[0]}"
        assert "unexpected" not in lines[0], f"{label}: {lines[0]}"


# -- the corpus ------------------------------------------------------------------------------------

CORPUS_EXPECT = {
    "exploit_ref.toml": "dataset.source.ref",
    "exploit_ref.json": "dataset.source.ref",
    "exploit_name.toml": "dataset.source.name",
    "source_canary.toml": "dataset.source.ref",
    "num_workers.toml": "workers.num_workers",
    "prefetch_factor.toml": "workers.prefetch_factor",
    "device.toml": "device",
    "cache_parent.toml": "cache.path",
    "cache_home.toml": "cache.path",
    "data_files_parent.toml": "dataset.source.options.data_files",
    "data_files_home.toml": "dataset.source.options.data_files",
    "data_files_list.toml": "dataset.source.options.data_files",
    "data_files_image_root.toml": "dataset.source.options.root",
    "data_files_image_list.toml": "dataset.source.options.files",
    "top_level_list.json": "file",
    "nan.json": "dataset.length",
    "infinity.json": "batch.batch_size",
    "minus_infinity.json": "batch.batch_size",
    "property.toml": "transform.ref",
    "property_fget.toml": "collator.ref",
    "module_getattr.toml": "collator.ref",
    "multimodal_sub.toml": "collator.options.collators.input_ids.name",
    # control characters (issue 22): shown escaped, in every refusal
    "escape_unknown_key.toml": "\\x1b]0;pwned\\x07",
    "escape_device.toml": "\\x1b[2J",
    "escape_ref.json": "\\x1b]8;;",
    "escape_collator_option.toml": "\\u202e",
    "huge_hex_version.toml": "an integer of 16,000 bits",
}


def test_the_corpus_is_what_the_tests_know():
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(CORPUS_EXPECT)


def _parsed(path: Path) -> dict[str, Any] | None:
    text = path.read_text()
    data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    return data if isinstance(data, dict) else None


def _corpus_case(world: World, name: str) -> Case:
    file = world.plans / name
    file.write_bytes((CORPUS / name).read_bytes())
    return Case(
        name,
        file,
        CORPUS_EXPECT[name],
        _parsed(file),
        relative=name.startswith(("cache", "data_files")),
    )


@pytest.mark.parametrize("name", sorted(CORPUS_EXPECT))
def test_a_hostile_file_is_refused_and_does_nothing(world: World, name: str):
    case = _corpus_case(world, name)
    assert_refused_by_the_api(world, case)
    assert_refused_by_the_cli(world, case)


# -- cases written at run time ---------------------------------------------------------------------


def _deep_json(levels: int) -> str:
    return '{"schema_version": 1, "dataset": ' + "[" * levels + "]" * levels + "}"


def _deep_value(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _with(section: str, table: object) -> dict[str, Any]:
    data = deepcopy(BASE)
    data[section] = table
    return data


def _runtime_cases(world: World) -> dict[str, Case]:
    root, plans = world.root, world.plans
    huge = 10**5000
    cases: dict[str, Case] = {}

    def add(
        name: str, text: str | bytes, expect: str, data: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        file = plans / name
        if isinstance(text, bytes):
            file.write_bytes(text)
        else:
            file.write_text(text)
        cases[name] = Case(name, file, expect, data, **kw)

    digits = "9" * 5000
    base_toml = tomli_w.dumps(BASE)
    add(
        "huge_int.toml",
        base_toml + f"[workers]\nnum_workers = {digits}\n",
        "file",
        _with("workers", {"num_workers": huge}),
        dict_expect="workers.num_workers",
    )
    add(
        "huge_int.json",
        json.dumps(BASE)[:-1] + f', "workers": {{"num_workers": {digits}}}}}',
        "file",
        _with("workers", {"num_workers": huge}),
        dict_expect="workers.num_workers",
    )
    hex_version = int("f" * 5000, 16)  # Python's int-digit limit: str() of it raises
    add(
        "hex_version.toml",
        f"schema_version = {hex(hex_version)}\n",
        "file",
        {"schema_version": hex_version},
        dict_expect="an integer of 20,000 bits",
    )
    deep = _deep_value(100_000)
    add("deep.json", _deep_json(100_000), "file", _with("dataset", deep), dict_expect="32 levels")
    add(
        "deep_array.toml", "schema_version = 1\nx = " + "[" * 100_000 + "]" * 100_000 + "\n", "file"
    )
    add("deep_inline.toml", "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n", "file")
    add(
        "deep_tables.toml",
        "schema_version = 1\n[" + "a." * 100_000 + "a]\nb = 1\n",
        "more than 32 parts",
        _with("collator", deep),
        dict_expect="32 levels",
    )
    add("big.json", b" " * (20 * 2**20) + json.dumps(BASE).encode(), "file")
    # under the size bound, but a long parse: refused before the parser runs
    add("many_values.toml", "x = [" + "1," * 450_000 + "]\n", "by its commas and lines")
    add("many_lines.json", "{" + "\n" * 900_000 + '"schema_version": 1}', "by its commas")
    add("not_utf8.toml", b"schema_version = 1\n# \xff\xfe\x80\n", "file")
    add("not_utf8_string.json", b'{"schema_version": 1, "x": "\xc3\x28"}', "file")
    columns = ["c"] * 200_000
    add(
        "huge_array.json",
        json.dumps(_with("dataset", {**BASE["dataset"], "columns": columns})),
        "100,000",
        _with("dataset", {**BASE["dataset"], "columns": columns}),
    )
    long = "a" * 5000 + ":b"
    add(  # a run of 5,000 letters: refused before parsing (the data: at its path)
        "long_string.toml",
        tomli_w.dumps(_with("transform", {"ref": long})),
        "unbroken run of more than 4,096",
        _with("transform", {"ref": long}),
        dict_expect="transform.ref",
    )
    add(
        "long_key.json",
        json.dumps(_with("checks", {"k" * 5000: 1})),
        "unbroken run of more than 4,096",
        _with("checks", {"k" * 5000: 1}),
        dict_expect="5,000 characters",
    )
    outside = str(root / "outside-cache")
    cache = {"storage": "disk", "path": outside}
    add(
        "cache_absolute.toml",
        tomli_w.dumps(_with("cache", cache)),
        "cache.path",
        _with("cache", cache),
        relative=True,
    )
    files = deepcopy(BASE)
    files["dataset"] = {
        "binding": "train",
        "kind": "hf",
        "type": "datasets.arrow_dataset.Dataset",
        "length": 1,
        "source": {"name": "hf_files", "options": {"data_files": str(root / "x.jsonl")}},
    }
    add(
        "data_files_absolute.json",
        json.dumps(files),
        "dataset.source.options.data_files",
        files,
        relative=True,
    )
    return cases


RUNTIME = [
    "huge_int.toml",
    "hex_version.toml",
    "huge_int.json",
    "deep.json",
    "deep_array.toml",
    "deep_inline.toml",
    "deep_tables.toml",
    "big.json",
    "many_values.toml",
    "many_lines.json",
    "not_utf8.toml",
    "not_utf8_string.json",
    "huge_array.json",
    "long_string.toml",
    "long_key.json",
    "cache_absolute.toml",
    "data_files_absolute.json",
]


@pytest.fixture(scope="module")
def runtime_cases(world: World) -> dict[str, Case]:
    cases = _runtime_cases(world)
    assert sorted(cases) == sorted(RUNTIME)
    return cases


@pytest.mark.parametrize("name", RUNTIME)
def test_an_oversized_or_malformed_file_is_refused_and_does_nothing(
    world: World, runtime_cases: dict[str, Case], name: str
):
    case = runtime_cases[name]
    assert_refused_by_the_api(world, case)
    assert_refused_by_the_cli(world, case)


# -- references: every place x every target --------------------------------------------------------

MIXTURE: dict[str, Any] = {
    "schema_version": 1,
    "dataset": {"binding": "mixture", "kind": "mixture", "type": "loaderkit.mixture", "length": 30},
    "mixture": {
        "mode": "weighted",
        "by": "epoch",
        "stratified": False,
        "sources": [
            {
                "binding": "a",
                "kind": "torch_map",
                "type": "loaderkit.datasets.SyntheticTokens",
                "length": 20,
                "source": {"name": "tokens", "options": {"n": 20}},
            },
            {
                "binding": "b",
                "kind": "torch_map",
                "type": "loaderkit.datasets.SyntheticTokens",
                "length": 10,
                "source": {"name": "tokens", "options": {"n": 10, "seed": 2}},
            },
        ],
    },
}


def _at(section: str, table: Callable[[str], object]) -> Callable[[str], dict[str, Any]]:
    def place(ref: str) -> dict[str, Any]:
        return _with(section, table(ref))

    return place


def _source(key: str) -> Callable[[str], dict[str, Any]]:
    def place(ref: str) -> dict[str, Any]:
        data = deepcopy(BASE)
        data["dataset"]["source"] = {key: ref, "options": {"command": "echo owned > owned.txt"}}
        return data

    return place


def _mixture_source(key: str) -> Callable[[str], dict[str, Any]]:
    def place(ref: str) -> dict[str, Any]:
        data = deepcopy(MIXTURE)
        data["mixture"]["sources"][1]["source"] = {key: ref, "options": {}}
        return data

    return place


def _mixture_weights(ref: str) -> dict[str, Any]:
    data = deepcopy(MIXTURE)
    data["mixture"]["weights_fn"] = {"ref": ref}
    return data


def _max_length(ref: str) -> dict[str, Any]:
    data = _with("collator", {"name": "text", "options": {}})
    data["max_length"] = {"by": "epoch", "fn": {"ref": ref}}
    return data


# (place, where the problem is reported, whether a ref there can be inspected unbound)
PLACES: dict[str, tuple[Callable[[str], dict[str, Any]], str, bool]] = {
    "dataset.source.ref": (_source("ref"), "dataset.source", False),
    "dataset.source.name": (_source("name"), "dataset.source", False),
    "mixture.source.ref": (_mixture_source("ref"), "mixture.sources[1].source", False),
    "mixture.source.name": (_mixture_source("name"), "mixture.sources[1].source", False),
    "collator.ref": (_at("collator", lambda r: {"ref": r}), "collator.ref", True),
    "collator.name": (_at("collator", lambda r: {"name": r, "options": {}}), "collator", False),
    "multimodal": (
        _at(
            "collator",
            lambda r: {"name": "multimodal", "options": {"collators": {"x": {"name": r}}}},
        ),
        "collator.options.collators.x",
        False,
    ),
    "transform.ref": (
        _at("transform", lambda r: {"ref": r, "accepts_rng": False}),
        "transform.ref",
        True,
    ),
    "transform.name": (_at("transform", lambda r: {"name": r}), "transform", False),
    "bucketing.length": (
        _at("bucketing", lambda r: {"length": {"ref": r}}),
        "bucketing.length",
        True,
    ),
    "sampling_weights": (
        _at("sampling_weights", lambda r: {"weights": {"ref": r}}),
        "sampling_weights.weights",
        True,
    ),
    "curriculum.difficulty": (
        _at("curriculum", lambda r: {"difficulty": {"ref": r}, "schedule": "linear", "horizon": 2}),
        "curriculum.difficulty",
        True,
    ),
    "curriculum.schedule": (
        _at(
            "curriculum", lambda r: {"difficulty": {"column": "input_ids"}, "schedule": {"ref": r}}
        ),
        "curriculum.schedule",
        True,
    ),
    "max_length.fn": (_max_length, "max_length", True),
    "batch.size_fn": (
        _at("batch", lambda r: {"batch_size": 4, "size_fn": {"ref": r}}),
        "batch.batch_size",
        True,
    ),
    "mixture.weights_fn": (_mixture_weights, "mixture.weights", True),
}

UNTRUSTED = [
    "os:remove",
    "os:system",
    "posix:system",
    "importlib:import_module",
    "builtins:eval",
    "builtins:exec",
    "subprocess:Popen",
    "pickle:loads",
    "shutil:rmtree",
    f"{CANARY_MODULE}:collate",
    f"{CANARY_MODULE}:Thing",
]
"""Well-formed references to modules nobody trusted: refused to build, never imported."""

REFUSED = [
    "loaderkit.plan.workers:os.system",
    "loaderkit.registry:importlib.import_module",
    "loaderkit.plan.serde:json.loads",
    "loaderkit:os.system",
    "loaderkit.registry:sys.modules",
    "loaderkit.no_such_module:thing",
    "loaderkit.integrations.lightning:thing",
    f"{PROBE_MODULE}:Holder.prop",
    f"{PROBE_MODULE}:Holder.prop.fget",
    f"{PROBE_MODULE}:missing",
    f"{PROBE_MODULE}:pathlib.Path",
    "a:b:c",
    ":x",
    "x:",
    "a..b:c",
    "a:<lambda>",
    "os :system",
    "\u043es:system",
    ".os:system",
    "os:system\n",
    "x" * 600 + ":y",
]
"""References that are wrong whatever the trust: refused even when only inspected."""


def _ref_cases() -> list[tuple[str, str, bool]]:
    cases = []
    for place, (_, _, inspectable) in PLACES.items():
        cases.extend((place, target, inspectable) for target in UNTRUSTED)
        cases.extend((place, target, False) for target in REFUSED)
    return cases


REF_CASES = _ref_cases()


def _ref_case(world: World, place: str, target: str, inspectable: bool) -> Case:
    make, expect, _ = PLACES[place]
    data = make(target)
    index = REF_CASES.index((place, target, inspectable))
    name = f"ref-{place}-{index}"
    file = world.write(name, data, "json" if index % 2 else "toml")
    return Case(name, file, expect, data, inspectable=inspectable)


@pytest.mark.parametrize(("place", "target", "inspectable"), REF_CASES)
def test_a_hostile_reference_is_refused_and_nothing_is_imported(
    world: World, place: str, target: str, inspectable: bool
):
    assert_refused_by_the_api(world, _ref_case(world, place, target, inspectable))


CLI_REF_CASES = [
    case
    for case in REF_CASES
    if case[0] in ("dataset.source.name", "transform.ref", "collator.name")
    or case[1]
    in ("os:system", f"{CANARY_MODULE}:collate", "loaderkit.registry:importlib.import_module")
]


@pytest.mark.parametrize(("place", "target", "inspectable"), CLI_REF_CASES)
def test_a_hostile_reference_fails_every_command_in_one_line(
    world: World, place: str, target: str, inspectable: bool
):
    assert_refused_by_the_cli(world, _ref_case(world, place, target, inspectable))


def test_the_trusted_probe_resolves_only_classes_and_functions(world: World):
    """The probe module is trusted: a real class in it resolves; its property never runs."""
    data = _with("transform", {"ref": f"{PROBE_MODULE}:Holder.static", "accepts_rng": False})
    bindings = None
    with world.effects.watch("a static method of a trusted class"):
        plan = LoaderPlan.from_dict(data, bindings=bindings)
    assert plan.transform is not None and plan.transform.name == f"{PROBE_MODULE}:Holder.static"


# -- cache folders and data files: never made by inspection ----------------------------------------


def test_validate_data_refuses_an_outside_cache_unless_allowed_and_makes_no_folder(world: World):
    outside = world.root / "outside-cache-2"
    data = _with("cache", {"storage": "disk", "path": str(outside)})
    data["collator"] = {"name": "text", "options": {}}
    file = world.write("cache-out", data, "toml")
    with world.effects.watch("validate --data, outside cache"):
        refused = _cli("validate", "--data", str(file))
    assert refused.exit_code == 1 and "cache.path" in refused.stderr, refused.output
    allowed = _cli("validate", "--data", "--allow-external-paths", str(file))
    assert allowed.exit_code == 0, allowed.output
    assert "valid" in allowed.stdout
    assert not outside.exists()
    for args in (("explain",), ("validate",), ("diff",)):
        extra = (str(world.valid),) if args == ("diff",) else ()
        with world.effects.watch(f"{args[0]} --allow-external-paths"):
            result = _cli(*args, "--allow-external-paths", str(file), *extra)
        assert result.exit_code in (0, 1) and not result.stderr, result.output
    assert not outside.exists()


def test_inspection_of_an_inside_cache_makes_no_folder(world: World):
    file = world.write(
        "cache-in", _with("cache", {"storage": "disk", "path": "cache/here"}), "json"
    )
    for mode in ({}, {"require_bindings": False}):
        with world.effects.watch(f"load {mode}"):
            plan = LoaderPlan.load(file, **mode)
        assert plan.cache is not None and plan.cache.path == str(world.plans / "cache" / "here")
    for args in (
        ("explain", str(file)),
        ("validate", str(file)),
        ("diff", str(file), str(world.valid)),
    ):
        with world.effects.watch(" ".join(args[:1])):
            result = _cli(*args)
        assert not result.stderr, result.output
    assert not (world.plans / "cache").exists()


# -- the real console script -----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_the_console_script_refuses_the_exploit_in_a_real_process(tmp_path: Path):
    script = Path(sys.executable).with_name("loaderkit")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "loaderkit"]
    for name in ("exploit_ref.toml",):
        plan = tmp_path / name
        plan.write_bytes((CORPUS / name).read_bytes())
        for args in (
            ["explain"],
            ["validate"],
            ["validate", "--data"],
            ["bench", "--batches", "2", "--workers", "0"],
        ):
            done = subprocess.run(
                [*command, *args, name],
                capture_output=True,
                text=True,
                timeout=90,
                cwd=tmp_path,
                env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")},
                check=False,
            )
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            lines = done.stderr.splitlines()
            assert len(lines) == 2, lines
            assert lines[0].startswith(f"error: {name}: dataset.source."), lines
            assert not (tmp_path / "owned.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["exploit_ref.toml"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_pipe_or_a_folder_named_like_a_plan_is_refused_without_waiting(world: World):
    pipe, folder = world.root / "pipe.toml", world.root / "folder.json"
    os.mkfifo(pipe)  # opening it for reading would wait for a writer forever
    folder.mkdir()
    for path in (pipe, folder):
        for mode in ({}, {"require_bindings": False}):
            with world.effects.watch(f"load {path.name}"), pytest.raises(PlanError) as err:
                LoaderPlan.load(path, **mode)
            assert err.value.paths == ("file",), err.value
            assert "not a regular file" in str(err.value) or "directory" in str(err.value)
    result = _cli("explain", str(pipe))
    assert result.exit_code == 1 and "not a regular file" in result.stderr, result.output
    assert result.stderr.startswith(f"error: {pipe}: file: "), result.stderr
    with pytest.raises(PlanError, match="embedded null byte"):
        LoaderPlan.load(str(world.plans / "a\x00.toml"))


PLUGIN_MODULE = "lk_untrusted_plugin"


def _install_plugin(world: World, patch: pytest.MonkeyPatch) -> None:
    """An installed package (dist-info on sys.path) whose entry points name a module that
    creates ``imported`` when imported; the registries forget what they scanned before."""
    from loaderkit.collators import collators
    from loaderkit.datasets import factories
    from loaderkit.transforms import transforms

    info = world.canary / "lk_untrusted_plugin-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lk-untrusted-plugin\n")
    (info / "entry_points.txt").write_text(
        f"[loaderkit.collators]\nplugin_collator = {PLUGIN_MODULE}:Collate\n\n"
        f"[loaderkit.transforms]\nplugin_transform = {PLUGIN_MODULE}:transform\n\n"
        f"[loaderkit.datasets]\nplugin_dataset = {PLUGIN_MODULE}:factory\n"
    )
    (world.canary / f"{PLUGIN_MODULE}.py").write_text(
        "import pathlib\n"
        'pathlib.Path(__file__).with_name("imported").write_text("plugin")\n'
        "class Collate:\n"
        "    def __init__(self, **options):\n"
        "        pass\n"
        "    def __call__(self, samples):\n"
        "        return samples\n"
        "def transform(sample):\n"
        "    return sample\n"
        "def factory(**options):\n"
        "    return [{'input_ids': [1, 2]}] * 3\n"
    )
    for registry in (collators, transforms, factories):
        patch.setattr(registry, "_plugins", None)
        patch.setattr(registry, "_entries", dict(registry._entries))


def test_inspecting_a_plan_imports_no_plugin_and_building_does(world: World):
    plans = {
        "collator": _with("collator", {"name": "plugin_collator", "options": {"x": 1}}),
        "transform": _with("transform", {"name": "plugin_transform", "accepts_rng": False}),
        "multimodal": _with(
            "collator",
            {"name": "multimodal", "options": {"collators": {"x": {"name": "plugin_collator"}}}},
        ),
    }
    source = deepcopy(BASE)
    source["dataset"]["type"] = "builtins.list"
    source["dataset"]["length"] = 3
    source["dataset"]["source"] = {"name": "plugin_dataset", "options": {}}
    plans["dataset"] = source
    with pytest.MonkeyPatch.context() as patch:
        _install_plugin(world, patch)
        try:
            for name, data in plans.items():
                file = world.write(f"plugin-{name}", data, "toml")
                with world.effects.watch(f"inspect {name}"):
                    plan = LoaderPlan.load(file, require_bindings=False)
                    plan.explain()
                    assert LoaderPlan.from_dict(data, require_bindings=False) == plan
                    for args in (("explain",), ("validate",), ("diff",)):
                        extra = (str(world.valid),) if args == ("diff",) else ()
                        result = _cli(*args, str(file), *extra)
                        assert not result.stderr, f"{name} {args}: {result.output}"
            # to build, the plugin is imported: the watch would have seen it
            LoaderPlan.load(world.plans / "plugin-transform.toml")
            assert PLUGIN_MODULE in sys.modules
            assert (world.canary / "imported").read_text() == "plugin"
        finally:
            (world.canary / "imported").unlink(missing_ok=True)
            sys.modules.pop(PLUGIN_MODULE, None)
