"""Stable key derivation for the order engine.

Every random decision loaderkit makes (the shuffle of an epoch, a per-sample
transform RNG, a per-batch collator RNG, the seed of a worker's global RNGs) is
keyed by a 64-bit integer derived here from the user's seed and a *component
path* such as ``("shuffle", epoch)``.  The derivation is BLAKE2b over a
canonical, unambiguous byte encoding of the path, so it is identical on every
platform, Python version and numpy release.  ``docs/order.md`` specifies the
encoding byte for byte; changing it is a breaking change of the order contract.

The checks of the plain arguments (seeds, epochs, counts, flags) that every order module
shares live here too: :func:`as_int`, :func:`as_bool` and :func:`as_real_array`.

This module imports only the standard library and numpy (never torch).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DOMAIN",
    "as_bool",
    "as_int",
    "as_real_array",
    "batch_rng",
    "derive_key",
    "sample_rng",
    "sample_seed",
    "worker_seed",
]

#: Domain-separation string hashed in front of every key path.  Part of the
#: order contract: changing it changes every key (and so every shuffle).
DOMAIN = "loaderkit.order.v1"


def _encode_str(text: str) -> bytes:
    """Encode a string part: tag ``b"s"``, u64-LE byte length, UTF-8 bytes."""
    data = text.encode("utf-8")
    return b"s" + len(data).to_bytes(8, "little") + data


def _encode_int(value: int) -> bytes:
    """Encode an integer part: tag ``b"i"``, u64-LE byte length, signed LE bytes.

    The byte length is ``(value.bit_length() + 8) // 8``: the smallest whole
    number of bytes that holds the value in two's complement with a sign bit
    (``0 -> 1`` byte, ``255 -> 2`` bytes, ``2**64 -> 9`` bytes).
    """
    size = (value.bit_length() + 8) // 8
    return b"i" + size.to_bytes(8, "little") + value.to_bytes(size, "little", signed=True)


def as_int(name: str, value: object, *, minimum: int | None = 0) -> int:
    """Return ``value`` as a Python int, rejecting bools, non-integers and too-small values."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(
            f"{name} must be an integer, got the bool {value!r}; "
            f"pass an int (a bool is almost always a mistake here)"
        )
    if not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}; "
            f"pass an int such as {name}=0"
        )
    result = int(value)
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {result}; pass a value >= {minimum}")
    return result


