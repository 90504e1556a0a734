"""StreamLoader: loaders over iterable (streamed) sources."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import datasets
import pytest
import torch
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder
from loaderkit.errors import DataError, PlanError, ResumeError
from loaderkit.runtime.stream.loader import StreamLoader
from loaderkit.runtime.stream.read import buffer_shuffle

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


@pytest.mark.parametrize("workers", [0, 1, 2])
@pytest.mark.parametrize("world", [1, 2])
def test_every_element_exactly_once_over_workers_and_ranks(workers: int, world: int) -> None:
    seen = [
        x for r in range(world) for b in _epoch(_builder(Numbers(24), workers), world, r) for x in b
    ]
    assert sorted(seen) == list(range(24))


@pytest.mark.parametrize("workers", [0, 2])
def test_element_sharding_is_k_mod_shards(workers: int) -> None:
    producers = max(workers, 1)
    batches = _epoch(_builder(Numbers(24), workers), 2, 1)
    shards = {x % (2 * producers) for b in batches for x in b}
    assert shards == {producers + w for w in range(producers)}


@pytest.mark.parametrize("workers", [0, 1, 2])
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


@pytest.mark.parametrize("workers", [0, 1, 2])
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
            assert resumed.epoch == 0  # the state of the last pass: epoch 0, complete
            assert resumed.state_dict()["pass_complete"] is True
            assert [_values(x) for x in resumed] != []  # the next pass: epoch 1
            assert resumed.epoch == 1


def test_iterating_again_starts_a_new_pass_and_a_kept_iterator_continues() -> None:
    with _builder(Numbers(12), 2).compile().build() as loader:
        it = iter(loader)
        first = _values(next(it))
        rest = [_values(b) for b in it]  # the kept iterator continues its pass
        assert sorted([*first, *[x for b in rest for x in b]]) == list(range(12))
        assert loader.state_dict()["epoch"] == 0
        assert loader.state_dict()["pass_complete"] is True
        peek = _values(next(iter(loader)))  # a peek starts epoch 1 ...
        assert loader.epoch == 1
        assert sorted(x for b in loader for x in _values(b)) == list(range(12))  # ... whole 2
        assert loader.epoch == 2
        assert peek


@pytest.mark.parametrize("workers", [0, 2])
def test_closing_mid_epoch_supersedes_the_iterator_and_keeps_the_position(workers: int) -> None:
    with _builder(Numbers(40), workers).compile().build() as loader:
        it = iter(loader)
        first = _values(next(it))
        loader.close()
        with pytest.raises(RuntimeError, match="superseded"):
            next(it)  # not the end of the epoch: its other batches were never delivered
        state = loader.state_dict()
        assert state["batches_delivered"] == 1
        loader.load_state_dict(state)  # continue that pass (a plain iter() is a new one)
        rest = [x for b in loader for x in _values(b)]
        assert sorted(first + rest) == list(range(40))
        assert sorted(x for b in loader for x in _values(b)) == list(range(40))  # epoch 1
        assert loader.epoch == 1


class RandomStream(IterableDataset[float]):
    """Four elements drawn from the worker's global torch RNG."""

    splits_by_worker = True  # each worker's stream is its own: take each one whole

    def __iter__(self) -> Iterator[float]:
        return iter(torch.rand(4).tolist())


def test_worker_rngs_are_seeded_by_the_plan_and_the_caller_rng_is_untouched() -> None:
    plan = _builder(RandomStream(), 2, batch=2).with_seed(5).compile()
    torch.manual_seed(0)
    before = torch.get_rng_state()

    def draws() -> list[list[float]]:
        with plan.build() as loader:
            return [b.tolist() for b in loader]

    first = draws()
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(1)  # the workers' RNGs depend on the plan, not on the caller's RNG
    assert draws() == first
    assert first[0] != first[1]  # each worker draws its own numbers


def test_a_stream_has_no_cache_stats() -> None:
    with _builder(Numbers(4)).compile().build() as loader:
        assert loader.cache_stats is None


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


