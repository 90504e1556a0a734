"""Sources: uniform random access over every kind of dataset a plan accepts.

A source answers three questions for a batch of sample indices:

- ``sample(i)``: one sample, exactly what ``dataset[i]`` would give;
- ``samples(indices)``: the list of samples, fetched at once where the dataset can
  (``__getitems__``, HF's Arrow ``take``, column gathers);
- ``default_batch(indices)``: the batch ``default_collate(samples(indices))`` would make,
  computed column-wise without materializing samples, or ``None`` where that is not possible.
  This is the fast path: one gather per column instead of one ``__getitem__`` per sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import TensorDataset, default_collate

from loaderkit.plan.specs import DatasetSpec

__all__ = ["Source", "make_source"]

Indices = npt.NDArray[np.int64]


class Source:
    """Random access to samples; subclasses add batched paths."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def sample(self, index: int) -> Any:
        """The sample at ``index``."""
        return self.data[index]

    def samples(self, indices: Indices) -> list[Any]:
        """The samples at ``indices``, in order."""
        getitems = getattr(self.data, "__getitems__", None)
        if getitems is not None:
            return list(getitems(indices.tolist()))
        data = self.data
        return [data[i] for i in indices.tolist()]

    def default_batch(self, indices: Indices) -> Any | None:
        """``default_collate(self.samples(indices))`` computed column-wise, or ``None``."""
        return None


def _gather(column: Any, indices: Indices, index_tensor: torch.Tensor) -> Any:
    """One column's batch: a tensor gather, a numpy gather, or collate of the picked values."""
    if isinstance(column, torch.Tensor):
        return torch.index_select(column, 0, index_tensor)
    if isinstance(column, np.ndarray) and column.dtype.kind in "biufc":
        return torch.as_tensor(column[indices])
    return default_collate([column[i] for i in indices.tolist()])


def _can_gather(column: Any) -> bool:
    return isinstance(column, torch.Tensor) or (
        isinstance(column, np.ndarray) and column.dtype.kind in "biufc"
    )


class TensorsSource(Source):
    """A tuple of equal-length tensors/arrays: sample ``i`` is ``tuple(c[i] for c in cols)``."""

    def __init__(self, data: Sequence[Any]) -> None:
        super().__init__(tuple(data))
        self.fast = all(_can_gather(c) for c in self.data)

    def sample(self, index: int) -> Any:
        return tuple(c[index] for c in self.data)

    def samples(self, indices: Indices) -> list[Any]:
        cols = self.data
        return [tuple(c[i] for c in cols) for i in indices.tolist()]

    def default_batch(self, indices: Indices) -> Any | None:
        if not self.fast:
            return None
        index_tensor = torch.from_numpy(indices)
        # default_collate turns a batch of tuples into a list of stacked columns
        return [_gather(c, indices, index_tensor) for c in self.data]


class ColumnsSource(Source):
    """A dict of equal-length columns: sample ``i`` is ``{name: column[i]}``."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(dict(data))

    def sample(self, index: int) -> Any:
        return {k: c[index] for k, c in self.data.items()}

    def samples(self, indices: Indices) -> list[Any]:
        cols = self.data
        return [{k: c[i] for k, c in cols.items()} for i in indices.tolist()]

    def default_batch(self, indices: Indices) -> Any | None:
        index_tensor = torch.from_numpy(indices)
        return {k: _gather(c, indices, index_tensor) for k, c in self.data.items()}


class HFSource(Source):
    """An HF ``datasets.Dataset``: batches are one Arrow ``take`` (``ds[list]``)."""

    def samples(self, indices: Indices) -> list[Any]:
        return list(self.data.__getitems__(indices.tolist()))

    def default_batch(self, indices: Indices) -> Any | None:
        columns = self.data[indices.tolist()]
        n = len(indices)
        out = {}
        for key, value in columns.items():
            if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
                out[key] = value
            else:  # python objects or ragged rows: collate what default_collate would see
                out[key] = default_collate(list(value))
        return out


class TensorDatasetSource(TensorsSource):
    """A ``torch.utils.data.TensorDataset``, gathered through its tensors.

    Sample by sample it is exactly what ``TensorDataset.__getitem__`` gives.
    """

    def __init__(self, data: TensorDataset) -> None:
        super().__init__(data.tensors)


def make_source(data: Any, spec: DatasetSpec) -> Source:
    """The source for a bound dataset of the kind recorded in ``spec``."""
    if type(data) is TensorDataset:  # subclasses may override __getitem__: leave them alone
        return TensorDatasetSource(data)
    makers: dict[str, Callable[[Any], Source]] = {
        "tensors": TensorsSource,
        "columns": ColumnsSource,
        "hf": HFSource,
    }
    return makers.get(spec.kind, Source)(data)
