"""The token-budget cut against a plain-Python reference, with every padding rule (issue 16)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaderkit.order.bucketing import bucket_ids, bucketed_batches, bucketed_sequence_batches
from loaderkit.order.padding import NO_PADDING, PackedRows, PaddedLength, padded_costs
from loaderkit.order.token_budget import cut_budget, oversize_sample, padding_stats


def _width(rule: PaddedLength, longest: int) -> int:
    """The reference padded width, written out."""
    width = rule.max_length if rule.fixed else longest
    if rule.max_length is not None:
        width = min(width, rule.max_length)
    multiple = rule.multiple or 1
    return -(-width // multiple) * multiple


def _rows(rule: PackedRows, lengths: list[int]) -> int:
    """The reference next-fit: what the packed collator does, piece by piece."""
    rows, used = 0, rule.row_length
    for length in lengths:
        length = max(length, 1)
        if length > rule.row_length:
            full, rest = divmod(length, rule.row_length)
            pieces = [rule.row_length] * full + ([rest] if rest else [])
            if not rule.split:
                pieces = [rule.row_length]
        else:
            pieces = [length]
        for piece in pieces:
            if used + piece > rule.row_length:
                rows, used = rows + 1, 0
            used += piece
    return rows


def _cost(rule: PaddedLength | PackedRows, lengths: list[int], quadratic: bool) -> int:
    if isinstance(rule, PackedRows):
        return _rows(rule, lengths) * rule.row_length ** (2 if quadratic else 1)
    width = _width(rule, max(max(x, 1) for x in lengths))
    return len(lengths) * width ** (2 if quadratic else 1)


def _reference_cut(
    ordered: list[int],
    budget: int,
    quadratic: bool,
    cap: int | None,
    rule: PaddedLength | PackedRows,
) -> list[int]:
    """Greedy: each batch is the longest prefix of the rest whose padded cost fits."""
    starts, p = [], 0
    while p < len(ordered):
        starts.append(p)
        q = p + 1
        while (
            q < len(ordered)
            and (cap is None or q - p < cap)
            and _cost(rule, ordered[p : q + 1], quadratic) <= budget
        ):
            q += 1
        p = q
    return [*starts, len(ordered)]


paddings = st.one_of(
    st.builds(
        PaddedLength,
        multiple=st.sampled_from([None, 1, 8, 64]),
        max_length=st.none() | st.integers(1, 300),
    ),
    st.builds(PaddedLength, multiple=st.sampled_from([None, 8]), max_length=st.integers(1, 64)).map(
        lambda r: PaddedLength(r.multiple, r.max_length, fixed=True)
    ),
    st.builds(PackedRows, row_length=st.integers(1, 128), split=st.booleans()),
)


@given(
    lengths=st.lists(st.integers(0, 400), min_size=1, max_size=60),
    budget=st.integers(1, 5_000),
    cap=st.none() | st.integers(1, 40),
    rule=paddings,
    quadratic=st.booleans(),
)
def test_the_cut_is_the_greedy_over_padded_costs(lengths, budget, cap, rule, quadratic):
    budget = budget * budget if quadratic else budget
    ordered = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
    if oversize_sample(ordered, budget, "quadratic" if quadratic else "linear", rule):
        return  # refused before any cut (tested below)
    offsets, last_full = cut_budget(ordered.astype(np.uint32), budget, quadratic, cap, rule)
    expected = _reference_cut(ordered.tolist(), budget, quadratic, cap, rule)
    assert offsets.tolist() == expected
    for lo, hi in itertools.pairwise(expected):
        assert _cost(rule, ordered[lo:hi].tolist(), quadratic) <= budget
    assert last_full == (cap is not None and expected[-1] - expected[-2] == cap)


@given(
    lengths=st.lists(st.integers(0, 1_000), min_size=1, max_size=300),
    budget=st.integers(1_000, 8_192),
    cap=st.none() | st.integers(1, 300),
    multiple=st.sampled_from([None, 1, 8, 64]),
    max_length=st.none() | st.integers(64, 1_200),
    seed=st.integers(0, 2**32),
)
def test_every_batch_holds_within_the_budget_padding_included(
    lengths, budget, cap, multiple, max_length, seed
):
    arr = np.asarray(lengths, dtype=np.int64)
    rule = PaddedLength(multiple=multiple, max_length=max_length)
    ids = bucket_ids(arr, 8)
    args = {"bucket_ids": ids, "seed": seed, "epoch": 1, "batch_size": cap, "max_tokens": budget}
    if oversize_sample(arr, budget, "linear", rule) is not None:
        with pytest.raises(ValueError, match="no batch can hold it"):
            bucketed_batches(arr, padding=rule, **args)
        return
    batches = bucketed_batches(arr, padding=rule, **args)
    assert sorted(batches.indices.tolist()) == list(range(len(arr)))
    for b in range(len(batches)):
        part = arr[batches.batch(b)].tolist()
        assert _cost(rule, part, False) <= budget
        assert cap is None or len(part) <= cap
    costs = padded_costs(arr[batches.indices], batches.offsets, rule)[1]
    stats = padding_stats(arr, batches, max_tokens=budget, padding=rule, max_batch_size=cap)
    assert stats["max_batch_cost"] == costs.max() <= budget
    # a sequence epoch (weighted draws, curricula) is cut the same way
    seq = np.random.default_rng(seed).integers(0, len(arr), size=2 * len(arr))
    drawn = bucketed_sequence_batches(seq, arr, padding=rule, **args)
    for b in range(len(drawn)):
        assert _cost(rule, arr[drawn.batch(b)].tolist(), False) <= budget


@given(
    lengths=st.lists(st.integers(0, 600), min_size=1, max_size=200),
    budget=st.integers(600, 4_096),
    cap=st.none() | st.integers(1, 64),
    seed=st.integers(0, 2**32),
)
def test_without_padding_the_batches_are_those_of_the_longest_sample_rule(
    lengths, budget, cap, seed
):
    """No rounding, no cutting: the cost is rows x longest, exactly as before padding rules."""
    arr = np.asarray(lengths, dtype=np.int64)
    args = {"bucket_ids": bucket_ids(arr, 4), "seed": seed, "epoch": 0, "batch_size": cap}
    plain = bucketed_batches(arr, max_tokens=budget, **args)
    for rule in (NO_PADDING, PaddedLength(multiple=1)):
        same = bucketed_batches(arr, max_tokens=budget, padding=rule, **args)
        assert same.indices.tolist() == plain.indices.tolist()
        assert same.offsets.tolist() == plain.offsets.tolist()


def test_a_sample_longer_than_the_budget_is_refused_unless_the_collator_cuts_it():
    lengths = np.array([100, 5_000, 300], dtype=np.int64)
    ids = bucket_ids(lengths, 2)
    args = {"bucket_ids": ids, "seed": 0, "epoch": 0, "batch_size": None, "max_tokens": 4_096}
    with pytest.raises(ValueError, match=r"sample 1 has length 5000: alone it costs 5000"):
        bucketed_batches(lengths, **args)
    # padded: 3,995 rounds up to 4,000 with 8 (fits 4,000), to 4,032 with 64 (does not)
    near = np.array([3_995], dtype=np.int64)
    assert oversize_sample(near, 4_000, "linear", PaddedLength(multiple=8)) is None
    assert oversize_sample(near, 4_000, "linear", PaddedLength(multiple=64)) == (0, 3_968)
    # a collator max_length of 1,024 cuts it: it fits, alone or with others
    cut = PaddedLength(multiple=8, max_length=1_024)
    batches = bucketed_batches(lengths, padding=cut, **args)
    assert sorted(batches.indices.tolist()) == [0, 1, 2]
    # packed rows of 1,024, longer sequences split: 5 rows of 1,024 > 4 allowed
    with pytest.raises(ValueError, match="5 row"):
        bucketed_batches(lengths, padding=PackedRows(1_024, split=True), **args)
