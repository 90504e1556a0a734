"""Untrusted text is inert, and every input is bounded before it costs (issue 22).

Text from a plan file, a saved state or a dataset reaches a terminal through error messages
and the ``loaderkit`` commands' output: it must come out escaped (no raw control character
but the newline) and bounded in length. Every input is bounded before it costs: a plan file's
size before parsing, a 16 MB integer before the TOML reader converts it, the ``plan`` of a
state (a million keys, a 50 MB string, 200,000 levels) before anything compares or shows it.
Each case of the issue is a test here; hypothesis sends arbitrary text through every command
and every error class, and random deep or huge values through plan files and states, each
refused within a time and memory bound.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from untrusted_kit import assert_inert, raw_controls

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError, ResumeError
from loaderkit._text import LINE_CHARS, LISTED, MESSAGE_CHARS, SHOWN_CHARS, inert, listed, shown
from loaderkit.cli import cli
from loaderkit.errors import (
    DataError,
    LoaderkitError,
    NotBuiltYetError,
    Problem,
    WorkerError,
    data_error,
)
from loaderkit.registry import UnknownNameError

pytestmark = pytest.mark.timeout(300)

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil\u202c\x00\r\t\u2028x"
"""Control characters a terminal acts on: a title change, a clear screen, a C1 CSI, a bidi
override, NUL, a carriage return, a tab, a line separator."""

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

TIME_BOUND = 30.0
"""Seconds any refusal may take here: generous (a loaded 2-core machine), yet far below the
minutes and gigabytes these inputs cost before."""

MEMORY_BOUND = 256 * 2**20
"""Bytes of Python memory any refusal may allocate (traced), beyond the input itself."""


def _cli(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _write(path: Path, data: dict[str, Any]) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def _with(data: dict[str, Any], dotted: str, value: object) -> dict[str, Any]:
    """``data`` (copied) with ``value`` at the dotted path (tables made on the way)."""
    out = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    table = out
    for key in parents:
        table = table.setdefault(key, {})
    table[last] = value
    return out


@contextmanager
def bounded(what: str) -> Iterator[None]:
    """The block takes at most :data:`TIME_BOUND` seconds and :data:`MEMORY_BOUND` bytes."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert took < TIME_BOUND, f"{what}: {took:.1f} s"
    assert peak < MEMORY_BOUND, f"{what}: {peak / 2**20:.0f} MiB"


# -- the one escaping function --------------------------------------------------------------------


def test_inert_escapes_what_a_terminal_acts_on_as_repr_does():
    assert inert(HOSTILE) == (
        "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202eevil\\u202c\\x00\\r\\t\\u2028x"
    )
    assert inert("plain text, é, 漢字, emoji 😀") == "plain text, é, 漢字, emoji 😀"
    assert inert("C:\\data\\x1b") == "C:\\data\\x1b"  # backslashes stay (a Windows path)


def test_inert_cuts_with_a_marker_saying_how_much_was_cut():
    text = "a" * 50_000_000
    start = time.monotonic()
    cut = inert(text)
    assert time.monotonic() - start < 1.0  # O(limit), not O(len(text))
    assert len(cut) <= SHOWN_CHARS
    kept = cut.index("...")
    assert cut.endswith(f"... [+{50_000_000 - kept:,} characters]")
    quoted = shown(text)
    assert len(quoted) <= SHOWN_CHARS + 2
    assert quoted.endswith(f"'... [+{50_000_000 - (quoted.index(chr(39), 1) - 1):,} characters]")


def test_shown_never_raises_and_is_bounded():
    deep: list[Any] = []
    for _ in range(200_000):
        deep = [deep]

    class Raising:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert shown(int("f" * 5000, 16)) == "an integer of 20,000 bits"
    assert shown(-(10**5000)) == "an integer of 16,610 bits"
    assert len(shown(deep)) <= SHOWN_CHARS
    assert len(shown(list(range(10**6)))) <= SHOWN_CHARS
    assert len(shown({str(i): i for i in range(10**5)})) <= SHOWN_CHARS
    assert "Raising" in shown(Raising())
    assert shown({HOSTILE: HOSTILE}) == repr({HOSTILE: HOSTILE})  # repr escapes these too


def test_listed_shows_the_first_50_and_counts_the_rest():
    items = [f"p{i}" for i in range(99_000)]
    shown_items = listed(items, "problems")
    assert shown_items[:LISTED] == items[:LISTED]
    assert shown_items[LISTED:] == ["... and 98,950 more problems"]
    assert listed(items[:LISTED], "problems") == items[:LISTED]


_ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)


@given(text=_ANY_TEXT, limit=st.integers(60, 3000))
def test_inert_text_holds_no_control_character_and_fits_its_bound(text: str, limit: int):
    out = inert(text, limit)
    assert not raw_controls(out) and "\n" not in out
    assert len(out) <= limit
    assert inert(out, limit) == out  # inert text is its own inert
    if text.isprintable() and len(text) <= limit:
        assert out == text


@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(10**29, 10**40)
        | st.floats()
        | _ANY_TEXT,
        lambda children: (
            st.lists(children, max_size=30) | st.dictionaries(_ANY_TEXT, children, max_size=30)
        ),
        max_leaves=200,
    )
)
def test_shown_is_inert_for_any_value(value: object):
    out = shown(value)
    assert not raw_controls(out) and "\n" not in out
    assert len(out) <= SHOWN_CHARS + 2  # a cut string keeps its quotes


# -- every error class ----------------------------------------------------------------------------


def _errors(text: str) -> list[BaseException]:
    return [
        PlanError(Problem(text, text)),
        PlanError([Problem(text, text), Problem("batch", text)], file=text),
        ResumeError(text, [text, f"plan.{text}: {text!r} -> 1"]),
        DataError(text, sample_index=3),
        data_error(text, ValueError("x"), sample_index=3),
        data_error(text, KeyError),
        WorkerError(text, worker_id=0),
        LoaderkitError(text),
        UnknownNameError(text),
        NotBuiltYetError(text),
    ]


@given(text=_ANY_TEXT | st.builds(lambda t, n: t * n, _ANY_TEXT, st.integers(1, 2000)))
def test_every_error_class_shows_arbitrary_text_escaped_and_bounded(text: str):
    for error in _errors(text):
        message = str(error)
        label = type(error).__name__
        assert_inert(message, label)
        assert len(message) <= MESSAGE_CHARS + LINE_CHARS, label
        assert all(len(line) <= LINE_CHARS + SHOWN_CHARS + 10 for line in message.split("\n"))


def test_a_plan_error_lists_50_problems_and_a_count():
    err = PlanError([Problem(f"batch.k{i}", "unknown key") for i in range(99_000)])
    text = str(err)
    assert text.startswith("99,000 problems in the plan:\n")
    assert text.endswith("  - ... and 98,950 more problems")
    assert text.count("\n") == LISTED + 1
    assert len(err.problems) == 99_000  # all of them are kept


def test_a_resume_error_lists_50_differences_and_a_count():
    err = ResumeError("another plan; differences:", [f"plan.k{i}: 1 -> 2" for i in range(1000)])
    lines = str(err).split("\n")
    assert len(lines) == 1 + LISTED + 1
    assert lines[-1] == "  ... and 950 more differences"
    assert len(err.diff) == 1000


# -- plans whose text is hostile: every command ---------------------------------------------------

HOSTILE_PLACES: dict[str, Callable[[str], dict[str, Any]]] = {
    "an unknown key": lambda t: _with(BASE, f"batch.{t}", 1),
    "an unknown section": lambda t: {**BASE, t: {}},
    "a preset name": lambda t: {**BASE, "preset": {"name": t, "options": {"size": t}}},
    "a preset option": lambda t: {**BASE, "preset": {"name": "p", "options": {t: 1}}},
    "a type": lambda t: _with(BASE, "dataset.type", t),
    "a reason": lambda t: {**BASE, "collator": {"name": "default", "reason": t}},
    "a label": lambda t: {**BASE, "transform": {"binding": "fn", "label": t}},
    "a binding": lambda t: {**BASE, "transform": {"binding": t}},
    "a reference": lambda t: {**BASE, "transform": {"ref": t}},
    "a collator name": lambda t: {**BASE, "collator": {"name": t}},
    "a collator option": lambda t: {**BASE, "collator": {"name": "default", "options": {t: t}}},
    "a source option": lambda t: _with(BASE, "dataset.source.options", {"n": 20, t: t}),
    "a column": lambda t: _with(BASE, "dataset.columns", [t]),
    "a device": lambda t: {**BASE, "device": t},
    "a choice": lambda t: _with(BASE, "order.shuffle", t),
    "a cache path": lambda t: {**BASE, "cache": {"storage": "disk", "path": t}},
    "the schema version": lambda t: {**BASE, "schema_version": t},
}
"""Where a plan file holds text loaderkit may show: keys, names, labels, reasons, values."""


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-text")
    _write(folder / "valid.toml", BASE)
    return folder


