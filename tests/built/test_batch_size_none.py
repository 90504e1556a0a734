"""Issue 21: ``with_batch_size(None)`` is torch's ``DataLoader(batch_size=None)``.

Automatic batching off: each sample is delivered on its own, converted by
``torch.utils.data.default_convert``, without a batch dimension. Every expectation here is
what the real ``DataLoader(batch_size=None)`` yields on the same data, with the same number of
workers; the comparison is exact, types, dtypes and shapes included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from loaderkit import DataLoaderBuilder, LoaderPlan

pytestmark = pytest.mark.timeout(120)

N = 6


def _rows(make: Callable[[int], Any]) -> list[Any]:
    return [make(i) for i in range(N)]


# each case: (what loaderkit is given, the same samples as a torch map-style dataset)
CASES: dict[str, Callable[[], tuple[object, object]]] = {
    "ints": lambda: (list(range(N)), list(range(N))),
    "tuples": lambda: (_rows(lambda i: (i, i / 2)),) * 2,
    "tuples of numpy": lambda: (_rows(lambda i: (np.arange(i, i + 3), np.float32(i))),) * 2,
    "dicts": lambda: (_rows(lambda i: {"x": np.full(2, i), "y": i, "name": f"s{i}"}),) * 2,
    "numpy arrays": lambda: (_rows(lambda i: np.arange(4, dtype=np.float64) * i),) * 2,
    "tensor dataset": lambda: (TensorDataset(torch.arange(N), torch.ones(N, 2)),) * 2,
    "dict of columns": lambda: (
        {"x": list(range(N)), "y": [i / 4 for i in range(N)]},
        [{"x": i, "y": i / 4} for i in range(N)],
    ),
    "numpy columns": lambda: (
        (np.arange(N), np.arange(N, dtype=np.float32)),
        [(np.arange(N)[i], np.arange(N, dtype=np.float32)[i]) for i in range(N)],
    ),
}


def assert_same(got: Any, want: Any, where: str = "sample") -> None:
    """``got`` is ``want``: same types all the way down, tensors equal in dtype and shape."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype, f"{where}: {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{where}: {tuple(got.shape)} != {tuple(want.shape)}"
        assert torch.equal(got, want), f"{where}: {got} != {want}"
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), f"{where}: {len(got)} items != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_each_sample_is_what_torch_batch_size_none_yields(case: str, workers: int) -> None:
    ours, theirs = CASES[case]()
    want = list(DataLoader(theirs, batch_size=None, num_workers=workers))  # type: ignore[arg-type]
    builder = DataLoaderBuilder().with_dataset(ours).with_batch_size(None)
    if workers:
        builder = builder.with_workers(workers, persistent=False)
    with builder.build() as loader:
        assert len(loader) == len(want) == N
        got = list(loader)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, f"sample {i}")


def test_a_saved_plan_without_batching_builds_the_same_loader(tmp_path: Any) -> None:
    rows = [{"x": np.full(2, i), "y": i} for i in range(N)]
    plan = DataLoaderBuilder().with_dataset(rows, name="rows").with_batch_size(None).compile()
    plan.save(tmp_path / "plan.toml")
    again = LoaderPlan.load(tmp_path / "plan.toml", bindings={"rows": rows})
    want = list(DataLoader(rows, batch_size=None))  # type: ignore[arg-type]
    with again.build() as loader:
        for i, (a, b) in enumerate(zip(loader, want, strict=True)):
            assert_same(a, b, f"sample {i}")


class Stream(IterableDataset[Any]):
    """An iterable source of ``(i, numpy row)`` pairs."""

    def __iter__(self) -> Iterator[Any]:
        return iter([(i, np.arange(3) + i) for i in range(N)])


def test_a_stream_without_batching_is_what_torch_yields() -> None:
    want = list(DataLoader(Stream(), batch_size=None))
    with DataLoaderBuilder().with_dataset(Stream()).with_batch_size(None).build() as loader:
        got = list(loader)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, f"element {i}")


def test_a_mixture_source_id_has_no_batch_dimension_either() -> None:
    sources = {"a": [{"x": i} for i in range(3)], "b": [{"x": 10 + i} for i in range(2)]}
    builder = DataLoaderBuilder().with_mixture(sources, mode="sequential", source_key="source")
    with builder.with_batch_size(None).build() as loader:
        got = list(loader)
    assert [(s["x"], s["source"]) for s in got] == [(0, 0), (1, 0), (2, 0), (10, 1), (11, 1)]
    for sample in got:
        assert_same(sample["source"], torch.tensor(sample["source"].item()), "source id")
