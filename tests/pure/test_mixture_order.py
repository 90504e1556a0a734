"""Tests of mixtures of sources (``loaderkit.order.mixture``)."""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import FeistelPermutation, derive_key
from loaderkit.order.mixture import (
    MODES,
    mixture_batches,
    mixture_num_batches,
    source_of,
)

FAST = settings(deadline=None)
SEEDS = st.integers(min_value=0, max_value=2**64)
EPOCHS = st.integers(min_value=0, max_value=5)
SIZES = st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=4)
BATCH_SIZES = st.integers(min_value=1, max_value=9)
CUT_MODES = ("round_robin", "max_size_cycle", "min_size", "weighted")


def names_for(sizes: list[int] | tuple[int, ...]) -> list[str]:
    return [chr(ord("a") + s) for s in range(len(sizes))]


def run(sizes: Any, mode: str, **kw: Any) -> Any:
    args: dict[str, Any] = {"names": names_for(sizes), "seed": 0, "epoch": 0, "batch_size": 4}
    args.update(kw)
    return mixture_batches(sizes, mode=mode, **args)


def batches(epoch: Any) -> list[list[int]]:
    return [epoch.batch(b).tolist() for b in range(len(epoch))]


def offsets_of(sizes: Any) -> list[int]:
    return [sum(sizes[:s]) for s in range(len(sizes))]


# ------------------------------------------------------------------------------------------------
# A straightforward pure-Python reading of the algorithm in the module docstring of
# loaderkit/order/mixture.py: one position at a time, Python ints and floats, bisect. The
# vectorized implementation must agree with it exactly.
# ------------------------------------------------------------------------------------------------

M64 = 2**64 - 1


def ref_uniform(seed: int, component: str, epoch: int, p: int) -> float:
    z = derive_key(seed, component, epoch) ^ p
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z >> 11) * 2.0**-53


def ref_stream(sizes, names, seed, epoch, shuffle, s, j):
    n = sizes[s]
    c, i = divmod(j, n)
    if shuffle:
        perm = FeistelPermutation(n, derive_key(seed, "mixture", names[s], epoch, c))
        i = int(perm(np.array([i]))[0])
    return sum(sizes[:s]) + i


def ref_cumsum(row):
    out, acc = [], 0.0
    for w in row:
        acc = w if not out else acc + w
        out.append(acc)
    return out


def ref_labels(sizes, mode, seed, epoch, size, weights, num_samples, stratified, drop):
    """The label sequence of the kept positions, and the batch lengths."""
    k = len(sizes)
    if mode == "sequential":
        labels, lengths = [], []
        for s, n in enumerate(sizes):
            full, rest = divmod(n, size)
            labels += [s] * (full * size if drop else n)
            lengths += [size] * full + ([rest] if rest and not drop else [])
        return labels, lengths
    if mode == "round_robin":
        labels = [s for r in range(max(sizes)) for s in range(k) if sizes[s] > r]
    elif mode == "max_size_cycle":
        labels = [s for _ in range(max(sizes)) for s in range(k)]
    elif mode == "min_size":
        labels = [s for _ in range(min(sizes)) for s in range(k)]
    else:
        total = sum(sizes) if num_samples is None else num_samples
        labels = [None] * total
    total = len(labels)
    nb = total // size if drop else -(-total // size)
    kept = min(nb * size, total)
    lengths = [min(size, kept - b * size) for b in range(nb)]
    if mode != "weighted":
        return labels[:kept], lengths
    w = np.asarray(sizes if weights is None else weights, dtype=np.float64)

    def row(b):
        return [float(x) for x in (w[b] if w.ndim == 2 else w)]

    labels = []
    for b, m in enumerate(lengths):
        r = row(b)
        c = ref_cumsum(r)
        total_w = c[-1]
        if stratified:
            u = ref_uniform(seed, "mixture-strata", epoch, b)
            below = 0
            for s in range(k):
                q = float(m) * (c[s] / total_w)
                reached = math.floor(q) + (1 if q - math.floor(q) > u else 0)
                labels += [s] * (reached - below)
                below = reached
        else:
            last = max(s for s in range(k) if r[s] > 0)
            for p in range(b * size, b * size + m):
                t = ref_uniform(seed, "mixture-weights", epoch, p) * total_w
                labels.append(min(bisect.bisect_right(c, t), last))
    return labels, lengths


