"""Field checks shared by several plan sections' constructors.

Each section's constructor (shared by the builder's ``with_*`` method and plan loading) lives
in its module of :mod:`loaderkit.plan.sections`; here are the pieces several of them use:
binding names, batch sizes, functions given as callables or ``module:qualname`` references,
``(until, value)`` schedules and the seed bound. Each raises a
:class:`~loaderkit.errors.PlanError` whose problem path names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from loaderkit._limits import LIMITS
from loaderkit._validate import check_int, check_number, check_str
from loaderkit.errors import PlanError, PlanTypeError
from loaderkit.plan.specs import (
    CallableSpec,
)
from loaderkit.registry import callable_ref, resolve_ref

__all__ = [
    "RESERVED_BINDINGS",
    "batch_size_value",
    "binding_name",
    "callable_label",
    "int_schedule",
    "resolve_function",
]

RESERVED_BINDINGS = (
    "collator",
    "transform",
    "length",
    "lengths",
    "weight",
    "weights",
    "difficulty",
    "difficulty_fn",
    "schedule",
    "mixture",
    "mixture_weights",
    "batch_size_fn",
    "max_length_fn",
)
"""Binding names of callables given without an importable path; datasets cannot take them."""

_BINDING = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def binding_name(path: str, name: object) -> str:
    """Accept a binding name: letters, digits, ``_ . -``, not starting with a digit."""
    text = check_str(path, name)
    if not _BINDING.match(text):
        raise PlanError.single(
            path,
            f"must start with a letter or '_' and use only letters, digits, '_', '.', '-' "
            f"(got {text!r})",
        )
    return text


def batch_size_value(value: object, path: str = "batch.batch_size") -> int:
    """One batch size: an int >= 1."""
    return check_int(
        path,
        value,
        minimum=1,
        maximum=LIMITS.batch_size,
        fix="pass a positive number of samples",
    )


def is_function(value: object) -> bool:
    """Whether ``value`` names a function: a callable or a ``"module:qualname"`` string."""
    return callable(value) or (isinstance(value, str) and ":" in value)


def function_spec(path: str, value: object, binding: str) -> tuple[CallableSpec, object]:
    """A function given to the builder as a spec and the object to bind.

    An importable function or a ``"module:qualname"`` string becomes a ``ref``; anything else
    (a lambda, a local function) is bound under ``binding``, labelled by its qualified name.
    """
    if isinstance(value, str):
        target = resolve_function(path, value)
        return CallableSpec("ref", callable_ref(target) or value), target
    ref = callable_ref(value)
    if ref is not None:
        return CallableSpec("ref", ref), value
    return CallableSpec("binding", binding, label=callable_label(value)), value


V = TypeVar("V")


def until_table(
    path: str, value: list[Any] | tuple[Any, ...], what: str, read: Callable[[str, object], V]
) -> tuple[tuple[float, V], ...]:
    """A schedule table ``[(until, value), ...]`` with increasing ``until``.

    Each value is read and checked by ``read(path_of_the_entry, value)``.
    """
    table: list[tuple[float, V]] = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise PlanTypeError.single(
                f"{path}[{i}]", f"must be an (until, {what}) pair (got {pair!r})"
            )
        until = check_number(f"{path}[{i}]", pair[0], minimum=0.0)
        if table and until <= table[-1][0]:
            raise PlanError.single(f"{path}[{i}]", "the 'until' values must increase")
        table.append((until, read(f"{path}[{i}]", pair[1])))
    return tuple(table)


def int_schedule(
    path: str,
    value: object,
    fn_binding: str,
    check: Callable[[object, str], int],
) -> tuple[int | None, tuple[tuple[float, int], ...], CallableSpec | None, object | None]:
    """An int that may follow a schedule: ``(fixed, table, fn, live function)``.

    ``value`` is an int, a list of ``(until, value)`` pairs with increasing ``until``, or a
    function of the epoch or step (a callable or a ``"module:qualname"`` string).
    """
    if is_function(value):
        spec, target = function_spec(path, value, fn_binding)
        return None, (), spec, target
    if isinstance(value, list | tuple):
        if not value:
            raise PlanError.single(path, "an empty schedule; give (until, value) pairs")
        table = until_table(path, value, "value", lambda where, v: check(v, where))
        return None, table, None, None
    return check(value, path), (), None, None


MAX_SEED = 2**63 - 1
"""The largest seed: seeds are ints in [0, 2**63) so that every plan file is valid TOML."""


def resolve_function(path: str, ref: str) -> Callable[..., Any]:
    """Resolve a ``module:qualname`` string the caller wrote in code (imports allowed)."""
    try:
        target = resolve_ref(ref, allow_imports=True)
    except LookupError as exc:
        raise PlanError.single(path, str(exc)) from None
    if not callable(target):
        raise PlanTypeError.single(path, f"{ref!r} is not callable (got {type(target).__name__})")
    return target


def callable_label(fn: object) -> str:
    """How a callable without an importable path is told apart: ``module.qualname``."""
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"
