"""Curriculum learning: train on the easiest samples first, widening the pool as training goes.

A curriculum (Bengio et al. 2009; Platanios et al. 2019, "Competence-based curriculum
learning") ranks the samples by a difficulty score and, at training time ``t``, draws only
from the easiest fraction ``c(t)`` of them, the *competence*, which grows to 1:

- :func:`competence` evaluates a schedule ``c(t)``: ``"linear"``, ``"root"`` or
  ``"discrete"``;
- :func:`difficulty_order` ranks the samples once, easiest first;
- :func:`eligible_count` is the size ``m`` of the eligible set ``order[:m]`` at competence
  ``c``;
- :func:`curriculum_epoch_batches` builds the batches of an epoch at a fixed competence
  (the competence is updated per epoch);
- :func:`curriculum_step_batch` / :func:`curriculum_step_batches` draw each batch from the
  eligible set of its own step (the competence is updated per step).

**The algorithm is part of the order contract** (``docs/order.md``): the results are pure
functions of their arguments, the same on every platform and with every numpy release, and
never use a global RNG. ``n = len(order)``.

1. **Ranking** (:func:`difficulty_order`): the sample indices sorted by ``(difficulty[i], i)``
   ascending, i.e. numpy's stable argsort of the difficulties converted to float64 (integer
   difficulties beyond ``2**53`` in magnitude are rounded by that conversion; ``-0.0 ==
   0.0``; infinities are allowed, NaN is refused).

2. **Eligible set**: ``order[:m]`` with ``m = eligible_count(n, c)``: ``ceil(c * n)`` clipped
   to ``[1, n]`` (``0`` when ``n == 0``). The product ``c * n`` is computed exactly (the
   float ``c`` is the rational it represents), and a product exceeding an integer ``k`` by at
   most ``min(c * n * 2**-50, 2**-20)`` counts as ``k``: float noise such as ``0.1 * 3 ==
   0.30000000000000004`` gives ``m = 3`` for ``n = 10``, not 4. So ``m`` is ``floor(c * n)``
   or ``ceil(c * n)``, non-decreasing in ``c``, and ``n`` at ``c = 1``.

3. **By epoch** (:func:`curriculum_epoch_batches`): with ``P = FeistelPermutation(m,
   derive_key(seed, "curriculum", epoch))`` the epoch is the sequence ``s_p = order[P(p)]``,
   ``p = 0 .. m - 1`` (each eligible sample once), cut into consecutive batches of
   ``batch_size``: ``ceil(m / batch_size)`` batches, or ``m // batch_size`` with
   ``drop_last=True`` (PyTorch ``BatchSampler`` semantics).

4. **By step** (:func:`curriculum_step_batch`): the batch of global step ``step`` at
   competence ``c`` is ``order[Q(p)]``, ``p = 0 .. k - 1``, with ``k = min(batch_size, m)``
   and ``Q = FeistelPermutation(m, derive_key(seed, "curriculum-step", step))``: ``k``
   distinct eligible samples, a pure function of ``(order, c, seed, step, batch_size)`` (so
   resuming at any step needs no state). Samples do not repeat within a batch; across steps
   they are independent draws.

``order`` is expected to be a permutation of ``[0, n)`` (as returned by
:func:`difficulty_order`); only its dtype and shape are checked up front, and the entries
actually read are checked to be ``>= 0``. With repeated entries the epoch visits repeated
samples.

Pure numpy and the standard library; never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loaderkit.order.batches import (
    EpochBatches,
    batch_count,
    even_offsets,
    frozen_batches,
    index_dtype,
)
from loaderkit.order.feistel import BLOCK, FeistelPermutation
from loaderkit.order.keys import as_bool, as_int, as_real_array, derive_key

__all__ = [
    "COMPONENT_EPOCH",
    "COMPONENT_STEP",
    "SCHEDULES",
    "competence",
    "curriculum_epoch_batches",
    "curriculum_step_batch",
    "curriculum_step_batches",
    "difficulty_order",
    "eligible_count",
]

_I64 = npt.NDArray[np.int64]
_Int = npt.NDArray[np.int32] | npt.NDArray[np.int64]
# an integer array of any integer dtype
_Order = npt.NDArray[Any]

#: The competence schedules :func:`competence` knows.
SCHEDULES = ("linear", "root", "discrete")

#: Key path component of the per-epoch order. Part of the order contract.
COMPONENT_EPOCH = "curriculum"
#: Key path component of the per-step batches. Part of the order contract.
COMPONENT_STEP = "curriculum-step"

# a product c * n above an integer k by at most min(c * n * 2**-50, 2**-20) counts as k
_GUARD_BITS = 50
_GUARD_CAP_BITS = 20


# -- validation -----------------------------------------------------------------------------------


def _as_real(name: str, value: object) -> float:
    """Return ``value`` as a float, rejecting bools, non-numbers and NaN."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}; "
            f"pass an int or a float"
        )
    result = float(value)
    if math.isnan(result):
        raise ValueError(f"{name} must not be NaN; pass a number")
    return result


