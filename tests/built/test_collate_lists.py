"""Issue 16: lists of numbers collate to one ``[batch, ...]`` tensor, not transposed lists.

The ``default`` collator stacks a batch of equal-shape (nested) Python lists of one number type
into one tensor (bool / int64 / float64); HF list columns formatted as Python lists keep their
Arrow dtype. Tuples, strings, lists of tensors and mixed-type lists keep torch's semantics, and
``torch_default`` is exactly torch's ``default_collate``. References are computed with numpy
and torch's own ``default_collate``, never with the code under test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import default_collate as torch_collate

from loaderkit import DataError, DataLoaderBuilder
from loaderkit.collators import collators, default_collate
from loaderkit.plan.specs import describe_dataset
from loaderkit.runtime.sources.access import dataset_source
from loaderkit.testing import batches_differ

datasets = pytest.importorskip("datasets")

N = 10


def _first(dataset: Any, batch_size: int = 3) -> Any:
    builder = DataLoaderBuilder().with_dataset(dataset).with_batch_size(batch_size)
    with builder.compile().build() as loader:
        return next(iter(loader))


def _same(a: Any, b: Any) -> None:
    found = batches_differ(a, b)
    assert found is None, found


# -- HF datasets ------------------------------------------------------------------------------


def _issue_dataset() -> Any:
    return datasets.Dataset.from_dict(
        {
            "x": [[float(i)] * 4 for i in range(N)],
            "y": list(range(N)),
            "f": [i / 2 for i in range(N)],
        }
    )


def test_the_issue_repro_gives_one_tensor() -> None:
    batch = _first(_issue_dataset())
    _same(batch["x"], torch.tensor([[0.0] * 4, [1.0] * 4, [2.0] * 4], dtype=torch.float64))
    # scalar columns keep today's behaviour: Python ints and floats -> int64 and float64
    _same(batch["y"], torch.tensor([0, 1, 2]))
    _same(batch["f"], torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64))


def test_a_float32_sequence_column_stays_float32() -> None:
    ds = _issue_dataset().cast_column("x", datasets.Sequence(datasets.Value("float32"), length=4))
    batch = _first(ds)
    _same(batch["x"], torch.tensor([[0.0] * 4, [1.0] * 4, [2.0] * 4], dtype=torch.float32))


def test_a_cache_or_the_skip_policy_gives_the_same_float32_batches(tmp_path: Any) -> None:
    """Sample-by-sample paths cast to the Arrow dtype too: a cache never changes a batch."""
    ds = _issue_dataset().cast_column("x", datasets.Sequence(datasets.Value("float32"), length=4))
    plain = DataLoaderBuilder().with_dataset(ds).with_batch_size(3)
    want = list(plain.build())
    for variant in (
        plain.with_cache("memory"),
        plain.with_cache("disk", path=tmp_path / "cache"),
        plain.with_error_policy("skip", max_errors=1),
    ):
        for _ in range(2):  # filling the cache, then reading it
            got = list(variant.build())
            assert got[0]["x"].dtype == torch.float32
            assert len(got) == len(want)
            for a, b in zip(want, got, strict=True):
                assert batches_differ(a, b) is None


# Arrow dtype -> batch dtype (uint16/uint32 widen: torch has almost no ops for them)
ARROW_DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "uint16": torch.int32,
    "uint32": torch.int64,
    "bool": torch.bool,
}


def _values(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("float"):
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def _list_feature(dtype: str, dims: tuple[int, ...], fixed: bool) -> Any:
    feature: Any = datasets.Value(dtype)
    for n in reversed(dims):
        feature = datasets.List(feature, length=n if fixed else -1)
    return feature


def _hf_lists(dtype: str, dims: tuple[int, ...], fixed: bool, rows: int = N) -> Any:
    values = _values(dtype, (rows, *dims))
    features = datasets.Features({"x": _list_feature(dtype, dims, fixed)})
    return datasets.Dataset.from_dict({"x": values.tolist()}, features=features), values


def _stacked(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` (rows of a column of Arrow dtype ``dtype``) in the batch's dtype."""
    return values.astype(str(ARROW_DTYPES[dtype]).removeprefix("torch."))


