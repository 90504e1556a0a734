"""Argument checks shared by the builder and the plan loader.

Each check returns the value it accepted (possibly normalised) or raises a ``PlanError`` with one
problem whose path names the field. Messages say what was expected, the value received, and how
to fix it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from loaderkit._text import shown
from loaderkit.errors import PlanError, PlanTypeError, Problem

__all__ = [
    "LIMITS",
    "Bindings",
    "FrozenMap",
    "Limits",
    "check_bool",
    "check_choice",
    "check_int",
    "check_number",
    "check_optional_bool",
    "check_plain_tree",
    "check_str",
    "did_you_mean",
    "freeze_value",
    "thaw_value",
    "unknown_keys",
]


def _limit(doc: str, default: int) -> Any:
    return attrs.field(default=default, metadata={"doc": doc})


@attrs.frozen
class Limits:
    """The bounds on what a plan (a file, a dict, or builder arguments) may set.

    One declaration: the checks read these numbers, ``docs/security.md`` lists them (a test
    keeps the two equal), and a value over a bound is a ``PlanError`` naming its path and the
    bound. They keep a hostile or mistaken plan from hanging, exhausting memory or crashing a
    reader; none of them is near what a real plan needs.
    """

    file_bytes: int = _limit("size of a plan file, in bytes (the default: see below)", 2**20)
    depth: int = _limit("nesting of tables and arrays in a plan", 32)
    values: int = _limit("values (numbers, strings, tables, array items) in a plan", 100_000)
    string_chars: int = _limit("characters of one string or key", 4096)
    integer: int = _limit("magnitude of any integer", 2**63 - 1)
    dataset_length: int = _limit("samples in a dataset (`dataset.length`)", 2**48)
    batch_size: int = _limit(
        "samples in a batch, tokens in a budget or a sequence, buckets", 2**31 - 1
    )
    num_workers: int = _limit("`workers.num_workers`", 256)
    prefetch_factor: int = _limit("`workers.prefetch_factor`", 1024)
    batches_in_flight: int = _limit("`num_workers x prefetch_factor`", 16_384)
    workers_per_cpu: int = _limit(
        "worker processes per CPU of the machine that builds the loader (checked by `build()`)",
        8,
    )
    device_index: int = _limit("`N` of a `cuda:N` device", 1023)
    timeout_seconds: int = _limit("`workers.timeout`, in seconds (one week)", 7 * 24 * 3600)

    def rows(self) -> list[tuple[str, int, str]]:
        """``(name, bound, what it bounds)`` for each limit, in declaration order."""
        return [
            (field.name, getattr(self, field.name), field.metadata["doc"])
            for field in attrs.fields(type(self))
        ]


LIMITS: Final = Limits()
"""The bounds in force (see :class:`Limits`)."""


def _show(value: object) -> str:
    return shown(value, 60)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_int(
    path: str,
    value: object,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    fix: str = "",
) -> int:
    """Accept an ``int`` (not a ``bool``) in ``[minimum, maximum]``.

    ``maximum`` defaults to ``LIMITS.integer``: no int a plan holds is larger.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanTypeError.single(
            path, f"must be an int (got {type(value).__name__} {_show(value)}){_fix(fix)}"
        )
    if minimum is not None and value < minimum:
        raise PlanError.single(path, f"must be >= {minimum} (got {_show_int(value)}){_fix(fix)}")
    bound = LIMITS.integer if maximum is None else maximum
    if value > bound or value < -LIMITS.integer:
        raise PlanError.single(path, f"must be <= {bound:,} (got {_show_int(value)}){_fix(fix)}")
    return int(value)


def _show_int(value: int) -> str:
    """An int for a message: huge ones by their size (str() of 5,000 digits is refused)."""
    return shown(value)


