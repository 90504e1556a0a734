"""Plans as data: ``to_dict`` / ``from_dict`` and ``.json`` / ``.toml`` files.

The format is documented in ``docs/plan-format.md``. Reading re-runs every check the builder
runs, refuses unknown keys with a "did you mean", and reports all problems at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from loaderkit._limits import LIMITS
from loaderkit._text import shown
from loaderkit._validate import check_int, check_plain_tree, did_you_mean, unknown_keys
from loaderkit.datasets.paths import absolute_path, relative_path
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.plan import SCHEMA_VERSION, LoaderPlan
from loaderkit.plan.reader import Reader
from loaderkit.plan.sections import FILE_KEYS, SECTIONS
from loaderkit.plan.sections.dataset import source_table
from loaderkit.registry import (
    no_plugin_imports,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "PLAN_BYTES_VARIABLE",
    "ReadOptions",
    "load_plan",
    "plan_file_limit",
    "plan_from_dict",
    "plan_to_dict",
    "read_plan_file",
    "save_plan",
]


def plan_to_dict(plan: LoaderPlan) -> dict[str, Any]:
    """Plain data for ``plan``: each section's table when written (see ``plan.sections``)."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for section in SECTIONS:
        value = getattr(plan, section.name)
        if section.written(value):
            out[section.key] = section.to_dict(value)
    return out


@attrs.frozen
class ReadOptions:
    """How plan data is read: the options of ``LoaderPlan.from_dict`` and ``LoaderPlan.load``.

    See :meth:`LoaderPlan.from_dict <loaderkit.LoaderPlan.from_dict>` and ``docs/security.md``.
    """

    bindings: Mapping[str, object] | None = None
    allow_imports: bool = False
    require_bindings: bool = True
    base_dir: str | os.PathLike[str] | None = None
    allow_external_paths: bool = False


def plan_from_dict(data: Mapping[str, Any], options: ReadOptions = ReadOptions()) -> LoaderPlan:
    """Read plan data written by :func:`plan_to_dict` (or by hand); see ``LoaderPlan.from_dict``.

    Relative paths (dataset source files, the disk cache's folder) resolve against
    ``options.base_dir`` (default: the working directory; :func:`load_plan` passes the file's
    folder). With ``base_dir`` given, a path that leaves it is refused unless
    ``allow_external_paths``. The data is first checked against
    :data:`~loaderkit._limits.LIMITS` as a whole (depth, size, integers, strings), so nothing
    below reads a value it cannot handle. Inspecting (``require_bindings=False``) imports no
    entry-point plugin: a plugin's collator or transform name is checked when the plan is
    loaded to build.
    """
    with contextlib.nullcontext() if options.require_bindings else no_plugin_imports():
        return _plan_from_dict(data, options)