def _check_competence(name: str, value: object) -> float:
    """A competence: a real number in ``(0, 1]``."""
    c = _as_real(name, value)
    if not 0.0 < c <= 1.0:
        raise ValueError(
            f"{name} must be in (0, 1] (the fraction of the easiest samples to draw from), "
            f"got {c!r}"
        )
    return c


def _check_order(order: object) -> _Order:
    """A 1-d integer numpy array (not copied). Its entries are checked when read."""
    if not isinstance(order, np.ndarray):
        raise TypeError(
            f"order must be a numpy array, got {type(order).__name__}; "
            f"pass the result of difficulty_order(difficulty)"
        )
    if order.dtype == np.bool_ or order.dtype.kind not in "iu":
        raise TypeError(
            f"order must be an integer array, got dtype {order.dtype}; "
            f"pass the result of difficulty_order(difficulty)"
        )
    if order.ndim != 1:
        raise ValueError(
            f"order must be a 1-d array of sample indices, got shape {order.shape}; "
            f"pass the result of difficulty_order(difficulty)"
        )
    return order


def _gather(order: _Order, positions: _I64) -> _I64:
    """``order[positions]`` as int64, refusing negative entries."""
    values = order[positions].astype(np.int64, copy=False)
    if values.size and int(values.min()) < 0:
        bad = int(positions[int(np.argmin(values))])
        raise ValueError(
            f"order must hold sample indices >= 0, but order[{bad}] = {int(order[bad])}; "
            f"pass the result of difficulty_order(difficulty)"
        )
    return values


def _freeze(indices: _I64, offsets: _I64) -> EpochBatches:
    """An :class:`EpochBatches` over read-only arrays, indices in the compact dtype."""
    top = int(indices.max()) + 1 if indices.size else 0
    stored: _Int = indices.astype(np.int32) if index_dtype(top) is np.int32 else indices
    return frozen_batches(stored, offsets)


# -- the public functions -------------------------------------------------------------------------