def check_number(
    path: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    fix: str = "",
) -> float:
    """Accept a finite int or float (not a bool) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanTypeError.single(
            path, f"must be a number (got {type(value).__name__} {_show(value)}){_fix(fix)}"
        )
    if isinstance(value, int) and abs(value) > LIMITS.integer:
        raise PlanError.single(
            path, f"must be <= {LIMITS.integer:,} (got {_show_int(value)}){_fix(fix)}"
        )
    number = float(value)
    if maximum is not None and number > maximum:
        raise PlanError.single(path, f"must be <= {maximum:g} (got {value}){_fix(fix)}")
    if not math.isfinite(number):
        raise PlanError.single(path, f"must be finite (got {value}){_fix(fix)}")
    if minimum is not None and number < minimum:
        raise PlanError.single(path, f"must be >= {minimum:g} (got {value}){_fix(fix)}")
    return number


def check_bool(path: str, value: object) -> bool:
    """Accept exactly ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise PlanTypeError.single(
            path, f"must be True or False (got {type(value).__name__} {_show(value)})"
        )
    return value


def check_optional_bool(path: str, value: object) -> bool | None:
    """Accept ``True``, ``False`` or ``None`` (automatic)."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise PlanTypeError.single(
            path,
            f"must be True, False or None for automatic (got {type(value).__name__} "
            f"{_show(value)})",
        )
    return value


def check_str(path: str, value: object, *, nonempty: bool = True) -> str:
    """Accept a string (non-empty unless told otherwise)."""
    if not isinstance(value, str):
        raise PlanTypeError.single(
            path, f"must be a string (got {type(value).__name__} {_show(value)})"
        )
    if nonempty and not value.strip():
        raise PlanError.single(path, "must be a non-empty string (got '')")
    return value


def check_choice(path: str, value: object, choices: Iterable[str]) -> str:
    """Accept one of ``choices``; otherwise name them all and suggest the closest."""
    options = tuple(choices)
    text = check_str(path, value)
    if text not in options:
        listed = ", ".join(repr(c) for c in options)
        raise PlanError.single(
            path, f"must be one of {listed} (got {shown(text)}){did_you_mean(text, options)}"
        )
    return text


def unknown_keys(path: str, given: Iterable[str], known: Iterable[str]) -> list[Problem]:
    """One problem per key of ``given`` that is not in ``known``, each with a suggestion."""
    allowed = tuple(known)
    problems = []
    for key in given:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            hint = did_you_mean(key, allowed)
            if not hint:
                hint = "; known keys: " + ", ".join(sorted(allowed))
            problems.append(Problem(where, f"unknown key {shown(key)}{hint}"))
    return problems


def _fix(fix: str) -> str:
    return f"; {fix}" if fix else ""


class FrozenMap(Mapping[str, Any]):
    """An immutable, hashable mapping with string keys, kept in sorted key order."""

    __slots__ = ("_hash", "_items")

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, Any] = dict(sorted(pairs))
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"


class Bindings(Mapping[str, object]):
    """Live objects by binding name: read-only, compared by identity, picklable.

    Equality is identity of the bound objects (datasets rarely define a meaningful ``==``);
    plans and builders leave bindings out of their own equality anyway.
    """

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, object] | None = None) -> None:
        self._items: dict[str, object] = dict(items or {})

    def __getitem__(self, key: str) -> object:
        return self._items[key]

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return set(self._items) == set(other) and all(
            self._items[k] is other[k] for k in self._items
        )

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, object]:
        return self._items

    def __setstate__(self, state: dict[str, object]) -> None:
        self._items = state

    def __repr__(self) -> str:
        return f"Bindings({', '.join(sorted(self._items))})"


_PLAIN = (str, int, float, bool, type(None))


def freeze_value(path: str, value: object) -> object:
    """Turn plain data (JSON-like) into a hashable form: lists become tuples, dicts FrozenMaps.

    Anything else (objects, callables, arrays) is refused: plan options must be plain data so
    that plans serialize. The fix says to register a factory that builds the object instead.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise PlanError.single(path, f"must be a finite number (got {value})")
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list | tuple):
        return tuple(freeze_value(f"{path}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PlanTypeError.single(path, f"mapping keys must be strings (got {_show(key)})")
            out[key] = freeze_value(f"{path}.{key}", item)
        return FrozenMap(out)
    raise PlanTypeError.single(
        path,
        f"must be plain data (str, int, float, bool, None, lists and dicts of them) so the "
        f"plan can be saved (got {type(value).__name__} {_show(value)}); pass a registry name "
        f"or build the object inside a registered factory",
    )


def thaw_value(value: object) -> object:
    """The inverse of :func:`freeze_value`: tuples become lists, FrozenMaps dicts."""
    if isinstance(value, tuple):
        return [thaw_value(v) for v in value]
    if isinstance(value, FrozenMap):
        return {k: thaw_value(v) for k, v in value.items()}
    return value


_PATH_CHARS = 400
"""Characters of a path :func:`check_plain_tree` keeps for a value (longer ones are cut: a
path of 32 keys of 4,096 characters, made for each of 100,000 values, would take 13 GB)."""


def _child(path: str, step: str) -> str:
    """The path of a child value: ``path`` and ``step``, cut to :data:`_PATH_CHARS`."""
    if len(path) >= _PATH_CHARS:
        return path  # cut already: its children share the string
    joined = path + step[: _PATH_CHARS + 1]
    return joined if len(joined) <= _PATH_CHARS else joined[:_PATH_CHARS] + "..."


def _too_many(values: int) -> Problem:
    return Problem(
        "plan",
        f"holds more than {values:,} values; a plan file is settings, not data: pass large "
        f"arrays in bindings",
    )


def check_plain_tree(data: object, path: str = "") -> list[Problem]:
    """Check data a plan holds against :data:`LIMITS` before anything reads it.

    Walks ``data`` without recursion (so a deeply nested value cannot crash the walk) and
    checks the bounds that hold for any plan: nesting depth, number of values, string and key
    length, integer magnitude, finite floats, string keys, and plain types only (str, int,
    float, bool, None, lists/tuples, mappings). A problem of *shape* (too deep, too many
    values, a key or value of a type no plan holds) raises one ``PlanError`` with every such
    problem at once: nothing can safely read the data. Problems of single *values* (an int
    or string too long, a NaN) are returned, for the caller to report with whatever else is
    wrong. Stops after 20 problems.
    """
    limits = LIMITS
    problems: list[Problem] = []
    fatal = False
    stack: list[tuple[str, object, int]] = [(path, data, 0)]
    count = 0
    while stack and len(problems) < 20:
        where, value, depth = stack.pop()
        at = where or "plan"
        count += 1
        if count > limits.values:
            problems.append(_too_many(limits.values))
            fatal = True
            break
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if abs(value) > limits.integer:
                problems.append(
                    Problem(at, f"must be <= {limits.integer:,} (got {_show_int(value)})")
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                problems.append(Problem(at, f"must be a finite number (got {value})"))
        elif isinstance(value, str):
            if len(value) > limits.string_chars:
                problems.append(
                    Problem(
                        at,
                        f"is a string of {len(value):,} characters; at most "
                        f"{limits.string_chars:,} are allowed",
                    )
                )
        elif isinstance(value, Mapping | list | tuple):
            if depth >= limits.depth:
                problems.append(
                    Problem(at, f"is nested more than {limits.depth} levels deep; flatten it")
                )
                fatal = True
                continue
            if count + len(stack) + len(value) > limits.values:  # refused before it is walked
                problems.append(_too_many(limits.values))
                fatal = True
                break
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):
                        problems.append(Problem(at, f"keys must be strings (got {_show(key)})"))
                        fatal = True
                        continue
                    if len(key) > limits.string_chars:
                        problems.append(
                            Problem(
                                at,
                                f"has a key of {len(key):,} characters; at most "
                                f"{limits.string_chars:,} are allowed",
                            )
                        )
                        fatal = True
                        continue
                    stack.append((_child(where, f".{key}" if where else key), item, depth + 1))
            else:
                stack.extend(
                    (_child(at, f"[{i}]"), item, depth + 1) for i, item in enumerate(value)
                )
        else:
            problems.append(
                Problem(
                    at,
                    f"must be plain data (str, int, float, bool, None, lists and tables of "
                    f"them) (got {type(value).__name__})",
                )
            )
            fatal = True
    if fatal:
        raise PlanError(problems)
    return problems
