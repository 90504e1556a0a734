"""Tests of curriculum learning (``loaderkit.order.curriculum``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import FeistelPermutation, derive_key
from loaderkit.order.curriculum import (
    competence,
    curriculum_epoch_batches,
    curriculum_step_batch,
    curriculum_step_batches,
    difficulty_order,
    eligible_count,
)

FAST = settings(deadline=None, max_examples=60)
SEEDS = st.integers(min_value=0, max_value=2**64)
COMPETENCES = st.floats(min_value=1e-6, max_value=1.0)
STARTS = st.floats(min_value=1e-3, max_value=1.0)
DEGREES = st.floats(min_value=1.0, max_value=8.0)
HORIZONS = st.floats(min_value=1e-3, max_value=1e6)
TIMES = st.floats(min_value=0.0, max_value=2e6)


def ranking(n: int, seed: int = 0) -> np.ndarray:
    difficulty = np.random.default_rng(seed).integers(0, max(n // 3, 1), size=n)
    return difficulty_order(difficulty)


# -- competence -----------------------------------------------------------------------------------


@FAST
@given(st.sampled_from(["linear", "root"]), TIMES, TIMES, HORIZONS, STARTS, DEGREES)
def test_competence_monotone_and_bounded(schedule, t1, t2, horizon, start, degree):
    lo, hi = sorted((t1, t2))
    c_lo = competence(schedule, lo, horizon=horizon, start=start, degree=degree)
    c_hi = competence(schedule, hi, horizon=horizon, start=start, degree=degree)
    assert start <= c_lo <= c_hi <= 1.0


@FAST
@given(st.sampled_from(["linear", "root"]), HORIZONS, STARTS, DEGREES, st.floats(1.0, 1e3))
def test_competence_endpoints(schedule, horizon, start, degree, factor):
    kw = {"horizon": horizon, "start": start, "degree": degree}
    assert competence(schedule, 0.0, **kw) == start
    assert competence(schedule, 0, **kw) == start
    assert competence(schedule, horizon, **kw) == 1.0
    assert competence(schedule, horizon * factor, **kw) == 1.0
    assert competence(schedule, math.inf, **kw) == 1.0


def test_competence_formulas():
    assert competence("linear", 5, horizon=10, start=0.2) == pytest.approx(0.6)
    assert competence("root", 5, horizon=10, start=0.1) == pytest.approx(
        math.sqrt(0.5 * 0.99 + 0.01)
    )
    assert competence("root", 2, horizon=8, start=0.5, degree=3) == pytest.approx(
        (2 * (1 - 0.125) / 8 + 0.125) ** (1 / 3)
    )
    assert competence("linear", 3, horizon=10, start=1.0) == 1.0


def test_competence_discrete_picks_the_step():
    steps = [(10, 0.25), (20, 0.5), (30, 0.75)]
    got = [
        competence("discrete", t, horizon=1, steps=steps) for t in (0, 9.9, 10, 19, 20, 29, 30, 99)
    ]
    assert got == [0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]
    assert competence("discrete", 5, horizon=1) == 1.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"schedule": "cubic", "t": 0, "horizon": 1}, "schedule"),
        ({"schedule": "linear", "t": -1, "horizon": 1}, "t"),
        ({"schedule": "linear", "t": math.nan, "horizon": 1}, "t"),
        ({"schedule": "linear", "t": 0, "horizon": 0}, "horizon"),
        ({"schedule": "linear", "t": 0, "horizon": math.inf}, "horizon"),
        ({"schedule": "linear", "t": 0, "horizon": 1, "start": 0}, "start"),
        ({"schedule": "linear", "t": 0, "horizon": 1, "start": 1.5}, "start"),
        ({"schedule": "root", "t": 0, "horizon": 1, "degree": 0.5}, "degree"),
        ({"schedule": "discrete", "t": 0, "horizon": 1, "steps": [(1, 0.0)]}, "steps"),
        ({"schedule": "discrete", "t": 0, "horizon": 1, "steps": [(2, 0.5), (1, 0.6)]}, "steps"),
    ],
)
def test_competence_value_errors(kwargs, name):
    schedule, t = kwargs.pop("schedule"), kwargs.pop("t")
    with pytest.raises(ValueError, match=name):
        competence(schedule, t, **kwargs)


def test_competence_type_errors():
    with pytest.raises(TypeError, match="t"):
        competence("linear", True, horizon=1)
    with pytest.raises(TypeError, match="horizon"):
        competence("linear", 0, horizon="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="steps"):
        competence("discrete", 0, horizon=1, steps=[(1,)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="schedule"):
        competence(1, 0, horizon=1)  # type: ignore[arg-type]


# -- ranking and eligible set ---------------------------------------------------------------------


def test_difficulty_order_ties_broken_by_index():
    got = difficulty_order([3.0, 1, 2, 1, 0, 5, 4, 4, 2, -math.inf, -0.0])
    assert got.tolist() == [9, 4, 10, 1, 3, 2, 8, 0, 6, 7, 5]
    assert got.dtype == np.int64
    assert difficulty_order([]).tolist() == []


@FAST
@given(st.lists(st.integers(-3, 3), max_size=50))
def test_difficulty_order_is_the_lexicographic_sort(values):
    expected = sorted(range(len(values)), key=lambda i: (values[i], i))
    assert difficulty_order(np.asarray(values, dtype=np.int64)).tolist() == expected


def test_difficulty_order_errors():
    with pytest.raises(ValueError, match=r"difficulty\[1\]"):
        difficulty_order([0.0, math.nan])
    with pytest.raises(ValueError, match="1-d"):
        difficulty_order([[1, 2]])
    with pytest.raises(TypeError, match="difficulty"):
        difficulty_order([True, False])
    with pytest.raises(TypeError, match="difficulty"):
        difficulty_order(["a"])


@FAST
@given(st.integers(0, 10**6), COMPETENCES, COMPETENCES)
def test_eligible_count_monotone_and_bounded(n, c1, c2):
    lo, hi = sorted((c1, c2))
    m_lo, m_hi = eligible_count(n, lo), eligible_count(n, hi)
    assert m_lo <= m_hi
    if n:
        assert 1 <= m_lo <= n
        assert math.floor(lo * n) - 1 <= m_lo <= math.ceil(lo * n) + 1
    else:
        assert m_lo == m_hi == 0
    assert eligible_count(n, 1.0) == n


def test_eligible_count_rounding():
    assert eligible_count(10, 0.25) == 3
    assert eligible_count(10, 0.3) == 3
    assert eligible_count(10, 0.1 * 3) == 3  # 0.30000000000000004: float noise
    assert eligible_count(10, 0.31) == 4
    assert eligible_count(10, 1e-9) == 1
    assert eligible_count(2**62, 0.5) == 2**61
    assert eligible_count(2**62 + 1, 0.5) == 2**61 + 1
    with pytest.raises(ValueError, match="c"):
        eligible_count(10, 0.0)
    with pytest.raises(ValueError, match="n"):
        eligible_count(-1, 0.5)
    with pytest.raises(TypeError, match="n"):
        eligible_count(1.5, 0.5)  # type: ignore[arg-type]


# -- by epoch -------------------------------------------------------------------------------------


@FAST
@given(st.integers(0, 300), COMPETENCES, SEEDS, st.integers(0, 5), st.integers(1, 40))
def test_epoch_visits_the_eligible_set_once(n, c, seed, epoch, batch_size):
    order = ranking(n, seed % 7)
    m = eligible_count(n, c)
    got = curriculum_epoch_batches(order, c, seed=seed, epoch=epoch, batch_size=batch_size)
    assert sorted(got.indices.tolist()) == sorted(order[:m].tolist())
    assert len(got) == -(-m // batch_size)
    assert all(size == batch_size for size in got.sizes().tolist()[:-1])
    perm = FeistelPermutation(m, derive_key(seed, "curriculum", epoch))
    assert got.indices.tolist() == order[perm.slice(0, m)].tolist()
    assert not got.indices.flags.writeable
    dropped = curriculum_epoch_batches(
        order, c, seed=seed, epoch=epoch, batch_size=batch_size, drop_last=True
    )
    assert len(dropped) == m // batch_size
    assert dropped.indices.tolist() == got.indices[: dropped.num_samples].tolist()


def test_epoch_reproducible_and_varies():
    order = ranking(1000)

    def run(seed: int, epoch: int) -> list[int]:
        b = curriculum_epoch_batches(order, 0.4, seed=seed, epoch=epoch, batch_size=32)
        return b.indices.tolist()

    assert run(1, 2) == run(1, 2)
    assert run(1, 2) != run(1, 3)
    assert run(1, 2) != run(2, 2)
    assert set(run(1, 2)) == set(order[:400].tolist())
    assert curriculum_epoch_batches(order, 1.0, seed=1, epoch=0, batch_size=7).num_samples == 1000


def test_epoch_golden():
    order = difficulty_order([3, 1, 2, 1, 0, 5, 4, 4, 2, 9])
    got = curriculum_epoch_batches(order, 0.5, seed=0, epoch=0, batch_size=2)
    assert got.indices.tolist() == [2, 8, 3, 1, 4]
    assert got.offsets.tolist() == [0, 2, 4, 5]
    assert got.indices.dtype == np.int32


# -- by step --------------------------------------------------------------------------------------


@FAST
@given(st.integers(0, 300), COMPETENCES, SEEDS, st.integers(0, 10**9), st.integers(1, 40))
def test_step_batch_distinct_and_eligible(n, c, seed, step, batch_size):
    order = ranking(n, seed % 5)
    m = eligible_count(n, c)
    got = curriculum_step_batch(order, c, seed=seed, step=step, batch_size=batch_size)
    assert got.dtype == np.int64
    assert got.size == min(batch_size, m)
    assert len(set(got.tolist())) == got.size
    assert set(got.tolist()) <= set(order[:m].tolist())
    again = curriculum_step_batch(order, c, seed=seed, step=step, batch_size=batch_size)
    assert got.tolist() == again.tolist()


def test_step_batches_are_a_pure_function_of_the_step():
    order = ranking(500)
    cs = [competence("root", t, horizon=10, start=0.05) for t in range(10)]
    whole = curriculum_step_batches(order, cs, seed=3, first_step=0, batch_size=16)
    tail = curriculum_step_batches(order, cs[5:], seed=3, first_step=5, batch_size=16)
    assert len(whole) == 10
    assert len(tail) == 5
    for j in range(5):
        assert whole.batch(5 + j).tolist() == tail.batch(j).tolist()
    for j in range(10):
        single = curriculum_step_batch(order, cs[j], seed=3, step=j, batch_size=16)
        assert whole.batch(j).tolist() == single.tolist()
    assert whole.batch(1).tolist() != whole.batch(2).tolist()
    other = curriculum_step_batches(order, cs, seed=4, first_step=0, batch_size=16)
    assert other.indices.tolist() != whole.indices.tolist()
    empty = curriculum_step_batches(order, [], seed=3, first_step=0, batch_size=16)
    assert len(empty) == 0


def test_step_golden():
    order = difficulty_order([3, 1, 2, 1, 0, 5, 4, 4, 2, 9])
    assert curriculum_step_batch(order, 0.5, seed=0, step=3, batch_size=4).tolist() == [1, 3, 2, 8]
    got = curriculum_step_batches(order, [0.1, 0.5, 1.0], seed=0, first_step=0, batch_size=4)
    assert got.indices.tolist() == [4, 1, 8, 2, 4, 4, 2, 0, 1]
    assert got.offsets.tolist() == [0, 1, 5, 9]


# -- validation -----------------------------------------------------------------------------------


def test_batch_validation_errors():
    order = ranking(20)
    kw = {"seed": 0, "epoch": 0, "batch_size": 4}
    with pytest.raises(TypeError, match="order"):
        curriculum_epoch_batches(order.tolist(), 0.5, **kw)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="order"):
        curriculum_epoch_batches(order.astype(np.float64), 0.5, **kw)
    with pytest.raises(ValueError, match="order"):
        curriculum_epoch_batches(order.reshape(4, 5), 0.5, **kw)
    with pytest.raises(ValueError, match="order"):
        curriculum_epoch_batches(-1 - order, 0.5, **kw)
    with pytest.raises(ValueError, match="c"):
        curriculum_epoch_batches(order, 1.5, **kw)
    with pytest.raises(ValueError, match="batch_size"):
        curriculum_epoch_batches(order, 0.5, seed=0, epoch=0, batch_size=0)
    with pytest.raises(ValueError, match="epoch"):
        curriculum_epoch_batches(order, 0.5, seed=0, epoch=-1, batch_size=4)
    with pytest.raises(TypeError, match="drop_last"):
        curriculum_epoch_batches(order, 0.5, **kw, drop_last=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step"):
        curriculum_step_batch(order, 0.5, seed=0, step=-1, batch_size=4)
    with pytest.raises(ValueError, match="seed"):
        curriculum_step_batch(order, 0.5, seed=-1, step=0, batch_size=4)
    with pytest.raises(ValueError, match=r"competences\[1\]"):
        curriculum_step_batches(order, [0.5, 0.0], seed=0, first_step=0, batch_size=4)
    with pytest.raises(ValueError, match="first_step"):
        curriculum_step_batches(order, [0.5], seed=0, first_step=-1, batch_size=4)
