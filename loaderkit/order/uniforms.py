"""Counter-based uniforms: the random numbers of weighted sampling and of mixtures.

A uniform in ``[0, 1)`` at position ``p`` is ``(mix64(key ^ p) >> 11) * 2**-53``: a pure
function of ``(seed, component, epoch, p)`` that any range of positions can compute alone (no
numpy ``Generator`` stream, so a resumed epoch does not replay earlier draws). The definition
is step 1 of the weighted sampling contract, stated in :mod:`loaderkit.order.weighted`
(``docs/order.md``); :mod:`loaderkit.order.weighted` and :mod:`loaderkit.order.mixture` draw
from :func:`uniform_draws`, and the weighted sampler also reads the 53-bit integers
(:func:`bits53`) before their scaling by :data:`UNIT`.

Pure numpy and the standard library; never imports torch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loaderkit.order.feistel import mix64
from loaderkit.order.keys import as_int, derive_key

__all__ = ["BLOCK", "MAX_POSITION", "UNIT", "bits53", "bits53_range", "uniform_draws"]

#: Positions processed per step of numpy work (an implementation detail: it changes the
#: speed, never the values).
BLOCK = 1 << 16

#: Positions of :func:`uniform_draws` must lie below this (they are int64).
MAX_POSITION = 2**63

#: The scale of the 53-bit integers: ``u_p = k_p * UNIT`` (exact in binary64).
UNIT = 2.0**-53

_SHIFT53 = np.uint64(11)

_U64 = npt.NDArray[np.uint64]


def bits53(key: int, positions: _U64) -> _U64:
    """``mix64(key ^ p) >> 11`` for an array of positions (a new array; wraps silently)."""
    z = mix64(np.bitwise_xor(positions, np.uint64(key)))
    z >>= _SHIFT53
    return z


def bits53_range(key: int, start: int, stop: int) -> _U64:
    """:func:`bits53` of the positions ``[start, stop)``."""
    return bits53(key, np.arange(start, stop, dtype=np.uint64))


def uniform_draws(
    seed: int, component: str, epoch: int, start: int, stop: int
) -> npt.NDArray[np.float64]:
    """Counter-based uniforms in ``[0, 1)`` at positions ``start .. stop-1``.

    ``u_p = (mix64(key ^ p) >> 11) * 2**-53`` with ``key = derive_key(seed, component, epoch)``
    and ``mix64`` the splitmix64 finalizer (step 1 of the :mod:`loaderkit.order.weighted`
    docstring). Each value is a multiple of ``2**-53`` in ``[0, 1 - 2**-53]`` and depends
    only on ``(seed, component, epoch, p)``: ``uniform_draws(s, c, e, a, b)`` equals
    ``uniform_draws(s, c, e, 0, b)[a:]``.

    Args:
        seed: the user's seed (``>= 0``).
        component: the consumer's name, a ``str`` (``"weights"`` and ``"weights-noreplace"``
            are the weighted samplers'); the first component of the key path, so pick one no
            other part of loaderkit uses (``docs/order.md`` §1 lists them).
        epoch: the epoch number (``>= 0``).
        start: the first position, ``>= 0``.
        stop: one past the last position, ``start <= stop <= 2**63``.

    Returns:
        A new float64 array of ``stop - start`` values.

    Raises:
        TypeError: an argument has the wrong type (bools are refused).
        ValueError: a number is out of range.

    """
    if not isinstance(component, str):
        raise TypeError(
            f"component must be a str naming the consumer (e.g. 'weights'), "
            f"got {type(component).__name__} {component!r}"
        )
    epoch_int = as_int("epoch", epoch)
    lo = as_int("start", start)
    hi = as_int("stop", stop)
    if hi < lo:
        raise ValueError(f"stop must be >= start, got start={lo}, stop={hi}; pass start <= stop")
    if hi > MAX_POSITION:
        raise ValueError(f"stop must be <= 2**63 (positions are int64), got {hi}")
    key = derive_key(seed, component, epoch_int)
    out = np.empty(hi - lo, dtype=np.float64)
    for a in range(lo, hi, BLOCK):
        b = min(a + BLOCK, hi)
        out[a - lo : b - lo] = bits53_range(key, a, b)  # < 2**53: converted exactly
    out *= UNIT  # a power of two: exact
    return out