# -- resume from the source's own state (no replay) ------------------------------------------------


def _logged_rows(shards: list[int], log: str) -> Iterator[dict[str, int]]:
    """HF generator: shard s holds 5s .. 5s + 4; every row read is appended to ``log``."""
    for s in shards:
        for i in range(5):
            with open(log, "a") as f:
                f.write(f"{5 * s + i}\n")
            yield {"x": 5 * s + i}


def _logged_hf(log: Any, shards: int = 6) -> datasets.IterableDataset:
    return datasets.IterableDataset.from_generator(
        _logged_rows, gen_kwargs={"shards": list(range(shards)), "log": str(log)}
    )


def _reads(log: Any) -> list[int]:
    return [int(x) for x in log.read_text().split()]


def _cut_and_resume(plan: Any, cut: int, epoch: int = 0) -> tuple[list[Any], Any, Any]:
    """The first ``cut`` batches of ``epoch``, the state then, and a NEW loader resumed from it."""
    with plan.build() as loader:
        loader.set_epoch(epoch)
        it = iter(loader)
        head = [_values(next(it)) for _ in range(cut)]
        state = json.loads(json.dumps(loader.state_dict()))
    resumed = plan.build()
    resumed.load_state_dict(state)
    return head, state, resumed


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(("world", "rank"), [(1, 0), (2, 1)])
def test_hf_resume_loads_its_state_and_reads_nothing_twice(
    tmp_path: Any, workers: int, world: int, rank: int
) -> None:
    log = tmp_path / "read.log"
    b = _builder(_logged_hf(log), workers, batch=3)
    if world > 1:
        b = b.with_distributed(world_size=world, rank=rank)
    plan = b.compile()
    for epoch in (0, 1):  # HF reorders its shards in epoch 1
        with plan.build() as loader:
            assert loader.resume_native
            loader.set_epoch(epoch)
            full = [_values(x) for x in loader]
        for cut in (1, 3, len(full) - 1):
            head, state, resumed = _cut_and_resume(plan, cut, epoch)
            assert any(s is not None for s in state["worker_states"])
            log.write_text("")
            with resumed:
                rest = [_values(x) for x in resumed]
            assert head + rest == full
            # nothing is replayed: the new loader reads every row it delivers once, and of the
            # rows delivered before the cut only those HF itself passes over in the one shard
            # each producer stopped in (a generator's shard is regenerated up to the saved row)
            reads = _reads(log)
            delivered = {x for batch in rest for x in batch}
            assert sorted(x for x in reads if x in delivered) == sorted(delivered)
            again = sorted(x for x in reads if x not in delivered)
            shards = {x // 5 for x in again}
            assert len(shards) <= max(workers, 1), again
            for shard in shards:  # a prefix of the shard, up to where its producer stopped
                passed = [x for x in again if x // 5 == shard]
                assert passed == list(range(5 * shard, 5 * shard + len(passed)))


@pytest.mark.parametrize("workers", [0, 2])
def test_hf_arrow_backed_resume_is_exact(workers: int) -> None:
    plan = _builder(_hf(40, 4), workers, batch=3).compile()
    with plan.build() as loader:
        full = [_values(b) for b in loader]
    for cut in (1, 5, len(full) - 1):
        head, _, resumed = _cut_and_resume(plan, cut)
        with resumed:
            assert resumed.resume_native
            assert head + [_values(b) for b in resumed] == full


def test_a_shuffle_buffer_means_replay_and_explain_says_why() -> None:
    with _builder(_hf(), 0).with_shuffle(buffer_size=4).compile().build() as loader:
        assert not loader.resume_native
        assert "replays the stream" in loader.explain()
        assert "the buffer shuffle has read ahead" in loader.explain()
    with _builder(_hf().shuffle(seed=1, buffer_size=4)).compile().build() as loader:
        assert not loader.resume_native  # HF's own buffer is not in its state_dict()
        assert "HF's state_dict()" in loader.explain()
    with _builder(_hf()).compile().build() as loader:
        assert "O(1): each producer loads its source's state" in loader.explain()
    with _builder(Numbers(4)).compile().build() as loader:
        assert "Numbers defines no state_dict()" in loader.explain()


class Resumable(IterableDataset[int]):
    """The stream 0 .. n - 1 with HF's state contract; every element read is logged.

    ``state_dict()`` is the position right after the last element yielded;
    ``load_state_dict(s)`` makes the next iteration start there.
    """

    def __init__(self, n: int, log: str) -> None:
        self.n, self.log = n, log
        self._start = self._at = 0

    def _read(self, elements: Iterable[int]) -> Iterator[int]:
        for k in elements:
            self._at += 1
            with open(self.log, "a") as f:
                f.write(f"{k}\n")
            yield k

    def __iter__(self) -> Iterator[int]:
        self._at, self._start = self._start, 0
        return self._read(range(self._at, self.n))

    def state_dict(self) -> dict[str, int]:
        return {"at": self._at}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._start = state["at"]


class ResumableShards(Resumable):
    """:class:`Resumable` read through the sharding hook (the state counts shard elements)."""

    def __iter__(self) -> Iterator[int]:
        raise AssertionError("the loader must read this dataset through shard()")

    def shard(self, num_shards: int, index: int) -> Iterator[int]:
        self._at, self._start = self._start, 0
        return self._read(range(index, self.n, num_shards)[self._at :])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("hook", [False, True])
def test_a_torch_dataset_with_state_dict_resumes_without_replay(
    tmp_path: Any, workers: int, hook: bool
) -> None:
    log = tmp_path / "read.log"
    data = (ResumableShards if hook else Resumable)(30, str(log))
    plan = _builder(data, workers, batch=4).compile()
    with plan.build() as loader:
        assert loader.resume_native
        full = [_values(b) for b in loader]
    for cut in (1, 3, len(full) - 1):
        head, state, resumed = _cut_and_resume(plan, cut)
        log.write_text("")
        with resumed:
            rest = [_values(b) for b in resumed]
        assert head + rest == full
        reads = _reads(log)
        if hook:  # each producer reads its own shard: exactly what it still delivers
            assert sorted(reads) == sorted(x for b in rest for x in b)
        else:  # each producer reads the whole stream on from its own last delivered element
            starts = [s["source"]["at"] if s else 0 for s in state["worker_states"]]
            assert starts[0] > 0  # producer 0 delivered the first batch
            assert sorted(reads) == sorted(k for s in starts for k in range(s, 30))


def test_worker_states_are_checked_on_load() -> None:
    plan = _builder(_hf(), 2, batch=3).compile()
    with plan.build() as loader:
        full = [_values(b) for b in loader]
    with plan.build() as loader:
        it = iter(loader)
        next(it)
        state = loader.state_dict()
    assert [s is not None for s in state["worker_states"]] == [True, False]
    for bad in ([None], [{"read": 0, "source": {}}, None], [None, {"read": 3, "source": {}}]):
        with plan.build() as other, pytest.raises(ResumeError, match=r"worker_states"):
            other.load_state_dict({**state, "worker_states": bad})
    old = {k: v for k, v in state.items() if k != "worker_states"}  # a state without them
    with plan.build() as other:
        other.load_state_dict(old)  # every producer replays
        assert [_values(b) for b in other] == full[1:]


# -- the skip policy -------------------------------------------------------------------------------


def _fail_on_sevens(x: int) -> int:
    if x % 7 == 3:
        raise ValueError(f"bad element {x}")
    return x


_BAD = [x for x in range(40) if x % 7 == 3]


def _skipping(data: Any, workers: int, batch: int = 4, **kw: Any) -> DataLoaderBuilder:
    policy = _builder(data, workers, batch=batch).with_transform(_fail_on_sevens)
    return policy.with_error_policy("skip", **kw)


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_drops_and_records_transform_failures(workers: int) -> None:
    with _skipping(Numbers(40), workers).compile().build() as loader:
        batches = [_values(b) for b in loader]
        skipped = loader.skipped
        assert loader.errors == skipped
    assert sorted(x for b in batches for x in b) == [x for x in range(40) if x not in _BAD]
    assert sorted(r.sample_index for r in skipped) == _BAD  # the stream positions
    for r in skipped:
        assert r.epoch == 0
        assert r.exc_type == "ValueError"
        assert f"stream element {r.sample_index} " in r.message
        assert "failed in the transform" in r.message
        assert (r.worker_id is None) == (workers == 0)
    # the batch an element was dropped from is delivered smaller, and is the one recorded
    sizes = [len(b) for b in batches]
    for r in skipped:
        assert sizes[r.batch_index] < 4


def test_skip_is_deterministic_and_a_batch_of_failures_counts() -> None:
    plan = _skipping(Numbers(40), 2, batch=2).compile()
    with plan.build() as a, plan.build() as b:
        assert [_values(x) for x in a] == [_values(x) for x in b]
        assert a.skipped == b.skipped

    def bad_pair(x: int) -> int:
        if x in (4, 5):
            raise KeyError(x)
        return x

    plan = (
        _builder(Numbers(8), batch=2).with_transform(bad_pair).with_error_policy("skip").compile()
    )
    with plan.build() as loader:
        got = [_values(x) for x in loader]
        assert got == [[0, 1], [2, 3], [6, 7]]
        assert [(r.sample_index, r.batch_index) for r in loader.skipped] == [(4, 2), (5, 2)]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("source", ["replay", "native"])
def test_skip_survives_resume(tmp_path: Any, workers: int, source: str) -> None:
    data = Numbers(40) if source == "replay" else Resumable(40, str(tmp_path / "log"))
    plan = _skipping(data, workers, batch=3).compile()
    with plan.build() as loader:
        full = [_values(b) for b in loader]
        records = [(r.sample_index, r.batch_index) for r in loader.skipped]
    for cut in (2, 7):
        head, _, resumed = _cut_and_resume(plan, cut)
        with resumed:
            assert resumed.resume_native == (source == "native")
            assert head + [_values(b) for b in resumed] == full
            after = [(r.sample_index, r.batch_index) for r in resumed.skipped]
        assert after == [r for r in records if r[1] >= cut]


def test_the_skip_budget_raises_with_a_summary() -> None:
    plan = _skipping(Numbers(40), 0, max_errors=3).compile()
    with plan.build() as loader, pytest.raises(DataError, match=r"dropped 4 samples") as info:
        list(loader)
    assert "max_errors=3" in str(info.value)
    assert info.value.sample_index == _BAD[3]


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_cannot_skip_an_error_of_the_source_itself(workers: int) -> None:
    plan = _builder(Numbers(24, bad=13), workers).with_error_policy("skip").compile()
    with plan.build() as loader, pytest.raises(DataError, match="stream element 13") as info:
        list(loader)
    assert "the skip policy cannot skip it" in str(info.value)
    with plan.build() as loader:
        assert "cannot be skipped" in loader.explain()


def test_step_schedules_stay_refused_with_the_reason() -> None:
    from loaderkit.errors import NotBuiltYetError

    plan = _builder(Numbers(8), batch=[(2, 4), (10, 8)], by="step").compile()
    with pytest.raises(NotBuiltYetError, match=r"no global step .* schedule it by epoch"):
        plan.build()


@pytest.mark.parametrize("epoch", [-1, True, 1.5, "2"])
def test_set_epoch_refuses_what_is_not_an_epoch_on_both_loaders(epoch: Any) -> None:
    """Both loaders check set_epoch's argument the same way, before anything moves."""
    stream = _builder(Numbers(8)).build()
    indexed = DataLoaderBuilder().with_dataset(list(range(8))).with_batch_size(4).build()
    for loader in (stream, indexed):
        with pytest.raises(ValueError, match=r"set_epoch: epoch must be an int >= 0 \(got "):
            loader.set_epoch(epoch)
        assert [len(_values(b)) for b in loader] == [4, 4]  # the next pass is still epoch 0
        loader.close()
