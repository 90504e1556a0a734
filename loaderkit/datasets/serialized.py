"""Flat storage: samples kept as one byte buffer plus offsets, not as Python objects.

Reading a Python object touches its reference count, so a worker that reads a list of dicts
it inherited by ``fork`` copies every page it reads (torch's copy-on-read memory growth: each
worker ends up with a private copy of the list). :func:`flat` serializes each sample with
pickle (protocol 5) into one contiguous ``uint8`` array and records where each one ends in an
``int64`` array: two objects in all, so reading sample ``i`` unpickles a slice of the buffer
and touches no shared Python object. ``fork`` workers share the buffer's pages; ``spawn`` and
``forkserver`` workers receive it through shared memory when torch is loaded (it travels as a
tensor, which torch's pickler places in shared memory once).

Each sample comes back as an equal, independent copy of what was stored: types included
(tuples stay tuples, tensors tensors with their dtype, numpy arrays with dtype and shape,
nested dicts). A CPU tensor is stored as its values, dtype and shape (a tensor viewing a
larger storage carries only its own values; it comes back contiguous).

The plan layer imports this module: torch is used only when the caller has imported it.
"""

from __future__ import annotations

import array
import io
import pickle
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from loaderkit.errors import DataError, PlanTypeError

__all__ = ["FlatSamples", "NotSerializableError", "by_value", "flat", "serialize"]

PROTOCOL = 5