def ref_batches(
    sizes,
    names,
    mode,
    seed,
    epoch,
    size,
    *,
    shuffle=True,
    weights=None,
    num_samples=None,
    stratified=False,
    drop=False,
):
    labels, lengths = ref_labels(
        sizes, mode, seed, epoch, size, weights, num_samples, stratified, drop
    )
    used = [0] * len(sizes)
    flat = []
    for s in labels:
        flat.append(ref_stream(sizes, names, seed, epoch, shuffle, s, used[s]))
        used[s] += 1
    out, at = [], 0
    for m in lengths:
        out.append(flat[at : at + m])
        at += m
    return out


@FAST
@given(
    SIZES,
    st.sampled_from(MODES),
    SEEDS,
    EPOCHS,
    BATCH_SIZES,
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.data(),
)
def test_matches_the_reference(sizes, mode, seed, epoch, size, shuffle, stratified, drop, data):
    names = names_for(sizes)
    kw: dict[str, Any] = {}
    if mode == "weighted":
        kw["stratified"] = stratified
        kw["num_samples"] = data.draw(st.none() | st.integers(0, 60), label="num_samples")
        nb = mixture_num_batches(
            sizes, mode=mode, batch_size=size, num_samples=kw["num_samples"], drop_last=drop
        )
        shape = data.draw(st.sampled_from([None, (len(sizes),), (nb, len(sizes))]), label="shape")
        if shape is not None:
            w = data.draw(
                st.lists(
                    st.sampled_from([0.0, 0.5, 1.0, 3.0, 1e-3, 7.25]),
                    min_size=math.prod(shape),
                    max_size=math.prod(shape),
                ),
                label="weights",
            )
            arr = np.asarray(w, dtype=np.float64).reshape(shape)
            if arr.size:
                arr[..., 0] += 0.25  # every row has a positive weight
            kw["weights"] = arr
    got = mixture_batches(
        sizes,
        names=names,
        mode=mode,
        seed=seed,
        epoch=epoch,
        batch_size=size,
        shuffle=shuffle,
        drop_last=drop,
        **kw,
    )
    want = ref_batches(
        sizes,
        names,
        mode,
        seed,
        epoch,
        size,
        shuffle=shuffle,
        weights=kw.get("weights"),
        num_samples=kw.get("num_samples"),
        stratified=kw.get("stratified", False),
        drop=drop,
    )
    assert batches(got) == want
    assert len(got) == mixture_num_batches(
        sizes, mode=mode, batch_size=size, num_samples=kw.get("num_samples"), drop_last=drop
    )
    assert got.indices.dtype == np.int32
    assert not got.indices.flags.writeable
    assert not got.offsets.flags.writeable


@pytest.mark.parametrize("stratified", [False, True])
@pytest.mark.parametrize("per_batch", [False, True])
@pytest.mark.parametrize(
    "weights",
    [
        [1.0] * 12,  # more sources than the direct count handles: the searches
        [0.0, 3.0, 0.0, 1e-300, 2.0, 0.0, 0.0, 0.5, 0.0, 7.0, 1e300, 0.0],
        [5e-324] * 3 + [0.0] * 9,  # a subnormal total: fl(u * S) can reach S
        [2.0**-1070, 0.0, 2.0**-1074] + [0.0] * 9,
    ],
)
def test_many_sources_and_extreme_weights_match_the_reference(weights, per_batch, stratified):
    sizes = [1 + (3 * s) % 7 for s in range(12)]
    names = names_for(sizes)
    nb = mixture_num_batches(sizes, mode="weighted", batch_size=5, num_samples=90)
    w = np.tile(weights, (nb, 1)) if per_batch else np.asarray(weights)
    if per_batch:
        w[1::3] = np.roll(w[1::3], 1, axis=1)
    got = mixture_batches(
        sizes,
        names=names,
        mode="weighted",
        seed=9,
        epoch=1,
        batch_size=5,
        weights=w,
        num_samples=90,
        stratified=stratified,
    )
    want = ref_batches(
        sizes, names, "weighted", 9, 1, 5, weights=w, num_samples=90, stratified=stratified
    )
    assert batches(got) == want
    src = source_of(got.indices, sizes)
    for b in range(nb):
        row = w[b] if per_batch else w
        assert np.all(row[src[got.offsets[b] : got.offsets[b + 1]]] > 0)