def competence(
    schedule: str,
    t: float,
    *,
    horizon: float,
    start: float = 0.1,
    degree: float = 2.0,
    steps: Sequence[tuple[float, float]] = (),
) -> float:
    """The competence ``c(t)`` in ``(0, 1]``: the fraction of the easiest samples to draw from.

    - ``"linear"``: ``c = min(1, start + (1 - start) * t / horizon)``.
    - ``"root"`` (Platanios et al. 2019): ``c = min(1, (t * (1 - start**degree) / horizon +
      start**degree) ** (1 / degree))``; ``degree=2`` is their square-root schedule, fast
      growth early.
    - ``"discrete"``: ``steps = [(until, c), ...]`` sorted by ``until`` (strictly
      increasing), each ``c`` in ``(0, 1]``: the ``c`` of the first entry with ``t < until``,
      else ``1.0`` (so ``steps=()`` is always 1). ``start``, ``degree`` and ``horizon`` are
      validated but unused.

    For ``"linear"`` and ``"root"``, ``c(0) == start`` and ``c(t) == 1.0`` for ``t >=
    horizon`` exactly (both special-cased, so float rounding cannot leave them a ulp off), and
    ``c`` is non-decreasing in ``t`` (the root value is also clamped to ``>= start``).

    Args:
        schedule: ``"linear"``, ``"root"`` or ``"discrete"``.
        t: the training time (a step or epoch count, or a fraction), ``>= 0`` (``inf``
            allowed).
        horizon: the time at which the competence reaches 1, finite and ``> 0``.
        start: the initial competence, in ``(0, 1]``.
        degree: the root's degree, finite and ``>= 1``.
        steps: the ``(until, c)`` pairs of ``"discrete"``.

    Returns:
        A float in ``(0, 1]``.

    Raises:
        TypeError: an argument has the wrong type (bools are refused).
        ValueError: an argument is out of range; the message names it.

    """
    if not isinstance(schedule, str):
        raise TypeError(f"schedule must be a str, got {type(schedule).__name__} {schedule!r}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    time = _as_real("t", t)
    if time < 0:
        raise ValueError(f"t must be >= 0, got {time!r}")
    span = _as_real("horizon", horizon)
    if not (span > 0 and math.isfinite(span)):
        raise ValueError(f"horizon must be finite and > 0, got {span!r}")
    c0 = _check_competence("start", start)
    d = _as_real("degree", degree)
    if not (d >= 1 and math.isfinite(d)):
        raise ValueError(f"degree must be finite and >= 1, got {d!r}")
    table = _check_steps(steps)
    if schedule == "discrete":
        for until, c in table:
            if time < until:
                return c
        return 1.0
    if time >= span:
        return 1.0
    if time == 0:
        return c0
    if schedule == "linear":
        return min(1.0, c0 + (1.0 - c0) * time / span)
    base = c0**d
    value: float = (time * (1.0 - base) / span + base) ** (1.0 / d)
    return min(1.0, max(c0, value))


def _check_steps(steps: object) -> list[tuple[float, float]]:
    """The ``(until, c)`` pairs of a discrete schedule, validated."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise TypeError(
            f"steps must be a sequence of (until, c) pairs, got {type(steps).__name__}; "
            f"pass e.g. steps=[(1000, 0.25), (2000, 0.5)]"
        )
    table: list[tuple[float, float]] = []
    for i, entry in enumerate(steps):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Sequence) or len(entry) != 2:
            raise TypeError(f"steps[{i}] must be an (until, c) pair, got {entry!r}")
        until = _as_real(f"steps[{i}][0] (until)", entry[0])
        c = _check_competence(f"steps[{i}][1] (c)", entry[1])
        if table and until <= table[-1][0]:
            raise ValueError(
                f"steps must be sorted by strictly increasing until, but steps[{i}] has until "
                f"{until!r} <= {table[-1][0]!r} of steps[{i - 1}]"
            )
        table.append((until, c))
    return table


def difficulty_order(difficulty: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The sample indices sorted by ``(difficulty[i], i)`` ascending: the easiest first.

    Numpy's stable argsort of the difficulties as float64, so ties keep index order and the
    result is deterministic everywhere (integers beyond ``2**53`` in magnitude are rounded by
    the conversion).

    Args:
        difficulty: one score per sample, a 1-d array-like of integers or floats (lower is
            easier); ``±inf`` allowed, NaN refused. May be empty.

    Returns:
        A new int64 array, a permutation of ``[0, len(difficulty))``.

    Raises:
        TypeError: the scores are not real numbers (bool arrays are refused).
        ValueError: not 1-d, or a score is NaN.

    """
    arr = as_real_array(
        "difficulty", difficulty, hint="pass numpy.asarray(difficulty, dtype=numpy.float64)"
    )
    if arr.ndim != 1:
        raise ValueError(
            f"difficulty must be a 1-d array (one score per sample), got shape {arr.shape}"
        )
    scores = arr.astype(np.float64, copy=False)
    nan = np.isnan(scores)
    if bool(nan.any()):
        bad = int(np.argmax(nan))
        raise ValueError(
            f"difficulty must not be NaN, but difficulty[{bad}] is; give every sample a score"
        )
    return np.argsort(scores, kind="stable").astype(np.int64, copy=False)


def eligible_count(n: int, c: float) -> int:
    """The size ``m`` of the eligible set at competence ``c``: ``ceil(c * n)`` in ``[1, n]``.

    ``0`` when ``n == 0``. ``c * n`` is computed exactly with integers (``c`` as the rational
    its float represents); a product exceeding an integer ``k`` by at most ``min(c * n *
    2**-50, 2**-20)`` (float noise, e.g. ``c = 0.1 * 3``) counts as ``k``. ``m`` is
    non-decreasing in ``c`` and equals ``n`` at ``c = 1``.

    Raises:
        TypeError: ``n`` is not an int or ``c`` not a real number.
        ValueError: ``n < 0`` or ``c`` outside ``(0, 1]``.

    """
    size = as_int("n", n)
    frac = _check_competence("c", c)
    if size == 0:
        return 0
    num, den = frac.as_integer_ratio()
    product = num * size  # c * n == product / den exactly
    whole, rest = divmod(product, den)
    # noise: rest / den <= min((product / den) * 2**-50, 2**-20)
    noise = (rest << _GUARD_BITS) <= product and (rest << _GUARD_CAP_BITS) <= den
    m = whole if rest == 0 or noise else whole + 1
    return min(max(m, 1), size)


def curriculum_epoch_batches(
    order: npt.NDArray[np.int64],
    c: float,
    *,
    seed: int,
    epoch: int,
    batch_size: int,
    drop_last: bool = False,
) -> EpochBatches:
    """The batches of one epoch over the eligible set ``order[:m]``, ``m = eligible_count(n, c)``.

    Position ``p`` of the epoch is ``order[P(p)]`` with ``P = FeistelPermutation(m,
    derive_key(seed, "curriculum", epoch))``: every eligible sample exactly once, in an order
    that changes with the epoch and the seed; cut into consecutive batches of ``batch_size``
    (``ceil(m / batch_size)`` batches, or ``m // batch_size`` with ``drop_last=True``).

    Args:
        order: the ranking, easiest first (:func:`difficulty_order`): a 1-d integer array.
        c: the competence of this epoch, in ``(0, 1]`` (:func:`competence`).
        seed: the user's seed (``>= 0``).
        epoch: the epoch number (``>= 0``).
        batch_size: samples per batch, ``>= 1``.
        drop_last: drop the last batch when it is partial.

    Returns:
        An :class:`EpochBatches` over read-only arrays (``int32`` indices when they fit).

    Raises:
        TypeError / ValueError: an argument has the wrong type or is out of range, or an
            entry of ``order`` read is negative.

    """
    arr = _check_order(order)
    frac = _check_competence("c", c)
    seed_int = as_int("seed", seed)
    epoch_int = as_int("epoch", epoch)
    size = as_int("batch_size", batch_size, minimum=1)
    drop = as_bool("drop_last", drop_last)
    m = eligible_count(int(arr.size), frac)
    batches = batch_count(m, size, drop)
    kept = min(batches * size, m)
    perm = FeistelPermutation(m, derive_key(seed_int, COMPONENT_EPOCH, epoch_int))
    indices = np.empty(kept, dtype=np.int64)
    for a in range(0, kept, BLOCK):
        b = min(a + BLOCK, kept)
        indices[a:b] = _gather(arr, perm.slice(a, b))
    return _freeze(indices, even_offsets(m, size, batches))


def _step_batch(arr: _Order, frac: float, seed: int, step: int, size: int) -> _I64:
    """The batch of one step, arguments validated."""
    m = eligible_count(int(arr.size), frac)
    perm = FeistelPermutation(m, derive_key(seed, COMPONENT_STEP, step))
    return _gather(arr, perm.slice(0, min(size, m)))


def curriculum_step_batch(
    order: npt.NDArray[np.int64],
    c: float,
    *,
    seed: int,
    step: int,
    batch_size: int,
) -> npt.NDArray[np.int64]:
    """The batch of global step ``step``: ``min(batch_size, m)`` distinct eligible samples.

    With ``m = eligible_count(len(order), c)`` and ``Q = FeistelPermutation(m,
    derive_key(seed, "curriculum-step", step))``, the batch is ``order[Q(p)]`` for ``p = 0 ..
    k - 1``, ``k = min(batch_size, m)``. A pure function of its arguments: any step can be
    computed alone (resuming needs no state). Empty when ``order`` is empty.

    Args:
        order: the ranking, easiest first (:func:`difficulty_order`): a 1-d integer array.
        c: the competence at this step, in ``(0, 1]`` (:func:`competence`).
        seed: the user's seed (``>= 0``).
        step: the global step number (``>= 0``).
        batch_size: samples per batch, ``>= 1``.

    Returns:
        A new int64 array of ``k`` sample indices.

    Raises:
        TypeError / ValueError: an argument has the wrong type or is out of range, or an
            entry of ``order`` read is negative.

    """
    arr = _check_order(order)
    frac = _check_competence("c", c)
    seed_int = as_int("seed", seed)
    step_int = as_int("step", step)
    size = as_int("batch_size", batch_size, minimum=1)
    return _step_batch(arr, frac, seed_int, step_int, size)


def curriculum_step_batches(
    order: npt.NDArray[np.int64],
    competences: Sequence[float],
    *,
    seed: int,
    first_step: int,
    batch_size: int,
) -> EpochBatches:
    """The batches of steps ``first_step, first_step + 1, ...``, one per competence, together.

    Batch ``j`` is ``curriculum_step_batch(order, competences[j], seed=seed, step=first_step
    + j, batch_size=batch_size)``, so computing steps 5..9 alone gives the tail of steps
    0..9. Batches are smaller than ``batch_size`` only while ``m < batch_size``.

    Args:
        order: the ranking, easiest first (:func:`difficulty_order`): a 1-d integer array.
        competences: the competence of each step, each in ``(0, 1]`` (may be empty).
        seed: the user's seed (``>= 0``).
        first_step: the global step of the first batch (``>= 0``).
        batch_size: samples per batch, ``>= 1``.

    Returns:
        An :class:`EpochBatches` of ``len(competences)`` batches over read-only arrays.

    Raises:
        TypeError / ValueError: as for :func:`curriculum_step_batch`; a bad competence is
            named by its position.

    """
    arr = _check_order(order)
    if isinstance(competences, (str, bytes)) or not isinstance(competences, Sequence | np.ndarray):
        raise TypeError(
            f"competences must be a sequence of floats, got {type(competences).__name__}"
        )
    fracs = [_check_competence(f"competences[{j}]", c) for j, c in enumerate(competences)]
    seed_int = as_int("seed", seed)
    first = as_int("first_step", first_step)
    size = as_int("batch_size", batch_size, minimum=1)
    parts = [_step_batch(arr, f, seed_int, first + j, size) for j, f in enumerate(fracs)]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([p.size for p in parts], out=offsets[1:])
    indices = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return _freeze(indices, offsets)
