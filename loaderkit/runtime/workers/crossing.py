"""What a worker sends to the main process: pickled in the worker, where a failure can be named.

torch's worker puts each result on a ``multiprocessing`` queue, whose feeder thread pickles it
later; a result that does not pickle (a lambda, a lock, an open file in a sample) is then only
printed to the worker's stderr and dropped, and the main process waits for it forever. So the
loaders' workers pickle each result themselves (:func:`pickled`, with torch's
``ForkingPickler``: tensors above :data:`BY_VALUE_BYTES` still travel through shared memory,
smaller ones in the bytes) and send the bytes; a result
that does not pickle is replaced by an error naming the sample and the part of it that cannot
be sent (:func:`unpicklable`). Nothing is pickled twice: the queue pickles only the bytes.

The other way round, a result that pickled in the worker may still fail to unpickle in the
main process (a class the main process cannot import, a ``__setstate__`` or ``__reduce__``
that works only in a worker). Raised inside torch's result queue, that error would reach the
program as a bare exception, and torch's iterator would lose track of the batch. So the bytes
are unpickled by :func:`arrived`, which returns an :class:`Unarrived` in the result's place
(naming the worker, what the result was, and the type that failed); the loaders make it a
``DataError`` for that batch (:func:`unarrived_message`) and go on with the next.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import reprlib
import traceback
from collections.abc import Mapping
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple

import numpy as np
import torch

from loaderkit.datasets.serialized import by_value

__all__ = [
    "Pickled",
    "Unarrived",
    "arrived",
    "pickled",
    "type_name",
    "unarrived_message",
    "unpicklable",
    "unsendable_message",
]

_PROTOCOL = pickle.HIGHEST_PROTOCOL  # 5: small tensors' values go in as buffers, one copy
_LEAVES = (str, bytes, int, float, complex, bool, type(None))
_DEPTH = 32
"""How deep :func:`unpicklable` looks into nested containers and objects."""
_CHILDREN = 10_000
"""How many parts of a value :func:`unpicklable` tries at most (it runs only on failure)."""


class Pickled:
    """A worker's result as bytes: unpickled where it arrives (the main process).

    ``origin`` is plain data saying what the result is (a batch's epoch and index), for the
    message if it cannot be unpickled there; ``worker`` and ``pid`` are the sender's.
    """

    __slots__ = ("origin", "payload", "pid", "worker")

    def __init__(
        self, payload: bytes, origin: object = None, worker: int | None = None, pid: int = 0
    ) -> None:
        self.payload = payload
        self.origin = origin
        self.worker = worker
        self.pid = pid

    def __reduce__(self) -> tuple[Any, tuple[bytes, object, int | None, int]]:
        return (arrived, (self.payload, self.origin, self.worker, self.pid))


class Unarrived(NamedTuple):
    """A worker's result that could not be unpickled in the main process, in its place."""

    origin: Any
    """What the sender said the result is (see :class:`Pickled`)."""
    worker: int | None
    pid: int
    failed_type: str
    """The type (or function) whose unpickling raised, as far as can be told."""
    error: BaseException
    """What unpickling raised (its traceback attached)."""


def arrived(payload: bytes, origin: object, worker: int | None, pid: int) -> Any:
    """The result pickled in ``payload``, or an :class:`Unarrived` if unpickling it raises."""
    try:
        return ForkingPickler.loads(payload)
    except Exception as exc:  # noqa: BLE001 - any failure: named, delivered as the batch's error
        return Unarrived(origin, worker, pid, _failed_type(exc), exc)


_NO_ATTRIBUTE = re.compile(r"Can't get attribute '([^']+)' on <module '([^']+)'")
_NO_MODULE = re.compile(r"No module named '([^']+)'")


def _failed_type(exc: BaseException) -> str:
    """The type whose unpickling raised ``exc`` (caught in :func:`arrived`).

    The frame the unpickler called is the one after :func:`arrived`'s in the traceback: a
    ``__setstate__`` (its ``self`` names the type), a ``__reduce__``'s callable (a class or a
    function). Without one (the unpickler itself raised: a class or module it cannot find)
    the message names what was missing.
    """
    tb = exc.__traceback__
    called = tb.tb_next if tb is not None else None
    if called is not None:
        frame = called.tb_frame
        owner = frame.f_locals.get("self")
        if owner is not None:
            return type_name(owner)
        module = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_qualname
        return f"{module}.{name}" if module else name
    text = str(exc)
    found = _NO_ATTRIBUTE.search(text)
    if found:
        return f"{found.group(2)}.{found.group(1)}"
    found = _NO_MODULE.search(text)
    if found:
        return f"a class of module {found.group(1)!r}"
    return type(exc).__name__


BY_VALUE_BYTES = 1 << 20
"""A tensor of at most this many bytes crosses in the pickle itself, not in shared memory.

torch's ``ForkingPickler`` moves every tensor's storage to shared memory and sends a file
descriptor, which the main process fetches over a new connection to the worker's resource
sharer: about half a millisecond a tensor here, whatever its size. A batch of 1,024 rows of
16 float32 (64 KiB) spent more time so than the whole batch took to read, and 2 workers
read 5x fewer rows than none. Copying a small tensor's bytes through the pipe costs
microseconds; above 1 MiB, shared memory wins (its cost is flat, a copy's grows)."""


class _WorkerPickler(ForkingPickler):
    """torch's ``ForkingPickler``, with tensors of at most :data:`BY_VALUE_BYTES` by value."""

    def reducer_override(self, obj: Any) -> Any:
        return by_value(obj, max_bytes=BY_VALUE_BYTES, grad=False)


def pickled(value: object, origin: object = None) -> Pickled:
    """``value`` pickled; raises what pickling raises.

    Small tensors go by value, the rest as torch's ``ForkingPickler`` sends them (shared
    memory). ``origin`` (plain data: what ``value`` is) travels beside it, for the message
    if ``value`` cannot be unpickled where it arrives (:class:`Unarrived`).
    """
    stream = io.BytesIO()
    _WorkerPickler(stream, _PROTOCOL).dump(value)
    info = torch.utils.data.get_worker_info()
    worker = None if info is None else int(info.id)
    return Pickled(stream.getvalue(), origin, worker, os.getpid())


def _sends(value: object) -> bool:
    if isinstance(value, _LEAVES):
        return True
    if isinstance(value, torch.Tensor) and not value.requires_grad:
        return True  # tried, a tensor would be moved to shared memory for nothing
    if isinstance(value, np.ndarray) and value.dtype != object:
        return True
    try:
        ForkingPickler.dumps(value)
    except Exception:  # noqa: BLE001 - whatever pickle refuses cannot be sent
        return False
    return True


def _parts(value: object) -> list[tuple[str, object]]:
    """The parts of ``value`` that pickle would pickle, with how to name them."""
    if isinstance(value, Mapping):
        return [(f"[{reprlib.repr(k)}]", v) for k, v in value.items()]
    if isinstance(value, list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return [(f".{k}", v) for k, v in attributes.items() if isinstance(k, str)]
    return []


def unpicklable(value: object) -> tuple[str, str] | None:
    """``(where, type name)`` of the innermost part of ``value`` that does not pickle.

    ``where`` is a path from ``value`` (``"['f']"``, ``"[2].lock"``; ``""`` for the value
    itself); ``None`` if ``value`` pickles. Looks at most ``_DEPTH`` levels deep and tries at
    most ``_CHILDREN`` parts, then names the part it got to.
    """
    if _sends(value):
        return None
    budget = [_CHILDREN]

    def find(node: object, where: str, depth: int) -> tuple[str, str]:
        if depth < _DEPTH:
            for name, part in _parts(node):
                budget[0] -= 1
                if budget[0] < 0:
                    break
                if not _sends(part):
                    return find(part, where + name, depth + 1)
        return where, type_name(node)

    return find(value, "", 0)


def type_name(value: object) -> str:
    """``function``, ``_thread.lock``, ``mypkg.Thing``: the type of ``value``, for messages."""
    kind = type(value)
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


_SHOWN = 300
"""At most this many characters of pickle's own message are quoted."""


def unsendable_message(
    what: str, root: str, found: tuple[str, str], exc: BaseException, worker: int | None
) -> str:
    """The message for ``what`` (``"sample 5 (batch 1 of epoch 0)"``) that cannot be sent.

    ``root`` names the value the path of ``found`` (:func:`unpicklable`) starts from
    (``"sample"``, ``"batch"``).
    """
    where, kind = found
    said = str(exc)
    said = said if len(said) <= _SHOWN else said[:_SHOWN] + "..."
    who = "its worker" if worker is None else f"worker {worker}"
    return (
        f"{what} cannot be sent from {who} to the main process: {root}{where} is a {kind}, "
        f"which pickle cannot send ({type(exc).__name__}: {said}); make the dataset (and the "
        f"transform and collator) return picklable data (tensors, arrays, numbers, strings, "
        f"containers of them), or load in the main process (num_workers=0), where nothing "
        f"is pickled"
    )


def unarrived_message(what: str, unarrived: Unarrived) -> str:
    """The message for ``what`` (``"batch 3 of epoch 0"``) that could not be unpickled here."""
    exc = unarrived.error
    said = str(exc)
    said = said if len(said) <= _SHOWN else said[:_SHOWN] + "..."
    who = "a worker" if unarrived.worker is None else f"worker {unarrived.worker}"
    trace = "".join(traceback.format_exception(exc)).rstrip()
    return (
        f"{what} was pickled in {who} (pid {unarrived.pid}) but could not be unpickled in "
        f"the main process: unpickling {unarrived.failed_type} raised {type(exc).__name__}: "
        f"{said}. The main process must be able to rebuild every object a worker sends: "
        f"define its class at the top level of a module the main process imports (not in a "
        f"spawned worker's __main__, nor made while the worker runs), and make its "
        f"__reduce__ / __setstate__ work outside a worker (not depending on "
        f"get_worker_info(), the worker's pid or what only the worker opened); or return "
        f"plain data (tensors, arrays, numbers, strings, containers of them), or load in the "
        f"main process (num_workers=0), where nothing is pickled. The pass goes on with the "
        f"next batch.\n\nThe traceback of the unpickling:\n{trace}"
    )
