"""The immutable records plans hold.

:class:`FrozenMap` (plain options, hashable), :class:`Bindings` (live objects by name), and
:func:`freeze_value` / :func:`thaw_value` between plain data and its frozen form.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from loaderkit._text import shown
from loaderkit.errors import PlanError, PlanTypeError

__all__ = ["Bindings", "FrozenMap", "freeze_value", "thaw_value"]


def _show(value: object) -> str:
    return shown(value, 60)


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
