"""StreamLoader: loaders over iterable (streamed) sources."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import datasets
import pytest
import torch
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder
from loaderkit.build.stream import StreamLoader, buffer_shuffle
from loaderkit.errors import DataError, PlanError, ResumeError

pytestmark = pytest.mark.timeout(240)


class Numbers(IterableDataset[int]):
    """The stream 0, 1, ..., n - 1 (the whole stream in every process)."""

    def __init__(self, n: int, bad: int | None = None) -> None:
        self.n = n
        self.bad = bad
        self.epoch: int | None = None

    def __iter__(self) -> Iterator[int]:
        for k in range(self.n):
            if k == self.bad:
                raise ValueError(f"element {k} is corrupt")
            yield k

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class Sharded(IterableDataset[int]):
    """A stream that reads one shard itself (the ``shard`` hook): contiguous blocks."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        raise AssertionError("the loader must read this dataset through shard()")

    def shard(self, num_shards: int, index: int) -> Iterator[int]:
        per = -(-self.n // num_shards)
        return iter(range(index * per, min((index + 1) * per, self.n)))


class EpochStream(IterableDataset[int]):
    """Yields its epoch (as set by set_epoch) as every element."""

    def __init__(self) -> None:
        self.epoch = -1

    def __iter__(self) -> Iterator[int]:
        return iter([self.epoch] * 4)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


def _builder(data: Any, workers: int = 0, batch: int = 4, **kw: Any) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(data).with_batch_size(batch, **kw)
    return b.with_workers(workers)


def _values(batch: Any) -> list[int]:
    if isinstance(batch, dict):
        batch = batch["x"]
    out: list[int] = batch.tolist()
    return out


def _epoch(builder: DataLoaderBuilder, world: int, rank: int) -> list[list[int]]:
    if world > 1:
        builder = builder.with_distributed(world_size=world, rank=rank)
    with builder.compile().build() as loader:
        return [_values(b) for b in loader]


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("world", [1, 2])
def test_every_element_exactly_once_over_workers_and_ranks(workers: int, world: int) -> None:
    seen = [
        x for r in range(world) for b in _epoch(_builder(Numbers(24), workers), world, r) for x in b
    ]
    assert sorted(seen) == list(range(24))


@pytest.mark.parametrize("workers", [0, 3])
def test_element_sharding_is_k_mod_shards(workers: int) -> None:
    producers = max(workers, 1)
    batches = _epoch(_builder(Numbers(24), workers), 2, 1)
    shards = {x % (2 * producers) for b in batches for x in b}
    assert shards == {producers + w for w in range(producers)}


@pytest.mark.parametrize("workers", [0, 2, 3])
def test_the_shard_hook_is_used(workers: int) -> None:
    seen = []
    for r in range(2):
        batches = _epoch(_builder(Sharded(24), workers), 2, r)
        seen += [x for b in batches for x in b]
        for b in batches:  # contiguous blocks: each batch is a run of consecutive elements
            assert b == list(range(b[0], b[0] + len(b)))
    assert sorted(seen) == list(range(24))


def _hf(n: int = 40, shards: int = 4) -> datasets.IterableDataset:
    return datasets.Dataset.from_dict({"x": list(range(n))}).to_iterable_dataset(num_shards=shards)


@pytest.mark.parametrize("workers", [0, 2])
def test_hf_iterable_every_row_exactly_once_over_two_ranks(workers: int) -> None:
    seen = [x for r in range(2) for b in _epoch(_builder(_hf(), workers), 2, r) for x in b]
    assert sorted(seen) == list(range(40))


def test_hf_iterable_uneven_shards_split_by_example() -> None:
    seen = [x for r in range(2) for b in _epoch(_builder(_hf(30, 3), 2), 2, r) for x in b]
    assert sorted(seen) == list(range(30))


def test_drop_last_drops_each_producers_partial_batch() -> None:
    batches = _epoch(_builder(Numbers(24), 2, batch=5, drop_last=True), 1, 0)
    assert [len(b) for b in batches] == [5, 5, 5, 5]  # each worker reads 12: 2 of 5, 2 dropped


def _shuffled(workers: int, epoch: int, seed: int = 3, world: int = 1, rank: int = 0) -> list[int]:
    b = _builder(Numbers(40), workers).with_shuffle(buffer_size=8).with_seed(seed)
    if world > 1:
        b = b.with_distributed(world_size=world, rank=rank)
    with b.compile().build() as loader:
        loader.set_epoch(epoch)
        return [x for batch in loader for x in _values(batch)]


@pytest.mark.parametrize("workers", [0, 2])
def test_buffer_shuffle_is_reproducible_and_differs_across_epochs(workers: int) -> None:
    first = _shuffled(workers, 0)
    assert sorted(first) == list(range(40))
    assert first != list(range(40))
    assert _shuffled(workers, 0) == first
    assert _shuffled(workers, 1) != first
    assert _shuffled(workers, 0, seed=4) != first


def test_buffer_shuffle_over_ranks_keeps_every_element_once() -> None:
    seen = _shuffled(2, 1, world=2, rank=0) + _shuffled(2, 1, world=2, rank=1)
    assert sorted(seen) == list(range(40))


def test_buffer_shuffle_keeps_every_item() -> None:
    import numpy as np

    out = list(buffer_shuffle(range(100), 7, np.random.default_rng(0)))
    assert sorted(out) == list(range(100))
    assert list(buffer_shuffle([], 7, np.random.default_rng(0))) == []


def test_shuffle_of_a_stream_needs_a_buffer() -> None:
    with pytest.raises(PlanError, match=r"with_shuffle\(buffer_size=...\)"):
        _builder(Numbers(4)).with_shuffle().compile()
    assert _builder(Numbers(4)).with_shuffle(buffer_size=2).compile().order.buffer_size == 2


def test_a_buffer_is_refused_for_map_style_data() -> None:
    with pytest.raises(PlanError, match=r"order\.buffer_size"):
        _builder(list(range(8))).with_shuffle(buffer_size=4).compile()


def test_buffer_size_round_trips_and_is_fingerprinted() -> None:
    from loaderkit.plan.plan import LoaderPlan

    plan = _builder(Numbers(4)).with_shuffle(buffer_size=16).compile()
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["order"]["buffer_size"] == 16
    again = LoaderPlan.from_dict(data, bindings={"dataset": plan.bindings["dataset"]})  # type: ignore[index]
    assert again.order.buffer_size == 16
    assert again.fingerprint == plan.fingerprint
    other = _builder(Numbers(4)).with_shuffle(buffer_size=17).compile()
    assert other.fingerprint != plan.fingerprint


@pytest.mark.parametrize("workers", [0, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_mid_epoch_continues_exactly(workers: int, shuffle: bool) -> None:
    b = _builder(Numbers(50), workers, batch=3)
    if shuffle:
        b = b.with_shuffle(buffer_size=6)
    plan = b.compile()
    with plan.build() as loader:
        full = [_values(x) for x in loader]
    for cut in (1, 4, len(full) - 1):
        with plan.build() as loader:
            it = iter(loader)
            head = [_values(next(it)) for _ in range(cut)]
            state = json.loads(json.dumps(loader.state_dict()))
        assert head == full[:cut]
        with plan.build() as resumed:
            resumed.load_state_dict(state)
            assert [_values(x) for x in resumed] == full[cut:]
            assert resumed.epoch == 1  # the epoch was delivered completely


def test_iterating_again_continues_then_moves_to_the_next_epoch() -> None:
    with _builder(Numbers(12), 2).compile().build() as loader:
        it = iter(loader)
        first = _values(next(it))
        rest = [_values(b) for b in loader]  # a new iterator continues from the cursor
        assert sorted([*first, *[x for b in rest for x in b]]) == list(range(12))
        assert loader.state_dict()["epoch"] == 1
        assert sorted(x for b in loader for x in _values(b)) == list(range(12))
        assert loader.epoch == 2


def test_state_from_another_plan_raises_with_the_diff() -> None:
    with _builder(Numbers(12), batch=4).compile().build() as loader:
        state = loader.state_dict()
    other = _builder(Numbers(12), batch=3).compile().build()
    with other, pytest.raises(ResumeError, match="another plan") as info:
        other.load_state_dict(state)
    assert any("batch_size" in line for line in info.value.diff)


def test_state_from_another_worker_count_raises() -> None:
    with _builder(Numbers(12), 2).compile().build() as loader:
        state = loader.state_dict()
    with _builder(Numbers(12), 3).compile().build() as other:
        with pytest.raises(ResumeError, match="num_workers"):
            other.load_state_dict(state)
        with pytest.raises(ResumeError, match="num_workers"):
            other.load_state_dict(state, strict=False)


def test_a_map_style_state_is_refused() -> None:
    with _builder(list(range(8))).compile().build() as loader:
        state = loader.state_dict()
    stream = _builder(Numbers(8)).compile().build()
    with stream, pytest.raises(ResumeError, match="not a loaderkit stream state"):
        stream.load_state_dict(state)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_element_raises_data_error_naming_its_position(workers: int) -> None:
    loader = _builder(Numbers(24, bad=13), workers).compile().build()
    with loader, pytest.raises(DataError, match="stream element 13") as info:
        list(loader)
    assert info.value.sample_index == 13
    # 13 mod 2 workers: worker 1's shard (worker 0 may reach it first, reading past it)
    assert ("shard 1 of 2: rank 0, worker 1" in str(info.value)) == (workers == 2)


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise KeyError("no seven")
    return x


def test_a_failing_transform_names_the_position_and_worker() -> None:
    b = _builder(Numbers(12), 2).with_transform(_fail_on_seven)
    with b.compile().build() as loader, pytest.raises(DataError, match="stream element 7") as info:
        list(loader)
    assert "failed in the transform" in str(info.value)
    assert info.value.worker_id == 1


@pytest.mark.parametrize("workers", [0, 2])
def test_set_epoch_reaches_the_dataset(workers: int) -> None:
    data = EpochStream()
    with _builder(data, workers).compile().build() as loader:
        loader.set_epoch(5)
        values = {x for b in loader for x in _values(b)}
    assert data.epoch == 5
    assert values == {5}


def test_set_epoch_reaches_an_hf_iterable_dataset() -> None:
    ds = _hf().shuffle(seed=1)
    with _builder(ds).compile().build() as loader:
        assert isinstance(loader, StreamLoader)
        loader.set_epoch(3)
        list(loader)
        assert loader.data.epoch == 3


def test_no_length_and_no_indices() -> None:
    with _builder(Numbers(8)).compile().build() as loader:
        with pytest.raises(TypeError, match="no len"):
            len(loader)
        with pytest.raises(TypeError, match="no batch_indices"):
            loader.batch_indices(0, 0)
        assert len(list(loader)) == 2  # list() copes with the missing length


def test_explain_says_how_the_stream_is_read() -> None:
    b = _builder(Numbers(8), 2).with_shuffle(buffer_size=64)
    with b.compile().build() as loader:
        text = loader.explain()
    assert "streamed" in text
    assert "by element: element k goes to shard k mod 2" in text
    assert "depends on num_workers (2) and the world size (1)" in text
    assert "buffer shuffle of 64 samples" in text
    with _builder(Sharded(8)).compile().build() as hooked:
        assert "shard(1, rank x 1 + worker)" in hooked.explain()
    with _builder(_hf()).with_distributed(world_size=2, rank=0).compile().build() as hf:
        assert "split_dataset_by_node(rank=0, world_size=2)" in hf.explain()


def test_hf_rows_go_through_the_collator() -> None:
    with _builder(_hf(8, 2), batch=4).compile().build() as loader:
        batches = list(loader)
    assert all(isinstance(b["x"], torch.Tensor) for b in batches)
    assert sorted(x for b in batches for x in b["x"].tolist()) == list(range(8))


@pytest.mark.parametrize("workers", [0, 2])
def test_hf_resume_mid_epoch_replays_exactly(workers: int) -> None:
    plan = _builder(_hf(40, 4), workers, batch=3).with_shuffle(buffer_size=5).compile()
    with plan.build() as loader:
        full = [_values(b) for b in loader]
    with plan.build() as loader:
        it = iter(loader)
        head = [_values(next(it)) for _ in range(5)]
        state = loader.state_dict()
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        assert head + [_values(b) for b in resumed] == full
