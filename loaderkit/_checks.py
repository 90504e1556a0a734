"""Argument checks shared by the builder and the plan loader.

Each check returns the value it accepted (possibly normalised) or raises a ``PlanError`` with one
problem whose path names the field. Messages say what was expected, the value received, and how
to fix it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from loaderkit.errors import PlanError, PlanTypeError, Problem

__all__ = [
    "Bindings",
    "FrozenMap",
    "check_bool",
    "check_choice",
    "check_int",
    "check_number",
    "check_optional_bool",
    "check_str",
    "did_you_mean",
    "freeze_value",
    "thaw_value",
    "unknown_keys",
]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_int(path: str, value: object, *, minimum: int | None = None, fix: str = "") -> int:
    """Accept an ``int`` (not a ``bool``) that is at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanTypeError.single(
            path, f"must be an int (got {type(value).__name__} {_show(value)}){_fix(fix)}"
        )
    if minimum is not None and value < minimum:
        raise PlanError.single(path, f"must be >= {minimum} (got {value}){_fix(fix)}")
    return int(value)


def check_number(path: str, value: object, *, minimum: float | None = None, fix: str = "") -> float:
    """Accept a finite int or float (not a bool) that is at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanTypeError.single(
            path, f"must be a number (got {type(value).__name__} {_show(value)}){_fix(fix)}"
        )
    number = float(value)
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
            path, f"must be one of {listed} (got {text!r}){did_you_mean(text, options)}"
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
            problems.append(Problem(where, f"unknown key {key!r}{hint}"))
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
                raise PlanTypeError.single(path, f"mapping keys must be strings (got {key!r})")
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
