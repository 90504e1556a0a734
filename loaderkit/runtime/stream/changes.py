"""A stream that changes itself while a pass reads it: each pass reads its own copy, and says so.

torch reads an ``IterableDataset`` in the main process (``num_workers=0``: its ``__iter__``
changes the very object the program holds, and the next pass sees the change), in a worker's
copy made for each pass (non-persistent workers: the change is lost when the pass ends), or
in a worker's copy kept between passes (persistent workers: each worker's copy keeps its
changes). So a dataset whose ``__iter__`` does ``self.epoch += 1`` gives epochs 0, 1, 2 with
0 workers and with persistent workers, and 0, 0, 0 with non-persistent ones, and a resume in
a new process starts from the dataset as constructed whatever the run before it had reached.

A :class:`~loaderkit.runtime.stream.loader.StreamLoader` promises the same batches for any
``num_workers`` and an exact resume, so every pass reads the dataset as it stands in the main
process when the pass starts (after ``set_epoch(epoch)``): a copy of it in each worker, and
with ``num_workers=0`` the copy :func:`pass_copy` makes. What ``__iter__`` changes stays in
that copy, and :class:`Watch` finds it once the producer has read its stream to the end, in
the process that read it; the loader logs it once (and keeps it in
:attr:`~loaderkit.runtime.stream.loader.StreamLoader.stream_changed`), naming the attribute and the
fix (``set_epoch(epoch)``, which the loader calls before each pass, also before a resumed
one).

What is compared is a *shallow* snapshot of the dataset's attributes: an attribute added,
removed or bound to another object (``self.epoch += 1``), a list, dict, set, deque or
bytearray attribute changed in place (its items, not what they hold), or a random generator
attribute (``random.Random``, numpy's ``Generator`` / ``RandomState``, ``torch.Generator``)
that drew numbers. :func:`pass_copy` copies those containers and generators too, so their
changes stay in the pass as well; a change deeper inside an attribute is neither copied nor
seen. A source with its own ``state_dict()`` / ``load_state_dict()`` records its position in
its attributes on purpose (the loader saves and restores it), and is not watched.
"""

from __future__ import annotations

import collections
import copy
import pickle
import random
import reprlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["Watch", "pass_copy"]

_CONTAINERS = (list, dict, set, bytearray, collections.deque)
"""Attribute values copied (one level) for a pass, and compared item by item after it."""

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 40
_SHOWN.maxlevel = 2

_CHANGES_SHOWN = 5
"""At most this many changed attributes are described; the rest are counted."""


def _rng_state(value: object) -> Callable[[], object] | None:
    """How to read the state of a random generator ``value`` (``None``: not one)."""
    if isinstance(value, random.Random):
        return value.getstate
    if isinstance(value, np.random.Generator):
        return lambda: pickle.dumps(value.bit_generator.state)
    if isinstance(value, np.random.RandomState):
        return lambda: pickle.dumps(value.get_state())
    if isinstance(value, np.random.BitGenerator):
        return lambda: pickle.dumps(value.state)
    if isinstance(value, torch.Generator):
        return lambda: bytes(value.get_state().numpy())
    return None


def _copied(value: Any) -> Any:
    """``value`` for a pass of its own: a container or generator copied, anything else itself."""
    try:
        if isinstance(value, _CONTAINERS):
            return copy.copy(value)
        if isinstance(value, torch.Generator):
            clone = torch.Generator(device=value.device)
            clone.set_state(value.get_state())
            return clone
        if _rng_state(value) is not None:
            return copy.deepcopy(value)  # a generator's state: a few KB
    except Exception:  # noqa: BLE001 - not copyable: the pass shares it (and it is watched)
        return value
    return value


def pass_copy(data: Any) -> Any:
    """The copy of ``data`` one pass reads in the main process (``num_workers=0``).

    A new object of the same type with an attribute dict of its own, the containers and random
    generators among the attributes copied too (one level: see the module docstring); ``data``
    itself when it has no attribute dict (``__slots__``) or its type cannot be made so.
    """
    attributes = getattr(data, "__dict__", None)
    if not isinstance(attributes, dict):
        return data
    try:
        clone = object.__new__(type(data))
    except TypeError:
        return data
    clone.__dict__.update({name: _copied(value) for name, value in attributes.items()})
    return clone


class _Seen:
    """One attribute as a pass started: its value, and what can change in it in place."""

    __slots__ = ("content", "state", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.content: Any = None
        self.state: Callable[[], object] | None = None
        read = _rng_state(value)
        try:
            if read is not None:
                self.state, self.content = read, read()
            elif isinstance(value, dict):
                self.content = dict(value)
            elif isinstance(value, bytearray):
                self.content = bytes(value)
            elif isinstance(value, _CONTAINERS):
                self.content = list(value)
        except Exception:  # noqa: BLE001 - unreadable: only rebinding is seen
            self.state, self.content = None, None

    def change(self, now: Any) -> str | None:
        """How the attribute changed since (``None``: it did not, as far as can be seen)."""
        if now is not self.value:
            try:  # rebound to an equal value (a list sorted again) is no change
                equal = type(now) is type(self.value) and bool(now == self.value)
            except Exception:  # noqa: BLE001 - not comparable (an array): a change
                equal = False
            return None if equal else f"{_SHOWN.repr(self.value)} -> {_SHOWN.repr(now)}"
        if self.content is None:
            return None
        kind = type(now).__name__
        try:
            if self.state is not None:
                same = self.state() == self.content
                return None if same else f"the {kind} drew numbers"
            if isinstance(now, dict):
                before: dict[Any, Any] = self.content
                same = before.keys() == now.keys() and all(now[k] is v for k, v in before.items())
            elif isinstance(now, bytearray):
                same = bytes(now) == self.content
            else:
                items = list(now)
                same = len(items) == len(self.content) and all(
                    a is b for a, b in zip(items, self.content, strict=True)
                )
        except Exception:  # noqa: BLE001 - unreadable now: say nothing rather than guess
            return None
        return (
            None
            if same
            else f"the {kind} changed in place ({len(self.content)} -> {len(now)} items)"
        )


class Watch:
    """A shallow snapshot of ``obj``'s attributes, compared with them later (:meth:`changes`)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        attributes = getattr(obj, "__dict__", None)
        self.seen = (
            {name: _Seen(value) for name, value in attributes.items()}
            if isinstance(attributes, dict)
            else None
        )

    def changes(self) -> tuple[str, ...]:
        """``("epoch: 0 -> 1", ...)``: the attributes that changed since the snapshot."""
        if self.seen is None:
            return ()
        now = getattr(self.obj, "__dict__", None)
        if not isinstance(now, dict):
            return ()
        found: list[str] = []
        for name, seen in self.seen.items():
            if name not in now:
                found.append(f"{name}: removed")
                continue
            change = seen.change(now[name])
            if change is not None:
                found.append(f"{name}: {change}")
        found += [
            f"{name}: added ({_SHOWN.repr(now[name])})" for name in now if name not in self.seen
        ]
        if len(found) > _CHANGES_SHOWN:
            found[_CHANGES_SHOWN:] = [f"and {len(found) - _CHANGES_SHOWN} more attributes"]
        return tuple(found)