class NotSerializableError(Exception):
    """Sample ``index`` could not be pickled (``cause`` says why), from :func:`serialize`."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(index, cause)
        self.index = index
        self.cause = cause

    def describe(self) -> str:
        """``"sample 3 does not pickle (TypeError: cannot pickle 'generator' object)"``."""
        return f"sample {self.index} does not pickle ({type(self.cause).__name__}: {self.cause})"


def _tensor(data: Any, dtype: str, shape: tuple[int, ...], requires_grad: bool) -> Any:
    """A CPU tensor from its bytes, dtype name (``"uint16"``) and shape (see ``by_value``).

    ``data`` is the ``bytearray`` pickle made of the values (the tensor takes it over, no
    copy) or, from an older pickle, ``bytes`` (copied once).
    """
    import torch  # only where a tensor was stored, so torch is installed

    kind = getattr(torch, dtype)
    if len(data):
        owned = data if isinstance(data, bytearray) else bytearray(data)
        tensor = torch.frombuffer(owned, dtype=torch.uint8).view(kind).reshape(shape)
    else:
        tensor = torch.empty(shape, dtype=kind)
    return tensor.requires_grad_() if requires_grad else tensor


def by_value(obj: Any, *, max_bytes: int | None = None, grad: bool = True) -> Any:
    """A pickle reduction of a plain CPU tensor as its values, dtype and shape.

    For a ``reducer_override`` (protocol 5: the values go in as a writable buffer, with one
    copy, and come out as the ``bytearray`` the new tensor takes over). ``NotImplemented``
    (pickle's own way then) for anything else: not a plain strided CPU tensor, more than
    ``max_bytes`` of values, or one that requires grad with ``grad=False``.

    torch pickles a tensor with its whole storage (a row of a big tensor would carry the big
    tensor), slowly, and some dtypes it pickles do not unpickle (``uint16`` in torch 2.x).
    """
    torch = sys.modules.get("torch")
    if (
        torch is None
        or type(obj) is not torch.Tensor
        or obj.layout != torch.strided
        or obj.device.type != "cpu"
        or obj.is_quantized
        or (obj.requires_grad and not grad)
        or (max_bytes is not None and obj.numel() * obj.element_size() > max_bytes)
    ):
        return NotImplemented
    values = obj.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    raw: Any = pickle.PickleBuffer(values.view(torch.uint8).numpy()) if values.numel() else b""
    dtype = str(obj.dtype).removeprefix("torch.")
    return _tensor, (raw, dtype, tuple(obj.shape), obj.requires_grad)


class _Pickler(pickle.Pickler):
    """pickle's own pickler, with plain CPU tensors stored by value (:func:`by_value`).

    Called only for objects pickle has no fast path for (never for plain ints, floats,
    strings, lists, tuples or dicts).
    """

    def reducer_override(self, obj: Any) -> Any:
        return by_value(obj)


class FlatSamples(Sequence[Any]):
    """A read-only sequence of samples stored flat (see the module docstring).

    ``len()``, ``flat[i]`` (negative ``i`` too; a slice gives a list) and ``__getitems__``
    (a batch of indices, as torch's fetcher calls it). Each read unpickles a fresh copy, so
    changing a sample that was read never changes what is stored. :attr:`nbytes` is the size
    of the buffer and offsets, :attr:`seconds` what serializing took.
    """

    def __init__(
        self, buffer: npt.NDArray[np.uint8], ends: npt.NDArray[np.int64], seconds: float = 0.0
    ) -> None:
        self._buffer = buffer
        self._ends = ends
        """Where each sample's bytes end (sample ``i`` starts where ``i - 1`` ends)."""
        self.seconds = seconds
        """Seconds spent serializing the samples."""
        self._view = buffer.data
        self._shared: tuple[Any, Any] | None = None
        """The buffer and offsets as tensors in shared memory, once sent (``__getstate__``)."""

    @property
    def nbytes(self) -> int:
        """Bytes held: the buffer plus the offsets."""
        return int(self._buffer.nbytes + self._ends.nbytes)

    def __len__(self) -> int:
        return len(self._ends)

    def _read(self, index: int) -> Any:
        ends = self._ends
        start = int(ends[index - 1]) if index > 0 else 0
        return pickle.loads(self._view[start : int(ends[index])])

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._read(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        i = int(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"sample index {index} out of range for {n} samples")
        return self._read(i)

    def __getitems__(self, indices: Iterable[int]) -> list[Any]:
        """The samples at ``indices``, in order (one call per batch; negative ones too)."""
        n = len(self)
        given = np.fromiter(indices, dtype=np.int64)
        at = np.where(given < 0, given + n, given)
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= n):
            bad = int(given[(at < 0) | (at >= n)][0])
            raise IndexError(f"sample index {bad} out of range for {n} samples")
        ends = self._ends
        stops = ends[at].tolist()
        starts = np.where(at > 0, ends[at - 1], 0).tolist()
        view, loads = self._view, pickle.loads
        return [loads(view[a:b]) for a, b in zip(starts, stops, strict=True)]

    def __repr__(self) -> str:
        return f"<FlatSamples: {len(self):,} samples in {self.nbytes:,} bytes>"

    def __getstate__(self) -> dict[str, Any]:
        state = {"buffer": self._buffer, "ends": self._ends, "seconds": self.seconds}
        torch = sys.modules.get("torch")
        if torch is None:
            return state
        if self._shared is None:  # torch's pickler (spawn workers) sends tensors' memory
            buffer = torch.from_numpy(self._buffer).share_memory_()
            ends = torch.from_numpy(self._ends).share_memory_()
            self._shared = buffer, ends  # once: every copy sent after this one shares it
            self._buffer, self._ends = buffer.numpy(), ends.numpy()
            self._view = self._buffer.data
        state["buffer"], state["ends"] = self._shared
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        buffer, ends = state["buffer"], state["ends"]
        shared = (buffer, ends) if hasattr(buffer, "numpy") else None
        self.__init__(  # type: ignore[misc]
            np.asarray(buffer.numpy() if shared else buffer, dtype=np.uint8),
            np.asarray(ends.numpy() if shared else ends, dtype=np.int64),
            float(state["seconds"]),
        )
        self._shared = shared


def serialize(samples: Sequence[Any]) -> FlatSamples:
    """``samples`` stored flat; :class:`NotSerializableError` names the first that is not.

    Every sample is pickled into one stream (the memo cleared between samples, so each is a
    pickle of its own).
    """
    started = time.perf_counter()
    stream = io.BytesIO()
    pickler = _Pickler(stream, protocol=PROTOCOL)
    dump, clear, tell = pickler.dump, pickler.clear_memo, stream.tell
    n = len(samples)
    read = samples if isinstance(samples, list | tuple) else (samples[i] for i in range(n))
    stops = array.array("q")  # 8 bytes an entry while it grows, not a Python int each
    stop = stops.append
    for index, sample in enumerate(read):
        try:
            dump(sample)
        except Exception as exc:
            raise NotSerializableError(index, exc) from exc
        clear()
        stop(tell())
    ends = np.frombuffer(stops, dtype=np.int64) if stops else np.empty(0, dtype=np.int64)
    buffer = np.frombuffer(stream.getbuffer(), dtype=np.uint8)
    return FlatSamples(buffer, ends, time.perf_counter() - started)


def flat(samples: Sequence[Any]) -> FlatSamples:
    """Return ``samples`` (a list or tuple) stored flat, for a ``Dataset`` of your own to hold.

    loaderkit stores a list dataset flat by itself (``with_dataset(samples, storage=...)``);
    a ``Dataset`` class holding lists is yours, so hold ``self.items = flat(items)`` in it
    and read ``self.items[i]`` as before: workers then read it without copying its pages.
    Raises :class:`~loaderkit.DataError` naming the first sample that does not pickle.
    """
    if isinstance(samples, FlatSamples):
        return samples
    if (
        isinstance(samples, str | bytes | Mapping)
        or not hasattr(samples, "__len__")
        or not hasattr(samples, "__getitem__")
    ):
        raise PlanTypeError.single(
            "samples",
            f"flat() takes a list or tuple of samples (got {type(samples).__name__}); a dict "
            f"of columns or a tensor is stored column-wise already: pass it to with_dataset "
            f"as it is",
        )
    try:
        return serialize(samples)
    except NotSerializableError as exc:
        raise DataError(
            f"{exc.describe()}: flat storage pickles every sample; make it picklable (plain "
            f"values, tensors, numpy arrays and classes defined in a module), or keep the "
            f"samples as Python objects",
            sample_index=exc.index,
        ) from exc.cause
