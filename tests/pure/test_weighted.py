"""Tests of weighted sampling (``loaderkit.order.weighted``)."""

from __future__ import annotations

import bisect
import itertools
import math
import tracemalloc
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import derive_key
from loaderkit.order import weighted as weighted_module
from loaderkit.order.guide_table import build_guide
from loaderkit.order.weighted import uniform_draws, weighted_batches, weighted_sample

FAST = settings(deadline=None)
SEEDS = st.integers(min_value=0, max_value=2**64)
EPOCHS = st.integers(min_value=0, max_value=5)


# ------------------------------------------------------------------------------------------------
# A straightforward pure-Python reading of the algorithm in the module docstring of
# loaderkit/order/weighted.py (Python ints and floats, bisect, sorted). The vectorized
# implementation must agree with it exactly.
# ------------------------------------------------------------------------------------------------

M64 = 2**64 - 1
SQRT_HALF = float.fromhex("0x1.6a09e667f3bcdp-1")
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
C = [0.0] + [1 / (2 * j + 1) for j in range(1, 11)]  # C[1] .. C[10]


def ref_mix64(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z


def ref_uniform(seed: int, component: str, epoch: int, p: int) -> float:
    key = derive_key(seed, component, epoch)
    return (ref_mix64(key ^ p) >> 11) * 2.0**-53


def ref_log(x: float) -> float:
    if x == 0.0:
        return -math.inf
    m, e = math.frexp(x)
    if m < SQRT_HALF:
        m, e = m + m, e - 1
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    q = C[10]
    for j in range(9, 0, -1):
        q = q * z + C[j]
    h = s + s
    r = h + (h * z) * q
    return e * LN2_HI + (r + e * LN2_LO)


def ref_sample(
    weights: list[float], seed: int, epoch: int, count: int | None, replacement: bool
) -> list[int]:
    w = [float(x) for x in weights]
    if replacement:
        cdf = list(itertools.accumulate(w))  # left to right, like numpy.cumsum
        total = cdf[-1]
        last = max(i for i, x in enumerate(w) if x > 0)
        n = len(w) if count is None else count
        return [
            min(bisect.bisect_right(cdf, ref_uniform(seed, "weights", epoch, p) * total), last)
            for p in range(n)
        ]
    keys = [
        (ref_log(ref_uniform(seed, "weights-noreplace", epoch, i)) / x, i)
        for i, x in enumerate(w)
        if x > 0
    ]
    order = [i for _, i in sorted(keys, key=lambda k: (-k[0], k[1]))]
    return order if count is None else order[:count]


@st.composite
def weight_lists(draw: st.DrawFn, max_size: int = 60) -> list[float]:
    """1-d weights with some zeros and at least one positive value."""
    n = draw(st.integers(min_value=1, max_value=max_size))
    kind = draw(st.sampled_from(["float", "int", "spread"]))
    if kind == "int":
        values = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        weights = [float(v) for v in values]
    elif kind == "spread":  # many orders of magnitude: absorbed weights, skewed CDFs
        exps = draw(st.lists(st.integers(-40, 40), min_size=n, max_size=n))
        zero = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        weights = [0.0 if z else 2.0**e for e, z in zip(exps, zero, strict=True)]
    else:
        weights = draw(
            st.lists(st.floats(0, 100, allow_nan=False) | st.just(0.0), min_size=n, max_size=n)
        )
    if not any(x > 0 for x in weights):
        weights[draw(st.integers(0, n - 1))] = draw(st.floats(1e-3, 10))
    return weights


# ------------------------------------------------------------------------------------------------
# Golden vectors.
#
# These literal numbers ARE the order contract (docs/order.md and the module docstring of
# loaderkit/order/weighted.py). A run with the same seed must draw exactly these samples on every
# platform, Python version and numpy release, and in every future loaderkit version. If a change
# makes any of these tests fail, that change is a BREAKING CHANGE of the order contract: do not
# "update the numbers"; either fix the change or ship it as a new, explicitly versioned order
# (new DOMAIN string or new component names) with a changelog entry.
# ------------------------------------------------------------------------------------------------

GOLDEN_BITS_0_WEIGHTS_0 = [4302379318604676, 3888311640439806, 8410073398275909, 7154272252402677]
GOLDEN_UNIFORM_FAR = [0.1374359403497749, 0.7461298457054233]  # (12345, "weights-noreplace", 3)
GOLDEN_WITH_1234 = [2, 2, 3, 3, 3, 3, 0, 3, 2, 3, 3, 2, 2, 3, 2, 2]
GOLDEN_WITH_ZEROS = [1, 1, 1, 4, 1, 1, 4, 4, 1, 4, 4, 4]
GOLDEN_WITHOUT_1_TO_10 = [7, 9, 5, 6, 4, 8, 3, 2, 1, 0]
GOLDEN_WITHOUT_ZEROS = [4, 1, 3, 6]
GOLDEN_LOG = {  # L(x) of step 4, as hex floats
    2.0**-53: "-0x1.25e4f7b2737fap+5",
    0.1: "-0x1.26bb1bbb55515p+1",
    0.5: "-0x1.62e42fefa39efp-1",
    0.75: "-0x1.269621134db92p-2",
    1 - 2.0**-53: "-0x1.0000000000000p-53",
}


def test_golden_uniforms() -> None:
    u = uniform_draws(0, "weights", 0, 0, 4)
    assert [int(x * 2**53) for x in u] == GOLDEN_BITS_0_WEIGHTS_0
    assert u.tolist() == [k * 2.0**-53 for k in GOLDEN_BITS_0_WEIGHTS_0]
    far = uniform_draws(12345, "weights-noreplace", 3, 10**12, 10**12 + 2)
    assert far.tolist() == GOLDEN_UNIFORM_FAR


def test_golden_samples() -> None:
    got = weighted_sample([1, 2, 3, 4], seed=0, epoch=0, num_samples=16)
    assert got.tolist() == GOLDEN_WITH_1234
    got = weighted_sample([0, 5, 0, 1, 2.5, 0], seed=7, epoch=2, num_samples=12)
    assert got.tolist() == GOLDEN_WITH_ZEROS
    got = weighted_sample(list(range(1, 11)), seed=0, epoch=0, replacement=False)
    assert got.tolist() == GOLDEN_WITHOUT_1_TO_10
    got = weighted_sample([0, 5, 0, 1, 2.5, 0, 0.25], seed=7, epoch=2, replacement=False)
    assert got.tolist() == GOLDEN_WITHOUT_ZEROS


def test_golden_log() -> None:
    x = np.array(list(GOLDEN_LOG), dtype=np.float64)
    got = weighted_module._log(x)
    assert [float(v).hex() for v in got] == [float.fromhex(h).hex() for h in GOLDEN_LOG.values()]
    assert [ref_log(float(v)) for v in x] == got.tolist()


def test_golden_vectors_match_the_reference() -> None:
    assert ref_sample([1, 2, 3, 4], 0, 0, 16, True) == GOLDEN_WITH_1234
    assert ref_sample([0, 5, 0, 1, 2.5, 0], 7, 2, 12, True) == GOLDEN_WITH_ZEROS
    assert ref_sample([float(i) for i in range(1, 11)], 0, 0, None, False) == GOLDEN_WITHOUT_1_TO_10
    assert ref_sample([0, 5, 0, 1, 2.5, 0, 0.25], 7, 2, None, False) == GOLDEN_WITHOUT_ZEROS


# ------------------------------------------------------------------------------------------------
# Agreement with the reference.
# ------------------------------------------------------------------------------------------------


@FAST
@given(weights=weight_lists(), seed=SEEDS, epoch=EPOCHS, replacement=st.booleans())
def test_matches_reference(weights: list[float], seed: int, epoch: int, replacement: bool) -> None:
    expected = ref_sample(weights, seed, epoch, None, replacement)
    got = weighted_sample(weights, seed=seed, epoch=epoch, replacement=replacement)
    assert got.dtype == np.int64
    assert got.tolist() == expected


@FAST
@given(weights=weight_lists(max_size=20), seed=SEEDS, count=st.integers(0, 300))
def test_matches_reference_many_draws(weights: list[float], seed: int, count: int) -> None:
    got = weighted_sample(weights, seed=seed, epoch=1, num_samples=count)
    assert got.tolist() == ref_sample(weights, seed, 1, count, True)


@FAST
@given(
    x=st.integers(0, 2**53 - 1).map(lambda k: k * 2.0**-53)
    | st.sampled_from([0.0, 2.0**-53, 0.5, SQRT_HALF, SQRT_HALF - 2.0**-53, 1 - 2.0**-53]),
)
def test_log_matches_reference_and_ln(x: float) -> None:
    got = float(weighted_module._log(np.array([x]))[0])
    assert got == ref_log(x)
    if x > 0:
        assert got < 0
        assert abs(got - math.log(x)) <= 2 * math.ulp(math.log(x))
    else:
        assert got == -math.inf


def test_log_accuracy_on_many_values() -> None:
    rng = np.random.default_rng(0)
    k = rng.integers(1, 2**53, 20_000, dtype=np.int64)
    k[:2000] >>= rng.integers(0, 53, 2000)  # small values: every exponent
    np.maximum(k, 1, out=k)
    x = k.astype(np.float64) * 2.0**-53
    got = weighted_module._log(x)
    ln = np.array([math.log(v) for v in x])
    assert np.all(np.abs(got - ln) <= 2 * np.spacing(np.abs(ln)))
    assert got.tolist()[:500] == [ref_log(float(v)) for v in x[:500]]


def guide_cases() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    cases = [
        np.array([1.0]),
        np.array([0.0, 0.0, 3.0]),
        np.array([3.0, 0.0, 0.0]),
        np.array([1e300, 1e-300, 1e-300, 1.0]),  # absorbed weights
        np.full(1024, 5e-324),  # subnormal total: the plain search
        np.full(1025, 1e-310),
        rng.random(4097),
        np.exp(rng.normal(0, 12, 3000)),  # many decades: most draws in a few items
        np.where(rng.random(5000) < 0.9, 0.0, rng.random(5000)),  # long runs of zeros
        np.concatenate([np.full(2000, 1e-12), [1.0], np.full(2000, 1e-12)]),  # crowded buckets
        rng.integers(0, 4, 2**12).astype(np.float64) + np.eye(1, 2**12, 7)[0],
    ]
    return cases


@pytest.mark.parametrize("weights", guide_cases(), ids=lambda w: f"n{w.size}")
def test_guided_search_equals_plain_search(weights: np.ndarray) -> None:
    key = derive_key(5, "weights", 1)
    count = 20_000
    guided = np.empty(count, dtype=np.int64)
    plain = np.empty(count, dtype=np.int64)
    weighted_module._with_replacement(weights, key, count, guided, guided=True)
    weighted_module._with_replacement(weights, key, count, plain, guided=False)
    np.testing.assert_array_equal(guided, plain)
    assert np.all(weights[guided] > 0)
    cdf = np.cumsum(weights)
    t = uniform_draws(5, "weights", 1, 0, count) * cdf[-1]
    last = int(np.flatnonzero(weights)[-1])
    np.testing.assert_array_equal(plain, np.minimum(np.searchsorted(cdf, t, side="right"), last))


def test_guide_table_entries() -> None:
    rng = np.random.default_rng(11)
    weights = np.where(rng.random(3000) < 0.3, 0.0, rng.random(3000) ** 4)
    cdf = np.cumsum(weights)
    m = (weights.size - 1).bit_length()
    guide = build_guide(cdf, m)
    assert guide is not None
    bounds = (np.arange(2**m + 1) * 2.0**-m) * cdf[-1]
    g = np.searchsorted(cdf, bounds, side="right")
    marked = np.append(g[1:] != g[:-1], False)
    np.testing.assert_array_equal(guide, np.where(marked, ~g, g))


def test_tie_runs_are_sorted_by_full_clock_then_index(monkeypatch: pytest.MonkeyPatch) -> None:
    # crafted clocks: many equal truncated (and some equal full) values, to exercise the fix-up
    rng = np.random.default_rng(2)
    n = 5000
    base = rng.integers(0, 8, n).astype(np.uint64) << np.uint64(40)
    clocks = base | rng.integers(0, 4, n).astype(np.uint64)  # ties in the low (rank) bits
    weights = np.where(rng.random(n) < 0.2, 0.0, 1.0)
    items = np.flatnonzero(weights)

    def fake_clock_bits(w: Any, key: int, chosen: np.ndarray) -> np.ndarray:
        return clocks[chosen]

    monkeypatch.setattr(weighted_module, "_clock_bits", fake_clock_bits)
    expected = sorted(items.tolist(), key=lambda i: (int(clocks[i]), i))
    for count in (0, 1, 17, 600, 601, items.size - 1, items.size):
        got = weighted_sample(weights, seed=0, epoch=0, num_samples=count, replacement=False)
        assert got.tolist() == expected[:count]


def test_large_order_matches_a_plain_lexsort() -> None:
    rng = np.random.default_rng(8)
    n = 300_000
    weights = np.where(rng.random(n) < 0.1, 0.0, rng.pareto(1.0, n))
    got = weighted_sample(weights, seed=3, epoch=4, replacement=False)
    items = np.flatnonzero(weights)
    u = uniform_draws(3, "weights-noreplace", 4, 0, n)[items]
    r = weighted_module._log(u) / weights[items]
    expected = items[np.lexsort((items, -r))]  # r descending, then index ascending
    np.testing.assert_array_equal(got, expected)
    head = weighted_sample(weights, seed=3, epoch=4, num_samples=1234, replacement=False)
    np.testing.assert_array_equal(head, expected[:1234])


def test_cumsum_is_sequential_and_absorbed_weights_are_never_drawn() -> None:
    weights = np.array([1.0] + [2.0**-53] * 1000 + [0.5])
    cdf = np.cumsum(weights)
    assert cdf.tolist() == list(itertools.accumulate(weights.tolist()))
    assert cdf[1000] == 1.0  # each 2**-53 is absorbed (a pairwise sum would keep them)
    draws = weighted_sample(weights, seed=0, epoch=0, num_samples=30_000)
    assert set(np.unique(draws).tolist()) == {0, 1001}


def test_inputs_are_not_modified() -> None:
    weights = np.array([3.0, 0.0, 1.0, 2.0])
    weights.flags.writeable = False
    for replacement in (True, False):
        weighted_sample(weights, seed=1, epoch=1, replacement=replacement)
        weighted_batches(weights, seed=1, epoch=1, batch_size=2, replacement=replacement)
    assert weights.tolist() == [3.0, 0.0, 1.0, 2.0]


# ------------------------------------------------------------------------------------------------
# uniform_draws.
# ------------------------------------------------------------------------------------------------


@FAST
@given(
    seed=SEEDS,
    epoch=EPOCHS,
    start=st.integers(0, 2**63 - 200_000) | st.integers(0, 300),
    lengths=st.tuples(st.integers(0, 200), st.integers(0, 200)),
)
def test_uniform_slices_equal_the_longer_range(
    seed: int, epoch: int, start: int, lengths: tuple[int, int]
) -> None:
    a, b = lengths
    whole = uniform_draws(seed, "weights", epoch, start, start + a + b)
    assert np.array_equal(whole[:a], uniform_draws(seed, "weights", epoch, start, start + a))
    assert np.array_equal(
        whole[a:], uniform_draws(seed, "weights", epoch, start + a, start + a + b)
    )
    assert whole.dtype == np.float64
    assert np.all((whole >= 0) & (whole < 1))
    assert np.array_equal(whole * 2.0**53, np.floor(whole * 2.0**53))  # multiples of 2**-53
    head = [ref_uniform(seed, "weights", epoch, start + p) for p in range(min(3, whole.size))]
    assert whole[: len(head)].tolist() == head


def test_uniform_blocks_and_the_top_of_the_range() -> None:
    block = weighted_module.BLOCK
    whole = uniform_draws(1, "x", 2, block - 5, 2 * block + 5)
    part = uniform_draws(1, "x", 2, 2 * block - 3, 2 * block + 2)
    np.testing.assert_array_equal(part, whole[block + 2 : block + 7])
    top = uniform_draws(1, "x", 2, 2**63 - 3, 2**63)
    assert top.tolist() == [ref_uniform(1, "x", 2, p) for p in range(2**63 - 3, 2**63)]
    assert uniform_draws(1, "x", 2, 7, 7).shape == (0,)


def test_uniform_draws_are_uniform() -> None:
    u = uniform_draws(0, "weights", 0, 0, 200_000)
    counts = np.bincount((u * 100).astype(np.int64), minlength=100)
    expected = u.size / 100
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 99 + 5 * math.sqrt(2 * 99)  # df = 99; fixed seed, so it cannot flake
    assert abs(float(u.mean()) - 0.5) < 0.005


def test_uniform_draws_differ_by_component_seed_and_epoch() -> None:
    base = uniform_draws(0, "weights", 0, 0, 64)
    for other in (
        uniform_draws(1, "weights", 0, 0, 64),
        uniform_draws(0, "weights", 1, 0, 64),
        uniform_draws(0, "weights-noreplace", 0, 0, 64),
    ):
        assert np.count_nonzero(base == other) == 0


def test_no_numpy_warnings() -> None:
    rng = np.random.default_rng(0)
    weights = rng.random(3000)
    weights[::7] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            uniform_draws(2**64 + 5, "weights", 3, 2**62, 2**62 + 5000)
            weighted_sample(weights, seed=2**64 - 1, epoch=9, num_samples=50_000)
            weighted_sample(weights, seed=2**64 - 1, epoch=9, replacement=False)
            weighted_sample([1e-300, 1e300, 0.0], seed=1, epoch=0, replacement=False)
            weighted_sample([5e-324, 1.0, 1e-320], seed=1, epoch=0, replacement=False)
            weighted_sample(np.full(100, 5e-324), seed=1, epoch=0, num_samples=1000)
            weighted_sample(np.full(100, 5e-324), seed=1, epoch=0, replacement=False)
        with pytest.raises(ValueError, match="overflows"):
            weighted_sample([1e308, 1e308], seed=0, epoch=0)


# ------------------------------------------------------------------------------------------------
# Properties of weighted_sample.
# ------------------------------------------------------------------------------------------------


@FAST
@given(weights=weight_lists(), seed=SEEDS, epoch=EPOCHS, replacement=st.booleans())
def test_reproducible_and_never_draws_zero_weights(
    weights: list[float], seed: int, epoch: int, replacement: bool
) -> None:
    kwargs: dict[str, Any] = {"seed": seed, "epoch": epoch, "replacement": replacement}
    first = weighted_sample(weights, **kwargs)
    assert np.array_equal(first, weighted_sample(weights, **kwargs))
    w = np.array(weights)
    assert np.array_equal(first, weighted_sample(w, **kwargs))
    assert np.all(w[first] > 0)
    positives = int(np.count_nonzero(w))
    if replacement:
        assert first.size == w.size
    else:
        assert first.size == positives
        assert np.unique(first).size == first.size
        assert set(first.tolist()) == set(np.flatnonzero(w).tolist())


@FAST
@given(
    weights=weight_lists(),
    seed=SEEDS,
    replacement=st.booleans(),
    counts=st.tuples(st.integers(0, 80), st.integers(0, 80)),
)
def test_first_draws_do_not_depend_on_num_samples(
    weights: list[float], seed: int, replacement: bool, counts: tuple[int, int]
) -> None:
    small, large = sorted(counts)
    if not replacement:
        positives = sum(1 for x in weights if x > 0)
        small, large = min(small, positives), min(large, positives)
    kwargs: dict[str, Any] = {"seed": seed, "epoch": 0, "replacement": replacement}
    head = weighted_sample(weights, num_samples=small, **kwargs)
    longer = weighted_sample(weights, num_samples=large, **kwargs)
    assert np.array_equal(head, longer[:small])


def test_different_across_epochs_and_seeds() -> None:
    weights = np.arange(1, 1001, dtype=np.float64)
    for replacement in (True, False):
        base = weighted_sample(weights, seed=0, epoch=0, replacement=replacement)
        for seed, epoch in ((0, 1), (1, 0), (2**64, 0)):
            other = weighted_sample(weights, seed=seed, epoch=epoch, replacement=replacement)
            assert np.count_nonzero(base == other) < 100  # about 1 in 1000 positions agree


def chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_frequencies_converge_to_the_weights(seed: int) -> None:
    weights = np.array([0, 1, 2, 3, 4, 0, 10, 0.5, 0], dtype=np.float64)
    draws = weighted_sample(weights, seed=seed, epoch=0, num_samples=200_000)
    counts = np.bincount(draws, minlength=weights.size)
    assert counts[weights == 0].sum() == 0
    positive = weights > 0
    chi2 = chi_square(counts[positive], weights[positive] / weights.sum())
    assert chi2 < 25.0  # df = 5: P(chi2 > 25) ~ 1e-4; fixed seeds, so it cannot flake
    # many categories, skewed
    weights = np.random.default_rng(seed).pareto(1.5, 500) + 0.01
    draws = weighted_sample(weights, seed=seed, epoch=3, num_samples=200_000)
    counts = np.bincount(draws, minlength=weights.size)
    assert chi_square(counts, weights / weights.sum()) < 499 + 5 * math.sqrt(2 * 499)


def test_one_positive_weight_is_always_drawn() -> None:
    weights = np.zeros(1000)
    weights[637] = 1e-200
    assert np.all(weighted_sample(weights, seed=1, epoch=0, num_samples=5000) == 637)
    assert weighted_sample(weights, seed=1, epoch=0, replacement=False).tolist() == [637]


def test_first_item_without_replacement_follows_the_weights() -> None:
    weights = np.array([1.0, 2.0, 0.0, 3.0, 4.0])
    firsts = [
        int(weighted_sample(weights, seed=9, epoch=e, num_samples=1, replacement=False)[0])
        for e in range(4000)
    ]
    counts = np.bincount(firsts, minlength=5)
    assert counts[2] == 0
    keep = weights > 0
    assert chi_square(counts[keep], weights[keep] / weights.sum()) < 20.0  # df = 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heavier_items_come_earlier_without_replacement(seed: int) -> None:
    n = 1000
    weights = np.random.default_rng(seed).permutation(np.arange(1, n + 1, dtype=np.float64))
    order = weighted_sample(weights, seed=seed, epoch=0, replacement=False)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    by_weight = np.argsort(weights)
    bottom, top = by_weight[: n // 10], by_weight[-n // 10 :]
    assert position[top].mean() < position[bottom].mean() - n / 4


def test_dtypes_of_weights() -> None:
    ints = weighted_sample(np.array([0, 3, 1], dtype=np.uint8), seed=4, epoch=0, num_samples=64)
    floats = weighted_sample([0.0, 3.0, 1.0], seed=4, epoch=0, num_samples=64)
    assert np.array_equal(ints, floats)
    halves = weighted_sample(np.array([0, 3, 1], dtype=np.float16), seed=4, epoch=0)
    assert np.array_equal(halves, floats[:3])
    assert weighted_sample([2, 1], seed=0, epoch=0, num_samples=0).shape == (0,)
    assert weighted_sample([2, 1], seed=0, epoch=0, num_samples=0, replacement=False).shape == (0,)


def test_memory_with_replacement() -> None:
    n = 1_000_000
    weights = np.random.default_rng(0).random(n)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = weighted_sample(weights, seed=0, epoch=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.nbytes == 8 * n
    # the output, the CDF and the guide table (4 bytes per bucket, 2**20 buckets) + blocks
    assert peak - base < 8 * n + 8 * n + 4 * 2**20 + 8 * 2**20


def test_memory_without_replacement() -> None:
    n = 1_000_000
    weights = np.random.default_rng(0).random(n)
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        out = weighted_sample(weights, seed=0, epoch=0, replacement=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.nbytes == 8 * n
    # the output and the packed clocks (8 bytes each per item) + blocks
    assert peak - base < 2 * 8 * n + 2 * n + 8 * 2**20


# ------------------------------------------------------------------------------------------------
# weighted_batches.
# ------------------------------------------------------------------------------------------------


@FAST
@given(
    weights=weight_lists(),
    seed=SEEDS,
    batch_size=st.integers(1, 30),
    num_samples=st.none() | st.integers(0, 100),
    replacement=st.booleans(),
    drop_last=st.booleans(),
)
def test_batches_cut_the_sampled_sequence(
    weights: list[float],
    seed: int,
    batch_size: int,
    num_samples: int | None,
    replacement: bool,
    drop_last: bool,
) -> None:
    if not replacement and num_samples is not None:
        num_samples = min(num_samples, sum(1 for x in weights if x > 0))
    kwargs: dict[str, Any] = {
        "seed": seed,
        "epoch": 2,
        "num_samples": num_samples,
        "replacement": replacement,
    }
    sequence = weighted_sample(weights, **kwargs).tolist()
    batches = weighted_batches(weights, batch_size=batch_size, drop_last=drop_last, **kwargs)
    total = len(sequence)
    expected_count = total // batch_size if drop_last else -(-total // batch_size)
    assert len(batches) == expected_count
    expected = [sequence[b * batch_size : (b + 1) * batch_size] for b in range(expected_count)]
    assert [batches.batch(b).tolist() for b in range(len(batches))] == expected
    sizes = batches.sizes()
    assert np.all(sizes[:-1] == batch_size) if sizes.size else True
    if drop_last and sizes.size:
        assert sizes[-1] == batch_size
    assert batches.indices.dtype == np.int32
    assert not batches.indices.flags.writeable
    assert not batches.offsets.flags.writeable


def test_batches_sizes_and_drop_last() -> None:
    weights = np.ones(10)
    keep = weighted_batches(weights, seed=0, epoch=0, batch_size=4)
    assert keep.sizes().tolist() == [4, 4, 2]
    drop = weighted_batches(weights, seed=0, epoch=0, batch_size=4, drop_last=True)
    assert drop.sizes().tolist() == [4, 4]
    assert np.array_equal(drop.indices, keep.indices[:8])
    exact = weighted_batches(weights, seed=0, epoch=0, batch_size=5, drop_last=True)
    assert exact.sizes().tolist() == [5, 5]
    none = weighted_batches(weights, seed=0, epoch=0, batch_size=11, drop_last=True)
    assert len(none) == 0 and none.num_samples == 0
    empty = weighted_batches(weights, seed=0, epoch=0, batch_size=3, num_samples=0)
    assert len(empty) == 0
    without = weighted_batches(weights, seed=0, epoch=0, batch_size=3, replacement=False)
    assert sorted(without.indices.tolist()) == list(range(10))
    assert without.sizes().tolist() == [3, 3, 3, 1]


# ------------------------------------------------------------------------------------------------
# Validation.
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ([True, False], TypeError, r"weights must be numbers, got a bool array"),
        (["a", "b"], TypeError, r"weights must be real numbers.*dtype <U1"),
        ([1 + 2j], TypeError, r"weights must be real numbers.*complex"),
        ([None, 1.0], TypeError, r"weights must be real numbers.*object"),
        ([[1.0, 2.0]], ValueError, r"weights must be a 1-d array.*shape \(1, 2\)"),
        (3.0, ValueError, r"weights must be a 1-d array.*shape \(\)"),
        ([], ValueError, r"weights must not be empty"),
        ([1.0, float("nan")], ValueError, r"weights must be finite, but weights\[1\] = nan"),
        ([float("inf"), 1.0], ValueError, r"weights must be finite, but weights\[0\] = inf"),
        ([1.0, 2.0, -0.5], ValueError, r"weights must be >= 0, but weights\[2\] = -0.5"),
        ([0, 0, 0], ValueError, r"weights must not all be zero \(got 3 zeros\)"),
        ([1e308, 1e308], ValueError, r"sum of the weights overflows float64"),
    ],
)
def test_bad_weights(weights: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        weighted_sample(weights, seed=0, epoch=0)  # type: ignore[arg-type]
    if "overflows" not in match:  # the overflow only matters for the CDF
        with pytest.raises(error, match=match):
            weighted_sample(weights, seed=0, epoch=0, replacement=False)  # type: ignore[arg-type]
        with pytest.raises(error, match=match):
            weighted_batches(weights, seed=0, epoch=0, batch_size=2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_samples": -1}, ValueError, r"num_samples must be >= 0, got -1"),
        ({"num_samples": True}, TypeError, r"num_samples must be an integer, got the bool"),
        ({"num_samples": 2.0}, TypeError, r"num_samples must be an integer, got float"),
        ({"seed": -1}, ValueError, r"seed must be >= 0"),
        ({"seed": False}, TypeError, r"seed must be an integer, got the bool"),
        ({"epoch": True}, TypeError, r"epoch must be an integer, got the bool"),
        ({"epoch": -2}, ValueError, r"epoch must be >= 0"),
        ({"replacement": 1}, TypeError, r"replacement must be a bool, got int 1"),
        (
            {"replacement": False, "num_samples": 3},
            ValueError,
            r"num_samples=3 is more than the 2 samples with a positive weight",
        ),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    args: dict[str, Any] = {"seed": 0, "epoch": 0, **kwargs}
    with pytest.raises(error, match=match):
        weighted_sample([1.0, 0.0, 2.0], **args)
    with pytest.raises(error, match=match):
        weighted_batches([1.0, 0.0, 2.0], batch_size=2, **args)


def test_bad_batch_arguments() -> None:
    with pytest.raises(ValueError, match=r"batch_size must be >= 1, got 0"):
        weighted_batches([1.0], seed=0, epoch=0, batch_size=0)
    with pytest.raises(TypeError, match=r"batch_size must be an integer, got the bool"):
        weighted_batches([1.0], seed=0, epoch=0, batch_size=True)
    with pytest.raises(TypeError, match=r"drop_last must be a bool, got str 'yes'"):
        weighted_batches([1.0], seed=0, epoch=0, batch_size=1, drop_last="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, 3, 0, 0, 1), TypeError, r"component must be a str"),
        ((0, "w", 0, 5, 4), ValueError, r"stop must be >= start, got start=5, stop=4"),
        ((0, "w", 0, -1, 4), ValueError, r"start must be >= 0, got -1"),
        ((0, "w", 0, 0, 2**63 + 1), ValueError, r"stop must be <= 2\*\*63"),
        ((0, "w", True, 0, 1), TypeError, r"epoch must be an integer, got the bool"),
        ((0, "w", 0, 0, 1.5), TypeError, r"stop must be an integer, got float"),
        ((-3, "w", 0, 0, 1), ValueError, r"seed must be >= 0"),
    ],
)
def test_bad_uniform_arguments(args: tuple[Any, ...], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        uniform_draws(*args)