def _plan_from_dict(data: Mapping[str, Any], options: ReadOptions) -> LoaderPlan:
    if not isinstance(data, Mapping):
        raise PlanTypeError.single(
            "plan",
            f"must be a mapping of sections (got {type(data).__name__}); pass what "
            f"LoaderPlan.to_dict() returns",
        )
    value_problems = check_plain_tree(data)  # shape problems raise here, value ones wait
    base_dir = options.base_dir
    folder = None if base_dir is None else Path(os.path.abspath(base_dir))
    confine = None if options.allow_external_paths else folder
    reader = Reader(
        options.bindings, options.allow_imports, options.require_bindings, folder, confine
    )
    reader.call_factories = not value_problems  # a factory never sees an out-of-bound value
    reader.problems.extend(unknown_keys("", data, FILE_KEYS))
    version = data.get("schema_version")
    if version is None:
        reader.problems.append(
            Problem("schema_version", f"missing; add schema_version = {SCHEMA_VERSION}")
        )
    elif isinstance(version, bool) or not isinstance(version, int) or version < 1:
        reader.problems.append(
            Problem("schema_version", f"must be a positive int (got {shown(version)})")
        )
    elif version > SCHEMA_VERSION:
        reader.problems.append(
            Problem(
                "schema_version",
                f"the plan was written by a newer loaderkit (schema {shown(version)}; this one "
                f"reads up to {SCHEMA_VERSION}); upgrade loaderkit",
            )
        )

    for section in SECTIONS:
        reader.values[section.name] = section.read(reader, data)

    for name in reader.given:
        if name not in reader.used:
            known = sorted(set(reader.wanted))
            reader.problems.append(
                Problem(
                    "bindings",
                    f"{name!r} is not used by this plan{did_you_mean(name, known)}; the plan "
                    f"binds: {', '.join(repr(k) for k in known) or 'nothing'}",
                )
            )

    reported = {p.path for p in reader.problems}
    reader.problems.extend(p for p in value_problems if p.path not in reported)
    values = reader.values
    if reader.problems or values["dataset"] is None or values["collator"] is None:
        raise PlanError(reader.problems or [Problem("plan", "the plan could not be read")])
    defaults = attrs.fields_dict(LoaderPlan)
    sections: dict[str, Any] = {  # an absent (or unset) section takes the plan's default
        name: defaults[name].default if value is None else value for name, value in values.items()
    }
    try:
        return LoaderPlan(**sections, bindings=None if reader.unbound else reader.used)
    except PlanError as exc:
        raise PlanError(exc.problems) from None


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise PlanError(
            Problem("file", f"plan files end in .json or .toml (got {suffix or 'none'!r})"),
            file=str(path),
        )
    return suffix