def _paths(ds: Any, idx: np.ndarray) -> dict[str, Any]:
    """The batch of ``idx`` by every route a loader can take for an HF dataset."""
    source = dataset_source(ds, describe_dataset(ds, "d"))
    return {
        "arrow": source._arrow_batch(idx),
        "formatted": source._formatted_batch(idx),
        "default_batch": source.default_batch(idx),
    }


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "variable"])
@pytest.mark.parametrize("dtype", list(ARROW_DTYPES))
def test_hf_list_columns_keep_their_arrow_dtype(dtype: str, fixed: bool) -> None:
    ds, values = _hf_lists(dtype, (3,), fixed)
    idx = np.array([4, 0, 7], dtype=np.int64)
    expected = torch.from_numpy(_stacked(values[idx], dtype))
    for route, batch in _paths(ds, idx).items():
        assert batch is not None, route
        found = batches_differ(expected, batch["x"], route)
        assert found is None, found
    _same(_first(ds)["x"], torch.from_numpy(_stacked(values[:3], dtype)))


def test_nested_hf_lists_are_one_tensor() -> None:
    for fixed in (True, False):
        ds, values = _hf_lists("float32", (3, 2), fixed)
        batch = _first(ds, 4)
        _same(batch["x"], torch.from_numpy(values[:4]))


def test_hf_per_sample_route_matches_through_the_arrow_dtype_rule() -> None:
    """Per-sample rows + the default collator give float64; the Arrow dtype makes it exact."""
    ds, values = _hf_lists("float32", (4,), True)
    idx = np.array([1, 2, 9], dtype=np.int64)
    per_sample = default_collate([ds[i] for i in idx.tolist()])["x"]
    _same(per_sample, torch.from_numpy(values[idx].astype(np.float64)))
    _same(per_sample.to(torch.float32), _paths(ds, idx)["arrow"]["x"])


def test_hf_numpy_and_torch_formats_keep_hf_semantics() -> None:
    ds, values = _hf_lists("float64", (4,), True)
    idx = np.arange(3, dtype=np.int64)
    # HF's numpy and torch formatters make float32 (that is HF's rule, not the Arrow dtype)
    for fmt in ("numpy", "torch"):
        batch = _paths(ds.with_format(fmt), idx)
        _same(batch["arrow"]["x"], torch.from_numpy(values[:3].astype(np.float32)))
        _same(batch["formatted"]["x"], batch["arrow"]["x"])


def test_ragged_hf_rows_still_fail_clearly() -> None:
    ds = datasets.Dataset.from_dict({"r": [[1] * (1 + i % 2) for i in range(N)]})
    with pytest.raises(DataError, match="could not be gathered"):
        _first(ds)
    # equal lengths within a batch: one tensor (here rows 0, 2, 4 have one element each)
    _same(_first(ds.select([0, 2, 4]))["r"], torch.tensor([[1], [1], [1]]))


def _double(sample: dict[str, Any]) -> dict[str, Any]:
    return {"x": [[2 * v for v in row] for row in sample["x"]]}


