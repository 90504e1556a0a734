"""Flat storage of list datasets (issue 24): samples come back equal, batches and states unchanged.

A list of samples read by workers is serialized at ``build()`` into one byte buffer plus
offsets (``with_dataset(..., storage=...)``, :mod:`loaderkit.datasets.serialized`), so workers
touch no shared Python object. These tests pin that the samples come back equal (types
included), that batches, states and fingerprints are those of the list read as objects, and
the errors and reports around it.
"""

from __future__ import annotations

import multiprocessing
import pickle
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import loaderkit
from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError, PlanTypeError
from loaderkit.datasets import FlatSamples, flat
from loaderkit.plan.specs import AUTO_FLAT_MIN_SAMPLES

# -- equality with types -------------------------------------------------------------------


def assert_same(got: Any, want: Any, where: str = "sample") -> None:
    """``got`` equals ``want`` and has the same type at every level (dtype and shape too)."""
    assert type(got) is type(want), f"{where}: {type(got)} is not {type(want)}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=where)
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        np.testing.assert_array_equal(got, want, err_msg=where)  # NaN equals NaN here
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for key in want:
            assert_same(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def assert_batches_equal(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_same(g, w, f"batch {i}")


_arrays = hnp.arrays(
    dtype=st.sampled_from([np.dtype(t) for t in ("int8", "int64", "uint16", "float32", "bool")]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | _arrays
    | _arrays.map(lambda a: torch.from_numpy(a.copy()))
)
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(samples=st.lists(_values, max_size=12), data=st.data())
def test_samples_come_back_equal_types_included(samples: list[Any], data: st.DataObject) -> None:
    stored = flat(samples)
    assert len(stored) == len(samples)
    for i, sample in enumerate(samples):
        assert_same(stored[i], sample, f"sample {i}")
        assert_same(stored[i - len(samples)], sample, f"sample {i - len(samples)}")
    if samples:
        indices = data.draw(st.lists(st.integers(-len(samples), len(samples) - 1), max_size=6))
        assert_same(stored.__getitems__(indices), [samples[i] for i in indices])
    assert_same(stored[1:3], samples[1:3])
    again = pickle.loads(pickle.dumps(stored))  # how spawn workers receive it
    assert_same(list(again), samples)


def test_a_read_is_a_copy_and_out_of_range_is_index_error() -> None:
    stored = flat([{"a": [1, 2]}, {"a": [3]}])
    stored[0]["a"].append(9)
    assert stored[0] == {"a": [1, 2]}
    with pytest.raises(IndexError, match="sample index 2 out of range for 2 samples"):
        stored[2]
    with pytest.raises(IndexError, match="sample index -3 out of range"):
        stored.__getitems__([0, -3])
    assert flat(stored) is stored


def test_a_tensor_row_is_stored_without_the_tensor_it_views() -> None:
    big = torch.arange(100_000, dtype=torch.float32)
    rows = [big[i : i + 4] for i in range(10)]
    stored = flat(rows)
    assert stored.nbytes < big.nbytes / 10  # not ten copies of the whole storage
    for got, want in zip(stored, rows, strict=True):
        assert_same(got, want.clone())


@pytest.mark.parametrize("given", [{"a": [1, 2]}, "text", 3])
def test_flat_takes_a_list_of_samples(given: Any) -> None:
    with pytest.raises(PlanTypeError, match=r"flat\(\) takes a list or tuple of samples"):
        flat(given)


def test_a_sample_that_does_not_pickle_is_named() -> None:
    with pytest.raises(DataError, match=r"sample 2 does not pickle") as info:
        flat([1, 2, {"f": lambda x: x}, 4])
    assert info.value.sample_index == 2


# -- the loader ------------------------------------------------------------------------------


def _samples(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "x": torch.full((3,), i, dtype=torch.float16),
            "pos": np.asarray([i, -i], dtype=np.int32),
            "meta": {"tag": f"t{i % 5}", "pair": (i, i * 0.5)},
        }
        for i in range(n)
    ]


def _builder(samples: list[Any], storage: Any = "auto", workers: int = 0) -> DataLoaderBuilder:
    b = (
        DataLoaderBuilder()
        .with_dataset(samples, storage=storage)
        .with_batch_size(7)
        .with_shuffle()
        .with_seed(3)
    )
    return b.with_workers(workers, timeout=120) if workers else b


def _epoch(loader: Any) -> list[Any]:
    return list(loader)


@pytest.mark.timeout(300)
def test_workers_0_and_2_give_the_batches_of_the_list_read_as_objects() -> None:
    samples = _samples(60)
    want = _epoch(_builder(samples, "objects").build())
    for workers in (0, 2):
        loader = _builder(samples, "flat", workers).build()
        try:
            assert_batches_equal(_epoch(loader), want)
            assert "'dataset': flat" in loader.explain()
        finally:
            loader.close()
    with _builder(samples, "objects", 2).build() as loader:
        assert_batches_equal(_epoch(loader), want)
        assert "'dataset': Python objects (storage='objects')" in loader.explain()


@pytest.mark.timeout(300)
def test_auto_stores_a_large_list_flat_only_for_workers() -> None:
    samples = [{"id": i, "w": i * 0.25, "tag": f"s{i % 3}"} for i in range(AUTO_FLAT_MIN_SAMPLES)]
    big = DataLoaderBuilder().with_dataset(samples).with_batch_size(512).with_shuffle().with_seed(1)
    want = _epoch(big.build())
    with big.with_workers(2, timeout=120).build() as loader:
        text = loader.explain()
        assert "storage     'dataset': flat, " in text
        assert f"2 workers read {AUTO_FLAT_MIN_SAMPLES:,} samples" in text
        assert_batches_equal(_epoch(loader), want)
    assert "  storage     " not in big.build().explain()  # no workers: nothing to say
    small = big.with_dataset(samples[:100]).with_workers(2, timeout=120).build()
    try:
        assert f"fewer than the {AUTO_FLAT_MIN_SAMPLES:,}" in small.explain()
    finally:
        small.close()


@pytest.mark.timeout(300)
def test_states_and_fingerprints_are_those_of_objects_and_resume_across_storages() -> None:
    samples = _samples(50)
    objects = _builder(samples, "objects").build()
    stored = _builder(samples, "flat", 2).build()
    try:
        assert stored.plan.fingerprint == objects.plan.fingerprint
        assert stored.global_fingerprint == objects.global_fingerprint
        it_o, it_f = iter(objects), iter(stored)
        for _ in range(3):
            assert_same(next(it_f), next(it_o))
        state_o, state_f = objects.state_dict(), stored.state_dict()
        assert state_f["fingerprint"] == state_o["fingerprint"]
        assert {k: v for k, v in state_f.items() if k != "plan"} == {
            k: v for k, v in state_o.items() if k != "plan"
        }
        rest = list(it_o)
        resumed = _builder(samples, "flat", 2).build()
        try:
            resumed.load_state_dict(state_o)  # a state of the objects loader
            assert_batches_equal(list(resumed), rest)
        finally:
            resumed.close()
    finally:
        stored.close()


class _Opaque:
    """Pickles only by failing (a handle to something that cannot be sent)."""

    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle '_Opaque' object")


@pytest.mark.timeout(300)
def test_a_sample_that_cannot_be_stored_flat() -> None:
    samples: list[Any] = [{"id": i} for i in range(AUTO_FLAT_MIN_SAMPLES)]
    samples[4321] = {"id": 4321, "handle": _Opaque()}
    base = DataLoaderBuilder().with_batch_size(100)
    with pytest.raises(DataError, match=r"sample 4321 does not pickle") as info:
        base.with_dataset(samples, storage="flat").build()
    assert info.value.sample_index == 4321
    assert "storage='objects'" in str(info.value)
    # "auto" keeps the list as it is (fork workers read it) and explain() says why
    auto = base.with_dataset(samples[:4400]).with_workers(1, timeout=120)
    with auto.with_dataset(samples).build() as loader:
        assert "sample 4321 does not pickle" in loader.explain()
        assert "Python objects" in loader.explain()


def test_storage_is_a_plan_option_written_only_when_chosen(tmp_path: Any) -> None:
    samples = _samples(20)
    plan = _builder(samples, "flat", 2).compile()
    assert plan.to_dict()["dataset"]["storage"] == "flat"
    assert "storage" not in _builder(samples).compile().to_dict()["dataset"]
    assert "storage='flat'" in repr(_builder(samples, "flat"))
    assert "storage 'flat'" in plan.explain()
    path = tmp_path / "plan.toml"
    plan.save(path)
    again = LoaderPlan.load(path, bindings={"dataset": samples})
    assert again.dataset.storage == "flat"
    assert again.fingerprint == plan.fingerprint == _builder(samples).compile().fingerprint
    data = plan.to_dict()
    data["dataset"]["storage"] = "flatt"
    with pytest.raises(PlanError, match=r"dataset\.storage.*did you mean 'flat'"):
        LoaderPlan.from_dict(data, bindings={"dataset": samples})


def test_storage_applies_to_lists_only() -> None:
    with pytest.raises(PlanError, match=r"dataset\.storage.*loaderkit\.datasets\.flat"):
        DataLoaderBuilder().with_dataset(
            torch.utils.data.TensorDataset(torch.zeros(4)), storage="flat"
        )
    with pytest.raises(PlanError, match=r"dataset\.storage"):
        DataLoaderBuilder().with_dataset([1, 2], storage="compact")  # type: ignore[arg-type]


class _Annotations(torch.utils.data.Dataset[Any]):
    """A user's own Dataset holding its annotations flat (the one-line way in the docs)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = loaderkit.datasets.flat(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


@pytest.mark.timeout(300)
def test_a_users_dataset_holding_flat_samples() -> None:
    samples = _samples(30)
    dataset = _Annotations(samples)
    assert isinstance(dataset.items, FlatSamples)
    want = _epoch(_builder(samples, "objects").build())
    builder = (
        DataLoaderBuilder().with_dataset(dataset).with_batch_size(7).with_shuffle().with_seed(3)
    )
    with builder.with_workers(2, timeout=120).build() as loader:
        assert_batches_equal(_epoch(loader), want)


@pytest.mark.timeout(300)
def test_spawn_workers_read_the_flat_buffer() -> None:
    samples = _samples(40)
    want = _epoch(_builder(samples, "objects").build())
    builder = _builder(samples, "flat").with_workers(2, start_method="spawn", timeout=180)
    with builder.build() as loader:
        assert_batches_equal(_epoch(loader), want)


@pytest.mark.timeout(300)
def test_a_mixtures_list_sources_are_stored_as_auto_says() -> None:
    large = [{"x": i} for i in range(AUTO_FLAT_MIN_SAMPLES)]
    small = [{"x": -i} for i in range(50)]
    builder = (
        DataLoaderBuilder()
        .with_mixture({"large": large, "small": small})
        .with_batch_size(256)
        .with_shuffle()
        .with_seed(2)
    )
    want = _epoch(builder.build())
    with builder.with_workers(2, timeout=120).build() as loader:
        text = loader.explain()
        assert "'large': flat, " in text
        assert "'small': Python objects (storage='auto': 50 samples, fewer than" in text
        assert "anyway" not in text  # a mixture's source has no storage= to suggest
        assert_batches_equal(_epoch(loader), want)


def _children() -> set[int]:
    """The pids of this process's children now."""
    import psutil

    return {child.pid for child in psutil.Process().children()}


def _worker_uss_mb(earlier: set[int]) -> list[float]:
    """USS (MB) of this process's forked children (its loader workers) not in ``earlier``.

    Workers an earlier test left behind (still exiting, or held by a trainer) are not this
    loader's.
    """
    import psutil

    me = psutil.Process()
    line = me.cmdline()
    return [
        child.memory_full_info().uss / 1e6
        for child in me.children()
        if child.pid not in earlier and child.cmdline() == line  # not the resource tracker
    ]


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="copy-on-read is a fork problem"
)
def test_workers_reading_a_flat_list_do_not_copy_it() -> None:
    """The issue's scenario, scaled down: a list of small dicts read by 2 forked workers.

    Read as objects, each worker ends the epoch with its own copy of the pages it read
    (about 50 MB for 300,000 dicts); stored flat it holds only its own working memory.
    """
    samples = [
        {"id": i, "label": i % 10, "w": i * 0.5, "tag": f"t{i % 97}"} for i in range(300_000)
    ]
    uss = {}
    for storage in ("objects", "flat"):
        builder = (
            DataLoaderBuilder()
            .with_dataset(samples, storage=storage)
            .with_batch_size(1024)
            .with_shuffle()
            .with_workers(2, timeout=300)
        )
        earlier = _children()
        with builder.build() as loader:
            iterator = iter(loader)
            for _ in range(len(loader)):
                next(iterator)
            uss[storage] = _worker_uss_mb(earlier)  # after the last batch, workers still alive
        assert len(uss[storage]) == 2, uss
    grown = min(uss["objects"]) - max(uss["flat"])
    assert grown > 25, uss  # each objects worker holds at least 25 MB more: the list's pages


def test_spawn_workers_get_the_buffer_through_shared_memory() -> None:
    from multiprocessing.reduction import ForkingPickler

    samples = [{"a": i, "b": f"s{i}"} for i in range(20_000)]
    stored = flat(samples)
    assert stored.nbytes > 500_000
    sent = [ForkingPickler.dumps(stored) for _ in range(2)]  # one per worker
    assert all(len(s) < 5_000 for s in sent)  # handles to shared memory, not the bytes
    for payload in sent:
        assert list(pickle.loads(payload)) == samples
    assert list(stored) == samples  # the sender reads the shared copy