def save_plan(plan: LoaderPlan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as JSON or TOML, chosen by the file's suffix.

    Paths in dataset sources that lie inside the file's folder are written relative to it.
    A :class:`PlanError` (a bad suffix, a table TOML cannot hold) names the file.
    """
    try:
        _save(plan, Path(path))
    except PlanError as exc:
        raise exc.in_file(str(path)) from None


def _save(plan: LoaderPlan, target: Path) -> None:
    """:func:`save_plan`'s work; its errors do not name the file yet."""
    data = plan.to_dict()
    folder = target.parent.resolve()
    if plan.dataset.source is not None:
        data["dataset"]["source"] = source_table(plan.dataset.source, folder)
    if plan.mixture is not None:
        for table, spec in zip(data["mixture"]["sources"], plan.mixture.sources, strict=True):
            if spec.source is not None:
                table["source"] = source_table(spec.source, folder)
    if plan.cache is not None and plan.cache.path is not None:  # relative to the file
        data["cache"]["path"] = relative_path(absolute_path(plan.cache.path, None), folder)
    if _suffix(target) == ".json":
        target.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    else:
        import tomli_w

        target.write_text(tomli_w.dumps(_toml_nones(data, "")), encoding="utf-8")


_TOML_NONE: dict[str, Any] = {"none": True}
"""How a TOML plan file writes ``None`` (JSON's ``null``): TOML has no null value.

``save()`` writes every ``None`` of the plan's data (an option such as
``with_collator("vision", normalize=None)``) as the table ``{ none = true }``, and reading a
``.toml`` file reads every such table back as ``None``. A real table of exactly that content
cannot be written to TOML (``save()`` refuses it, naming the field): JSON keeps it.
"""


def _is_toml_none(value: object) -> bool:
    return (
        isinstance(value, dict)
        and len(value) == 1
        and value.get("none", False) is True  # True itself: 1 is not the marker
    )


def _toml_nones(value: Any, path: str) -> Any:
    """``value`` with each ``None`` written as :data:`_TOML_NONE` (for ``save()`` as TOML)."""
    if value is None:
        return dict(_TOML_NONE)
    if isinstance(value, Mapping):
        if _is_toml_none(dict(value)):
            raise PlanError.single(
                path or "plan",
                "is the table {none = true}, which a .toml plan file reads as None (TOML has "
                "no null); save the plan as .json, which keeps it",
            )
        return {k: _toml_nones(v, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_toml_nones(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _toml_nones_read(data: dict[str, Any]) -> dict[str, Any]:
    """Every :data:`_TOML_NONE` table of freshly parsed TOML data replaced by ``None``, in place.

    Iterative, so that a deeply nested file cannot exhaust the stack here.
    """
    stack: list[dict[str, Any] | list[Any]] = [data]
    while stack:
        container = stack.pop()
        if isinstance(container, dict):
            items: list[tuple[Any, Any]] = list(container.items())
        else:
            items = list(enumerate(container))
        for key, child in items:
            if _is_toml_none(child):
                container[key] = None
            elif isinstance(child, dict | list):
                stack.append(child)
    return data


_TOML_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\\\n]*"|'[^'\n]*')"""
_DEEP_TOML_KEY = re.compile(
    rf"(?<![A-Za-z0-9_.\-\"'])(?:{_TOML_KEY_PART})(?:\.{_TOML_KEY_PART}){{{LIMITS.depth}}}"
)
"""A dotted key of more than ``LIMITS.depth`` parts, in TOML text without spaces and tabs.

Python's TOML reader takes time quadratic in the parts of one key (100,000 parts: minutes),
so such a key is refused before parsing. Linear: a match starts only at the first part of a
chain. A string value of that many dotted parts is refused too (no plan holds one).
"""

_RUN_CHARS = "0-9A-Za-z_\\-"
_LONG_RUN = re.compile(rf"(?<![{_RUN_CHARS}])[{_RUN_CHARS}]{{{LIMITS.string_chars + 1}}}")
"""An unbroken run of more than ``LIMITS.string_chars`` digits, letters, ``_`` or ``-`` (what
the digits of a number, hex or not, and its exponent are made of), anywhere in the text.

Python's TOML reader converts a number of 16 million digits with 1.9 GB of memory before
anything can refuse it, and ``int()`` refuses more than 4,300 decimal digits with a raw
``ValueError``: such a run is refused before parsing. No plan holds one: its integers have at
most 19 digits and its strings and keys at most ``LIMITS.string_chars`` characters (a
comment of that long a word is refused too). Linear: a match starts only where a run does.
"""

PLAN_BYTES_VARIABLE = "LOADERKIT_MAX_PLAN_BYTES"
"""The environment variable that raises (or lowers) the bound on a plan file's size."""


def plan_file_limit(given: int | None = None) -> int:
    """The bound on a plan file's size, in bytes: ``given``, else the environment's, else 1 MiB.

    ``given`` is ``LoaderPlan.load(max_file_bytes=...)``; the environment variable
    :data:`PLAN_BYTES_VARIABLE` (``LOADERKIT_MAX_PLAN_BYTES``) holds a number of bytes; the
    default is ``LIMITS.file_bytes``. A bound that is not an int >= 1 is a ``PlanError``.
    """
    if given is not None:
        return check_int("max_file_bytes", given, minimum=1)
    text = os.environ.get(PLAN_BYTES_VARIABLE)
    if text is None:
        return LIMITS.file_bytes
    value = text.strip().replace("_", "")
    if not value.isdigit() or len(value) > 18 or int(value) < 1:
        raise PlanError.single(
            PLAN_BYTES_VARIABLE,
            f"must be a number of bytes >= 1 (got {shown(text)}); set it to e.g. "
            f"{4 * LIMITS.file_bytes} or unset it for the default ({LIMITS.file_bytes:,})",
        )
    return int(value)


def read_plan_file(
    path: str | os.PathLike[str], max_file_bytes: int | None = None
) -> dict[str, Any]:
    """The data of a plan file, parsed, and nothing else: no check, no import, no write.

    Refuses (``PlanError`` at ``file``, its ``file`` the path) a file over
    :func:`plan_file_limit` bytes (read no further), one that is not UTF-8, not valid
    JSON/TOML, or nested too deeply or holding numbers too long for the parser, all before
    parsing; :func:`plan_from_dict` checks the rest.
    """
    try:
        return _parsed(Path(path), plan_file_limit(max_file_bytes))
    except PlanError as exc:
        raise exc.in_file(str(path)) from None


def _parsed(source: Path, limit: int) -> dict[str, Any]:
    """:func:`read_plan_file`'s work; its errors do not name the file yet."""
    suffix = _suffix(source)
    try:  # non-blocking: opening a FIFO must not wait for a writer
        with os.fdopen(os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PlanError.single(
                    "file",
                    "is not a regular file (a pipe, a device, a socket?); "
                    "pass the path of a .json or .toml plan file",
                )
            raw = handle.read(limit + 1)
    except PlanError:
        raise
    except OSError as exc:
        raise PlanError.single("file", f"cannot be read: {exc.strerror}") from None
    except ValueError as exc:  # a path the OS cannot take (a NUL byte)
        raise PlanError.single("file", f"cannot be read: {exc}") from None
    if len(raw) > limit:
        raise PlanError.single(
            "file",
            f"is larger than {limit:,} bytes, the bound on a plan file; a plan "
            f"holds settings, not data: pass large arrays in bindings (or raise the bound: "
            f"LoaderPlan.load(path, max_file_bytes=...) or {PLAN_BYTES_VARIABLE}=...)",
        )
    kind = suffix[1:].upper()
    try:
        text = raw.decode("utf-8")
        if text.count(",") + text.count("\n") > 4 * LIMITS.values:  # before a long parse
            raise PlanError.single(
                "file",
                f"holds more than {LIMITS.values:,} values (by its commas and "
                f"lines); a plan file is settings, not data: pass large arrays in bindings",
            )
        run = _LONG_RUN.search(text)
        if run is not None:
            line = text.count("\n", 0, run.start()) + 1
            raise PlanError.single(
                "file",
                f"line {line}: holds an unbroken run of more than {LIMITS.string_chars:,} "
                f"digits or letters (a number that long, or a longer string or key than a "
                f"plan allows); a plan's integers have at most 19 digits: shorten it",
            )
        if suffix == ".toml" and _DEEP_TOML_KEY.search(text.replace(" ", "").replace("\t", "")):
            raise PlanError.single(
                "file",
                f"holds a dotted key (or a string) of more than {LIMITS.depth} "
                f"parts; a plan nests at most {LIMITS.depth} levels (and TOML reads such keys "
                f"in quadratic time): shorten it",
            )
        data = json.loads(text) if suffix == ".json" else tomllib.loads(text)
    except PlanError:
        raise
    except UnicodeDecodeError as exc:
        raise PlanError.single("file", f"is not UTF-8 text: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError.single("file", f"is not valid {kind}: {exc}") from None
    except RecursionError:
        raise PlanError.single(
            "file",
            f"nests arrays or tables too deeply to read (a plan allows {LIMITS.depth} levels)",
        ) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise PlanError.single("file", f"holds a value this reader refuses: {exc}") from None
    if not isinstance(data, dict):
        raise PlanTypeError.single(
            "file", f"must hold a table of sections (got {type(data).__name__})"
        )
    return _toml_nones_read(data) if suffix == ".toml" else data


def load_plan(
    path: str | os.PathLike[str],
    options: ReadOptions = ReadOptions(),
    max_file_bytes: int | None = None,
) -> LoaderPlan:
    """Read a plan file (``.json`` or ``.toml``); its errors name the file (and line).

    A :class:`PlanError` has the path as given in its ``file`` and at the start of its message.
    ``max_file_bytes`` bounds the file's size (:func:`plan_file_limit`).

    Relative paths resolve against the file's folder (``options.base_dir`` is replaced by it);
    paths leaving it are refused unless ``allow_external_paths`` (``docs/security.md``).
    """
    source = Path(path)
    try:
        data = read_plan_file(source, max_file_bytes)
        return plan_from_dict(data, attrs.evolve(options, base_dir=source.parent))
    except PlanError as exc:  # every problem of a file names the file
        raise exc.in_file(str(path)) from None
