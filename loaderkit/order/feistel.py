"""A keyed pseudo-random permutation of ``[0, n)`` computed pointwise in O(1) memory.

The permutation is a six-round Feistel network on a mixed-radix domain ``[0, u*v)``
(``v = 2**c`` a power of two near ``sqrt(n)``, ``u = ceil(n / v)``, so ``n <= u*v < n + v``)
restricted to ``[0, n)`` by cycle-walking.  Rounds alternate between adding a keyed
pseudo-random function modulo ``u`` and XORing one into ``c`` bits.  Any position can be
mapped without materializing the permutation, so the indices of batch ``k`` of a
100-million-sample epoch cost the same as those of batch 0; and because the domain is
less than ``n + v``, cycle-walking almost never needs a second pass.

Everything is computed with numpy array arithmetic (wrap-around multiplication is intended)
and is bit-for-bit reproducible; the algorithm is specified in ``docs/order.md``.  This
module never imports torch.

Implementation notes (none of this is part of the contract; only the values are):

- For ``n < 2**32`` the state fits in ``uint32`` and every round function has at most
  ``2**16`` inputs, so the six round functions are tabulated once per permutation (at most
  1.5 MiB, built lazily on the first large enough call) and a round is one table gather plus
  two or three cheap ufuncs.  Larger ``n`` computes the round functions in ``uint64`` on the
  fly.  Both paths compute the same values (the tests check it).
- Positions are processed in blocks of :data:`BLOCK` so the working set stays in the CPU
  cache and numpy's per-call overhead is amortized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.keys import as_int, derive_key

__all__ = ["BLOCK", "MAX_N", "ROUNDS", "FeistelPermutation", "mix64"]

#: Number of Feistel rounds.  Part of the order contract.
ROUNDS = 6

#: Largest supported ``n``: every position and value must fit in an int64.
MAX_N = 2**63 - 1

#: Positions mapped per block of numpy work (an implementation detail: it changes the speed,
#: never the values).
BLOCK = 1 << 15

# Round-function constants (the splitmix64 finalizer).  Part of the order contract.
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_SHIFT1 = np.uint64(30)
_SHIFT2 = np.uint64(27)
_SHIFT3 = np.uint64(31)

# Below this n the state fits in uint32 and the round functions are tabulated.
_SMALL_N = 2**32
# Tables this small are built on the first call whatever its size.
_CHEAP_TABLES = 1024

_U64 = npt.NDArray[np.uint64]
_U32 = npt.NDArray[np.uint32]
_I64 = npt.NDArray[np.int64]
_Unsigned = npt.NDArray[Any]
_Step = Callable[[_Unsigned], _Unsigned]


def mix64(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """The splitmix64 finalizer of an array of uint64, in place (``z`` is returned).

    ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
    z ^= z >> 31``, multiplication modulo ``2**64``: a bijection of 64-bit words. Arrays
    only (never numpy scalars), so the wrap-around stays silent.
    """
    z ^= z >> _SHIFT1
    z *= _MUL1
    z ^= z >> _SHIFT2
    z *= _MUL2
    z ^= z >> _SHIFT3
    return z


def _round_values(half: _U64, round_key: np.uint64, modulus: int) -> _U64:
    """Return ``mix64(half XOR round_key) mod modulus`` for an array of half-blocks.

    ``mix64`` is the bijective 64-bit splitmix64 finalizer
    ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
    z ^= z >> 31`` with multiplication modulo ``2**64``.  Operating on arrays (never
    numpy scalars) keeps the wrap-around silent: numpy's array ufuncs do not check
    integer overflow, while scalar arithmetic would warn.  ``half`` is not modified.
    """
    z = mix64(np.bitwise_xor(half, round_key))
    if modulus & (modulus - 1) == 0:  # a power of two: the remainder is a mask
        z &= np.uint64(modulus - 1)
    else:
        np.remainder(z, np.uint64(modulus), out=z)
    return z


class FeistelPermutation:
    """A keyed bijection of ``[0, n)`` computed pointwise in O(1) memory.

    With ``b = bit_length(n - 1)``, ``c = b // 2``, ``v = 2**c`` and ``u = ceil(n / v)``, a
    block ``x`` in ``[0, u*v)`` is the pair ``(L, R) = (x // v, x % v)``.  Round ``i``
    (``i = 0 .. 5``) with round key ``k_i = derive_key(key, "feistel", i)`` and
    ``F_i(r, m) = mix64(r ^ k_i) mod m`` maps

    - for even ``i``: ``(L, R) -> (R, (L + F_i(R, u)) mod u)``,
    - for odd ``i``: ``(L, R) -> (R, L ^ F_i(R, v))``,

    so the halves alternate between ``[0, u)`` and ``[0, v)`` and, after the six rounds,
    ``(L, R)`` is back in ``[0, u) x [0, v)`` and the output is ``L*v + R``.  Outputs ``>=
    n`` are fed back into the network (cycle-walking) until they fall in ``[0, n)``;
    because ``u*v < n + v``, the out-of-range part of the domain is below ``v/n`` (about
    ``2/sqrt(n)``), so almost every position takes one pass.  ``mix64`` is the splitmix64
    finalizer; ``docs/order.md`` specifies everything bit for bit.

    ``n == 0`` (the empty permutation) and ``n == 1`` are supported.  Instances compare
    and hash by ``(n, key)``; they are safe to share between threads.
    """

    __slots__ = ("_c", "_key", "_keys", "_n", "_tables", "_u", "_v")

    def __init__(self, n: int, key: int) -> None:
        """Build the permutation of ``[0, n)`` keyed by ``key``.

        Args:
            n: the domain size, ``0 <= n <= MAX_N`` (``2**63 - 1``).
            key: a 64-bit unsigned key, ``0 <= key < 2**64`` (typically from
                ``derive_key``).

        Raises:
            TypeError: ``n`` or ``key`` is not an int (bools are rejected).
            ValueError: ``n`` or ``key`` is out of range.

        """
        n_int = as_int("n", n)
        if n_int > MAX_N:
            raise ValueError(
                f"n must be <= 2**63 - 1 (positions are int64), got {n_int}; use a smaller n"
            )
        key_int = as_int("key", key)
        if key_int >= 2**64:
            raise ValueError(
                f"key must be a 64-bit unsigned int (< 2**64), got {key_int}; "
                f"derive one with derive_key(seed, ...)"
            )
        self._n = n_int
        self._key = key_int
        self._c = max(n_int - 1, 0).bit_length() // 2
        self._v = 1 << self._c
        self._u = -(-n_int // self._v)
        self._keys = tuple(np.uint64(derive_key(key_int, "feistel", i)) for i in range(ROUNDS))
        self._tables: tuple[_U32, ...] | None = None

    @property
    def n(self) -> int:
        """The domain size: the permutation maps ``[0, n)`` onto itself."""
        return self._n

    @property
    def key(self) -> int:
        """The 64-bit key the round keys are derived from."""
        return self._key

    @property
    def domain(self) -> int:
        """The size ``u*v`` of the network's domain (``n <= domain < n + v``; 0 when n is 0)."""
        return self._u * self._v

    def __repr__(self) -> str:
        """Return ``FeistelPermutation(n=..., key=...)``."""
        return f"FeistelPermutation(n={self._n}, key={self._key:#018x})"

    def __eq__(self, other: object) -> bool:
        """Two permutations are equal when they have the same ``n`` and ``key``."""
        if not isinstance(other, FeistelPermutation):
            return NotImplemented
        return (self._n, self._key) == (other._n, other._key)

    def __hash__(self) -> int:
        """Hash by ``(n, key)``."""
        return hash((FeistelPermutation, self._n, self._key))

    def __len__(self) -> int:
        """Return ``n``."""
        return self._n

    def __reduce__(self) -> tuple[type[FeistelPermutation], tuple[int, int]]:
        """Pickle as ``(n, key)``: the round tables are a cache, rebuilt on demand."""
        return FeistelPermutation, (self._n, self._key)

    # -- the round functions ----------------------------------------------------------------

    def _modulus(self, round_index: int) -> int:
        """The modulus of round ``round_index``'s function: ``u`` (even) or ``v`` (odd)."""
        return self._u if round_index % 2 == 0 else self._v

    def _table_entries(self) -> int:
        """Total size of the six tables (even rounds have ``v`` inputs, odd ones ``u``)."""
        return (ROUNDS // 2) * (self._u + self._v)

    def _build_tables(self) -> tuple[_U32, ...]:
        """Tabulate ``F_i(r, m_i)`` for every round ``i`` and every input ``r`` (n < 2**32)."""
        tables = []
        for i, round_key in enumerate(self._keys):
            size = self._v if i % 2 == 0 else self._u
            values = _round_values(np.arange(size, dtype=np.uint64), round_key, self._modulus(i))
            table = values.astype(np.uint32)
            table.flags.writeable = False
            tables.append(table)
        result = tuple(tables)
        self._tables = result  # one atomic store: concurrent builders just duplicate work
        return result

    # -- one pass of the network, uint32 with tables (n < 2**32) ------------------------------

    def _forward_small(self, x: _U32, tables: tuple[_U32, ...]) -> _U32:
        """One forward pass on blocks in ``[0, u*v)``, with the tabulated round functions."""
        c = np.uint32(self._c)
        u = np.uint32(self._u)
        left = x >> c
        right = x & np.uint32(self._v - 1)
        spare = np.empty_like(x)
        for i, table in enumerate(tables):
            out = np.take(table, right, out=spare, mode="wrap")  # in range: wrap is the fast mode
            if i % 2 == 0:
                out += left  # < 2u: (L + F) mod u is min(s, s - u) in wrap-around uint32
                np.subtract(out, u, out=left)
                np.minimum(out, left, out=out)
            else:
                out ^= left
            spare = left
            left, right = right, out
        left <<= c
        left |= right
        return left

    def _backward_small(self, y: _U32, tables: tuple[_U32, ...]) -> _U32:
        """One inverse pass on blocks in ``[0, u*v)``, with the tabulated round functions."""
        c = np.uint32(self._c)
        u = np.uint32(self._u)
        left = y >> c
        right = y & np.uint32(self._v - 1)
        spare = np.empty_like(y)
        for i in range(ROUNDS - 1, -1, -1):
            out = np.take(tables[i], left, out=spare, mode="wrap")
            if i % 2 == 0:
                np.subtract(right, out, out=out)  # (R - F) mod u is min(d, d + u) in uint32
                np.add(out, u, out=right)
                np.minimum(out, right, out=out)
            else:
                out ^= right
            spare = right
            left, right = out, left
        left <<= c
        left |= right
        return left

    # -- one pass of the network, uint64 computed on the fly (any n) -------------------------

    def _forward_large(self, x: _U64) -> _U64:
        """One forward pass on blocks in ``[0, u*v)``, computing the round functions."""
        c = np.uint64(self._c)
        u = np.uint64(self._u)
        left = x >> c
        right = x & np.uint64(self._v - 1)
        for i, round_key in enumerate(self._keys):
            out = _round_values(right, round_key, self._modulus(i))
            if i % 2 == 0:
                out += left  # < 2u <= 2**33: no wrap-around before the min trick
                np.subtract(out, u, out=left)
                np.minimum(out, left, out=out)
            else:
                out ^= left
            left, right = right, out
        left <<= c
        left |= right
        return left

    def _backward_large(self, y: _U64) -> _U64:
        """One inverse pass on blocks in ``[0, u*v)``, computing the round functions."""
        c = np.uint64(self._c)
        u = np.uint64(self._u)
        left = y >> c
        right = y & np.uint64(self._v - 1)
        for i in range(ROUNDS - 1, -1, -1):
            out = _round_values(left, self._keys[i], self._modulus(i))
            if i % 2 == 0:
                np.subtract(right, out, out=out)
                np.add(out, u, out=right)
                np.minimum(out, right, out=out)
            else:
                out ^= right
            left, right = out, left
        left <<= c
        left |= right
        return left

    # -- mapping arrays ---------------------------------------------------------------------

    def _stepper(
        self, count: int, *, inverse: bool, force_large: bool = False
    ) -> tuple[type[np.unsignedinteger[Any]], _Step]:
        """Pick the pass for ``count`` values: the working dtype and one pass of the network.

        The tabulated uint32 path when ``n < 2**32`` and the tables exist or are worth
        building: for a whole block of values, for at least an eighth of the table entries,
        or when the tables are tiny.  Otherwise the uint64 path, which needs no tables.
        """
        tables = self._tables
        if not force_large and self._n < _SMALL_N:
            entries = self._table_entries()
            if tables is None and (count >= BLOCK or entries <= max(_CHEAP_TABLES, 8 * count)):
                tables = self._build_tables()
            if tables is not None:
                built = tables
                if inverse:
                    return np.uint32, lambda x: self._backward_small(x, built)
                return np.uint32, lambda x: self._forward_small(x, built)
        return np.uint64, self._backward_large if inverse else self._forward_large

    def _walk(self, x: _Unsigned, step: _Step) -> _Unsigned:
        """Apply the network and cycle-walk every output ``>= n`` back into range."""
        limit = x.dtype.type(self._n)
        out = step(x)
        todo = np.flatnonzero(out >= limit)
        while todo.size:
            again = step(out[todo])
            out[todo] = again
            todo = todo[again >= limit]
        return out

    def _apply(self, values: npt.NDArray[Any], *, inverse: bool, force_large: bool = False) -> _I64:
        """Map a flat array of validated values in ``[0, n)`` (any integer dtype) to int64."""
        count = values.size
        if self._n <= 1 or count == 0:
            return values.astype(np.int64)
        dtype, step = self._stepper(count, inverse=inverse, force_large=force_large)
        out = np.empty(count, dtype=np.int64)
        for lo in range(0, count, BLOCK):
            hi = min(lo + BLOCK, count)
            out[lo:hi] = self._walk(values[lo:hi].astype(dtype), step)
        return out

    def _checked(self, values: Any, name: str) -> tuple[npt.NDArray[Any], tuple[int, ...]]:
        """Validate an array of positions/values in ``[0, n)`` and return it flat."""
        arr = np.asarray(values)
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(
                f"{name} must be an array of integers, got dtype {arr.dtype}; "
                f"convert with numpy.asarray(..., dtype=numpy.int64)"
            )
        if arr.size:
            low = int(arr.min())
            high = int(arr.max())
            if low < 0 or high >= self._n:
                raise ValueError(
                    f"{name} must lie in [0, n) = [0, {self._n}), got values in "
                    f"[{low}, {high}]; pass only {name} below n={self._n}"
                )
        return arr.reshape(-1), arr.shape

    def __call__(self, positions: npt.ArrayLike) -> _I64:
        """Map positions to permutation values.

        Args:
            positions: an integer array (any shape, any integer dtype) of
                positions in ``[0, n)``.

        Returns:
            An int64 array of the same shape: the values at those positions.

        Raises:
            TypeError: ``positions`` is not an integer array.
            ValueError: a position lies outside ``[0, n)``.

        """
        flat, shape = self._checked(positions, "positions")
        return self._apply(flat, inverse=False).reshape(shape)

    def slice(self, start: int, stop: int) -> _I64:
        """Return the values at positions ``start .. stop-1`` as an int64 array.

        ``start`` and ``stop`` are clipped to ``n``; an empty range (``stop <=
        start`` after clipping) gives an empty array.  Computed in blocks of
        :data:`BLOCK` positions, so a whole epoch costs the same per index as a block.

        Raises:
            TypeError: ``start`` or ``stop`` is not an int.
            ValueError: ``start`` or ``stop`` is negative.

        """
        lo = min(as_int("start", start), self._n)
        hi = min(as_int("stop", stop), self._n)
        if hi <= lo:
            return np.empty(0, dtype=np.int64)
        if self._n <= 1:
            return np.arange(lo, hi, dtype=np.int64)
        dtype, step = self._stepper(hi - lo, inverse=False)
        out = np.empty(hi - lo, dtype=np.int64)
        for a in range(lo, hi, BLOCK):
            b = min(a + BLOCK, hi)
            out[a - lo : b - lo] = self._walk(np.arange(a, b, dtype=dtype), step)
        return out

    def inverse(self, values: npt.ArrayLike) -> _I64:
        """Map permutation values back to their positions (the inverse permutation).

        ``self.inverse(self(p)) == p`` and ``self(self.inverse(v)) == v``.

        Args:
            values: an integer array (any shape) of values in ``[0, n)``.

        Returns:
            An int64 array of the same shape: the position of each value.

        Raises:
            TypeError: ``values`` is not an integer array.
            ValueError: a value lies outside ``[0, n)``.

        """
        flat, shape = self._checked(values, "values")
        return self._apply(flat, inverse=True).reshape(shape)