# -- golden vectors -------------------------------------------------------------------------------


def test_golden_round_robin():
    got = run([3, 5, 2], "round_robin")
    assert got.indices.tolist() == [1, 5, 9, 2, 7, 8, 0, 6, 3, 4]
    assert got.offsets.tolist() == [0, 4, 8, 10]


def test_golden_weighted():
    got = run([3, 5, 2], "weighted", weights=[1.0, 2.0, 1.0], num_samples=12)
    assert got.indices.tolist() == [1, 2, 9, 0, 8, 5, 2, 0, 7, 6, 3, 1]
    assert got.offsets.tolist() == [0, 4, 8, 12]


def test_golden_stratified_and_sequential():
    got = run([3, 5, 2], "weighted", weights=[1, 2, 1], stratified=True, epoch=1, seed=7)
    assert got.indices.tolist() == [2, 3, 5, 9, 1, 7, 4, 8, 0, 6]
    assert got.offsets.tolist() == [0, 4, 8, 10]
    got = run([3, 5, 2], "sequential", batch_size=2, seed=3)
    assert batches(got) == [[2, 0], [1], [3, 4], [6, 7], [5], [9, 8]]


# -- the modes ------------------------------------------------------------------------------------


@FAST
@given(SIZES, SEEDS, EPOCHS, BATCH_SIZES)
def test_round_robin_uses_every_sample_once_in_rounds(sizes, seed, epoch, size):
    got = run(sizes, "round_robin", seed=seed, epoch=epoch, batch_size=size)
    assert sorted(got.indices.tolist()) == list(range(sum(sizes)))
    src = source_of(got.indices, sizes).tolist()
    assert src == [s for r in range(max(sizes)) for s in range(len(sizes)) if sizes[s] > r]
    lengths = got.sizes().tolist()
    assert all(m == size for m in lengths[:-1]) and 1 <= lengths[-1] <= size


