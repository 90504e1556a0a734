"""The batched fetch path gives exactly what per-sample fetch + the default collator gives.

The reference is torch's ``default_collate`` with the one rule loaderkit's ``default`` collator
adds, computed here independently with numpy: a column of equal-shape nested Python lists of
one number type is one ``[batch, ...]`` tensor (``_expected_collate``), and for HF columns
formatted as Python lists, in the feature's dtype (``_hf_expected``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import Dataset, TensorDataset, default_collate

from loaderkit import DataLoaderBuilder
from loaderkit.collators import default_collate as lk_default_collate
from loaderkit.plan.specs import describe_dataset
from loaderkit.runtime.sources.access import dataset_source
from loaderkit.testing import batches_differ

N = 30  # rows of the small sources


def _leaves(value: object) -> Iterator[object]:
    if type(value) is list:
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _number_lists(values: list) -> np.ndarray | None:
    """``values`` as one numpy array if they are equal-shape nested lists of one number type."""
    if not all(type(v) is list for v in values):
        return None
    kinds = {type(leaf) for v in values for leaf in _leaves(v)}
    if len(kinds) != 1 or not kinds <= {bool, int, float}:
        return None  # also: no leaves at all, or tuples/strings/tensors inside
    try:
        array = np.array(values)
    except ValueError:  # ragged
        return None
    return array if array.dtype != object else None


def _expected_column(values: list) -> object:
    array = _number_lists(values)
    return default_collate(values) if array is None else torch.from_numpy(array)


def _expected_collate(samples: list) -> object:
    """torch's default_collate, with columns of number lists stacked instead of transposed."""
    first = samples[0]
    if isinstance(first, dict):
        return {k: _expected_column([s[k] for s in samples]) for k in first}
    if isinstance(first, tuple):
        return [_expected_column(list(column)) for column in zip(*samples, strict=True)]
    return _expected_column(list(samples))


_WIDENED = {"uint16": "int32", "uint32": "int64"}


def _feature_dtype(feature) -> str | None:
    """The leaf dtype of an HF list feature, or ``None`` for anything else."""
    import datasets

    depth = 0
    while type(feature) in (datasets.List, datasets.LargeList):
        feature, depth = feature.feature, depth + 1
    if depth == 0:
        return None
    if isinstance(feature, datasets.ClassLabel):
        return "int64"
    dtype = getattr(feature, "dtype", None)
    if dtype not in ("bool", "float16", "float32", "float64") and not (
        dtype and "int" in dtype and dtype != "uint64"
    ):
        return None
    return _WIDENED.get(dtype, dtype)


def _hf_expected(ds, samples: list) -> dict:
    """The reference batch of HF rows: list columns HF made Python lists keep their dtype."""
    expected = _expected_collate(samples)
    fmt = ds.format
    stock = fmt["type"] in (None, "python", "numpy", "torch") and not fmt["format_kwargs"]
    features = ds.features  # a deep copy each time it is read
    for key in expected:
        # formatted columns are HF's own Python lists only under a stock formatter (a
        # transform's output has no dtype); with output_all_columns the rest always are
        python_by_hf = stock if key in fmt["columns"] else fmt["output_all_columns"]
        dtype = _feature_dtype(features.get(key))
        array = _number_lists([s[key] for s in samples])
        if python_by_hf and dtype is not None and array is not None and array.ndim >= 2:
            expected[key] = torch.from_numpy(array.astype(dtype))
    return expected


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
    "dict of list rows": lambda: {
        "v": [[float(i), -1.5] for i in range(N)],
        "m": [[[i, 1], [2, 3]] for i in range(N)],
        "b": [[i % 2 == 0] for i in range(N)],
        "rec": [(float(i), i) for i in range(N)],
    },
    "list of samples": lambda: [{"v": torch.tensor([i, i])} for i in range(N)],
    "getitems": WithGetitems,
    "hf python": lambda: _hf(None),
    "hf torch": lambda: _hf("torch"),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