def _as_float32(sample: dict[str, Any]) -> dict[str, Any]:
    return {"x": torch.tensor(sample["x"], dtype=torch.float32)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_hf_lists_through_the_loader_with_workers(workers: int) -> None:
    ds, values = _hf_lists("float32", (2, 3), True, rows=12)
    builder = DataLoaderBuilder().with_dataset(ds).with_batch_size(4)
    if workers:
        builder = builder.with_workers(workers)
    with builder.compile().build() as loader:
        got = [b["x"] for b in loader]
    assert len(got) == 3
    _same(torch.cat(got), torch.from_numpy(values))
    # a per-sample transform hands the collator Python floats: float64, as documented
    with builder.with_transform(_double).compile().build() as loader:
        first = next(iter(loader))["x"]
    _same(first, torch.from_numpy(2 * values[:4].astype(np.float64)))
    with builder.with_transform(_as_float32).compile().build() as loader:
        first = next(iter(loader))["x"]
    _same(first, torch.from_numpy(values[:4]))


# -- torch datasets: what stacks and what keeps torch's semantics -----------------------------


def _expected_stack(values: list[Any]) -> torch.Tensor:
    return torch.from_numpy(np.array(values))


CASES: dict[str, tuple[list[Any], Any]] = {
    # name: (samples, expected batch); None = torch's default_collate of the samples
    "a sample that is a list of floats": (
        [[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]],
        torch.tensor([[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]], dtype=torch.float64),
    ),
    "lists of ints in dicts": (
        [{"ids": [1, 2], "y": 0}, {"ids": [3, 4], "y": 1}],
        {"ids": torch.tensor([[1, 2], [3, 4]]), "y": torch.tensor([0, 1])},
    ),
    "nested bool lists": (
        [[[True, False]], [[False, False]]],
        torch.tensor([[[True, False]], [[False, False]]]),
    ),
    "(list, label) tuples: x, y = batch": (
        [([1.0, 2.0], 0), ([3.0, 4.0], 1)],
        [torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64), torch.tensor([0, 1])],
    ),
    # torch's semantics, unchanged
    "tuples of numbers": ([(1, 2.5), (3, 4.5)], None),
    "a list record of a float and an int": ([[0.5, 3], [1.5, 4]], None),
    "a list record of an int and a bool": ([[1, True], [2, False]], None),
    "lists of strings": ([["a", "b"], ["c", "d"]], None),
    "lists of tensors": ([[torch.zeros(2), torch.ones(2)], [torch.ones(2), torch.zeros(2)]], None),
    "lists of numpy scalars": ([[np.float32(1), np.float32(2)]] * 2, None),
    "lists of tuples": ([[(1, 2)], [(3, 4)]], None),
    "empty lists": ([[], []], None),
    "strings": (["ab", "cd"], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_default_collator_on_lists(name: str) -> None:
    samples, expected = CASES[name]
    _same(default_collate(samples), torch_collate(samples) if expected is None else expected)


def test_inner_ragged_lists_stack_where_the_columns_are_even() -> None:
    # torch transposes [[1, 2], [3]] rows into two columns; each column is even, so it stacks
    got = default_collate([[[1, 2], [3]], [[4, 5], [6]]])
    _same(got, [torch.tensor([[1, 2], [4, 5]]), torch.tensor([[3], [6]])])


def test_ragged_lists_across_the_batch_raise_a_data_error_naming_the_path() -> None:
    with pytest.raises(DataError, match=r"at \['x'\]: sample at batch position 1 has 3 elements"):
        default_collate([{"x": [1.0, 2.0]}, {"x": [1.0, 2.0, 3.0]}])


def test_ints_too_large_for_int64_raise_a_data_error() -> None:
    with pytest.raises(DataError, match=r"at \['x'\]: cannot stack lists of int"):
        default_collate([{"x": [2**70, 1]}, {"x": [1, 1]}])


def test_a_torch_dataset_of_list_samples_through_the_loader() -> None:
    data = [{"x": [float(i), -float(i)], "label": i % 2} for i in range(N)]
    x, y = _first([([float(i)] * 3, i) for i in range(N)])
    _same(x, torch.tensor([[0.0] * 3, [1.0] * 3, [2.0] * 3], dtype=torch.float64))
    _same(y, torch.tensor([0, 1, 2]))
    batch = _first(data, 2)
    _same(batch["x"], torch.tensor([[0.0, -0.0], [1.0, -1.0]], dtype=torch.float64))


@settings(max_examples=30, deadline=None)
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    batch=st.integers(1, 4),
    kind=st.sampled_from(["bool", "int", "float"]),
    data=st.data(),
)
def test_equal_shape_number_lists_stack_like_numpy(
    shape: list[int], batch: int, kind: str, data: st.DataObject
) -> None:
    strategy: st.SearchStrategy[Any] = {
        "bool": st.booleans(),
        "int": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(allow_nan=True, allow_infinity=True),
    }[kind]
    size = int(np.prod(shape))
    samples = [
        np.array(data.draw(st.lists(strategy, min_size=size, max_size=size)), dtype=object)
        .reshape(shape)
        .tolist()
        for _ in range(batch)
    ]
    expected = _expected_stack(samples)
    assert expected.dtype == {"bool": torch.bool, "int": torch.int64, "float": torch.float64}[kind]
    _same(default_collate([{"v": s} for s in samples])["v"], expected)
    # torch_default keeps torch's transposed lists
    torch_default = collators.get("torch_default").factory()
    _same(torch_default(samples), torch_collate(samples))


@settings(max_examples=15, deadline=None)
@given(
    dtype=st.sampled_from(list(ARROW_DTYPES)),
    dims=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple),
    fixed=st.booleans(),
    indices=st.lists(st.integers(0, 5), min_size=1, max_size=5),
)
def test_hf_routes_agree_over_shapes_and_dtypes(
    dtype: str, dims: tuple[int, ...], fixed: bool, indices: list[int]
) -> None:
    ds, values = _hf_lists(dtype, dims, fixed, rows=6)
    idx = np.asarray(indices, dtype=np.int64)
    expected = torch.from_numpy(_stacked(values[idx], dtype))
    routes = _paths(ds, idx)
    if not fixed and len(dims) > 1:  # nested variable lists: HF's formatted path only
        assert routes["arrow"] is None
        del routes["arrow"]
    for route, batch in routes.items():
        found = batches_differ(expected, batch["x"], route)
        assert found is None, found


