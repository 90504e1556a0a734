"""Large Python containers held by a dataset object, which workers copy as they read them.

A forked worker that reads a Python object writes its reference count, so the page holding
the object is copied into that worker (torch's copy-on-read growth). loaderkit stores a list
given to ``with_dataset`` flat by itself (:mod:`loaderkit.runtime.workers.storage`); a ``Dataset``
of the user's own class is a black box whose ``__getitem__`` reads what it holds. This module
looks at what such an object holds, without running any of its code, and reports each large
Python container a worker would copy: where it is, its length, an estimate of the memory each
worker copies, and the one-line fix.

What is looked at (bounded, whatever the object): the instance's ``__dict__`` and ``__slots__``
values (read through the descriptors of the type, so no property, ``__getattr__`` or
``__getattribute__`` of the user's runs), at most :data:`ATTRIBUTES` of them per object; one
level into a small plain container an attribute holds (a dict of columns, a list of lists:
at most :data:`SMALL` entries); and the datasets an attribute holds (``Subset.dataset``,
``ConcatDataset.datasets``), down to :data:`DEPTH` objects deep, :data:`OBJECTS` objects in
all. A container is found by its length alone (the length of the list, tuple or dict itself,
not a ``__len__`` of a subclass); none is iterated to find it.

Reported: a list, tuple or dict (subclasses too) or a numpy array of Python objects of at
least :data:`~loaderkit.plan.specs.AUTO_FLAT_MIN_SAMPLES` items whose estimated copy is at
least :data:`MIN_BYTES`. Not reported, since a worker copies none of it: numpy arrays of
numbers, tensors, Arrow tables, ``FlatSamples``, strings and bytes (one object each), and a
list of small ints (shared objects). Classes defined in loaderkit are not reported (a fix of
theirs is loaderkit's, not the user's).

The estimate: the mean size of up to :data:`SAMPLED` items (evenly spaced; a dict's first and
last entries), each the bytes of the objects it is made of that a read writes the pages of
(:func:`_size`: a string, number or tuple whole, a dict or list without its table, which
reads do not write; a few levels deep; the string keys of a sample's dict left out as the field
names its samples share; rounded up to the allocator's 16 bytes), times the length. Not
counted: the container's own array of pointers, and the data buffers of tensors and arrays
(only their Python object is). Measured against the USS of 2 forked workers after one epoch
over 2,000,000 small dicts: 382 MB estimated, 380 MB grown (``tests/built/test_copy_on_read.py``
checks a smaller case within 1.5x). At most :data:`REPORTED` containers are reported per
dataset.

loaderkit does not store these containers flat by itself: the user's ``__getitem__`` may
change them or use them as lists (``append``, slices, ``sort``, identity), which a flat copy
(read-only, each read a new object) would break without a word. The report says the fix.
"""

from __future__ import annotations

import itertools
import sys
import types
from collections.abc import Iterator
from typing import Any, Final, Literal

import attrs
import numpy as np

from loaderkit._text import inert, shown
from loaderkit.datasets.serialized import FlatSamples
from loaderkit.plan.specs import AUTO_FLAT_MIN_SAMPLES

__all__ = [
    "ATTRIBUTES",
    "DEPTH",
    "MIN_BYTES",
    "OBJECTS",
    "REPORTED",
    "SAMPLED",
    "SMALL",
    "Held",
    "held_containers",
]

ATTRIBUTES: Final = 256
"""Attributes looked at per object (an object with more: the first ones, in order)."""

SMALL: Final = 64
"""Entries of a small plain container looked into (a dict of columns, a list of datasets)."""

DEPTH: Final = 3
"""How deep datasets held by datasets are looked into (the bound dataset is depth 0)."""

OBJECTS: Final = 32
"""Objects (the dataset and the datasets it holds) looked into in all."""

SAMPLED: Final = 32
"""Items of a large container measured for the estimate."""

REPORTED: Final = 8
"""Containers reported per dataset at most (the first found)."""

MIN_BYTES: Final = 1_000_000
"""The estimated copy per worker from which a container is reported."""