@given(indices=st.lists(st.integers(0, N - 1), min_size=1, max_size=12))
def test_batched_fetch_equals_per_sample_fetch(name, indices):
    data = SOURCES[name]()
    if name == "hf python":  # nothing stacks ragged lists: leave that column out
        data = data.remove_columns(["ragged"])
    spec = describe_dataset(data, "d")
    source = dataset_source(data, spec)
    idx = np.asarray(indices, dtype=np.int64)
    samples = source.samples(idx)
    if spec.kind == "hf":
        expected = _hf_expected(data, [data[i] for i in indices])
    else:
        expected = _expected_collate(
            [data[i] for i in indices] if spec.kind not in ("tensors", "columns") else samples
        )
    if spec.kind != "hf":  # HF rows carry no dtype: the collator alone gives float64
        assert batches_differ(lk_default_collate(samples), expected) is None
    fast = source.default_batch(idx)
    if fast is not None:
        found = batches_differ(expected, fast)
        assert found is None, found


def test_samples_of_columns_are_what_indexing_gives():
    x, y = torch.randn(N, 2), torch.arange(N)
    source = dataset_source((x, y), describe_dataset((x, y), "d"))
    ((sx, sy),) = source.samples(np.array([4]))
    assert torch.equal(sx, x[4])
    assert torch.equal(sy, y[4])


def test_tensor_datasets_take_the_column_path():
    ds = TensorDataset(torch.randn(N, 3), torch.arange(N))
    source = dataset_source(ds, describe_dataset(ds, "d"))
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


# -- HF datasets: the Arrow path of HFSource.default_batch -----------------------------------

HF_N = 30


def _hf_matrix():
    """One row per dtype and shape the Arrow path handles, with awkward values."""
    datasets = pytest.importorskip("datasets")
    value, fixed = datasets.Value, datasets.List
    n = HF_N
    rng = np.random.default_rng(7)
    f64 = rng.normal(size=n) * 10.0 ** rng.integers(-45, 45, n)  # rounds, flushes, overflows
    f64[:4] = [np.nan, -np.inf, 0.1, -0.0]
    f32 = rng.normal(size=n).astype(np.float32)
    f32[0] = np.nan
    f16 = rng.normal(size=n).astype(np.float16)
    f16[1] = np.inf
    columns = {
        "i8": (value("int8"), [(i * 37) % 256 - 128 for i in range(n)]),
        "i16": (value("int16"), [(i * 997) % 65536 - 32768 for i in range(n)]),
        "i32": (value("int32"), [(i * 7919) % 1000 - 500 for i in range(n)]),
        "i64": (value("int64"), [i * 10**12 - 2**62 for i in range(n)]),
        "u8": (value("uint8"), [(i * 53) % 256 for i in range(n)]),
        "u16": (value("uint16"), [(i * 4099) % 65536 for i in range(n)]),
        "u32": (value("uint32"), [2**32 - 1 - i for i in range(n)]),
        "f16": (value("float16"), f16.tolist()),
        "f32": (value("float32"), f32.tolist()),
        "f64": (value("float64"), f64.tolist()),
        "b": (value("bool"), [i % 3 == 0 for i in range(n)]),
        "cl": (datasets.ClassLabel(names=["a", "b", "c"]), [i % 3 for i in range(n)]),
        "s": (value("string"), [f"rów{i}" + "\x00" * (i % 4 == 0) for i in range(n)]),
        "ls": (value("large_string"), [f"{i}" * (i % 3) for i in range(n)]),
        "bin": (value("binary"), [bytes([i, 0, i % 2])[: 1 + i % 3] for i in range(n)]),
        "fl": (fixed(value("float32"), length=4), rng.normal(size=(n, 4)).tolist()),
        "fl64": (fixed(value("float64"), length=2), (rng.normal(size=(n, 2)) * 1e-39).tolist()),
        "fb": (fixed(value("bool"), length=3), (rng.random((n, 3)) > 0.5).tolist()),
        "nest": (
            fixed(fixed(value("int16"), length=2), length=3),
            rng.integers(-(2**15), 2**15, (n, 3, 2)).tolist(),
        ),
        "img": (  # an image-like H x W x C uint8 column
            fixed(fixed(fixed(value("uint8"), length=3), length=4), length=5),
            rng.integers(0, 256, (n, 5, 4, 3)).tolist(),
        ),
        "vleq": (fixed(value("float64")), rng.normal(size=(n, 3)).tolist()),
        "lvl": (datasets.LargeList(value("int8")), rng.integers(-128, 128, (n, 2)).tolist()),
    }
    features = datasets.Features({k: f for k, (f, _) in columns.items()})
    return datasets.Dataset.from_dict({k: v for k, (_, v) in columns.items()}, features=features)


