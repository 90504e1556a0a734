"""Plans as flattened paths, and the ``path: old -> new`` lines of two plans that differ.

Torch-free and small: ``plan.diff()`` and a refused resume state's message both use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loaderkit._text import LINE_CHARS, inert, shown

__all__ = ["diff_dicts", "flatten"]


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; lists stay values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path))
        else:
            out[path] = value
    return out


def diff_dicts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``path: old -> new`` for each flattened path that differs (``<unset>`` when absent).

    Paths and values are shown escaped and bounded (``loaderkit._text``): a plan's keys and
    strings are untrusted text.
    """
    a, b = flatten(old), flatten(new)
    lines = []
    for path in sorted(set(a) | set(b)):
        left, right = a.get(path, _UNSET), b.get(path, _UNSET)
        if left != right or type(left) is not type(right):
            lines.append(f"{inert(path)}: {_value(left)} -> {_value(right)}")
    return lines


def _value(value: object) -> str:
    return "<unset>" if value is _UNSET else shown(value, LINE_CHARS // 2)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()
