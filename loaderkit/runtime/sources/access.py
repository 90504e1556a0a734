"""Sources: uniform random access over every kind of dataset a plan accepts.

A source answers three questions for a batch of sample indices:

- ``sample(i)``: one sample, exactly what ``dataset[i]`` would give;
- ``samples(indices)``: the list of samples, fetched at once where the dataset can
  (``__getitems__``, HF's Arrow ``take``, column gathers);
- ``default_batch(indices)``: the batch the ``default`` collator would make of
  ``samples(indices)``, computed column-wise without materializing samples, or ``None`` where
  that is not possible. This is the fast path: one gather per column instead of one
  ``__getitem__`` per sample. For HF datasets, list columns of numbers formatted as Python
  lists keep their Arrow dtype (see :class:`HFSource`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import TensorDataset

from loaderkit.collators.default import default_collate
from loaderkit.order.mixture import source_of
from loaderkit.plan.specs import DatasetSpec
from loaderkit.runtime.sources.hf_arrow import HFPlan, arrow_batch, hf_list_dtypes

__all__ = ["MixtureSource", "Source", "dataset_source"]

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
        """The ``default`` collator's batch of ``self.samples(indices)``, or ``None``."""
        return None

    def gathers(self) -> bool:
        """Whether :meth:`default_batch` is a vectorized gather that runs no code of the user's.

        Such a batch costs less to read than to send from a worker process (pickling it,
        the pipe, unpickling it in the main process), so the loader reads it in the main
        process (see ``Loader.workers_unused``).
        """
        return False

    def list_dtypes(self) -> dict[str, torch.dtype]:
        """The dtype the ``default`` collator's batch gives each list column (none: its rule).

        HF datasets keep a list column's Arrow dtype; sample-by-sample paths (a cache, the
        skip policy) cast to it so that they give what :meth:`default_batch` gives.
        """
        return {}

    def epoch_hooks(self) -> list[Callable[[int], Any]]:
        """The ``set_epoch`` methods of the datasets behind this source."""
        hook = getattr(self.data, "set_epoch", None)
        return [hook] if callable(hook) else []

    def locate(self, index: int) -> str:
        """Where sample ``index`` comes from, for error messages (``""``: nothing to add)."""
        return ""


def _gather(column: Any, indices: Indices, index_tensor: torch.Tensor) -> Any:
    """One column's batch: a tensor gather, a numpy gather, or collate of the picked values."""
    if isinstance(column, torch.Tensor):
        return torch.index_select(column, 0, index_tensor)
    if isinstance(column, np.ndarray) and column.dtype.kind in "biufc":
        return torch.as_tensor(column[indices])
    return default_collate([column[i] for i in indices.tolist()])  # the default collator's


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

    def gathers(self) -> bool:
        return self.fast

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

    def gathers(self) -> bool:
        return all(_can_gather(c) for c in self.data.values())

    def default_batch(self, indices: Indices) -> Any | None:
        index_tensor = torch.from_numpy(indices)
        return {k: _gather(c, indices, index_tensor) for k, c in self.data.items()}