def _hf_chunked():
    """The matrix as a concatenation of slices: every column has several Arrow chunks."""
    datasets = pytest.importorskip("datasets")
    ds = _hf_matrix()
    parts = [ds.select(range(i, min(i + 7, HF_N))) for i in range(0, HF_N, 7)]
    chunked = datasets.concatenate_datasets(parts)
    assert chunked.data.table.column("fl").num_chunks > 1
    return chunked


def _hf_ragged(fmt):
    datasets = pytest.importorskip("datasets")
    return datasets.Dataset.from_dict(
        {"r": [[i] * (1 + i % 2) for i in range(HF_N)], "y": list(range(HF_N))}
    ).with_format(fmt)


def _hf_nulls(fmt):
    """Null rows: in a scalar column, in a list column, and over non-null list values."""
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa
    from datasets.table import InMemoryTable

    masked = pa.FixedSizeListArray.from_arrays(
        pa.array(np.arange(2 * HF_N, dtype=np.float32)),
        2,
        mask=pa.array([i % 4 == 1 for i in range(HF_N)]),
    )
    assert masked.null_count and not masked.flatten().null_count
    table = pa.table(
        {
            "v": pa.array([None if i % 5 == 0 else i for i in range(HF_N)], pa.int32()),
            "w": pa.array(
                [None if i % 7 == 0 else [i, 0.5] for i in range(HF_N)], pa.list_(pa.float32(), 2)
            ),
            "m": masked,
        }
    )
    return datasets.Dataset(InMemoryTable(table)).with_format(fmt)


def _hf_array3d():
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {"a": datasets.Array3D((5, 4, 3), "uint8"), "y": datasets.Value("int64")}
    )
    images = np.random.default_rng(0).integers(0, 256, (HF_N, 5, 4, 3), dtype=np.uint8)
    return datasets.Dataset.from_dict(
        {"a": images, "y": list(range(HF_N))}, features=features
    ).with_format("torch")


def _hf_uint64():
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"u": datasets.Value("uint64")})
    return datasets.Dataset.from_dict(
        {"u": [2**40 + i for i in range(HF_N)]}, features=features
    ).with_format("torch")


def _double_i8(batch):
    return {"i8": [2 * v for v in batch["i8"]], "s": batch["s"]}


_ODD = [29, 3, 3, 17, 0, 8, 21, 12, 12, 5, 26, 1]

# name -> (dataset factory, whether the Arrow path must serve every batch HF can collate)
HF_CASES = {
    "python": (_hf_matrix, True),
    "numpy": (lambda: _hf_matrix().with_format("numpy"), True),
    "torch": (lambda: _hf_matrix().with_format("torch"), True),
    "torch, some columns": (
        lambda: _hf_matrix().with_format("torch", columns=["img", "f64", "s", "i8", "vleq"]),
        True,
    ),
    "torch, some columns + the others": (
        lambda: _hf_matrix().with_format(
            "torch", columns=["img", "f64", "s", "i8"], output_all_columns=True
        ),
        True,
    ),
    "numpy, some columns + the others": (
        lambda: _hf_matrix().with_format(
            "numpy", columns=["fl", "u16", "bin"], output_all_columns=True
        ),
        True,
    ),
    "python, some columns": (
        lambda: _hf_matrix().with_format(None, columns=["f16", "nest", "s"]),
        True,
    ),
    "select": (lambda: _hf_matrix().select(_ODD).with_format("torch"), True),
    "shuffle": (lambda: _hf_matrix().shuffle(seed=0).with_format("numpy"), True),
    "filter": (lambda: _hf_matrix().filter(lambda r: r["i32"] % 3 != 0), True),
    "filter + select": (
        lambda: (
            _hf_matrix().filter(lambda r: r["u8"] % 2 == 0).select([5, 0, 3]).with_format("torch")
        ),
        True,
    ),
    "chunks": (lambda: _hf_chunked().with_format("torch"), True),
    "chunks, shuffled": (lambda: _hf_chunked().shuffle(seed=1), True),
    "chunks, numpy": (lambda: _hf_chunked().with_format("numpy"), True),
    "ragged, python": (lambda: _hf_ragged(None), True),
    "ragged, torch": (lambda: _hf_ragged("torch"), True),
    # maybe: the Arrow path serves the batches without null rows
    "nulls, python": (lambda: _hf_nulls(None), False),
    "nulls, torch": (lambda: _hf_nulls("torch"), False),
}

