"""Dataset lengths: a length changed after compile() is refused; a stream's len() is exact."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import datasets
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lk_testdata import worker_block
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder, PlanError, ResumeError
from loaderkit.runtime.stream.loader import StreamLoader

FIX = "compile the plan again after changing the dataset"


def _builder(data: object, batch: int = 4, **kw: Any) -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(data, name="train").with_batch_size(batch, **kw)


def _values(loader: Any) -> list[int]:
    return [int(v) for batch in loader for v in batch]


# -- a length changed after compile() ------------------------------------------------------------


def test_a_list_grown_after_compile_is_refused_at_build() -> None:
    data = list(range(10))
    plan = _builder(data).compile()
    data.append(10)
    with pytest.raises(PlanError) as info:
        plan.build()
    assert info.value.paths == ("dataset.length",)
    text = str(info.value)
    assert "dataset 'train' (list) has 11 samples at build()" in text
    assert "compiled for 10" in text
    assert FIX in text and "fingerprint holds the length" in text


def test_a_change_between_passes_is_refused_at_the_next_pass_and_moves_nothing() -> None:
    data = list(range(10))
    plan = _builder(data).compile()
    loader = plan.build()
    assert _values(loader) == list(range(10))  # epoch 0
    data.pop()
    with pytest.raises(PlanError, match=r"has 9 samples at the start of a pass \(epoch 1\)"):
        next(iter(loader))
    with pytest.raises(PlanError, match="compiled for 10"):  # every new pass, not only once
        list(loader)
    data.append(9)  # put back: the refused passes did not move the position
    assert _values(loader) == list(range(10))
    assert loader.epoch == 1


def test_a_change_during_a_pass_is_seen_by_the_next_pass() -> None:
    data = list(range(10))
    loader = _builder(data).compile().build()
    iterator = iter(loader)
    first = [int(v) for v in next(iterator)]
    data.extend([100, 101, 102])
    rest = [int(v) for batch in iterator for v in batch]
    assert first + rest == list(range(10))  # the pass reads the planned samples only
    with pytest.raises(PlanError, match="has 13 samples"):
        next(iter(loader))


def test_the_recompiled_plan_refuses_the_old_plans_state() -> None:
    data = list(range(10))
    plan = _builder(data).compile()
    loader = plan.build()
    next(iter(loader))
    state = json.loads(json.dumps(loader.state_dict()))
    data.append(10)
    fresh = _builder(data).compile().build()
    with pytest.raises(ResumeError):
        fresh.load_state_dict(state)


def test_a_dict_column_that_changed_is_named() -> None:
    data = {"x": list(range(8)), "y": torch.arange(8)}
    loader = _builder(data).compile().build()
    data["x"].append(8)
    with pytest.raises(PlanError, match=r"column 'x' of dataset 'train' \(list\) has 9 rows"):
        next(iter(loader))


def test_a_tuple_column_resized_in_place_is_named() -> None:
    x = torch.arange(8)
    loader = _builder((x, torch.zeros(8))).compile().build()
    x.resize_(6)
    with pytest.raises(PlanError, match=r"column 0 of dataset 'train' \(Tensor\) has 6 rows"):
        next(iter(loader))


def test_a_mixture_source_that_grew_is_named_with_its_path() -> None:
    code = {"x": list(range(100, 106))}
    plan = (
        DataLoaderBuilder()
        .with_mixture({"wiki": {"x": list(range(10))}, "code": code})
        .with_batch_size(4)
        .compile()
    )
    loader = plan.build()
    code["x"].append(106)
    with pytest.raises(PlanError) as info:
        next(iter(loader))
    assert info.value.paths == ("mixture.sources[1].length",)
    assert "mixture source 'code'" in str(info.value)
    assert "has 7 rows" in str(info.value) and "compiled for 6" in str(info.value)
    with pytest.raises(PlanError, match="mixture source 'code'"):
        plan.build()


@pytest.mark.parametrize("part", ["train", "val"])
def test_a_split_dataset_is_checked_whole_for_every_part(part: str) -> None:
    data = [{"x": i} for i in range(20)]
    plan = _builder(data).with_split(0.25).compile()
    loader = plan.build(split=part)
    data.append({"x": 20})
    with pytest.raises(PlanError, match=r"has 21 samples .* compiled for 20"):
        next(iter(loader))
    with pytest.raises(PlanError, match="has 21 samples at build"):
        plan.build(split=part)


class Sized:
    """A map-style dataset whose __len__ returns whatever ``length`` holds."""

    def __init__(self, n: int) -> None:
        self.length: Any = n
        self.calls = 0

    def __getitem__(self, i: int) -> int:
        return i

    def __len__(self) -> int:
        self.calls += 1
        if isinstance(self.length, Exception):
            raise self.length
        result: int = self.length
        return result


@pytest.mark.parametrize(
    ("bad", "cause"),
    [("ten", TypeError), (-1, ValueError), (OSError("the index file is gone"), OSError)],
)
def test_a_len_that_fails_or_is_not_an_int_is_a_clear_error(bad: Any, cause: type) -> None:
    data = Sized(10)
    loader = _builder(data).compile().build()
    data.length = bad
    with pytest.raises(PlanError, match=r"len\(\) of dataset 'train' \(Sized\) failed") as info:
        next(iter(loader))
    assert info.value.paths == ("dataset.length",)
    assert isinstance(info.value.__cause__, cause)
    assert "compiled for 10 samples" in str(info.value) and FIX in str(info.value)


def test_the_check_is_one_len_per_pass_not_per_batch() -> None:
    data = Sized(40)
    loader = _builder(data, batch=2).compile().build()
    before = data.calls
    assert len(list(loader)) == 20
    assert data.calls - before == 1
    before = data.calls
    assert len(list(loader)) == 20
    assert data.calls - before == 1


def test_an_hf_dataset_of_the_planned_length_builds_and_iterates() -> None:
    ds = datasets.Dataset.from_dict({"x": list(range(6))}).with_format("torch")
    loader = _builder(ds).compile().build()
    assert [int(v) for b in loader for v in b["x"]] == list(range(6))
    assert [int(v) for b in loader for v in b["x"]] == list(range(6))


@pytest.mark.timeout(120)
def test_with_persistent_workers_the_main_process_detects_the_change() -> None:
    data = list(range(12))
    plan = _builder(data).with_workers(2, persistent=True, start_method="fork").compile()
    with plan.build() as loader:
        assert sorted(_values(loader)) == list(range(12))
        data.append(12)  # the workers' copies did not change: the plan is stale all the same
        with pytest.raises(PlanError, match="has 13 samples"):
            next(iter(loader))


# -- len() of a stream ---------------------------------------------------------------------------


class Counted(IterableDataset[int]):
    """The stream 0 .. n - 1, whole in every process, with a __len__."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