def _run_everything(file: Path, valid: Path, *, build: bool = False) -> str:
    """Every command on ``file`` (and the API), all output together; each must be inert."""
    outputs = []
    commands = [
        ("explain", str(file)),
        ("--debug", "explain", str(file)),  # a traceback too
        ("validate", str(file)),
        ("diff", str(file), str(valid)),
        ("diff", str(valid), str(file)),
    ]
    if build:
        commands += [
            ("validate", "--data", str(file)),
            ("bench", "--batches", "2", "--workers", "0", str(file)),
        ]
    for args in commands:
        result = _cli(*args)
        assert "--debug" in args or "Traceback" not in result.output, args
        assert result.exit_code in (0, 1), (args, result.output)
        assert_inert(result.output, f"loaderkit {' '.join(args[:-1])}")
        outputs.append(result.output)
    try:
        plan = LoaderPlan.load(file, require_bindings=False)
    except PlanError as err:
        assert_inert(str(err), "load")
        outputs.append(str(err))
    else:
        for text in (plan.explain(), "\n".join(plan.diff(LoaderPlan.load(valid))), repr(plan)):
            assert_inert(text, "the API")
            outputs.append(text)
    return "\n".join(outputs)


@pytest.mark.parametrize("place", sorted(HOSTILE_PLACES))
def test_control_characters_in_a_plan_file_reach_no_terminal(plans: Path, place: str):
    file = _write(plans / f"{place.replace(' ', '_')}.toml", HOSTILE_PLACES[place](HOSTILE))
    output = _run_everything(file, plans / "valid.toml", build=True)
    assert "\\x1b]0;pwned\\x07" in output, output  # shown, escaped


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(
        st.characters(codec=None, exclude_categories=()) | st.sampled_from("\x1b\x9b\x07\r\t"),
        min_size=1,
        max_size=40,
    ),
    place=st.sampled_from(sorted(HOSTILE_PLACES)),
    suffix=st.sampled_from([".toml", ".json"]),
)
def test_arbitrary_text_through_every_command_comes_out_escaped(
    plans: Path, text: str, place: str, suffix: str
):
    data = HOSTILE_PLACES[place](text)
    file = plans / f"any{suffix}"
    try:
        _write(file, data)
    except (ValueError, TypeError, UnicodeEncodeError):  # TOML/UTF-8 cannot hold it
        assume(False)
    _run_everything(file, plans / "valid.toml")


# -- the scenarios: plan files ------------------------------------------------------------


def test_a_plan_with_99000_unknown_keys_prints_50_problems_and_a_count(
    plans: Path, monkeypatch: pytest.MonkeyPatch
):
    data = _with(BASE, "batch", {f"k{i}": 1 for i in range(99_000)} | {"batch_size": 4})
    file = plans / "many_keys.json"
    file.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("LOADERKIT_MAX_PLAN_BYTES", str(4 * 2**20))  # it is 1.3 MB
    with bounded("load"), pytest.raises(PlanError) as err:
        LoaderPlan.load(file, require_bindings=False)
    assert len(err.value.problems) == 99_000
    assert str(err.value).endswith("  - ... and 98,950 more problems")
    assert len(str(err.value)) < 20_000  # 23.5 MB before
    for command in ("explain",):
        result = _cli(command, str(file))
        assert result.exit_code == 1
        assert len(result.output) < 20_000, len(result.output)
        assert "99,000 problems in the plan" in result.output
        assert "... and 98,950 more problems" in result.output


