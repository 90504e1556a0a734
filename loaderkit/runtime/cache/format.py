"""How the disk cache stores a sample: data that cannot run code when read, with a checksum.

A disk cache folder is untrusted input (another user, a copied or damaged folder, a file
swapped by hand): reading it must never execute code and never deliver another sample. So a
sample is not pickled. An *entry* is::

    MAGIC (8 bytes) | digest (32 bytes) | body
    body = header length (4 bytes, little endian) | header (JSON, ASCII) | padding | buffers

The digest is ``sha256(key | body)``, or, for a folder others may write (``shared=True``),
``HMAC-SHA256(secret, key | body)`` with a secret key kept outside the folder: a plain
checksum can be recomputed by anyone who can write the folder, the keyed one only by the key's
owner. The header describes the sample as a tree of JSON values; the buffers hold the raw
bytes of its tensors, arrays and ``bytes``, each at a 64-byte aligned offset. Reading an
entry checks the magic and the checksum (over the entry's *key*, so a value stored under
another key fails too, and so does one signed without the secret), then rebuilds the tree
from JSON and the buffers: only the types listed below can come out of it, whatever the file
holds.

What can be stored (exactly, types included): ``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``; ``list``, ``tuple`` and ``dict`` (any of these as keys) of them; CPU
``torch.Tensor`` (strided, no grad, no names, the dtypes of ``_TORCH_DTYPES``); ``np.ndarray``
and numpy scalars of plain dtypes (bool, integers, floats, complex, fixed-width strings,
dates). A tensor or array comes back contiguous, as its own copy. Anything else (a PIL image,
a namedtuple, a dict subclass, a tensor subclass, an object) makes :func:`encode` return
``None``: the sample is not stored (``not_stored`` in the stats) and is loaded again next
time. Nesting is limited to :data:`MAX_DEPTH`.

:func:`code_digest` hashes what a transform computes with (its bytecode, constants, defaults,
plain closure values and plain attributes), so a transform edited under the same name is a
new cache.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import struct
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from loaderkit.plan.sections.checks import CHECK_DTYPES

__all__ = ["MAX_DEPTH", "CorruptEntryError", "code_digest", "decode", "encode"]

MAGIC = b"LKCACHE1"
"""The first bytes of every entry: the format and its version."""

MAX_DEPTH = 64
"""How deeply a sample may nest containers to be stored."""

_ALIGN = 64
_DIGEST = 32
_HEAD = len(MAGIC) + _DIGEST

_TORCH_DTYPES: dict[str, torch.dtype] = {
    name: dtype
    for name in CHECK_DTYPES  # torch's dtype names, as with_checks(dtypes=...) takes them
    if isinstance(dtype := getattr(torch, name, None), torch.dtype)
}
"""The tensor dtypes an entry may name, and the only ones it can produce."""

_TORCH_NAMES = {dtype: name for name, dtype in _TORCH_DTYPES.items()}
_NUMPY_KINDS = frozenset("biufcSUmM")
"""numpy dtype kinds of fixed-size plain values (never ``O``bject, never structured)."""


class CorruptEntryError(Exception):
    """An entry that is not what was stored under its key: read as a miss, and rewritten."""


class _NotStorableError(Exception):
    """A sample holding a value the format does not keep exactly."""


class _Writer:
    """Collects the buffers of one entry while its header tree is built."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def add(self, data: bytes | memoryview) -> list[int]:
        pad = -self.size % _ALIGN
        if pad:
            self.parts.append(b"\0" * pad)
            self.size += pad
        offset = self.size
        self.parts.append(data)
        self.size += len(data)
        return [offset, len(data)]


def _tree(value: Any, out: _Writer, depth: int) -> Any:
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value
    if kind is float:
        return value
    if depth >= MAX_DEPTH:
        raise _NotStorableError
    if kind is torch.Tensor:
        name = _TORCH_NAMES.get(value.dtype)
        if (
            name is None
            or value.device.type != "cpu"
            or value.layout != torch.strided
            or value.requires_grad
            or value.is_quantized
            or value.is_conj()
            or value.is_neg()
            or any(n is not None for n in getattr(value, "names", None) or ())
        ):
            raise _NotStorableError
        flat = value.detach().contiguous().reshape(-1).view(torch.uint8)
        return ["T", name, list(value.shape), *out.add(memoryview(flat.numpy()))]
    if kind is np.ndarray:
        if not _plain_dtype(value.dtype):
            raise _NotStorableError
        data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        return ["A", value.dtype.str, list(value.shape), *out.add(data.data)]
    if isinstance(value, np.generic) and type(value) is value.dtype.type:
        if not _plain_dtype(value.dtype):
            raise _NotStorableError
        return ["S", value.dtype.str, *out.add(np.asarray(value).tobytes())]
    if kind is bytes:
        return ["b", *out.add(value)]
    if kind is list:
        return ["l", *(_tree(v, out, depth + 1) for v in value)]
    if kind is tuple:
        return ["t", *(_tree(v, out, depth + 1) for v in value)]
    if kind is dict:
        node: list[Any] = ["d"]
        for key, item in value.items():
            node.append(_tree(key, out, depth + 1))
            node.append(_tree(item, out, depth + 1))
        return node
    raise _NotStorableError


