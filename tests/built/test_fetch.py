"""The batched fetch path gives exactly what per-sample fetch + default_collate gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import Dataset, TensorDataset, default_collate

from loaderkit import DataLoaderBuilder
from loaderkit.build.sources import make_source
from loaderkit.plan.specs import describe_dataset
from loaderkit.testing import batches_differ

N = 30


class WithGetitems(Dataset[tuple[torch.Tensor, int]]):
    """A dataset with a batched __getitems__ (the torch protocol)."""

    def __init__(self) -> None:
        self.x = torch.randn(N, 4)
        self.calls = 0

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.x[i], i

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, int]]:
        self.calls += 1
        return [(self.x[i], i) for i in indices]


def _hf(fmt: str | None):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {
            "x": [[float(i), float(i) / 2] for i in range(N)],
            "y": list(range(N)),
            "s": [f"row{i}" for i in range(N)],
            "ragged": [[1] * (1 + i % 3) for i in range(N)],
        }
    )
    if fmt == "torch":
        ds = ds.with_format("torch", columns=["x", "y"])
    return ds


SOURCES = {
    "tensor dataset": lambda: TensorDataset(torch.randn(N, 3), torch.arange(N)),
    "tuple of tensors": lambda: (torch.randn(N, 2), torch.arange(N)),
    "tuple of arrays": lambda: (np.random.default_rng(0).normal(size=(N, 2)), np.arange(N)),
    "dict of tensors": lambda: {"a": torch.randn(N, 2, 2), "b": torch.arange(N)},
    "dict of numpy": lambda: {
        "f32": np.arange(N, dtype=np.float32),
        "i16": np.arange(N, dtype=np.int16),
        "m": np.ones((N, 3), dtype=np.float64),
        "s": np.array([f"r{i}" for i in range(N)]),
    },
    "dict of lists": lambda: {"f": [float(i) for i in range(N)], "s": [str(i) for i in range(N)]},
    "list of samples": lambda: [{"v": torch.tensor([i, i])} for i in range(N)],
    "getitems": WithGetitems,
    "hf python": lambda: _hf(None),
    "hf torch": lambda: _hf("torch"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
@given(indices=st.lists(st.integers(0, N - 1), min_size=1, max_size=12))
def test_batched_fetch_equals_per_sample_fetch(name, indices):
    data = SOURCES[name]()
    if name == "hf python":  # default_collate cannot stack ragged lists: leave that column out
        data = data.remove_columns(["ragged"])
    spec = describe_dataset(data, "d")
    source = make_source(data, spec)
    idx = np.asarray(indices, dtype=np.int64)
    expected = (
        default_collate([data[i] for i in indices])
        if spec.kind not in ("tensors", "columns")
        else default_collate(source.samples(idx))
    )
    samples = source.samples(idx)
    assert batches_differ(default_collate(samples), expected) is None
    fast = source.default_batch(idx)
    if fast is not None:
        found = batches_differ(expected, fast)
        assert found is None, found


def test_samples_of_columns_are_what_indexing_gives():
    x, y = torch.randn(N, 2), torch.arange(N)
    source = make_source((x, y), describe_dataset((x, y), "d"))
    ((sx, sy),) = source.samples(np.array([4]))
    assert torch.equal(sx, x[4])
    assert torch.equal(sy, y[4])


def test_tensor_datasets_take_the_column_path():
    ds = TensorDataset(torch.randn(N, 3), torch.arange(N))
    source = make_source(ds, describe_dataset(ds, "d"))
    idx = np.array([3, 1, 4], dtype=np.int64)
    fast = source.default_batch(idx)
    assert fast is not None
    assert batches_differ(default_collate([ds[i] for i in idx.tolist()]), fast) is None


def test_getitems_is_used_once_per_batch():
    data = WithGetitems()
    loader = DataLoaderBuilder().with_dataset(data).with_batch_size(10).compile().build()
    list(loader)
    assert data.calls == 3


def test_a_fast_path_failure_names_the_sample():
    class Broken(Dataset[int]):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            if i == 2:
                raise OSError("disk")
            return i

    import loaderkit as lk

    loader = DataLoaderBuilder().with_dataset(Broken()).with_batch_size(4).compile().build()
    with pytest.raises(lk.DataError) as err:
        list(loader)
    assert err.value.sample_index == 2