def test_the_size_bound_is_checked_before_parsing_and_can_be_raised(
    plans: Path, monkeypatch: pytest.MonkeyPatch
):
    file = plans / "padded.toml"
    file.write_text(tomli_w.dumps(BASE) + "# " + "x " * 2**19 + "\n", encoding="utf-8")
    assert 2**20 < file.stat().st_size < 2**21
    with pytest.raises(PlanError, match="larger than 1,048,576 bytes") as err:
        LoaderPlan.load(file, require_bindings=False)
    assert "max_file_bytes" in str(err.value) and "LOADERKIT_MAX_PLAN_BYTES" in str(err.value)
    assert LoaderPlan.load(file, require_bindings=False, max_file_bytes=2**21).batch.batch_size == 4
    garbage = plans / "garbage.toml"
    garbage.write_text("[[[[" * 2**19, encoding="utf-8")  # a parse error, but too large first
    with pytest.raises(PlanError, match="larger than"):
        LoaderPlan.load(garbage, require_bindings=False)
    monkeypatch.setenv("LOADERKIT_MAX_PLAN_BYTES", "2_097_152")
    assert LoaderPlan.load(file, require_bindings=False).batch.batch_size == 4
    assert _cli("validate", str(file)).exit_code == 0
    with pytest.raises(PlanError, match="larger than 1,000 bytes"):  # the argument wins
        LoaderPlan.load(file, max_file_bytes=1000)
    for bad in ("lots", "-1", "0", "9" * 5000, "\x1b[2J"):
        monkeypatch.setenv("LOADERKIT_MAX_PLAN_BYTES", bad)
        with pytest.raises(PlanError) as err:
            LoaderPlan.load(file, require_bindings=False)
        assert err.value.paths == ("LOADERKIT_MAX_PLAN_BYTES",)
        assert_inert(str(err.value))
        result = _cli("explain", str(file))
        assert result.exit_code == 1 and "LOADERKIT_MAX_PLAN_BYTES" in result.output
    monkeypatch.delenv("LOADERKIT_MAX_PLAN_BYTES")
    for bad_arg in (0, -5, True, "big"):
        with pytest.raises(PlanError, match="max_file_bytes"):
            LoaderPlan.load(file, max_file_bytes=bad_arg)  # type: ignore[arg-type]


