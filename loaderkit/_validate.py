"""Argument checks shared by the builder and the plan loader.

Each check returns the value it accepted (possibly normalised) or raises a ``PlanError`` with one
problem whose path names the field. Messages say what was expected, the value received, and how
to fix it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping

from loaderkit._limits import LIMITS
from loaderkit._text import shown
from loaderkit.errors import PlanError, PlanTypeError, Problem

__all__ = [
    "check_bool",
    "check_choice",
    "check_int",
    "check_number",
    "check_optional_bool",
    "check_plain_tree",
    "check_str",
    "did_you_mean",
    "unknown_keys",
]


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


def _scalar_problem(at: str, value: int | float | str) -> Problem | None:
    """The problem of one plain value against :data:`LIMITS`, or ``None``.

    An int too large, a float not finite, a string too long.
    """
    limits = LIMITS
    if isinstance(value, int):
        if abs(value) > limits.integer:
            return Problem(at, f"must be <= {limits.integer:,} (got {_show_int(value)})")
    elif isinstance(value, float):
        if not math.isfinite(value):
            return Problem(at, f"must be a finite number (got {value})")
    elif len(value) > limits.string_chars:
        return Problem(
            at,
            f"is a string of {len(value):,} characters; at most "
            f"{limits.string_chars:,} are allowed",
        )
    return None


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
        if isinstance(value, int | float | str):
            problem = _scalar_problem(at, value)
            if problem is not None:
                problems.append(problem)
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
