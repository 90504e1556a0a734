"""The global RNGs' states (torch's CPU generator, numpy's legacy one, ``random``), read cheaply.

:class:`RngStates` takes the three states (and puts them back), :func:`marks` takes a look at
them small enough to make before and after every batch: the position, a few words and the
cached normals, read from the bytes behind each generator, found once and checked against the
official getters (which are used instead wherever a check fails). The seeding that uses these
looks is :mod:`loaderkit.runtime.fetch.global_rngs`.
"""

from __future__ import annotations

import ctypes
import random
import struct
import sys
from collections.abc import Callable, Iterable
from typing import Any, Literal, get_args

import numpy as np
import torch

__all__ = [
    "CPYTHON_RANDOM",
    "PY_RANDOM",
    "RNGS",
    "Rng",
    "RngStates",
    "marks",
    "restore_rngs",
    "user_rngs",
]

Rng = Literal["torch", "numpy", "random"]
"""A global RNG: torch's CPU generator, numpy's legacy ``np.random``, Python's ``random``."""
RNGS: tuple[Rng, ...] = get_args(Rng)

PY_RANDOM: Any = getattr(random, "_inst", None)
"""The instance behind ``random``'s module functions (CPython's ``random._inst``)."""
CPYTHON_RANDOM = type(PY_RANDOM) is random.Random
"""Whether ``random`` is CPython's (its state and ``gauss_next`` are seeded directly)."""
_NP_RANDOM: Any = np.random.mtrand._rand
"""The ``RandomState`` behind ``np.random``'s module functions."""


# -- reading the states cheaply ---------------------------------------------------------------
#
# ``random.getstate()`` (~10 us) and ``np.random.get_state()`` (~35 us) build tuples of 625
# Python ints; a copy of the bytes behind them costs ~0.5 us. Where the bytes are is found
# once, here, on generators of our own, and checked against the official getters; where a
# check fails (another Python, another numpy), the official getters are used instead.

_MT_WORDS = 624
_MT_BYTES = _MT_WORDS * 4 + 4
"""The bytes of a Mersenne Twister's words and position (CPython's and numpy's alike)."""
_PTR = struct.calcsize("P")


def _python_offset() -> int | None:
    """Where CPython's ``_random.Random`` keeps its position and words, or ``None``.

    ``RandomObject`` is ``{PyObject_HEAD; int index; uint32_t state[624];}``: the position,
    then the words, right after the object's header.
    """
    if not CPYTHON_RANDOM or sys.implementation.name != "cpython":
        return None
    offset = object.__basicsize__
    if random.Random.__mro__[1].__basicsize__ < offset + _MT_BYTES:  # not that layout
        return None
    for seed in (1, 2**40 + 7):
        probe = random.Random(seed)
        for _ in range(seed % 5 + 1):
            probe.random()
        index, *words = struct.unpack(
            f"<i{_MT_WORDS}I", ctypes.string_at(id(probe) + offset, _MT_BYTES)
        )
        state = probe.getstate()[1]
        if tuple(words) != state[:_MT_WORDS] or index != state[_MT_WORDS]:
            return None
        raw = ctypes.string_at(id(probe) + offset, _MT_BYTES)
        taken = probe.getstate()
        for _ in range(_MT_WORDS + 1):  # past a twist: every word changes
            probe.random()
        ctypes.memmove(id(probe) + offset, raw, _MT_BYTES)  # what _RandomReader.write does
        if probe.getstate() != taken:
            return None
    return offset


def _numpy_layout(rs: Any) -> tuple[int, int] | None:
    """Where a legacy ``RandomState`` points at its state, and its gaussian cache; or ``None``.

    ``RandomState`` holds a ``bitgen_t`` (five pointers, the first at the Mersenne Twister's
    state) followed by an ``aug_bitgen_t`` ``{bitgen_t *; int has_gauss; double gauss;}``
    whose pointer points back at that ``bitgen_t``. Found by those two pointers; checked by
    setting the state and the cache through ``set_state`` and reading them back.
    """
    size = type(rs).__basicsize__
    raw = ctypes.string_at(id(rs), size)
    address = rs._bit_generator.ctypes.state_address
    for at in range(0, size - 8 * _PTR + 1, _PTR):
        aug = at + 5 * _PTR
        if struct.unpack_from("P", raw, at)[0] != address:
            continue
        if struct.unpack_from("P", raw, aug)[0] != id(rs) + at:
            continue
        return at, aug + _PTR
    return None