# datasets the Arrow path must leave to HF's formatted path
HF_FALLBACKS = {
    "set_transform": lambda: _hf_matrix().with_transform(_double_i8),
    "transform + torch columns": lambda: _hf_matrix().with_transform(
        _double_i8, columns=["i8", "s"], output_all_columns=True
    ),
    "format kwargs": lambda: _hf_matrix().with_format("torch", dtype=torch.float64),
    "Array3D": _hf_array3d,
    "uint64": _hf_uint64,
}

_HF_BUILT: dict[str, object] = {}


def _hf_case(name):
    if name not in _HF_BUILT:
        factory = HF_CASES[name][0] if name in HF_CASES else HF_FALLBACKS[name]
        _HF_BUILT[name] = factory()
    return _HF_BUILT[name]


_HF_SPECS: dict[tuple[int, str], object] = {}  # (id, HF fingerprint) -> the spec (pure data)


def _hf_source(ds):
    """A fresh source over ``ds``; its spec is described once (it deep-copies the features)."""
    key = (id(ds), ds._fingerprint)
    if key not in _HF_SPECS:
        _HF_SPECS[key] = describe_dataset(ds, "d")
    source = dataset_source(ds, _HF_SPECS[key])
    assert type(source).__name__ == "HFSource"
    return source


def _collated_or_none(source, idx):
    """The reference batch of ``source.samples(idx)``, or ``None`` where HF or collate raises."""
    try:
        return _hf_expected(source.data, source.samples(idx))
    except Exception:  # noqa: BLE001 - HF itself fails on some null layouts
        return None


def _hf_row_batch_disagreements(ds, per_row, expected):
    """Columns where HF's own row and batch formatting collate differently.

    Known: the numpy formatter keeps a row's scalar in its Arrow dtype (int8, float64, ...)
    but converts a batch's column to int64 / float32, so ``ds[i]`` and ``ds.__getitems__``
    disagree there; the Source contract follows ``__getitems__`` (what ``samples`` returns).
    """
    found = {k for k in expected if batches_differ(per_row[k], expected[k]) is not None}
    numpy_scalars = set()
    if ds.format["type"] == "numpy":
        for name in ds.format["columns"]:
            dtype = getattr(ds.features[name], "dtype", None)
            if dtype not in (None, "int64", "float32", "bool", "string", "large_string"):
                numpy_scalars.add(name)
    assert found <= numpy_scalars, found - numpy_scalars
    return found


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("name", list(HF_CASES))
@given(data=st.data())
def test_hf_arrow_batches_equal_formatted_samples_collated(name, data):
    ds = _hf_case(name)
    indices = data.draw(st.lists(st.integers(0, len(ds) - 1), min_size=1, max_size=12))
    source = _hf_source(ds)
    idx = np.asarray(indices, dtype=np.int64)
    arrow = source._arrow_batch(idx)
    expected = _collated_or_none(source, idx)
    if expected is None:  # ragged rows, nulls: HF's path raises, or collating does
        assert arrow is None
        with pytest.raises(Exception):  # noqa: B017 - whatever HF's path raises
            source.default_batch(idx)
        return
    must_be_fast = HF_CASES[name][1]
    if must_be_fast:
        assert arrow is not None
    batch = source.default_batch(idx)
    found = batches_differ(expected, batch)
    assert found is None, found
    if arrow is not None:  # the Arrow path and HF's formatted path agree
        found = batches_differ(source._formatted_batch(idx), arrow)
        assert found is None, found
    per_row = _hf_expected(ds, [ds[i] for i in indices])
    skip = _hf_row_batch_disagreements(ds, per_row, expected)
    for key in per_row:
        if key not in skip:
            found = batches_differ(per_row[key], batch[key], f"[{key!r}]")
            assert found is None, found
    assert list(per_row) == list(batch)


