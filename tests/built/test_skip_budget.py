"""The skip budget: per epoch or per run, counted the same whether or not a run resumed (issue 15).

A run resumed each epoch (a new loader, ``load_state_dict``) must raise in the same epoch and
batch, with the same counts, as the uninterrupted run; ``loader.skipped`` stays bounded while
``loader.skip_counts`` stays exact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import IterableDataset

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError, ResumeError
from loaderkit.runtime.passes.skips import SKIPPED_RECORDS_KEPT, SkipCounts

pytestmark = pytest.mark.timeout(120)


class Flaky(torch.utils.data.Dataset[int]):
    """Samples 0..n-1; those in ``bad`` raise ValueError, except multiples of 7: KeyError."""

    def __init__(self, n: int, bad: frozenset[int]) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i in self.bad:
            raise (KeyError if i % 7 == 0 else ValueError)(f"record {i}")
        return i


class Stream(IterableDataset[int]):
    """The stream 0..n-1."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def _fails_on_five(x: int) -> int:
    if x % 10 == 5:
        raise ValueError(f"element {x}")
    return x


def _map_plan(n: int, bad: frozenset[int], **policy: Any) -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(Flaky(n, bad))
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(3)
        .with_error_policy("skip", **policy)
        .compile()
    )


def _stream_plan(n: int, workers: int = 0, **policy: Any) -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(Stream(n))
        .with_batch_size(4)
        .with_transform(_fails_on_five)
        .with_workers(workers)
        .with_error_policy("skip", **policy)
        .compile()
    )


Outcome = tuple[tuple[int, int] | None, list[dict[str, Any]]]
"""(epoch and batch where the budget raised, or None; the counts after each epoch)."""


def _uninterrupted(plan: LoaderPlan, epochs: int) -> Outcome:
    counts = []
    with plan.build() as loader:
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            try:
                for _ in loader:
                    pass
            except DataError as error:
                assert not isinstance(error, ValueError)  # the budget's own error
                return (epoch, loader.batches_delivered), counts
            counts.append(loader.skip_counts.to_state())
    return None, counts


def _resumed_each_epoch(plan: LoaderPlan, epochs: int, cut: int | None = None) -> Outcome:
    """A new loader per epoch (and, with ``cut``, a new one after ``cut`` batches too)."""
    counts: list[dict[str, Any]] = []
    state: dict[str, Any] | None = None
    for epoch in range(epochs):
        for part in ("head", "rest") if cut is not None else ("rest",):
            if part == "rest" and cut is not None and state is not None and state["pass_ended"]:
                break  # the epoch ended before the cut: its loop is over, no rest to resume
            with plan.build() as loader:
                if state is not None:
                    loader.load_state_dict(json.loads(json.dumps(state)))
                if part == "head" or cut is None:
                    loader.set_epoch(epoch)  # the state's own epoch keeps a mid-epoch resume
                try:
                    for delivered, _ in enumerate(loader, 1):
                        if part == "head" and delivered == cut:
                            break
                except DataError:
                    return (epoch, loader.batches_delivered), counts
                state = loader.state_dict()
        counts.append(state["skips"] if state else {})
    return None, counts


@pytest.mark.parametrize("kind", ["map", "stream"])
def test_one_bad_sample_per_epoch_spends_a_run_budget_but_not_an_epoch_budget(kind: str) -> None:
    def plan(per: str) -> LoaderPlan:
        if kind == "map":
            return _map_plan(16, frozenset({9}), max_errors=2, per=per)
        return _stream_plan(8, max_errors=2, per=per)  # element 5 fails

    for run in (_uninterrupted, _resumed_each_epoch):
        raised, counts = run(plan("epoch"), 6)
        assert raised is None
        assert [c["epoch_skipped"] for c in counts] == [1] * 6
        assert counts[-1]["skipped"] == 6
        raised, counts = run(plan("run"), 6)
        assert raised is not None
        assert raised[0] == 2  # the third drop is one too many
        assert [c["skipped"] for c in counts] == [1, 2]


@given(
    n=st.integers(8, 24),
    bad=st.frozensets(st.integers(0, 23), max_size=6),
    max_errors=st.none() | st.integers(0, 8),
    max_error_rate=st.none() | st.sampled_from([0.05, 0.2, 0.5]),
    per=st.sampled_from(["epoch", "run"]),
    cut=st.none() | st.integers(1, 5),
)
def test_a_run_resumed_anywhere_counts_and_raises_like_the_uninterrupted_one(
    n: int,
    bad: frozenset[int],
    max_errors: int | None,
    max_error_rate: float | None,
    per: str,
    cut: int | None,
) -> None:
    plan = _map_plan(
        n, frozenset(b for b in bad if b < n), max_errors=max_errors,
        max_error_rate=max_error_rate, per=per,
    )  # fmt: skip
    whole = _uninterrupted(plan, 4)
    assert _resumed_each_epoch(plan, 4, cut) == whole
    for after in whole[1]:  # the counts are exact: the bad samples of each epoch
        assert after["epoch_skipped"] == len([b for b in bad if b < n])
        assert after["epoch_read"] == n