_LEVELS = 3
"""Levels of an item measured (a dict of tuples of strings: all three)."""

_PER_LEVEL = 8
"""Entries of a container inside an item measured (the rest estimated from them)."""

_GC_HEAD = sys.getsizeof([]) - [].__sizeof__()
"""Bytes of the header the cyclic GC adds before each object it tracks."""

_INLINE: tuple[type, ...] = (int, float, complex, str, bytes, tuple)
"""Types whose instance is one allocation: its whole size is written where it lies."""

_HEADER_ONLY: tuple[type, ...] = (dict, list, set, frozenset, bytearray)
"""Types whose contents lie in a second allocation that reads do not write (a dict's table,
a list's array of pointers): only the object itself is counted."""

_HAVE_GC = 1 << 14
"""``Py_TPFLAGS_HAVE_GC``: the type's objects carry the cyclic GC's header."""

Kind = Literal["list", "tuple", "dict", "object array"]


@attrs.frozen
class Held:
    """One large container a dataset object holds: where, what, and what a worker copies."""

    owner: str
    """The class holding it (``"Annotations"``), made inert."""
    attribute: str
    """How it is reached from the owner: ``".items"``, ``".data['images']"``, made inert."""
    via: str
    """The chain from the bound dataset to the owner (``"Subset.dataset"``), ``""`` at the top."""
    kind: Kind
    length: int
    item_bytes: int
    """Estimated bytes of the Python objects its items are made of (the copy per worker)."""
    numbers: bool
    """Whether its items are Python ints and floats (a numpy array holds them better)."""

    @property
    def where(self) -> str:
        """``"Annotations.items"`` (``"Annotations.items (in Subset.dataset)"`` when nested)."""
        return f"{self.owner}{self.attribute}" + (f" (in {self.via})" if self.via else "")

    def fix(self) -> str:
        """The one line that stops the copy, and where it goes."""
        target = f"self{self.attribute}"
        if self.numbers:
            line = f"{target} = numpy.asarray({target})"
            note = (
                f"; reads then give numpy scalars (loaderkit.datasets.flat({target}) keeps "
                f"Python numbers)"
            )
        elif self.kind == "dict":
            line = f"{target} = loaderkit.datasets.flat(list({target}.values()))"
            note = "; then read it by position (flat() takes a sequence: a dict read by key copies)"
        else:
            values = f"list({target})" if self.kind == "object array" else target
            line = f"{target} = loaderkit.datasets.flat({values})"
            note = ""
        return f"{line} in {self.owner}.__init__ (or on the object before with_dataset){note}"

    def describe(self, num_workers: int) -> str:
        """The explain line's text (after the binding)."""
        mb = self.item_bytes / 1e6
        workers = (
            f", {mb * num_workers:,.1f} MB for {num_workers} workers" if num_workers > 1 else ""
        )
        return (
            f"Python objects in {self.where} ({self.kind} of {self.length:,} items): each "
            f"worker that reads them copies about {mb:,.1f} MB (copy-on-read, "
            f"estimated from {min(self.length, SAMPLED)} items{workers}); fix: {self.fix()}"
        )


def held_containers(dataset: object) -> tuple[Held, ...]:
    """The large Python containers ``dataset`` holds (see the module docstring), in order."""
    found: list[Held] = []
    seen: set[int] = set()
    queue: list[tuple[object, str, int]] = [(dataset, "", 0)]
    while queue and len(seen) < OBJECTS:
        obj, via, depth = queue.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        owner = inert(type(obj).__qualname__)
        module = vars(type(obj)).get("__module__")
        own = not (isinstance(module, str) and module.split(".")[0] == "loaderkit")
        for name, value in _attributes(obj):
            step = _attribute_step(name)
            inner = ((f"{step}[{_key(k)}]", v) for k, v in _small_entries(value))
            entries = [(step, value), *inner]
            for where, held_value in entries:
                if _is_dataset(held_value):
                    if depth < DEPTH:
                        queue.append((held_value, f"{via or owner}{where}", depth + 1))
                    continue
                held = _held(held_value, owner, where, via) if own else None
                if held is not None:
                    found.append(held)
                    if len(found) == REPORTED:
                        return tuple(found)
    return tuple(found)