@pytest.mark.parametrize("name", list(HF_FALLBACKS))
@given(indices=st.lists(st.integers(0, HF_N - 1), min_size=1, max_size=12))
def test_hf_arrow_path_leaves_what_it_cannot_reproduce_to_hf(name, indices):
    ds = _hf_case(name)
    source = _hf_source(ds)
    idx = np.asarray(indices, dtype=np.int64)
    assert source._arrow_batch(idx) is None
    expected = _hf_expected(ds, source.samples(idx))
    found = batches_differ(expected, source.default_batch(idx))
    assert found is None, found


def test_hf_arrow_path_serves_the_benchmark_layout():
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(0)
    features = datasets.Features(
        {"x": datasets.List(datasets.Value("float32"), length=16), "label": datasets.Value("int64")}
    )
    ds = datasets.Dataset.from_dict(
        {"x": rng.standard_normal((500, 16), dtype=np.float32), "label": rng.integers(0, 10, 500)},
        features=features,
    )
    ds.set_format("torch")
    source = _hf_source(ds)
    idx = rng.permutation(500)[:256].astype(np.int64)
    batch = source._arrow_batch(idx)
    assert batch is not None
    assert batch["x"].dtype == torch.float32 and batch["x"].shape == (256, 16)
    assert batch["label"].dtype == torch.int64
    assert batches_differ(default_collate([ds[i] for i in idx.tolist()]), batch) is None
    batch["x"] += 1  # batches are the caller's: writable, not aliasing the dataset
    assert (
        batches_differ(default_collate([ds[i] for i in idx.tolist()]), source.default_batch(idx))
        is None
    )


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_hf_arrow_path_follows_in_place_format_changes():
    ds = _hf_matrix()
    source = _hf_source(ds)
    idx = np.array([4, 2, 9], dtype=np.int64)
    for fmt in ("torch", "numpy", None):
        ds.set_format(fmt, columns=["f64", "fl", "s"])
        assert source._arrow_batch(idx) is not None
        expected = _hf_expected(ds, source.samples(idx))
        assert batches_differ(expected, source.default_batch(idx)) is None
    ds.set_transform(_double_i8)
    assert source._arrow_batch(idx) is None
    expected = _hf_expected(ds, source.samples(idx))
    assert batches_differ(expected, source.default_batch(idx)) is None
    ds.reset_format()
    assert source._arrow_batch(idx) is not None


def test_hf_arrow_path_leaves_odd_indices_to_hf():
    source = _hf_source(_hf_matrix().with_format("torch"))
    assert source._arrow_batch(np.array([], dtype=np.int64)) is None
    assert source._arrow_batch(np.array([-1, 2], dtype=np.int64)) is None
    assert source._arrow_batch(np.array([2, HF_N], dtype=np.int64)) is None


def test_hf_source_pickles_without_its_arrow_plan():
    import pickle

    ds = _hf_matrix().shuffle(seed=3).with_format("torch")
    source = _hf_source(ds)
    idx = np.array([7, 1, 1], dtype=np.int64)
    before = source.default_batch(idx)
    assert source._plan is not None
    copy = pickle.loads(pickle.dumps(source))
    assert copy._plan is None
    assert batches_differ(before, copy.default_batch(idx)) is None