# -- torch_default: exactly torch's default_collate --------------------------------------------


TORCH_SAMPLES: dict[str, list[Any]] = {
    "dicts of lists": [{"x": [1.0, 2.0], "y": 1, "s": "a"}, {"x": [3.0, 4.0], "y": 2, "s": "b"}],
    "tuples": [(torch.zeros(2), 1), (torch.ones(2), 2)],
    "nested": [{"a": [[1, 2], [3, 4]], "b": (True, 0.5)}] * 3,
    "numpy": [np.arange(3, dtype=np.int16), np.arange(3, dtype=np.int16)],
}


@pytest.mark.parametrize("name", list(TORCH_SAMPLES))
def test_torch_default_is_exactly_torch_default_collate(name: str) -> None:
    samples = TORCH_SAMPLES[name]
    torch_default = collators.get("torch_default").factory()
    _same(torch_default(samples), torch_collate(samples))


def test_torch_default_by_name_in_a_loader() -> None:
    entry = collators.get("torch_default")
    assert entry.origin == "builtin" and "default_collate" in entry.description
    ds = _issue_dataset()
    plan = DataLoaderBuilder().with_dataset(ds).with_batch_size(3).with_collator("torch_default")
    with plan.compile().build() as loader:
        batch = next(iter(loader))
    _same(batch, torch_collate([ds[i] for i in range(3)]))
    assert isinstance(batch["x"], list) and len(batch["x"]) == 4


def test_torch_default_errors_are_data_errors_naming_the_path() -> None:
    torch_default = collators.get("torch_default").factory()
    with pytest.raises(DataError, match=r"at \['x'\]: cannot stack Tensor values") as err:
        torch_default([{"x": torch.zeros(2)}, {"x": torch.zeros(3)}])
    assert err.value.collator == "torch_default"
    assert isinstance(err.value.__cause__, RuntimeError)
    bad = [{"x": [1.0, 2.0]}, {"x": [1.0]}]  # torch: "each element in list ... equal size"
    with pytest.raises(DataError, match=r"at \['x'\]: sample at batch position 1 has 1"):
        torch_default(bad)
    with pytest.raises(DataError, match="torch default_collate failed: IndexError"):
        torch_default([])