# -- what an object holds, read without its code --------------------------------------------


def _attributes(obj: object) -> Iterator[tuple[object, object]]:
    """Up to :data:`ATTRIBUTES` ``(name, value)`` of ``obj``'s ``__dict__`` and slots.

    Read through the type's own descriptors: a ``__dict__`` or slot shadowed by a property
    (or any descriptor of the user's) is not read.
    """
    count = 0
    instance_dict = _instance_dict(obj)
    if instance_dict is not None:
        for name, value in itertools.islice(dict.items(instance_dict), ATTRIBUTES):
            count += 1
            yield name, value
    for cls in type(obj).__mro__:
        slots = vars(cls).get("__slots__", ())
        if type(slots) not in (str, tuple, list):
            continue  # an iterable of the user's: iterating it would run its code
        for name in (slots,) if type(slots) is str else slots:
            if count >= ATTRIBUTES:
                return
            if not isinstance(name, str) or name in ("__dict__", "__weakref__"):
                continue
            descriptor = vars(cls).get(name)
            if not isinstance(descriptor, types.MemberDescriptorType):
                continue
            try:
                value = descriptor.__get__(obj, type(obj))
            except AttributeError:  # an empty slot
                continue
            count += 1
            yield name, value


def _instance_dict(obj: object) -> dict[Any, Any] | None:
    """``obj``'s ``__dict__`` through the getset descriptor of the type that gives it one."""
    for cls in type(obj).__mro__:
        descriptor = vars(cls).get("__dict__")
        if descriptor is None:
            continue
        if not isinstance(descriptor, types.GetSetDescriptorType):
            return None  # shadowed (a property of the user's, a class attribute): not read
        try:
            value = descriptor.__get__(obj, type(obj))
        except Exception:  # noqa: BLE001 - an odd C type: nothing to look at
            return None
        return value if _is(value, dict) else None
    return None


def _is(value: object, kinds: type | tuple[type, ...]) -> bool:
    """``isinstance`` by the type alone: a ``__class__`` of the user's is not consulted."""
    return issubclass(type(value), kinds)


def _is_dataset(value: object) -> bool:
    """Whether ``value`` is a torch dataset (one more object to look into)."""
    torch = sys.modules.get("torch")
    return torch is not None and _is(value, torch.utils.data.Dataset)


def _attribute_step(name: object) -> str:
    if isinstance(name, str) and type(name) is str and name.isidentifier():
        return f".{inert(name)}"
    return f".__dict__[{_key(name)}]"


def _key(key: object) -> str:
    """A key as the message shows it: the ``repr`` of a plain str or int, else its type."""
    if type(key) in (str, int):
        return shown(key, 60)
    return f"<{inert(type(key).__name__, 60)}>"


def _length(value: Any) -> tuple[Kind, int] | None:
    """The kind and length of a container a worker copies, by the base type's own length."""
    if _is(value, FlatSamples):
        return None
    if _is(value, list):
        return "list", list.__len__(value)
    if _is(value, tuple):
        return "tuple", tuple.__len__(value)
    if _is(value, dict):
        return "dict", dict.__len__(value)
    if type(value) is np.ndarray and value.dtype.kind == "O":  # a subclass: not looked into
        return "object array", int(value.size)
    return None


def _small_entries(value: Any) -> Iterator[tuple[object, object]]:
    """The entries of a small plain container (at most :data:`SMALL`), else none."""
    found = _length(value)
    if found is None or found[1] > SMALL or found[0] == "object array":
        return
    if _is(value, dict):
        yield from dict.items(value)
    else:
        assert _is(value, (list, tuple))
        for index in range(found[1]):
            yield index, _item(value, index)