def as_bool(name: str, value: object) -> bool:
    """Return ``value`` as a Python bool; only a bool (Python or numpy) is accepted."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def as_real_array(
    name: str, value: object, *, hint: str, bool_hint: str | None = None
) -> npt.NDArray[Any]:
    """Return ``value`` as a numpy array of real numbers (integers or floats), not copied.

    A bool array is refused with ``bool_hint`` (or, without one, as any other dtype is,
    with ``hint``): the hints end the messages with what to pass instead.
    """
    arr = np.asarray(value)
    if arr.dtype == np.bool_ and bool_hint is not None:
        raise TypeError(f"{name} must be numbers, got a bool array; {bool_hint}")
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be real numbers (an integer or float array), got dtype "
            f"{arr.dtype}; {hint}"
        )
    return arr


def _encode_component(position: int, component: object) -> bytes:
    """Encode one element of a component path (a ``str`` or an ``int``)."""
    if isinstance(component, str):
        return _encode_str(component)
    if isinstance(component, (int, np.integer)) and not isinstance(component, (bool, np.bool_)):
        return _encode_int(int(component))
    raise TypeError(
        f"key path component #{position} must be a str or an int (not a bool), "
        f"got {type(component).__name__} {component!r}; convert it with str() or int()"
    )


def derive_key(seed: int, *components: str | int) -> int:
    """Derive a 64-bit unsigned key from ``seed`` and a stable component path.

    Example: ``derive_key(seed, "shuffle", epoch)`` is the key of the shuffle of
    ``epoch``.  The result is
    ``int.from_bytes(blake2b(message, digest_size=8).digest(), "little")`` where
    ``message`` is the encoding of ``DOMAIN``, then of ``seed``, then of each
    component, each part tagged with its type and prefixed with its byte length
    (see ``docs/order.md``), so different paths never encode to the same bytes.

    Args:
        seed: the user's seed, any Python int ``>= 0`` (values ``>= 2**64`` are
            encoded in full, not truncated).
        *components: the path; each a ``str`` (hashed as UTF-8, no
            normalization) or an ``int`` (any sign).  Bools are rejected.

    Returns:
        An int in ``[0, 2**64)``.

    Raises:
        TypeError: ``seed`` or a component has the wrong type.
        ValueError: ``seed`` is negative.

    """
    seed_int = as_int("seed", seed)
    parts = [_encode_str(DOMAIN), _encode_int(seed_int)]
    parts.extend(_encode_component(i, c) for i, c in enumerate(components))
    digest = hashlib.blake2b(b"".join(parts), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _check_component(component: object) -> str:
    """Validate a user-supplied component name (a str)."""
    if not isinstance(component, str):
        raise TypeError(
            f"component must be a str naming the consumer (e.g. 'crop'), "
            f"got {type(component).__name__} {component!r}"
        )
    return component


def sample_seed(seed: int, component: str, epoch: int, index: int) -> np.random.SeedSequence:
    """Return the ``SeedSequence`` keyed to one sample of one epoch, for one component.

    The entropy is ``derive_key(seed, "sample", component)`` and the spawn key is
    ``(epoch, index)``, so two different ``(epoch, index)`` pairs always give
    different SeedSequence inputs; numpy's SeedSequence then hashes them into a
    128-bit pool.

    Args:
        seed: the user's seed (``>= 0``).
        component: a name for the consumer of the randomness (e.g. ``"crop"``),
            so that two transforms on the same sample draw independent streams.
        epoch: the epoch number (``>= 0``).
        index: the sample index in the dataset (``>= 0``), not its position in
            the epoch: a sample's randomness does not depend on the shuffle.

    """
    name = _check_component(component)
    epoch_int = as_int("epoch", epoch)
    index_int = as_int("index", index)
    return np.random.SeedSequence(
        entropy=derive_key(seed, "sample", name), spawn_key=(epoch_int, index_int)
    )


def sample_rng(seed: int, component: str, epoch: int, index: int) -> np.random.Generator:
    """Return ``Generator(PCG64(sample_seed(seed, component, epoch, index)))``.

    A fresh, reproducible RNG for one sample's transform, independent of the
    batch it lands in, of the worker that loads it and of the shuffle.
    """
    return np.random.Generator(np.random.PCG64(sample_seed(seed, component, epoch, index)))


def batch_rng(seed: int, component: str, epoch: int, batch_index: int) -> np.random.Generator:
    """Return a reproducible RNG keyed to one batch of one epoch, for one component.

    It is ``Generator(PCG64(SeedSequence(entropy=derive_key(seed, "batch",
    component), spawn_key=(epoch, batch_index))))``: meant for collators (e.g.
    MLM masking) whose randomness belongs to the batch rather than a sample.
    """
    name = _check_component(component)
    epoch_int = as_int("epoch", epoch)
    batch_int = as_int("batch_index", batch_index)
    sequence = np.random.SeedSequence(
        entropy=derive_key(seed, "batch", name), spawn_key=(epoch_int, batch_int)
    )
    return np.random.Generator(np.random.PCG64(sequence))


def worker_seed(seed: int, epoch: int, rank: int, worker_id: int) -> int:
    """Return the 64-bit seed for a worker's global RNGs (torch, numpy, random).

    It is ``derive_key(seed, "worker", epoch, rank, worker_id)``: reproducible,
    and distinct per ``(rank, worker_id)`` and per epoch.  The value is in
    ``[0, 2**64)``; ``torch.manual_seed`` and ``random.seed`` accept it as is,
    while the legacy ``numpy.random.seed`` needs ``value % 2**32`` (prefer
    ``numpy.random.default_rng(value)``).
    """
    return derive_key(
        seed,
        "worker",
        as_int("epoch", epoch),
        as_int("rank", rank),
        as_int("worker_id", worker_id),
    )