NUMBERS = {
    "int.toml": "x = {digits}\n",
    "float.toml": "x = 1.{digits}\n",
    "exponent.toml": "x = 1e{digits}\n",
    "hex.toml": "x = 0x{digits}\n",
    "underscored.toml": "x = 1_{digits}\n",
    "int.json": '{{"schema_version": 1, "x": {digits}}}',
    "float.json": '{{"schema_version": 1, "x": 0.{digits}}}',
}


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_a_16_mb_number_is_refused_before_the_parser_converts_it(plans: Path, name: str):
    file = plans / f"number_{name}"
    digits = "9" * (16 * 10**6)
    text = NUMBERS[name].format(digits=digits)
    if name.endswith(".toml"):
        text = "schema_version = 1\n" + text
    file.write_text(text, encoding="utf-8")
    del digits, text
    with bounded(name), pytest.raises(PlanError) as err:  # 1.9 GB and 2 s before
        LoaderPlan.load(file, require_bindings=False, max_file_bytes=32 * 2**20)
    assert err.value.paths == ("file",)
    assert "unbroken run of more than 4,096 digits" in str(err.value)


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc/self/statm")
@pytest.mark.timeout(120)
def test_a_16_mb_integer_fits_in_a_small_address_space(plans: Path):
    """The issue's case in a process whose address space is capped (``RLIMIT_AS``)."""
    file = plans / "sixteen.toml"
    file.write_text("schema_version = 1\nx = " + "9" * (16 * 10**6) + "\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        import resource
        from loaderkit import LoaderPlan, PlanError
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        cap = used + 512 * 2**20  # what is mapped now, plus 512 MiB: 1.9 GB before
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        try:
            LoaderPlan.load({str(file)!r}, require_bindings=False, max_file_bytes=2**25)
        except PlanError as err:
            print("refused:", err.paths)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "refused: ('file',)"


def test_a_from_dict_of_long_keys_and_many_values_stays_small():
    """32 levels of 1,000-character keys over 99,000 values: 13 GB of paths before."""
    value: object = [0] * 99_000
    for level in range(30):
        value = {f"k{level}" * 1000: value}
    with bounded("from_dict"), pytest.raises(PlanError):
        LoaderPlan.from_dict({**BASE, "checks": value}, require_bindings=False)


@settings(max_examples=20)
@given(
    kind=st.sampled_from(["arrays", "inline tables", "dotted keys", "keys", "digits", "string"]),
    size=st.integers(0, 3),
    suffix=st.sampled_from([".toml", ".json"]),
)
def test_random_deep_or_huge_values_in_plan_files_are_refused_within_bounds(
    tmp_path_factory: pytest.TempPathFactory, kind: str, size: int, suffix: str
):
    n = [40, 5_000, 200_000, 1_000_000][size]
    body = {
        "arrays": ("x = " + "[" * n + "]" * n, '"x": ' + "[" * n + "]" * n),
        "inline tables": (
            "x = " + "{a = " * n + "1" + "}" * n,
            '"x": ' + '{"a": ' * n + "1" + "}" * n,
        ),
        "dotted keys": ("[" + "a." * n + "a]\nb = 1", '"x": 1'),
        "keys": (
            "\n".join(f"k{i} = 1" for i in range(n)),
            ", ".join(f'"k{i}": 1' for i in range(n)),
        ),
        "digits": ("x = " + "7" * (4096 + n), '"x": ' + "7" * (4096 + n)),
        "string": (f'x = "{"s" * (4096 + n)}"', f'"x": "{"s" * (4096 + n)}"'),
    }[kind]
    if kind == "dotted keys" and suffix == ".json":
        return  # a TOML-only shape
    text = (
        "schema_version = 1\n" + body[0] + "\n"
        if suffix == ".toml"
        else '{"schema_version": 1, ' + body[1] + "}"
    )
    file = tmp_path_factory.mktemp("random") / f"plan{suffix}"
    file.write_text(text, encoding="utf-8")
    with bounded(f"{kind} {n} {suffix}"), pytest.raises(PlanError) as err:
        LoaderPlan.load(file, require_bindings=False, max_file_bytes=64 * 2**20)
    assert_inert(str(err.value))
    assert len(str(err.value)) < 20_000


# -- the scenarios: states ----------------------------------------------------------------


@pytest.fixture(scope="module")
def loaders() -> tuple[Any, Any, dict[str, Any]]:
    """A loader, a loader of another plan, and a state the first one saved mid-epoch."""
    builder = DataLoaderBuilder().with_dataset(list(range(20)), name="train").with_batch_size(4)
    first = builder.compile().build()
    iterator = iter(first)
    next(iterator)
    state = first.state_dict()
    other = builder.with_batch_size(5).compile().build()
    return first, other, state


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


STATE_CASES: dict[str, Callable[[dict[str, Any]], None]] = {
    "a plan of a million keys": lambda s: s.__setitem__("plan", {f"k{i}": i for i in range(10**6)}),
    "a 50 MB string in the plan": lambda s: s["plan"].__setitem__("x", "a" * 50_000_000),
    "a plan 200,000 levels deep": lambda s: s.__setitem__("plan", _deep(200_000)),
    "skip counts of a million keys": lambda s: s.__setitem__(
        "skips", {f"k{i}": i for i in range(10**6)}
    ),
    "a 5,000-digit hex state version": lambda s: s.__setitem__(
        "loaderkit_state", int("f" * 5000, 16)
    ),
    "a 5,000-digit hex epoch": lambda s: s.__setitem__("epoch", int("f" * 5000, 16)),
    "a 5,000-digit hex fingerprint": lambda s: s.__setitem__("fingerprint", int("f" * 5000, 16)),
    "a 50 MB fingerprint": lambda s: s.__setitem__("fingerprint", "f" * 50_000_000),
    "a 50 MB split": lambda s: s.__setitem__("split", "\x1b" * 50_000_000),
    "a key with escapes": lambda s: s["plan"].__setitem__(HOSTILE, HOSTILE),
    "a 200,000-deep extra key": lambda s: s.__setitem__("extra", _deep(200_000)),
    "a hostile pass_ended": lambda s: s.__setitem__("pass_ended", HOSTILE * 10**6),
}


HARMLESS_TO_ITS_OWN_PLAN = ("a key with escapes", "a 5,000-digit hex fingerprint")
"""States the loader that saved them may load: an extra key, and a fingerprint that is not
its own while its global fingerprint is (an elastic resume)."""


@pytest.mark.parametrize("case", sorted(STATE_CASES))
def test_a_hostile_state_is_a_short_resume_error(loaders: tuple[Any, Any, Any], case: str):
    first, other, good = loaders
    state = copy.deepcopy(good)
    STATE_CASES[case](state)
    for loader in (other,) if case in HARMLESS_TO_ITS_OWN_PLAN else (other, first):
        with bounded(case), pytest.raises(ResumeError) as err:
            loader.load_state_dict(state)
        message = str(err.value)
        assert_inert(message, case)
        assert len(message) < 10_000, f"{case}: {len(message):,} characters"


def test_a_resume_error_escapes_the_state_plans_keys(loaders: tuple[Any, Any, Any]):
    _, other, good = loaders
    state = copy.deepcopy(good)
    state["plan"]["batch"][HOSTILE] = HOSTILE
    with pytest.raises(ResumeError) as err:
        other.load_state_dict(state)
    assert f"batch.{inert(HOSTILE)}: {shown(HOSTILE)} -> <unset>" in str(err.value)
    assert "batch.batch_size: 4 -> 5" in str(err.value)


def test_a_resume_error_shows_50_differences_and_a_count(loaders: tuple[Any, Any, Any]):
    _, other, good = loaders
    state = copy.deepcopy(good)
    state["plan"]["checks"] = {f"k{i}": i for i in range(1000)}
    with pytest.raises(ResumeError) as err:
        other.load_state_dict(state)
    assert str(err.value).endswith("  ... and 951 more differences")  # 1,001 in all
    assert len(err.value.diff) == 1001


def test_a_data_module_state_of_a_huge_version_is_a_resume_error():
    from loaderkit import DataModule

    train = DataLoaderBuilder().with_dataset(list(range(8))).with_batch_size(4).compile()
    module = DataModule(train)
    for version in (int("f" * 5000, 16), HOSTILE * 10**5):
        with bounded("datamodule"), pytest.raises(ResumeError) as err:
            module.load_state_dict({"loaderkit_datamodule": version, "train": {}})
        assert_inert(str(err.value))
        assert len(str(err.value)) < 1000


def test_a_deep_stream_state_is_a_resume_error_not_a_recursion_error():
    import torch.utils.data

    class Iterable(torch.utils.data.IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(12))

    loader = DataLoaderBuilder().with_dataset(Iterable()).with_batch_size(4).compile().build()
    state = loader.state_dict()
    for key, value in (("plan", _deep(200_000)), ("worker_states", [_deep(200_000)])):
        hostile = {**state, key: value}
        with bounded(key), pytest.raises(ResumeError) as err:
            loader.load_state_dict(hostile)
        assert "deep" in str(err.value)


@settings(max_examples=20, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(["plan", "fingerprint", "split", "epoch", "loaderkit_state", "extra"]),
    kind=st.sampled_from(["deep", "wide", "integer", "string", "text"]),
    size=st.integers(0, 2),
)
def test_random_deep_or_huge_values_in_states_are_refused_within_bounds(
    loaders: tuple[Any, Any, Any], key: str, kind: str, size: int
):
    _, other, good = loaders
    n = [50, 20_000, 300_000][size]
    value: object = {
        "deep": _deep(n),
        "wide": {f"k{i}": i for i in range(n * 4)},
        "integer": 1 << (n * 3),
        "string": "s" * (n * 100),
        "text": HOSTILE * n,
    }[kind]
    state = copy.deepcopy(good)
    if key == "plan" and kind not in ("deep", "wide"):
        state["plan"]["batch"]["extra"] = value
    else:
        state[key] = value
    try:
        with bounded(f"{key} {kind} {n}"):
            other.load_state_dict(state)
    except ResumeError as err:
        assert_inert(str(err))
        assert len(str(err)) < 10_000
    else:
        pytest.fail(f"{key} {kind} {n}: loaded")


# -- datasets -------------------------------------------------------------------------------------


def test_a_dataset_error_message_reaches_the_terminal_escaped_and_bounded():
    class Hostile:
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> int:
            raise ValueError(HOSTILE * 200_000)

    loader = DataLoaderBuilder().with_dataset(Hostile()).with_batch_size(4).compile().build()
    with pytest.raises(DataError) as err:
        next(iter(loader))
    message = str(err.value)
    assert_inert(message)
    assert isinstance(err.value, ValueError)  # still the data's own type
    assert len(message) <= MESSAGE_CHARS + LINE_CHARS
    assert "\\x1b]0;pwned\\x07" in message


class _Mapped:
    def __getitem__(self, index: int) -> int:
        return index

    def __len__(self) -> int:
        return 8


def test_a_dataset_class_named_with_control_characters_explains_escaped():
    import torch.utils.data

    class Streamed(torch.utils.data.IterableDataset[int]):
        def __iter__(self) -> Iterator[int]:
            return iter(range(8))

    name = HOSTILE.replace("\x00", "")  # a class name holds no NUL
    mapped = type(name, (_Mapped,), {})()
    streamed = type(name, (Streamed,), {})()
    for dataset in (mapped, streamed):
        plan = DataLoaderBuilder().with_dataset(dataset).with_batch_size(4).compile()
        with plan.build() as loader:
            for text in (plan.explain(), loader.explain(), repr(loader), loader._repr_html_()):
                assert_inert(text)
            assert "\\x1b]0;pwned\\x07" in loader.explain()