@FAST
@given(SIZES, SEEDS, BATCH_SIZES, st.booleans())
def test_max_size_cycle_and_min_size_lengths(sizes, seed, size, drop):
    k = len(sizes)
    for mode, rounds in (("max_size_cycle", max(sizes)), ("min_size", min(sizes))):
        got = run(sizes, mode, seed=seed, batch_size=size, drop_last=drop)
        total = k * rounds
        assert got.num_samples == (total // size * size if drop else total)
        src = source_of(got.indices, sizes)
        assert src.tolist() == [p % k for p in range(got.num_samples)]
        counts = np.bincount(src, minlength=k)
        assert counts.max() - counts.min() <= 1
        if mode == "min_size" and not drop:  # no repeats: the first cycle of every stream
            assert len(set(got.indices.tolist())) == total


def test_max_size_cycle_cycles_the_short_sources_in_new_orders():
    got = run([3, 40], "max_size_cycle", batch_size=8)
    short = got.indices[source_of(got.indices, [3, 40]) == 0].tolist()
    assert len(short) == 40
    cycles = [short[i : i + 3] for i in range(0, 39, 3)]
    assert all(sorted(c) == [0, 1, 2] for c in cycles)
    assert len({tuple(c) for c in cycles}) > 1
    long = got.indices[source_of(got.indices, [3, 40]) == 1].tolist()
    assert sorted(long) == list(range(3, 43))


@FAST
@given(SIZES, SEEDS, BATCH_SIZES, st.booleans())
def test_sequential_batches_never_straddle_sources(sizes, seed, size, drop):
    got = run(sizes, "sequential", seed=seed, batch_size=size, drop_last=drop)
    seen = []
    for batch in batches(got):
        src = set(source_of(np.array(batch, dtype=np.int64), sizes).tolist())
        assert len(src) == 1
        seen.append(src.pop())
    assert seen == sorted(seen)  # source order
    for s, n in enumerate(sizes):
        mine = got.indices[source_of(got.indices, sizes) == s].tolist()
        kept = n // size * size if drop else n
        assert len(mine) == len(set(mine)) == kept
        assert all(offsets_of(sizes)[s] <= i < offsets_of(sizes)[s] + n for i in mine)


def test_sequential_drop_last_drops_every_sources_partial_batch():
    got = run([5, 3, 8], "sequential", batch_size=4, drop_last=True)
    assert got.sizes().tolist() == [4, 4, 4]
    assert source_of(got.indices, [5, 3, 8]).tolist() == [0] * 4 + [2] * 8
    got = run([5, 3, 8], "sequential", batch_size=4)
    assert got.sizes().tolist() == [4, 1, 3, 4, 4]


@pytest.mark.parametrize("mode", CUT_MODES)
def test_drop_last_keeps_the_same_prefix(mode):
    full = run([7, 4, 9], mode, batch_size=7)
    dropped = run([7, 4, 9], mode, batch_size=7, drop_last=True)
    assert full.sizes()[-1] < 7
    assert dropped.sizes().tolist() == [7] * (len(full) - 1)
    assert dropped.indices.tolist() == full.indices[: dropped.num_samples].tolist()


# -- weighted -------------------------------------------------------------------------------------


def test_weighted_frequencies_converge_to_the_weights():
    sizes, weights = [100, 50, 7], np.array([0.5, 0.3, 0.2])
    total = 20_000
    got = run(sizes, "weighted", weights=weights, num_samples=total, batch_size=32, seed=11)
    counts = np.bincount(source_of(got.indices, sizes), minlength=3)
    sd = np.sqrt(total * weights * (1 - weights))
    assert np.all(np.abs(counts - total * weights) < 4 * sd)
    # the small source cycles: every cycle of its stream is a permutation
    small = got.indices[source_of(got.indices, sizes) == 2] - 150
    whole = small.size // 7 * 7
    assert all(sorted(c) == list(range(7)) for c in small[:whole].reshape(-1, 7).tolist())


def test_weighted_default_weights_follow_the_sizes():
    sizes = [6000, 3000, 1000]
    got = run(sizes, "weighted", batch_size=50, seed=5)
    assert got.num_samples == 10_000
    counts = np.bincount(source_of(got.indices, sizes), minlength=3)
    p = np.array(sizes) / 10_000
    assert np.all(np.abs(counts - 10_000 * p) < 4 * np.sqrt(10_000 * p * (1 - p)))


def test_zero_weight_source_is_never_drawn():
    for stratified in (False, True):
        got = run(
            [5, 5, 5],
            "weighted",
            weights=[0, 1, 0],
            num_samples=500,
            stratified=stratified,
        )
        assert set(source_of(got.indices, [5, 5, 5]).tolist()) == {1}
        got = run([5, 5, 5], "weighted", weights=[2, 0, 1], num_samples=3000, stratified=stratified)
        assert set(source_of(got.indices, [5, 5, 5]).tolist()) == {0, 2}


@pytest.mark.parametrize("stratified", [False, True])
def test_per_batch_weight_rows_are_honoured(stratified):
    sizes, size = [10, 10, 10], 5
    nb = mixture_num_batches(sizes, mode="weighted", batch_size=size, num_samples=200)
    assert nb == 40
    rows = np.tile([1.0, 1.0, 1.0], (nb, 1))
    rows[::2, 1] = 0.0  # even batches: never source 1
    rows[1::2] = [0.0, 0.0, 1.0]  # odd batches: only source 2
    got = run(
        sizes, "weighted", weights=rows, num_samples=200, batch_size=size, stratified=stratified
    )
    for b in range(nb):
        src = set(source_of(got.batch(b), sizes).tolist())
        if b % 2:
            assert src == {2}
        else:
            assert 1 not in src
    # a constant 2-d schedule is the same as the 1-d weights
    flat = run(
        sizes,
        "weighted",
        weights=[1, 2, 3],
        num_samples=200,
        batch_size=size,
        stratified=stratified,
    )
    rows = run(
        sizes,
        "weighted",
        weights=np.tile([1, 2, 3], (nb, 1)),
        num_samples=200,
        batch_size=size,
        stratified=stratified,
    )
    assert flat.indices.tolist() == rows.indices.tolist()


@FAST
@given(
    st.lists(st.sampled_from([0.0, 0.1, 1.0, 2.5, 3.0, 1e-9, 1e9]), min_size=1, max_size=6),
    st.integers(1, 70),
    st.integers(0, 300),
    SEEDS,
)
def test_stratified_counts_are_floor_or_ceil_of_the_quotas(w, size, num_samples, seed):
    w[0] += 1.0
    sizes = [3] * len(w)
    got = run(
        sizes,
        "weighted",
        weights=w,
        num_samples=num_samples,
        batch_size=size,
        stratified=True,
        seed=seed,
    )
    assert got.num_samples == num_samples
    share = np.asarray(w) / sum(w)
    for b in range(len(got)):
        src = source_of(got.batch(b), sizes)
        assert np.all(np.diff(src) >= 0)  # grouped in source order
        counts = np.bincount(src, minlength=len(w))
        quota = len(src) * share
        assert np.all(counts >= np.floor(quota - 1e-9))
        assert np.all(counts <= np.ceil(quota + 1e-9))
        assert np.all(counts[share == 0] == 0)


def test_stratified_long_run_frequencies_follow_the_weights():
    weights = np.array([0.55, 0.3, 0.15])
    got = run(
        [50, 50, 50],
        "weighted",
        weights=weights,
        num_samples=20_000,
        batch_size=7,
        stratified=True,
        seed=2,
    )
    counts = np.bincount(source_of(got.indices, [50, 50, 50]), minlength=3)
    assert np.all(np.abs(counts / 20_000 - weights) < 0.005)


# -- determinism and keys -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_deterministic_and_keyed_by_seed_and_epoch(mode):
    base = run([30, 20, 40], mode, seed=1, epoch=2)
    assert base.indices.tolist() == run([30, 20, 40], mode, seed=1, epoch=2).indices.tolist()
    assert base.indices.tolist() != run([30, 20, 40], mode, seed=2, epoch=2).indices.tolist()
    assert base.indices.tolist() != run([30, 20, 40], mode, seed=1, epoch=3).indices.tolist()


@pytest.mark.parametrize("mode", ["sequential", "round_robin", "max_size_cycle", "min_size"])
def test_shuffle_false_gives_identity_streams(mode):
    sizes = [3, 5, 2]
    got = run(sizes, mode, shuffle=False)
    src = source_of(got.indices, sizes)
    for s in range(3):
        local = got.indices[src == s] - offsets_of(sizes)[s]
        assert local.tolist() == [j % sizes[s] for j in range(local.size)]


def test_shuffle_false_keeps_weighted_draws_random():
    sizes = [4, 4]
    got = run(sizes, "weighted", shuffle=False, num_samples=40)
    shuffled = run(sizes, "weighted", num_samples=40)
    assert source_of(got.indices, sizes).tolist() == source_of(shuffled.indices, sizes).tolist()
    local = got.indices[source_of(got.indices, sizes) == 1] - 4
    assert local.tolist() == [j % 4 for j in range(local.size)]


@FAST
@given(st.integers(1, 40), st.integers(1, 40), SEEDS, EPOCHS, st.sampled_from(MODES))
def test_a_sources_stream_does_not_depend_on_the_others(na, nb, seed, epoch, mode):
    """Adding source "b" leaves the subsequence of source "a" samples unchanged (as a prefix)."""
    alone = mixture_batches([na], names=["a"], mode=mode, seed=seed, epoch=epoch, batch_size=3)
    both = mixture_batches(
        [nb, na], names=["b", "a"], mode=mode, seed=seed, epoch=epoch, batch_size=3
    )
    mine = both.indices[source_of(both.indices, [nb, na]) == 1] - nb
    if mode == "max_size_cycle":  # the source then cycles max(na, nb) times
        want = [
            int(
                FeistelPermutation(na, derive_key(seed, "mixture", "a", epoch, j // na))(
                    np.array([j % na])
                )[0]
            )
            for j in range(mine.size)
        ]
        assert mine.tolist() == want
        return
    n = min(mine.size, alone.num_samples)
    assert mine[:n].tolist() == alone.indices[:n].tolist()
    if mode in ("round_robin", "sequential"):
        assert mine.tolist() == alone.indices.tolist()


def test_round_robin_source_a_unchanged_by_an_extra_source():
    one = mixture_batches([9], names=["a"], mode="round_robin", seed=4, epoch=1, batch_size=4)
    two = mixture_batches(
        [9, 6], names=["a", "b"], mode="round_robin", seed=4, epoch=1, batch_size=4
    )
    assert two.indices[source_of(two.indices, [9, 6]) == 0].tolist() == one.indices.tolist()


@FAST
@given(SIZES, SEEDS, st.sampled_from(["weighted", "max_size_cycle"]))
def test_no_duplicate_within_a_cycle(sizes, seed, mode):
    got = run(sizes, mode, seed=seed, num_samples=200 if mode == "weighted" else None)
    src = source_of(got.indices, sizes)
    for s, n in enumerate(sizes):
        mine = got.indices[src == s].tolist()
        for a in range(0, len(mine), n):
            cycle = mine[a : a + n]
            assert len(set(cycle)) == len(cycle)


# -- counts ---------------------------------------------------------------------------------------


@FAST
@given(
    SIZES,
    st.sampled_from(MODES),
    BATCH_SIZES,
    st.booleans(),
    st.none() | st.integers(0, 100),
    st.booleans(),
)
def test_num_batches_equals_len(sizes, mode, size, drop, num_samples, stratified):
    if mode != "weighted":
        num_samples, stratified = None, False
    got = run(
        sizes, mode, batch_size=size, drop_last=drop, num_samples=num_samples, stratified=stratified
    )
    nb = mixture_num_batches(
        sizes, mode=mode, batch_size=size, num_samples=num_samples, drop_last=drop
    )
    assert nb == len(got)
    assert got.offsets[-1] == got.num_samples


def test_num_samples_zero_gives_an_empty_epoch():
    got = run([3, 4], "weighted", num_samples=0)
    assert len(got) == 0 and got.num_samples == 0
    got = run([3, 4], "weighted", num_samples=0, weights=np.zeros((0, 2)))
    assert len(got) == 0


def test_large_index_space_uses_int64():
    got = run([2**31 - 5, 5], "min_size", batch_size=3)
    assert got.indices.dtype == np.int32
    got = run([2**31, 5], "weighted", weights=[0, 1], num_samples=4)
    assert got.indices.dtype == np.int64
    assert np.all(got.indices >= 2**31)


# -- source_of ------------------------------------------------------------------------------------


def test_source_of():
    sizes = [3, 5, 2]
    assert source_of(np.arange(10), sizes).tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 2, 2]
    assert source_of(np.array([[9, 0], [3, 2]], dtype=np.uint8), sizes).tolist() == [[2, 0], [1, 0]]
    assert source_of([], sizes).tolist() == []
    assert source_of(np.int64(4), sizes) == 1
    with pytest.raises(ValueError, match=r"indices must lie in \[0, sum\(sizes\)\) = \[0, 10\)"):
        source_of([10], sizes)
    with pytest.raises(ValueError, match="got -1"):
        source_of([0, -1], sizes)
    with pytest.raises(TypeError, match="indices must be integers"):
        source_of([0.5], sizes)
    with pytest.raises(TypeError, match="indices must be integers"):
        source_of([True], sizes)


# -- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sizes": [3, 0]}, ValueError, r"sizes\[1\] must be >= 1"),
        ({"sizes": []}, ValueError, "sizes must not be empty"),
        ({"sizes": [3, True]}, TypeError, r"sizes\[1\] must be an integer, got the bool"),
        ({"sizes": [3, 2.0]}, TypeError, r"sizes\[1\] must be an integer"),
        ({"sizes": "ab"}, TypeError, "sizes must be a sequence of ints"),
        ({"sizes": 5}, TypeError, "sizes must be a sequence of ints"),
        ({"sizes": np.ones((2, 2), dtype=int)}, ValueError, "sizes must be 1-d"),
        ({"sizes": [2**62, 2**62]}, ValueError, "sum to less than 2"),
        ({"names": ["a"]}, ValueError, "one name per source: got 1 names for 2 sizes"),
        ({"names": ["a", "a"]}, ValueError, r"names\[0\] and names\[1\] are both 'a'"),
        ({"names": ["a", ""]}, ValueError, r"names\[1\] must not be empty"),
        ({"names": ["a", 1]}, TypeError, r"names\[1\] must be a str"),
        ({"names": "ab"}, TypeError, "names must be a sequence of str"),
        ({"mode": "mixed"}, ValueError, "mode must be one of"),
        ({"mode": None}, TypeError, "mode must be a str"),
        ({"seed": -1}, ValueError, "seed must be >= 0"),
        ({"seed": True}, TypeError, "seed must be an integer, got the bool"),
        ({"epoch": 1.0}, TypeError, "epoch must be an integer"),
        ({"batch_size": 0}, ValueError, "batch_size must be >= 1"),
        ({"shuffle": 1}, TypeError, "shuffle must be a bool"),
        ({"drop_last": None}, TypeError, "drop_last must be a bool"),
        ({"stratified": "yes"}, TypeError, "stratified must be a bool"),
        ({"num_samples": -1}, ValueError, "num_samples must be >= 0"),
        ({"num_samples": False}, TypeError, "num_samples must be an integer, got the bool"),
        ({"weights": [1.0, np.nan]}, ValueError, r"weights must be finite, but weights\[1\]"),
        ({"weights": [1.0, np.inf]}, ValueError, "weights must be finite"),
        ({"weights": [1.0, -0.5]}, ValueError, r"weights must be >= 0, but weights\[1\] = -0.5"),
        ({"weights": [0, 0]}, ValueError, "weights are all zero"),
        ({"weights": [1, 2, 3]}, ValueError, r"weights must have shape \(2,\)"),
        ({"weights": 1.0}, ValueError, r"weights must have shape \(2,\)"),
        ({"weights": np.ones((2, 2, 2))}, ValueError, r"weights must have shape \(2,\)"),
        ({"weights": np.ones((3, 2))}, ValueError, "this epoch has 2 batches .* got 3 rows"),
        ({"weights": [[1, 0], [0, 0]]}, ValueError, r"row 1 \(batch 1\) are all zero"),
        ({"weights": [[1, 0], [0, -1]]}, ValueError, r"weights\[1, 1\] = -1.0"),
        ({"weights": [True, False]}, TypeError, "weights must be numbers, got a bool array"),
        ({"weights": ["a", "b"]}, TypeError, "weights must be real numbers"),
        ({"weights": [1e308, 1e308]}, ValueError, "overflows float64"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    args: dict[str, Any] = {
        "sizes": [3, 4],
        "names": ["a", "b"],
        "mode": "weighted",
        "seed": 0,
        "epoch": 0,
        "batch_size": 4,
    }
    args.update(kwargs)
    sizes = args.pop("sizes")
    with pytest.raises(error, match=match):
        mixture_batches(sizes, **args)


@pytest.mark.parametrize("mode", ["sequential", "round_robin", "max_size_cycle", "min_size"])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": [1, 1]}, "weights only applies to mode='weighted'"),
        ({"num_samples": 5}, "num_samples only applies to mode='weighted'"),
        ({"stratified": True}, "stratified=True only applies to mode='weighted'"),
    ],
)
def test_weighted_options_refused_for_other_modes(mode, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run([3, 4], mode, **kwargs)
    if "num_samples" in kwargs:
        with pytest.raises(ValueError, match=match):
            mixture_num_batches([3, 4], mode=mode, batch_size=2, num_samples=5)


def test_num_batches_validation():
    with pytest.raises(ValueError, match="mode must be one of"):
        mixture_num_batches([3], mode="zip", batch_size=2)
    with pytest.raises(ValueError, match=r"sizes\[0\] must be >= 1"):
        mixture_num_batches([0], mode="weighted", batch_size=2)
    with pytest.raises(TypeError, match="drop_last must be a bool"):
        mixture_num_batches([3], mode="weighted", batch_size=2, drop_last=0)
    assert mixture_num_batches(np.array([5, 7]), mode="sequential", batch_size=4) == 4
    assert mixture_num_batches([5, 7], mode="max_size_cycle", batch_size=4) == 4
    assert mixture_num_batches([5, 7], mode="min_size", batch_size=4, drop_last=True) == 2
    assert mixture_num_batches([5, 7], mode="weighted", batch_size=4, num_samples=9) == 3