def _plain_dtype(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in _NUMPY_KINDS and dtype.fields is None and dtype.subdtype is None


def _digest(key: bytes, body: bytes | memoryview, secret: bytes | None) -> bytes:
    """What authenticates ``body`` under ``key``: a keyed HMAC with ``secret``, else a sha256."""
    mac = hashlib.sha256(key) if secret is None else hmac.new(secret, key, "sha256")
    mac.update(body)
    return mac.digest()


def encode(key: bytes, sample: Any, secret: bytes | None = None) -> bytes | None:
    """The entry storing ``sample`` under ``key``; ``None`` if it holds a value not kept exactly.

    With ``secret``, the entry is signed with it (see the module docstring).
    """
    out = _Writer()
    try:
        tree = _tree(sample, out, 0)
    except _NotStorableError:
        return None
    header = json.dumps(tree, separators=(",", ":")).encode("ascii")
    start = 4 + len(header)
    pad = -(_HEAD + start) % _ALIGN
    body = b"".join([struct.pack("<I", len(header)), header, b"\0" * pad, *out.parts])
    return MAGIC + _digest(key, body, secret) + body


def decode(key: bytes, entry: bytes, secret: bytes | None = None) -> Any:
    """The sample of ``entry`` stored under ``key``; :class:`CorruptEntryError` if it is not one.

    Checks the magic and the checksum (the signature, with ``secret``) first, then rebuilds
    only the types :func:`encode` writes; every inconsistency (a size, an offset, a dtype, the
    JSON itself) is a :class:`CorruptEntryError`, never another exception and never code run.
    """
    if type(entry) is not bytes or entry[: len(MAGIC)] != MAGIC:
        raise CorruptEntryError("not an entry of this format")
    body = memoryview(entry)[_HEAD:]
    if not hmac.compare_digest(_digest(key, body, secret), entry[len(MAGIC) : _HEAD]):
        raise CorruptEntryError("the checksum does not match the key and the bytes")
    try:
        (size,) = struct.unpack_from("<I", body)
        header = json.loads(bytes(body[4 : 4 + size]).decode("ascii"))
        start = 4 + size + (-(_HEAD + 4 + size) % _ALIGN)
        buffers = bytearray(body[start:])  # one writable copy that the tensors share
        return _Reader(buffers).value(header, 0)
    except CorruptEntryError:
        raise
    except Exception as exc:  # anything malformed is a corrupt entry
        raise CorruptEntryError(f"malformed entry ({type(exc).__name__}: {exc})") from exc


class _Reader:
    """Rebuilds a sample from its header tree and the entry's buffers."""

    def __init__(self, buffers: bytearray) -> None:
        self.buffers = buffers

    def _span(self, offset: Any, length: Any) -> tuple[int, int]:
        if (
            type(offset) is not int
            or type(length) is not int
            or offset < 0
            or length < 0
            or offset + length > len(self.buffers)
        ):
            raise CorruptEntryError("a buffer outside the entry")
        return offset, length

    def _dtype(self, text: Any) -> np.dtype[Any]:
        if type(text) is not str or len(text) > 16:
            raise CorruptEntryError("a bad dtype")
        dtype = np.dtype(text)
        if not _plain_dtype(dtype) or dtype.str != text:
            raise CorruptEntryError(f"a dtype that is not stored: {text!r}")
        return dtype

    def _shape(self, shape: Any) -> list[int]:
        if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
            raise CorruptEntryError("a bad shape")
        return shape

    def value(self, node: Any, depth: int) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is not list or not node or depth >= MAX_DEPTH:
            raise CorruptEntryError("a bad node")
        tag = node[0]
        if tag == "l":
            return [self.value(v, depth + 1) for v in node[1:]]
        if tag == "t":
            return tuple(self.value(v, depth + 1) for v in node[1:])
        if tag == "d":
            items = node[1:]
            if len(items) % 2:
                raise CorruptEntryError("a dict with a key and no value")
            return {
                self.value(items[k], depth + 1): self.value(items[k + 1], depth + 1)
                for k in range(0, len(items), 2)
            }
        if tag == "b" and len(node) == 3:
            offset, length = self._span(node[1], node[2])
            return bytes(self.buffers[offset : offset + length])
        if tag == "T" and len(node) == 5:
            dtype = _TORCH_DTYPES.get(node[1]) if type(node[1]) is str else None
            if dtype is None:
                raise CorruptEntryError(f"a tensor dtype that is not stored: {node[1]!r}")
            shape = self._shape(node[2])
            offset, length = self._span(node[3], node[4])
            if length != _numel(shape) * dtype.itemsize:
                raise CorruptEntryError("a tensor whose size does not match its shape")
            if length == 0:
                return torch.empty(shape, dtype=dtype)
            flat = torch.frombuffer(self.buffers, dtype=torch.uint8, count=length, offset=offset)
            return flat.view(dtype).reshape(shape)
        if tag == "A" and len(node) == 5:
            np_dtype = self._dtype(node[1])
            shape = self._shape(node[2])
            offset, length = self._span(node[3], node[4])
            if length != _numel(shape) * np_dtype.itemsize:
                raise CorruptEntryError("an array whose size does not match its shape")
            count = _numel(shape)
            return np.frombuffer(self.buffers, np_dtype, count, offset).reshape(shape)
        if tag == "S" and len(node) == 4:
            np_dtype = self._dtype(node[1])
            offset, length = self._span(node[2], node[3])
            if length != np_dtype.itemsize:
                raise CorruptEntryError("a scalar of the wrong size")
            return np.frombuffer(self.buffers, np_dtype, 1, offset)[0]
        raise CorruptEntryError(f"an unknown node {str(tag)[:20]!r}")


def _numel(shape: list[int]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


# -- the identity of a transform's code ---------------------------------------------------

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_BUDGET = 100_000
"""How many values :func:`code_digest` reads at most (a closure over a huge object)."""


def code_digest(fn: Callable[..., Any] | None) -> str:
    """A sha256 of what ``fn`` computes with, as far as it can be seen without running it.

    Covered: the bytecode, constants (nested functions and lambdas included), names used,
    defaults and keyword defaults of a function; the values in its closure that are plain
    (numbers, strings, bytes, arrays, tensors, containers of them, functions, recursively);
    for a ``functools.partial``, its function and arguments; for a callable object, the
    functions its class defines and its attributes (the same way); for a bound method, the
    function and the object. Not covered: the globals and modules it reads (a helper it calls
    by name, a constant of its module), the inside of values that are not plain and have no
    ``__dict__`` (their type name only), code without bytecode (a builtin, a C extension: its
    qualified name only), and anything past the first ``_BUDGET`` values read. The digest
    also changes with the Python version (bytecode does).
    """
    digest = _Digest()
    digest.feed(fn, 0)
    return digest.hexdigest()


class _Digest:
    """A sha256 fed with a walk of a callable's code and plain values."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.seen: set[int] = set()
        self.budget = _BUDGET

    def hexdigest(self) -> str:
        return self.sha.hexdigest()

    def put(self, tag: str, data: bytes = b"") -> None:
        self.sha.update(f"{tag}:{len(data)}:".encode() + data)

    def feed(self, value: Any, depth: int) -> None:
        self.budget -= 1
        if self.budget < 0 or depth > MAX_DEPTH:
            self.put("cut")
            return
        kind = type(value)
        if kind in _PLAIN or isinstance(value, np.generic):
            self.put(kind.__name__, repr(value).encode())
            return
        if id(value) in self.seen:
            self.put("seen")
            return
        self.seen.add(id(value))
        down = functools.partial(self.feed, depth=depth + 1)
        if isinstance(value, types.CodeType):
            self.put("code", value.co_code)
            self.put("names", repr((value.co_names, value.co_varnames, value.co_freevars)).encode())
            for const in value.co_consts:
                down(const)
        elif isinstance(value, types.FunctionType):
            self.put("function", value.__qualname__.encode())
            down(value.__code__)
            down(value.__defaults__)
            down(value.__kwdefaults__)
            for cell in value.__closure__ or ():
                try:
                    down(cell.cell_contents)
                except ValueError:  # an empty cell
                    self.put("empty")
        elif isinstance(value, types.MethodType):
            self.put("method")
            down(value.__func__)
            down(value.__self__)
        elif isinstance(value, functools.partial):
            self.put("partial")
            down(value.func)
            down(value.args)
            down(value.keywords)
        elif isinstance(value, tuple | list):
            self.put(kind.__name__, str(len(value)).encode())
            for item in value:
                down(item)
        elif isinstance(value, frozenset | set):
            self.put(kind.__name__, str(len(value)).encode())
            for item in sorted(value, key=repr):  # set order changes with string hashing
                down(item)
        elif isinstance(value, dict):
            self.put("dict", str(len(value)).encode())
            for key, item in value.items():
                down(key)
                down(item)
        elif isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous()
            self.put("tensor", f"{tensor.dtype}{tuple(tensor.shape)}".encode())
            self.put("data", tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, np.ndarray) and not value.dtype.hasobject:
            self.put("array", f"{value.dtype.str}{value.shape}".encode())
            self.put("data", np.ascontiguousarray(value).tobytes())
        elif isinstance(value, types.ModuleType):
            self.put("module", value.__name__.encode())
        elif isinstance(value, type):
            self.put("class", f"{value.__module__}:{value.__qualname__}".encode())
            self._methods(value, depth)
        elif callable(value) and not hasattr(value, "__dict__"):  # a builtin
            name = getattr(value, "__qualname__", kind.__qualname__)
            self.put("builtin", f"{getattr(value, '__module__', None)}:{name}".encode())
        else:
            self.put("object", f"{kind.__module__}:{kind.__qualname__}".encode())
            self._methods(kind, depth)
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict):
                down(attributes)

    def _methods(self, cls: type, depth: int) -> None:
        """The functions a class defines itself (``__call__``, ``forward``, helpers)."""
        for name, member in sorted(vars(cls).items()):
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if isinstance(member, types.FunctionType):
                self.put("def", name.encode())
                self.feed(member, depth + 1)