@pytest.mark.timeout(120)
def test_a_stream_through_workers_resumed_mid_epoch_counts_like_the_uninterrupted_one() -> None:
    plan = _stream_plan(40, workers=2, max_errors=5, per="run")  # 4 bad elements per epoch
    whole = _uninterrupted(plan, 3)
    assert whole[0] == (1, whole[0][1])  # the 6th drop, in epoch 1
    assert _resumed_each_epoch(plan, 3, cut=3) == whole
    assert whole[1] == [
        {
            "skipped": 4,
            "read": 40,
            "by_type": {"ValueError": 4},
            "epoch": 0,
            "epoch_skipped": 4,
            "epoch_read": 40,
            "epoch_by_type": {"ValueError": 4},
        }
    ]


def test_records_are_bounded_and_the_totals_exact_over_60_epochs() -> None:
    bad = frozenset(range(0, 40, 2))  # 20 bad samples per epoch: 1,200 in 60 epochs
    plan = _map_plan(40, bad)
    with plan.build() as loader:
        for epoch in range(60):
            loader.set_epoch(epoch)
            delivered = [int(i) for batch in loader for i in batch]
            assert sorted(delivered) == list(range(1, 40, 2))
        counts = loader.skip_counts
        assert len(loader.skipped) == SKIPPED_RECORDS_KEPT == 1_000
        assert loader.errors is loader.skipped
        assert (counts.skipped, counts.read) == (1_200, 2_400)
        assert (counts.epoch, counts.epoch_skipped, counts.epoch_read) == (59, 20, 40)
        keyed = len([b for b in bad if b % 7 == 0])  # those raise KeyError
        assert dict(counts.by_type) == {"KeyError": 60 * keyed, "ValueError": 60 * (20 - keyed)}
        assert loader.skipped[-1].epoch == 59  # the newest records are the ones kept
        assert loader.skipped[0].epoch == 60 - SKIPPED_RECORDS_KEPT // 20
        assert "loader.skip_counts" in loader.explain()


def test_states_without_counts_load_with_zero_and_bad_counts_name_the_key() -> None:
    plan = _map_plan(16, frozenset({3}), max_errors=0, per="run")
    with plan.build() as loader:
        loader.set_epoch(0)
        with pytest.raises(DataError, match=r"dropped 1 samples of the \d+ read in this run"):
            list(loader)
        state = loader.state_dict()
    assert state["skips"]["skipped"] == 0  # the batch that spent the budget is not counted
    old = {k: v for k, v in state.items() if k != "skips"}  # a state from before the counts
    with plan.build() as loader:
        loader.load_state_dict(state)
        assert loader.state_dict() == state  # the counts round-trip
        assert loader.skip_counts.read == state["skips"]["read"] > 0
        loader.load_state_dict(old)
        assert loader.skip_counts == SkipCounts()
        assert loader.state_dict() == {**old, "skips": SkipCounts().to_state()}
    broken = {**state, "skips": {**state["skips"], "read": -1}}
    with plan.build() as loader, pytest.raises(ResumeError, match=r"state\['skips'\]"):
        loader.load_state_dict(broken)


def test_the_scope_is_in_the_plan_file_fingerprint_repr_and_explain(tmp_path: Any) -> None:
    base = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(3)
    epoch = base.with_error_policy("skip", max_errors=2).compile()
    run = base.with_error_policy("skip", max_errors=2, per="run").compile()
    assert epoch == base.with_error_policy("skip", max_errors=2, per="epoch").compile()
    assert run.fingerprint != epoch.fingerprint
    assert "per" not in epoch.to_dict()["error_policy"]  # the default: files stay as they were
    assert run.to_dict()["error_policy"]["per"] == "run"
    assert repr(run.to_builder()).endswith(".with_error_policy('skip', max_errors=2, per='run')")
    assert "at most 2 samples per run" in run.explain()
    assert "at most 2 samples per epoch" in epoch.explain()
    for suffix in (".json", ".toml"):
        path = tmp_path / f"plan{suffix}"
        run.save(path)
        assert LoaderPlan.load(path, bindings=run.bindings) == run
    with pytest.raises(PlanError) as error:
        base.with_error_policy("skip", per="step")  # type: ignore[arg-type]
    assert error.value.paths == ("error_policy.per",)
    assert "'epoch', 'run'" in str(error.value)
    with pytest.raises(PlanError, match="per only apply to policy='skip'"):
        base.with_error_policy("raise", per="run")
