"""What a worker sends to the main process: pickled in the worker, where a failure can be named.

torch's worker puts each result on a ``multiprocessing`` queue, whose feeder thread pickles it
later; a result that does not pickle (a lambda, a lock, an open file in a sample) is then only
printed to the worker's stderr and dropped, and the main process waits for it forever. So the
loaders' workers pickle each result themselves (:func:`pickled`, with torch's
``ForkingPickler``: tensors above :data:`BY_VALUE_BYTES` still travel through shared memory,
smaller ones in the bytes) and send the bytes; a result
that does not pickle is replaced by an error naming the sample and the part of it that cannot
be sent (:func:`unpicklable`). Nothing is pickled twice: the queue pickles only the bytes.
"""

from __future__ import annotations

import io
import pickle
import reprlib
from collections.abc import Mapping
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch

from loaderkit.datasets.serialized import by_value

__all__ = ["Pickled", "pickled", "type_name", "unpicklable", "unsendable_message"]

_PROTOCOL = pickle.HIGHEST_PROTOCOL  # 5: small tensors' values go in as buffers, one copy
_LEAVES = (str, bytes, int, float, complex, bool, type(None))
_DEPTH = 32
"""How deep :func:`unpicklable` looks into nested containers and objects."""
_CHILDREN = 10_000
"""How many parts of a value :func:`unpicklable` tries at most (it runs only on failure)."""


class Pickled:
    """A worker's result as bytes: unpickled where it arrives (the main process)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return (ForkingPickler.loads, (self.payload,))


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


def pickled(value: object) -> Pickled:
    """``value`` pickled; raises what pickling raises.

    Small tensors go by value, the rest as torch's ``ForkingPickler`` sends them (shared
    memory).
    """
    stream = io.BytesIO()
    _WorkerPickler(stream, _PROTOCOL).dump(value)
    return Pickled(stream.getvalue())


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