def _held(value: object, owner: str, step: str, via: str) -> Held | None:
    """``value`` as a reported container, or ``None`` (small, or not copied)."""
    found = _length(value)
    if found is None or found[1] < AUTO_FLAT_MIN_SAMPLES:
        return None
    kind, n = found
    items = list(_sampled(value, kind, n))
    if not items:
        return None
    per_item = sum(_bytes(item) for item in items) / len(items)
    total = int(per_item * n)
    if total < MIN_BYTES:
        return None
    numbers = kind in ("list", "tuple") and all(_number(item) for item in items)
    return Held(owner, step, via, kind, n, total, numbers)


def _sampled(value: Any, kind: Kind, n: int) -> Iterator[object]:
    """Up to :data:`SAMPLED` items, evenly spaced (a dict: its first and last entries)."""
    if kind == "dict":
        half = SAMPLED // 2
        first = list(itertools.islice(dict.items(value), half))
        last = list(itertools.islice(reversed(dict.items(value)), half)) if n > half else []
        yield from (_Entry(k, v) for k, v in first + last[: max(0, n - half)])
        return
    positions = sorted({(i * n) // SAMPLED for i in range(SAMPLED)}) if n > SAMPLED else range(n)
    if kind == "object array":
        flat = value.reshape(-1)
        for i in positions:
            yield flat[i]
        return
    for i in positions:
        yield _item(value, i)


@attrs.frozen
class _Entry:
    """One entry of a large dict: its key and its value are both copied as they are read."""

    key: object
    value: object


def _item(sequence: Any, index: int) -> object:
    """Item ``index`` of a list or tuple by the base type's own indexing (no override runs)."""
    if _is(sequence, list):
        return list.__getitem__(sequence, index)
    return tuple.__getitem__(sequence, index)


def _number(item: object) -> bool:
    if type(item) is float:
        return True
    return type(item) is int and -(2**63) <= item < 2**63


def _size(obj: Any) -> int:
    """The bytes a read of ``obj`` writes pages of, measured without running code of the user's.

    The object itself: a ``str``, ``int``, ``float`` or ``tuple`` whole, a ``dict`` or ``list``
    without its table (a second allocation reads do not write), anything else by its type's
    ``__basicsize__`` (a tensor's or an array's object, not its data), plus the GC header,
    rounded up to the 16 bytes Python's allocator gives small objects.
    """
    kind = type(obj)
    size = int(kind.__basicsize__)
    base: Any
    for base in _INLINE:
        if _is(obj, base):
            size = int(base.__sizeof__(obj))  # the base's own: an override is not run
            break
    if kind.__flags__ & _HAVE_GC:
        size += _GC_HEAD
    return size if size > 512 else -(-size // 16) * 16


def _bytes(obj: Any, level: int = 0) -> int:
    """The bytes of the objects ``obj`` is made of (an estimate: see the module docstring).

    Shared objects count nothing: ``None``, ``True``, ``False`` and the small ints; nor do the
    string keys of a dict inside an item (a sample's field names, which its samples share).
    """
    if isinstance(obj, _Entry):
        return _bytes(obj.key, level + 1) + _bytes(obj.value, level)
    if obj is None or obj is True or obj is False or obj is Ellipsis:
        return 0
    if type(obj) is int and -5 <= obj <= 256:
        return 0
    size = _size(obj)
    if level >= _LEVELS:
        return size
    parts: list[object]
    total: int
    if _is(obj, dict):
        total = dict.__len__(obj)
        entries = list(itertools.islice(dict.items(obj), _PER_LEVEL))
        parts = [v for _, v in entries]
        keys = sum(0 if type(k) is str else _bytes(k, level + 1) for k, _ in entries)
        inner = keys + sum(_bytes(v, level + 1) for v in parts)
    elif _is(obj, (list, tuple)):
        total = list.__len__(obj) if _is(obj, list) else tuple.__len__(obj)
        parts = [_item(obj, i) for i in range(min(total, _PER_LEVEL))]
        inner = sum(_bytes(v, level + 1) for v in parts)
    else:
        instance_dict = None if _is(obj, _INLINE + _HEADER_ONLY) else _instance_dict(obj)
        if instance_dict is None:
            return size
        return size + _bytes(instance_dict, level + 1) - _size(instance_dict)
    if not parts:
        return size
    return size + int(inner * total / len(parts))