def _numpy_checked() -> tuple[int, int] | None:
    """:func:`_numpy_layout` of ``np.random``'s ``RandomState``, checked on one of our own."""
    try:
        probe = np.random.RandomState(3)
        layout = _numpy_layout(probe)
        if layout is None or _numpy_layout(_NP_RANDOM) != layout:
            return None
        key = (np.arange(_MT_WORDS, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
        for pos, has, gauss in ((5, 1, 1.5), (623, 0, 0.0), (0, 1, -2.75)):
            probe.set_state(("MT19937", key, pos, has, gauss))
            if _numpy_parts(_numpy_read(probe, layout)) != (key.tobytes(), pos, has, gauss):
                return None
            probe.random_sample(3)
            if _numpy_parts(_numpy_read(probe, layout)) != _numpy_official(probe):
                return None
        raw, taken = _numpy_read(probe, layout), _numpy_official(probe)
        probe.standard_normal(_MT_WORDS + 1)  # past a twist, and a gaussian cached
        _numpy_write(probe, layout, raw)
        if _numpy_official(probe) != taken:
            return None
    except Exception:  # noqa: BLE001 - any surprise: the official getter is used
        return None
    return layout


def _numpy_read(rs: Any, layout: tuple[int, int]) -> tuple[bytes, bytes]:
    """The raw words and position, and the raw gaussian cache, of ``rs`` (see ``layout``)."""
    at, cache = layout
    address = ctypes.c_void_p.from_address(id(rs) + at).value  # numpy's current state
    return ctypes.string_at(address, _MT_BYTES), ctypes.string_at(id(rs) + cache, 16)  # type: ignore[arg-type]


def _numpy_write(rs: Any, layout: tuple[int, int], raw: tuple[bytes, bytes]) -> None:
    """Put back what :func:`_numpy_read` read (the bytes where they were read)."""
    at, cache = layout
    address = ctypes.c_void_p.from_address(id(rs) + at).value
    words, cached = raw
    ctypes.memmove(address, words, _MT_BYTES)  # type: ignore[arg-type]
    ctypes.memmove(id(rs) + cache, cached, 16)


def _numpy_parts(raw: tuple[bytes, bytes]) -> tuple[bytes, int, int, float]:
    """The words, position, ``has_gauss`` and ``gauss`` of a :func:`_numpy_read`."""
    words, cache = raw
    (pos,) = struct.unpack_from("<i", words, _MT_WORDS * 4)
    has, _, gauss = struct.unpack("<iid", cache)
    return words[: _MT_WORDS * 4], pos, has, gauss


def _numpy_official(rs: Any) -> tuple[bytes, int, int, float]:
    """The same through ``get_state()`` (~35 us)."""
    _, key, pos, has, gauss = rs.get_state()
    return key.tobytes(), int(pos), int(has), float(gauss)


_PY_OFFSET = _python_offset()
_NP_LAYOUT = _numpy_checked()
_GENERATOR = torch.default_generator
_STATE_BYTES = _GENERATOR.get_state().numel()


def _read_torch() -> bytes:
    state = _GENERATOR.get_state()  # held while its bytes are copied
    return ctypes.string_at(state.data_ptr(), _STATE_BYTES)


class _Raw:
    """The bytes at a fixed address, read through one ctypes array made once (~0.2 us)."""

    __slots__ = ("array",)

    def __init__(self, address: int, size: int) -> None:
        self.array = (ctypes.c_char * size).from_address(address)

    def __call__(self) -> bytes:
        return self.array.raw


class _NumpyReader:
    """The raw state and gaussian cache of ``np.random``'s ``RandomState`` (see ``layout``).

    The pointer to the state is read each time (numpy's current one); the array over the
    state is made again only when it changed.
    """

    __slots__ = ("cache", "head", "pointer", "tail", "words", "words_at")

    def __init__(self, layout: tuple[int, int]) -> None:
        at, cache = layout
        self.pointer = ctypes.c_void_p.from_address(id(_NP_RANDOM) + at)
        self.cache = _Raw(id(_NP_RANDOM) + cache, 16)
        self.words_at = 0
        self._arrays()

    def _address(self) -> int:
        address = self.pointer.value
        assert address is not None
        self.words_at = address
        return address

    def _arrays(self) -> None:
        address = self._address()
        self.words = _Raw(address, _MT_BYTES)
        self.head = _Raw(address, _MT_HEAD)
        self.tail = _Raw(address + _MT_TAIL, _MT_BYTES - _MT_TAIL)

    def __call__(self) -> tuple[bytes, bytes]:
        if self.pointer.value != self.words_at:
            self._arrays()
        return self.words(), self.cache()

    def mark(self) -> tuple[bytes, bytes, bytes]:
        """What tells a moved generator from an unmoved one (see :data:`_MARKS`)."""
        if self.pointer.value != self.words_at:
            self._arrays()
        return self.head(), self.tail(), self.cache()

    @staticmethod
    def mark_of(state: Any) -> tuple[bytes, bytes, bytes]:
        """:meth:`mark` of a state read whole."""
        return state[0][:_MT_HEAD], state[0][_MT_TAIL:], state[1]

    def write(self, state: Any) -> None:
        """Put back a state read here (~0.5 us; ``set_state`` takes ~30)."""
        assert _NP_LAYOUT is not None
        _numpy_write(_NP_RANDOM, _NP_LAYOUT, state)


_TORCH_HEAD, _TORCH_TAIL = 36, 2500
"""The engine's seed, position and first 4 words; its last 4 words and cached normals."""
_MT_HEAD, _MT_TAIL = 20, _MT_BYTES - 20
"""A Mersenne Twister's first and last bytes (numpy: words then position; CPython: position
then words): with the position, 4 words at each end."""

_ENGINE_BYTES = 2544
"""``CPUGeneratorImpl``'s ``engine_`` (``mt19937_data_pod``: ``seed_``, ``left_``,
``seeded_``, ``next_``, 624 words: 2520 bytes) and its two cached normals
(``std::optional<float>``, ``std::optional<double>``)."""


def _torch_offset(generator: torch.Generator) -> tuple[int, int] | None:
    """Where ``generator``'s implementation keeps its engine and cached normals, or ``None``.

    ``get_state()`` allocates and fills a 5 KB tensor (~2 us in a loop that makes tensors);
    the bytes behind it are read in ~0.4 us. ``THPGenerator`` is ``{PyObject_HEAD;
    at::Generator cdata;}`` (one pointer to the ``CPUGeneratorImpl``); the engine is found by
    its first fields (seed, position) as ``get_state()`` gives them, and the layout is checked
    by draws of every kind: the bytes change exactly when ``get_state()`` does, a cached
    normal included, and writing them back gives ``get_state()`` back.
    """
    if sys.byteorder != "little" or _PTR != 8 or sys.implementation.name != "cpython":
        return None
    address = ctypes.c_void_p.from_address(id(generator) + object.__basicsize__).value
    if address is None or address % 16 or not 2**16 < address < 2**47:
        return None  # not a heap pointer: another layout
    state = generator.get_state().numpy().tobytes()
    seed, left, _, _ = struct.unpack_from("<QiiQ", state, 0)
    words = struct.unpack_from(f"<{_MT_WORDS}Q", state, 24)
    head = ctypes.string_at(address, 256)
    at = head.find(struct.pack("<Qi", seed, left))
    if at < 0 or at % 8 or head.find(struct.pack("<Qi", seed, left), at + 1) >= 0:
        return None
    raw = ctypes.string_at(address + at, _ENGINE_BYTES)
    if struct.unpack_from(f"<{_MT_WORDS}I", raw, 20) != words:
        return None
    draws: tuple[Callable[[], object], ...] = (
        lambda: torch.rand(1, generator=generator),
        lambda: torch.randn((), dtype=torch.float64, generator=generator),  # caches one
        lambda: torch.randn((), dtype=torch.float64, generator=generator),  # uses it only
        lambda: torch.randn((), generator=generator),
        lambda: torch.randn((), generator=generator),
        lambda: torch.randn(17, generator=generator),
        lambda: torch.randint(9, (3,), generator=generator),
        lambda: torch.rand(_MT_WORDS + 1, generator=generator),  # past a twist
    )
    taken = ctypes.string_at(address + at, _ENGINE_BYTES)
    official = generator.get_state().numpy().tobytes()
    for draw in draws:
        before = ctypes.string_at(address + at, _ENGINE_BYTES)
        was = generator.get_state().numpy().tobytes()
        draw()
        moved = ctypes.string_at(address + at, _ENGINE_BYTES) != before
        if moved != (generator.get_state().numpy().tobytes() != was) or not moved:
            return None
    ctypes.memmove(address + at, taken, _ENGINE_BYTES)
    if generator.get_state().numpy().tobytes() != official:
        return None
    return object.__basicsize__, at


class _TorchReader:
    """The raw engine and cached normals of torch's default CPU generator (~0.2 us).

    The pointer to the implementation is read each time (``torch.default_generator`` keeps
    its one; the array over it is made again only if it changed); written back by the bytes
    too (``set_state`` checks and converts 5 KB).
    """

    __slots__ = ("at", "engine", "engine_at", "head", "pointer", "tail")

    def __init__(self, layout: tuple[int, int]) -> None:
        self.pointer = ctypes.c_void_p.from_address(id(_GENERATOR) + layout[0])
        self.at = layout[1]
        self.engine_at = 0
        self.engine = self._engine()

    def _engine(self) -> _Raw:
        address = self.pointer.value
        assert address is not None
        self.engine_at = address
        self.head = _Raw(address + self.at, _TORCH_HEAD)
        self.tail = _Raw(address + self.at + _TORCH_TAIL, _ENGINE_BYTES - _TORCH_TAIL)
        return _Raw(address + self.at, _ENGINE_BYTES)

    def __call__(self) -> bytes:
        if self.pointer.value != self.engine_at:
            self.engine = self._engine()
        return self.engine()

    def mark(self) -> tuple[bytes, bytes]:
        """What tells a moved generator from an unmoved one (see :data:`_MARKS`)."""
        if self.pointer.value != self.engine_at:
            self.engine = self._engine()
        return self.head(), self.tail()

    @staticmethod
    def mark_of(state: Any) -> tuple[bytes, bytes]:
        """:meth:`mark` of a state read whole."""
        return state[:_TORCH_HEAD], state[_TORCH_TAIL:]

    def write(self, state: Any) -> None:
        """Put back a state read here."""
        self()  # the engine where it is now
        ctypes.memmove(ctypes.addressof(self.engine.array), state, _ENGINE_BYTES)


def _read_numpy_official() -> tuple[bytes, int, int, float]:
    return _numpy_official(_NP_RANDOM)


def _read_random_official() -> Any:
    return random.getstate()


class _RandomReader:
    """The raw position and words of ``random``'s generator, and its ``gauss_next``."""

    __slots__ = ("head", "tail", "words")

    def __init__(self, offset: int) -> None:
        self.words = _Raw(id(PY_RANDOM) + offset, _MT_BYTES)
        self.head = _Raw(id(PY_RANDOM) + offset, _MT_HEAD)
        self.tail = _Raw(id(PY_RANDOM) + offset + _MT_TAIL, _MT_BYTES - _MT_TAIL)

    def __call__(self) -> tuple[bytes, Any]:
        return self.words(), PY_RANDOM.gauss_next

    def mark(self) -> tuple[bytes, bytes, Any]:
        """What tells a moved generator from an unmoved one (see :data:`_MARKS`)."""
        return self.head(), self.tail(), PY_RANDOM.gauss_next

    @staticmethod
    def mark_of(state: Any) -> tuple[bytes, bytes, Any]:
        """:meth:`mark` of a state read whole."""
        return state[0][:_MT_HEAD], state[0][_MT_TAIL:], state[1]

    def write(self, state: Any) -> None:
        """Put back a state read here (~0.5 us; ``setstate`` takes ~10)."""
        raw, gauss_next = state
        ctypes.memmove(ctypes.addressof(self.words.array), raw, _MT_BYTES)
        PY_RANDOM.gauss_next = gauss_next


def _torch_checked() -> tuple[int, int] | None:
    """:func:`_torch_offset` of torch's default generator, found on a generator of our own."""
    try:
        probe = torch.Generator().manual_seed(11)
        layout = _torch_offset(probe)
        if layout is None:
            return None
        state = _GENERATOR.get_state()
        try:
            if _torch_offset(_GENERATOR) != layout:
                return None
        finally:
            _GENERATOR.set_state(state)  # the check drew from it: the user's state as it was
    except Exception:  # noqa: BLE001 - any surprise: get_state() is used
        return None
    return layout


_TORCH_LAYOUT = _torch_checked()


class _Official:
    """A state read by the generator's own getter (the fallback): its mark is all of it."""

    __slots__ = ("get",)

    def __init__(self, get: Callable[[], Any]) -> None:
        self.get = get

    def __call__(self) -> Any:
        return self.get()

    def mark(self) -> Any:
        return self.get()

    @staticmethod
    def mark_of(state: Any) -> Any:
        return state


_Reader = _TorchReader | _NumpyReader | _RandomReader | _Official

_READERS: dict[Rng, _Reader] = {
    "torch": _Official(_read_torch) if _TORCH_LAYOUT is None else _TorchReader(_TORCH_LAYOUT),
    "numpy": _Official(_read_numpy_official) if _NP_LAYOUT is None else _NumpyReader(_NP_LAYOUT),
    "random": _Official(_read_random_official) if _PY_OFFSET is None else _RandomReader(_PY_OFFSET),
}
"""Each RNG's state, as a value that compares equal to an unchanged one (0.2-0.5 us), and
its *mark*: a few bytes that change whenever the state does (~0.1 us). A draw moves the
position; a draw of exactly a multiple of 624 words leaves the position where it was but
makes every word anew, so 4 words at each end differ (all 8 staying the same has a chance of
2**-256); the cached normals are part of it."""


def _write(rng: Rng, state: Any) -> None:
    """Put back a state :data:`_READERS` gave."""
    reader = _READERS[rng]
    if not isinstance(reader, _Official):
        reader.write(state)
    elif rng == "torch":
        _GENERATOR.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))
    elif rng == "numpy":
        words, pos, has, gauss = state
        np.random.set_state(("MT19937", np.frombuffer(words, np.uint32), pos, has, gauss))
    else:
        random.setstate(state)


