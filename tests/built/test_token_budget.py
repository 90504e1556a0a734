"""A token budget bounds the padded tensor the model sees, whatever the collator pads (issue 16)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder, presets
from loaderkit.plan.fingerprint import stream_fields
from loaderkit.testing import collect

pytestmark = pytest.mark.timeout(180)


def corpus(lengths: list[int]) -> list[dict]:
    return [
        {"input_ids": np.arange(1, n + 1, dtype=np.int64), "idx": i} for i, n in enumerate(lengths)
    ]


def budgeted(samples, max_tokens, cap=None, collator="text", **options):
    return (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_seed(3)
        .with_bucketing(
            "input_ids", max_tokens=max_tokens, max_batch_size=cap, num_buckets=min(4, len(samples))
        )
        .with_collator(collator, **options)
    )


@settings(max_examples=15)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80),
    max_tokens=st.integers(300, 2_000),
    cap=st.none() | st.integers(1, 64),
    multiple=st.sampled_from([None, 1, 8, 64]),
    max_length=st.none() | st.integers(8, 300),
)
@example(lengths=[257], max_tokens=300, cap=None, multiple=64, max_length=None)  # 320 > 300
def test_every_collated_batch_fits_the_budget(lengths, max_tokens, cap, multiple, max_length):
    samples = corpus(lengths)
    options = {"pad_to_multiple_of": multiple, "max_length": max_length}
    plan = budgeted(samples, max_tokens, cap, **options).compile()
    step = multiple or 1
    widths = [-(-min(n, max_length or n) // step) * step for n in lengths]  # each alone, padded
    if max(widths) > max_tokens:  # a sample no batch can hold is refused, never dropped
        with pytest.raises(lk.DataError, match=r"alone it costs \d+ .*> max_tokens"):
            plan.build()
        return
    batches = collect(plan.build())
    assert sorted(int(i) for b in batches for i in b["idx"]) == list(range(len(samples)))
    for batch in batches:
        rows, width = batch["input_ids"].shape
        assert batch["input_ids"].numel() <= max_tokens  # padding included
        assert cap is None or rows <= cap
        if multiple in (None, 1) and max_length is None:  # no padding rule: exact
            assert width == max(len(samples[int(i)]["input_ids"]) for i in batch["idx"])


def test_the_issue_repro_stays_within_the_budget():
    """Lengths 1..1000, max_tokens=4096, pad_to_multiple_of=8: over the budget before."""
    lengths = np.random.default_rng(16).integers(1, 1_001, size=600).tolist()
    sizes = {}
    for multiple in (8, None):
        plan = budgeted(corpus(lengths), 4_096, pad_to_multiple_of=multiple).compile()
        sizes[multiple] = [b["input_ids"].numel() for b in collect(plan.build())]
    assert max(sizes[8]) <= 4_096
    assert max(sizes[None]) <= 4_096
    assert sum(sizes[8]) / (4_096 * len(sizes[8])) > 0.8  # and the budget is still well used


def test_packed_rows_fit_the_budget():
    lengths = np.random.default_rng(1).integers(1, 200, size=150).tolist()
    plan = budgeted(
        corpus(lengths), 512, collator="packed", max_length=128, overflow="split"
    ).compile()
    batches = collect(plan.build())
    assert sum(len(b["sequence_ids"].unique()) - 1 for b in batches) >= len(lengths) - 1
    for batch in batches:
        assert batch["input_ids"].shape[1] == 128
        assert batch["input_ids"].numel() <= 512  # at most 4 rows of 128


def test_a_sample_longer_than_the_budget_fails_the_build_or_is_cut_by_max_length():
    samples = corpus([100, 200, 5_000, 50])
    with pytest.raises(lk.DataError, match=r"sample 2 has length 5000: alone it costs 5000"):
        budgeted(samples, 4_096).compile().build()
    # the collator cuts it to 1,024 tokens: it fits, in a batch of its own padded width
    plan = budgeted(samples, 4_096, max_length=1_024, pad_to_multiple_of=8).compile()
    batches = collect(plan.build())
    assert sorted(int(i) for b in batches for i in b["idx"]) == [0, 1, 2, 3]
    assert max(b["input_ids"].numel() for b in batches) <= 4_096
    # padded to a multiple of 64, a 4,100-token sample is 4,160 wide, over a budget of 4,150
    # that its raw length fits: refused, and the message names the padding
    with pytest.raises(lk.DataError, match="rounded up to a multiple of 64"):
        budgeted(corpus([4_100]), 4_150, pad_to_multiple_of=64).compile().build()


def test_compile_refuses_a_padding_wider_than_the_budget():
    with pytest.raises(lk.PlanError, match=r"bucketing\.max_tokens: no batch fits"):
        budgeted(corpus([3, 4]), 32, max_length=64, padding="max_length").compile()


def test_the_preset_default_lets_the_budget_bind_and_explain_says_so():
    lengths = np.random.default_rng(2).integers(1, 1_001, size=600).tolist()
    plan = presets.causal_lm_pretraining(corpus(lengths), max_tokens=4_096, seed=0).compile()
    assert plan.bucketing is not None
    assert plan.bucketing.max_batch_size == 256
    text = plan.explain()
    assert "at most max_batch_size=256 samples and max_tokens=4,096 padded tokens" in text
    assert "max_batch_size closes batches whose rows are at most 16 tokens wide" in text
    with plan.build() as loader:
        for _ in loader:  # epoch 0, to its end: explain() is then about the next pass
            pass
        report = loader.explain()
        assert "epoch 1 (next pass):" in report
        batches = [b["input_ids"] for b in loader]  # epoch 1
    rows = [b.shape[0] for b in batches]
    sizes = [b.numel() for b in batches]
    assert max(sizes) <= 4_096
    capped = sum(r == 256 for r in rows) / len(rows)
    assert capped < 0.1  # the budget closes almost every batch
    assert f"by max_batch_size=256 for the rest; largest batch {max(sizes):,}" in report
    assert f"capped by max_tokens=4,096 (padded tokens) for {1 - capped:.0%}" in report


def test_explain_says_when_the_cap_makes_the_budget_irrelevant():
    plan = budgeted(corpus([10, 20]), 4_096, cap=8, max_length=256, pad_to_multiple_of=8)
    assert "max_tokens never binds, 8 rows of at most 256 tokens" in plan.compile().explain()


def test_the_fingerprint_holds_the_padding_rule_only_where_it_changes_the_batches():
    samples = corpus([5, 6])
    padded = stream_fields(budgeted(samples, 64, pad_to_multiple_of=8).compile())
    assert padded["bucketing"]["padding"] == {
        "kind": "padded",
        "multiple": 8,
        "max_length": None,
        "fixed": False,
    }
    plain = stream_fields(budgeted(samples, 64).compile())
    assert "padding" not in plain["bucketing"]  # cut as before: the fingerprint is unchanged
    fixed = stream_fields(
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(2)
        .with_bucketing("input_ids")
        .with_collator("text", pad_to_multiple_of=8)
        .compile()
    )
    assert "padding" not in fixed["bucketing"]  # fixed-size batches do not depend on it
