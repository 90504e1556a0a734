"""A keyed pseudo-random permutation of ``[0, n)`` computed pointwise in O(1) memory.

The permutation is a balanced Feistel network on ``2*h`` bits (the smallest
``h >= 1`` with ``4**h >= n``) restricted to ``[0, n)`` by cycle-walking.  Any
position can be mapped without materializing the permutation, so the indices
of batch ``k`` of a 100-million-sample epoch cost the same as those of batch 0.

Everything is computed with numpy ``uint64`` array arithmetic (wrap-around
multiplication is intended) and is bit-for-bit reproducible; the algorithm is
specified in ``docs/order.md``.  This module never imports torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.keys import _as_int, derive_key

__all__ = ["MAX_N", "ROUNDS", "FeistelPermutation"]

#: Number of Feistel rounds.  Part of the order contract.
ROUNDS = 6

#: Largest supported ``n``: every position and value must fit in an int64.
MAX_N = 2**63 - 1

# Round-function constants (the splitmix64 finalizer multipliers).  Part of the order contract.
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_SHIFT1 = np.uint64(30)
_SHIFT2 = np.uint64(27)
_SHIFT3 = np.uint64(31)

_U64 = npt.NDArray[np.uint64]


def _half_bits(n: int) -> int:
    """Return the smallest ``h >= 1`` with ``4**h >= n``."""
    if n <= 4:
        return 1
    return ((n - 1).bit_length() + 1) // 2


def _round_function(half: _U64, round_key: np.uint64, mask: np.uint64) -> _U64:
    """Return ``mix64(half XOR round_key) AND mask`` for an array of half-blocks.

    ``mix64`` is the bijective 64-bit finalizer
    ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
    z ^= z >> 31`` with multiplication modulo ``2**64``.  Operating on arrays (never
    numpy scalars) keeps the wrap-around silent: numpy's array ufuncs do not check
    integer overflow, while scalar arithmetic would warn.
    """
    z = np.bitwise_xor(half, round_key)
    z ^= z >> _SHIFT1
    z *= _MUL1
    z ^= z >> _SHIFT2
    z *= _MUL2
    z ^= z >> _SHIFT3
    z &= mask
    return z


class FeistelPermutation:
    """A keyed bijection of ``[0, n)`` computed pointwise in O(1) memory.

    A balanced Feistel network on ``2*h`` bits (the smallest ``h >= 1`` with
    ``4**h >= n``) with ``ROUNDS`` (6) rounds.  Round ``i`` uses the round key
    ``derive_key(key, "feistel", i)`` and maps the halves ``(L, R)`` to
    ``(R, L ^ F(R, k_i))`` where ``F`` is a fixed 64-bit integer mixing of
    ``R ^ k_i`` masked to ``h`` bits.  Outputs ``>= n`` are fed back into the
    network (cycle-walking) until they fall in ``[0, n)``; because the network
    is a bijection of ``[0, 4**h)`` and ``4**h < 4*n`` (for ``n > 4``), this
    takes fewer than four passes on average and the result is a bijection of
    ``[0, n)``.

    ``n == 0`` (the empty permutation) and ``n == 1`` are supported.  Instances
    compare and hash by ``(n, key)``.
    """

    __slots__ = ("_h", "_key", "_keys", "_mask", "_n", "_n_u64")

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
        n_int = _as_int("n", n)
        if n_int > MAX_N:
            raise ValueError(
                f"n must be <= 2**63 - 1 (positions are int64), got {n_int}; use a smaller n"
            )
        key_int = _as_int("key", key)
        if key_int >= 2**64:
            raise ValueError(
                f"key must be a 64-bit unsigned int (< 2**64), got {key_int}; "
                f"derive one with derive_key(seed, ...)"
            )
        self._n = n_int
        self._key = key_int
        self._h = _half_bits(n_int)
        self._mask = np.uint64((1 << self._h) - 1)
        self._n_u64 = np.uint64(n_int)
        self._keys = tuple(np.uint64(derive_key(key_int, "feistel", i)) for i in range(ROUNDS))

    @property
    def n(self) -> int:
        """The domain size: the permutation maps ``[0, n)`` onto itself."""
        return self._n

    @property
    def key(self) -> int:
        """The 64-bit key the round keys are derived from."""
        return self._key

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

    # -- the network -------------------------------------------------------------------------

    def _forward(self, x: _U64) -> _U64:
        """Apply the Feistel network (one pass, no cycle-walking) to values in ``[0, 4**h)``."""
        h = np.uint64(self._h)
        mask = self._mask
        left = x >> h
        right = x & mask
        for round_key in self._keys:
            left ^= _round_function(right, round_key, mask)
            left, right = right, left
        return (left << h) | right

    def _backward(self, y: _U64) -> _U64:
        """Apply the inverse Feistel network (one pass) to values in ``[0, 4**h)``."""
        h = np.uint64(self._h)
        mask = self._mask
        left = y >> h
        right = y & mask
        for round_key in reversed(self._keys):
            left, right = right, left
            left ^= _round_function(right, round_key, mask)
        return (left << h) | right

    def _walk(self, x: _U64, *, inverse: bool) -> _U64:
        """Apply the network and cycle-walk every output ``>= n`` back into range."""
        step = self._backward if inverse else self._forward
        out = step(x)
        todo = np.flatnonzero(out >= self._n_u64)
        while todo.size:
            again = step(out[todo])
            out[todo] = again
            todo = todo[again >= self._n_u64]
        return out

    def _checked(self, values: Any, name: str) -> tuple[_U64, tuple[int, ...]]:
        """Validate an array of positions/values in ``[0, n)`` and return it flat as uint64."""
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
        return arr.astype(np.uint64).reshape(-1), arr.shape

    def __call__(self, positions: npt.ArrayLike) -> npt.NDArray[np.int64]:
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
        return self._walk(flat, inverse=False).astype(np.int64).reshape(shape)

    def slice(self, start: int, stop: int) -> npt.NDArray[np.int64]:
        """Return the values at positions ``start .. stop-1`` as an int64 array.

        ``start`` and ``stop`` are clipped to ``n``; an empty range (``stop <=
        start`` after clipping) gives an empty array.

        Raises:
            TypeError: ``start`` or ``stop`` is not an int.
            ValueError: ``start`` or ``stop`` is negative.

        """
        lo = min(_as_int("start", start), self._n)
        hi = min(_as_int("stop", stop), self._n)
        if hi <= lo:
            return np.empty(0, dtype=np.int64)
        positions = np.arange(lo, hi, dtype=np.uint64)
        return self._walk(positions, inverse=False).astype(np.int64)

    def inverse(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
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
        return self._walk(flat, inverse=True).astype(np.int64).reshape(shape)