_READER_TUPLES: dict[tuple[Rng, ...], tuple[_Reader, ...]] = {}
"""The readers of each tuple of RNGs taken (a batch takes the same tuple every time)."""


def _readers(rngs: tuple[Rng, ...]) -> tuple[_Reader, ...]:
    found = _READER_TUPLES.get(rngs)
    if found is None:
        found = _READER_TUPLES[rngs] = tuple(_READERS[rng] for rng in rngs)
    return found


def marks(rngs: tuple[Rng, ...]) -> tuple[Any, ...]:
    """The marks of ``rngs`` now (see :data:`_READERS`): equal marks, unmoved generators."""
    return tuple([reader.mark() for reader in _readers(rngs)])


class RngStates:
    """The states of some global RNGs at one moment: what moved since, and putting them back.

    Taking one costs ~2 us for the three (copies of the bytes behind the generators, not
    ``getstate()``'s tuples of ints; torch's ``get_state()`` is most of it).
    """

    __slots__ = ("rngs", "values")

    def __init__(self, rngs: tuple[Rng, ...] = RNGS) -> None:
        self.rngs = rngs
        self.values = tuple([read() for read in _readers(rngs)])

    def marks(self) -> tuple[Any, ...]:
        """The marks of the states taken (compare with :func:`marks` of now)."""
        return tuple([r.mark_of(v) for r, v in zip(_readers(self.rngs), self.values, strict=True)])

    def moved(self, rngs: Iterable[Rng] | None = None) -> tuple[Rng, ...]:
        """Those of ``rngs`` (default: all taken) whose state is no longer the one taken."""
        if rngs is None:
            return self.since(RngStates(self.rngs))
        taken = dict(zip(self.rngs, self.values, strict=True))
        return tuple(r for r in rngs if _READERS[r]() != taken[r])

    def since(self, later: RngStates) -> tuple[Rng, ...]:
        """The RNGs whose state in ``later`` (taken of the same RNGs) is not this one's."""
        return tuple(
            r for r, a, b in zip(self.rngs, self.values, later.values, strict=True) if a != b
        )

    def restore(self, rngs: Iterable[Rng] | None = None) -> None:
        """Put back the states taken of ``rngs`` (default: all taken)."""
        taken = dict(zip(self.rngs, self.values, strict=True))
        for rng in self.rngs if rngs is None else rngs:
            _write(rng, taken[rng])


def user_rngs() -> RngStates:
    """The main process's global RNG states, to put back once a batch was made there."""
    return RngStates()


def restore_rngs(states: RngStates) -> None:
    """Put back the global RNG states :func:`user_rngs` took."""
    states.restore()