class HFSource(Source):
    """An HF ``datasets.Dataset``.

    ``default_batch`` reads the dataset's Arrow table directly (a numpy gather from zero-copy
    views of number columns, an Arrow ``take`` for the others; rows mapped through the indices
    mapping that ``select``/``shuffle``/``filter`` leave) and converts each column the way HF's
    formatter for the dataset's format (python, numpy, torch) followed by the ``default``
    collator would, with one rule added: a list column of numbers (fixed-size, nested, or
    ``List`` rows of one length in the batch) formatted as Python lists becomes one
    ``[batch, ...]`` tensor of the column's Arrow dtype (uint16 and uint32, which torch barely
    supports, widen to int32 and int64), not the float64/int64 of Python numbers. Whatever it
    cannot prove identical (a custom transform, format kwargs, features that decode, nulls,
    types beyond numbers, strings and lists of numbers, ragged lists) takes HF's own path: one
    formatted ``ds[list]``, to which the same dtype rule applies.
    """

    def __init__(self, data: Any) -> None:
        super().__init__(data)
        self._plan: HFPlan | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_plan"] = None  # Arrow references and caches: rebuilt where the source lands
        return state

    def samples(self, indices: Indices) -> list[Any]:
        return list(self.data.__getitems__(indices.tolist()))

    def gathers(self) -> bool:
        """Whether the Arrow path reads this dataset's batches.

        Not with a feature that decodes, a custom transform or formatter (see the class).
        """
        return self._state_plan().columns is not None

    def default_batch(self, indices: Indices) -> Any | None:
        try:
            batch = self._arrow_batch(indices)
        except Exception:  # noqa: BLE001 - Arrow data this path did not foresee: HF's path
            batch = None
        if batch is not None:
            return batch
        return self._formatted_batch(indices)

    def list_dtypes(self) -> dict[str, torch.dtype]:
        """The Arrow dtype of each list-of-numbers column HF formats as Python lists.

        Read once per state of the dataset (its format, features, table), not per batch.
        """
        plan = self._state_plan()
        if plan.list_dtypes is None:
            plan.list_dtypes = hf_list_dtypes(self.data)
        return plan.list_dtypes

    def _state_plan(self) -> HFPlan:
        """The Arrow plan of the dataset's current state (made again when it changed)."""
        plan = self._plan
        if plan is None or not plan.describes(self.data):
            plan = self._plan = HFPlan(self.data)
        return plan

    def _arrow_batch(self, indices: Indices) -> dict[str, Any] | None:
        """The batch read from the Arrow table (:func:`arrow_batch`), or ``None``."""
        return arrow_batch(self._state_plan(), indices)

    def _formatted_batch(self, indices: Indices) -> dict[str, Any]:
        """The batch through HF's formatted ``ds[list]``, collated column by column."""
        columns = self.data[indices.tolist()]
        dtypes = self.list_dtypes()
        n = len(indices)
        out = {}
        for key, value in columns.items():
            if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
                out[key] = value
                continue
            # python objects or ragged rows: collate what the default collator would see
            batch = default_collate([{key: row} for row in value])[key]
            dtype = dtypes.get(key)
            if dtype is not None and isinstance(batch, torch.Tensor) and batch.ndim >= 2:
                batch = batch.to(dtype)  # exact: the Python numbers came from this dtype
            out[key] = batch
        return out


class TensorDatasetSource(TensorsSource):
    """A ``torch.utils.data.TensorDataset``, gathered through its tensors.

    Sample by sample it is exactly what ``TensorDataset.__getitem__`` gives.
    """

    def __init__(self, data: TensorDataset) -> None:
        super().__init__(data.tensors)


def dataset_source(data: Any, spec: DatasetSpec) -> Source:
    """The source for a bound dataset of the kind recorded in ``spec``."""
    if type(data) is TensorDataset:  # subclasses may override __getitem__: leave them alone
        return TensorDatasetSource(data)
    makers: dict[str, Callable[[Any], Source]] = {
        "tensors": TensorsSource,
        "columns": ColumnsSource,
        "hf": HFSource,
    }
    return makers.get(spec.kind, Source)(data)


class MixtureSource(Source):
    """Several sources read as their concatenation (a mixture's global index space).

    Source ``s`` sample ``i`` is global index ``offsets[s] + i``. Batches are fetched per
    source (each through its own batched path) and put back in request order.
    """

    def __init__(self, parts: Sequence[Source], names: Sequence[str], sizes: Sequence[int]) -> None:
        super().__init__([p.data for p in parts])
        self.parts = list(parts)
        self.names = list(names)
        self.sizes = list(sizes)
        self.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(np.asarray(sizes, dtype=np.int64), out=self.offsets[1:])

    def source_ids(self, indices: Indices) -> npt.NDArray[np.int64]:
        """The source of every global index."""
        return source_of(indices, self.sizes)

    def sample(self, index: int) -> Any:
        """The sample at global ``index``."""
        s = int(self.source_ids(np.asarray([index], dtype=np.int64))[0])
        return self.parts[s].sample(index - int(self.offsets[s]))

    def samples(self, indices: Indices) -> list[Any]:
        """The samples at global ``indices``, fetched source by source, in request order."""
        ids = self.source_ids(indices)
        out: list[Any] = [None] * len(indices)
        for s in np.unique(ids).tolist():
            where = np.flatnonzero(ids == s)
            got = self.parts[s].samples(indices[where] - self.offsets[s])
            for position, sample in zip(where.tolist(), got, strict=True):
                out[position] = sample
        return out

    def default_batch(self, indices: Indices) -> Any | None:
        """The column-wise batch when all samples come from one source, else ``None``."""
        ids = self.source_ids(indices)
        if len(ids) == 0 or bool((ids != ids[0]).any()):
            return None
        s = int(ids[0])
        return self.parts[s].default_batch(indices - self.offsets[s])

    def epoch_hooks(self) -> list[Callable[[int], Any]]:
        """Every source's ``set_epoch``."""
        return [hook for part in self.parts for hook in part.epoch_hooks()]

    def locate(self, index: int) -> str:
        """``" (source 'code', its sample 12)"``."""
        s = int(self.source_ids(np.asarray([index], dtype=np.int64))[0])
        return f" (source {self.names[s]!r}, its sample {index - int(self.offsets[s])})"