class CountedOwnBlocks(Counted):
    """Splits itself by worker (and says so): each worker yields its block."""

    splits_by_worker = True

    def __iter__(self) -> Iterator[int]:
        return worker_block(self.n)


class CountedSharded(Counted):
    def shard(self, num_shards: int, index: int) -> Iterator[int]:
        return iter(range(index, self.n, num_shards))


def _stream_builder(
    data: IterableDataset[int], batch: int, workers: int, drop_last: bool, world: int, rank: int
) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(data).with_batch_size(batch, drop_last=drop_last)
    if workers:
        b = b.with_workers(workers, start_method="fork")
    if world > 1:
        b = b.with_distributed(world_size=world, rank=rank)
    return b


def _len_and_count(builder: DataLoaderBuilder) -> tuple[int, int]:
    with builder.compile().build() as loader:
        assert isinstance(loader, StreamLoader)
        return len(loader), sum(1 for _ in loader)


def _assert_len_is_the_count(
    n: int, batch: int, workers: int, drop_last: bool, world: int, kind: type[Counted] = Counted
) -> None:
    counts = []
    for rank in range(world):
        expected, counted = _len_and_count(
            _stream_builder(kind(n), batch, workers, drop_last, world, rank)
        )
        assert expected == counted, (n, batch, workers, drop_last, world, rank)
        counts.append(counted)
    assert len(set(counts)) == 1  # even_batches: every rank has as many


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 40),
    batch=st.integers(1, 6),
    drop_last=st.booleans(),
    world=st.integers(1, 3),
)
def test_stream_len_is_the_batches_a_pass_delivers_in_process(
    n: int, batch: int, drop_last: bool, world: int
) -> None:
    _assert_len_is_the_count(n, batch, 0, drop_last, world)


@pytest.mark.timeout(180)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 30),
    batch=st.integers(1, 5),
    drop_last=st.booleans(),
    world=st.integers(1, 2),
)
def test_stream_len_is_the_batches_a_pass_delivers_with_two_workers(
    n: int, batch: int, drop_last: bool, world: int
) -> None:
    _assert_len_is_the_count(n, batch, 2, drop_last, world)


@pytest.mark.timeout(120)
def test_stream_len_counts_each_workers_partial_batch() -> None:
    # 10 elements, batch 4, 2 workers: shards of 5 each, 2 batches each; torch would say 3
    assert _len_and_count(_stream_builder(Counted(10), 4, 2, False, 1, 0)) == (4, 4)
    assert _len_and_count(_stream_builder(Counted(10), 4, 2, True, 1, 0)) == (2, 2)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_stream_len_of_a_self_splitting_dataset_in_process(world: int) -> None:
    _assert_len_is_the_count(23, 4, 0, False, world, CountedOwnBlocks)


def test_stream_len_follows_a_batch_size_schedule() -> None:
    b = DataLoaderBuilder().with_dataset(Counted(20)).with_batch_size([(1, 4), (2, 8)], by="epoch")
    with b.compile().build() as loader:
        assert len(loader) == sum(1 for _ in loader) == 5
        loader.set_epoch(1)
        assert len(loader) == sum(1 for _ in loader) == 3


class NoLen(IterableDataset[int]):
    def __iter__(self) -> Iterator[int]:
        return iter(range(8))


class FailingLen(Counted):
    def __len__(self) -> int:
        raise RuntimeError("the index is not loaded")


@pytest.mark.parametrize(
    ("data", "workers", "why"),
    [
        (NoLen(), 0, "NoLen defines no __len__"),
        (FailingLen(8), 0, r"len\(\) of FailingLen failed \(RuntimeError: the index"),
        (CountedSharded(8), 0, r"read through its shard\(\) hook"),
        (CountedOwnBlocks(8), 2, "it splits itself by worker"),
        (
            datasets.Dataset.from_dict({"x": list(range(8))}).to_iterable_dataset(num_shards=2),
            0,
            "an HF IterableDataset has no length",
        ),
    ],
    ids=["no-len", "failing-len", "hook", "self-split-workers", "hf"],
)
def test_stream_len_raises_type_error_saying_why_it_is_unknown(
    data: IterableDataset[Any], workers: int, why: str
) -> None:
    builder = _stream_builder(data, 4, workers, False, 1, 0)
    with builder.compile().build() as loader:
        with pytest.raises(TypeError, match="has no len") as info:
            len(loader)
        assert info.match(why)
        assert "count batches while iterating" in str(info.value)
