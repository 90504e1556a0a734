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
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import TensorDataset

from loaderkit.collators.default import default_collate
from loaderkit.order.mixture import source_of
from loaderkit.plan.specs import DatasetSpec

__all__ = ["MixtureSource", "Source", "make_source"]

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
        self._plan: _HFPlan | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_plan"] = None  # Arrow references and caches: rebuilt where the source lands
        return state

    def samples(self, indices: Indices) -> list[Any]:
        return list(self.data.__getitems__(indices.tolist()))

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
            plan.list_dtypes = _hf_list_dtypes(self.data)
        return plan.list_dtypes

    def _state_plan(self) -> _HFPlan:
        """The Arrow plan of the dataset's current state (made again when it changed)."""
        plan = self._plan
        if plan is None or not plan.describes(self.data):
            plan = self._plan = _HFPlan(self.data)
        return plan

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

    def _arrow_batch(self, indices: Indices) -> dict[str, Any] | None:
        """The batch read from the Arrow table, or ``None`` where that is not exact."""
        plan = self._state_plan()
        if plan.columns is None or len(indices) == 0:
            return None
        if int(indices.min()) < 0 or int(indices.max()) >= plan.length:
            return None  # HF wraps negative indices and raises on others: let it
        rows = indices
        if plan.mapping is not None:
            mapped = _hf_gather(plan.mapping, indices)
            if mapped is None:
                taken = _hf_take(plan.mapping, indices)
                if taken.null_count:
                    return None
                mapped = taken.to_numpy(zero_copy_only=False)
            if int(mapped.max()) >= plan.table_rows:
                return None
            rows = mapped.astype(np.int64)
        out = {}
        for column in plan.columns:
            chunks = plan.chunks[column.name]
            numbers = None if chunks.dims is None else _hf_gather(chunks, rows)
            if numbers is not None:
                value = _hf_numbers(numbers, column.style)
            else:
                value = _hf_collated(_hf_take(chunks, rows), column)
                if value is None:
                    return None
            out[column.name] = value
        return out


# -- HF datasets: batches straight from Arrow -------------------------------------------------

# the format types whose batches are reproduced from Arrow, and the formatter each one uses
_HF_STYLES: dict[str | None, str] = {
    None: "python",
    "python": "python",
    "numpy": "numpy",
    "torch": "torch",
}


class _HFColumn(NamedTuple):
    """How one output column of an HF batch is made from its Arrow values."""

    name: str
    style: str  # the formatter making its samples: "python", "numpy" or "torch"
    kind: str  # "number" (numbers in nested fixed-size lists), "ragged" (a list) or "text"
    dims: tuple[int, ...]  # the fixed-size list lengths of a "number" column, outermost first


class _HFChunks:
    """A chunked Arrow column: its chunks, where each starts, numpy views of their numbers.

    ``dims`` is ``None`` for columns that are not fixed-shape numbers; otherwise the fixed-size
    list lengths, and ``views`` holds, chunk by chunk as batches touch them, a zero-copy
    ``(rows, *dims)`` view of the chunk's numbers, or ``None`` where it has none to give
    (nulls, bit-packed bools).
    """

    def __init__(self, column: Any, dims: tuple[int, ...] | None) -> None:
        self.arrays: list[Any] = list(column.chunks)
        self.starts = np.zeros(len(self.arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in self.arrays], out=self.starts[1:])
        self.dims = dims
        self.views: dict[int, npt.NDArray[Any] | None] = {}

    def view(self, chunk: int) -> npt.NDArray[Any] | None:
        """The numpy view of chunk ``chunk``'s numbers, or ``None``."""
        if chunk not in self.views:
            self.views[chunk] = (
                None if self.dims is None else _hf_view(self.arrays[chunk], self.dims)
            )
        return self.views[chunk]


def _hf_format(ds: Any) -> tuple[Any, ...]:
    columns = ds._format_columns
    return (
        ds._format_type,
        None if columns is None else tuple(columns),
        bool(ds._output_all_columns),
        bool(ds._format_kwargs),
    )


class _HFPlan:
    """The Arrow path for one state of an HF dataset: table, indices mapping, features, format.

    ``columns`` is ``None`` where the state has anything the Arrow path does not reproduce.
    """

    def __init__(self, ds: Any) -> None:
        self.columns: tuple[_HFColumn, ...] | None = None
        self.format: tuple[Any, ...] | None = None
        self.list_dtypes: dict[str, torch.dtype] | None = None
        """The state's list column dtypes (:func:`_hf_list_dtypes`), read on first use."""
        try:
            self.data, self.indices, self.features = ds._data, ds._indices, ds._info.features
            self.format = _hf_format(ds)
        except AttributeError:  # not the datasets.Dataset this was written against
            return
        table = self.data.table
        self.table_rows = int(table.num_rows)
        self.length = self.table_rows if self.indices is None else int(self.indices.num_rows)
        self.mapping = None if self.indices is None else _HFChunks(self.indices.column(0), ())
        columns = _hf_columns(table, self.features, *self.format)
        if columns:
            self.chunks = {
                c.name: _HFChunks(table.column(c.name), c.dims if c.kind == "number" else None)
                for c in columns
            }
            self.columns = tuple(columns)

    def describes(self, ds: Any) -> bool:
        """Whether ``ds`` is still in the state this plan was made for."""
        try:
            return (
                self.format is not None
                and ds._data is self.data
                and ds._indices is self.indices
                and ds._info.features is self.features
                and _hf_format(ds) == self.format
            )
        except AttributeError:
            return False


def _hf_columns(
    table: Any,
    features: Any,
    format_type: str | None,
    format_columns: tuple[str, ...] | None,
    output_all_columns: bool,
    format_kwargs: bool,
) -> list[_HFColumn] | None:
    """The output columns of a batch in order (as ``format_table`` makes them), or ``None``."""
    style = _HF_STYLES.get(format_type)
    if style is None or format_kwargs or not _hf_stock_formatter(format_type, style, features):
        return None
    names = list(table.column_names)
    if len(set(names)) != len(names):
        return None
    if format_columns is None:
        wanted = [(name, style) for name in names]
    else:  # formatted columns in table order, then (as python objects) the others
        wanted = [(name, style) for name in names if name in format_columns]
        if output_all_columns:
            wanted += [(name, "python") for name in names if name not in format_columns]
    columns = []
    for name, column_style in wanted:
        if features is None or name not in features or not _hf_plain_feature(features[name]):
            return None
        kind = _hf_kind(table.schema.field(name).type, column_style)
        if kind is None:
            return None
        columns.append(_HFColumn(name, column_style, *kind))
    return columns or None


def _hf_stock_formatter(format_type: str | None, style: str, features: Any) -> bool:
    """Whether HF formats ``format_type`` with its own formatter (not a re-registered one)."""
    from datasets.formatting import get_formatter
    from datasets.formatting.formatting import PythonFormatter
    from datasets.formatting.np_formatter import NumpyFormatter
    from datasets.formatting.torch_formatter import TorchFormatter

    expected = {"python": PythonFormatter, "numpy": NumpyFormatter, "torch": TorchFormatter}
    try:
        return type(get_formatter(format_type, features=features)) is expected[style]
    except Exception:  # noqa: BLE001 - any failure means "not the formatter we know"
        return False


def _hf_plain_feature(feature: Any) -> bool:
    """Whether a feature is plain data (values, class labels, lists of them): nothing decodes."""
    import datasets
    from datasets.features.features import require_decoding

    if type(feature) in (datasets.List, datasets.LargeList):
        return _hf_plain_feature(feature.feature)
    return type(feature) in (datasets.Value, datasets.ClassLabel) and not require_decoding(feature)


def _pyarrow() -> Any:
    """The ``pyarrow`` module (imported only for HF datasets, which depend on it)."""
    import pyarrow

    return pyarrow


def _hf_kind(arrow_type: Any, style: str) -> tuple[str, tuple[int, ...]] | None:
    """``(kind, dims)`` of a column of ``arrow_type`` made by the ``style`` formatter, or None."""
    types = _pyarrow().types
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        return "text", ()
    if types.is_binary(arrow_type) or types.is_large_binary(arrow_type):
        return "text", ()
    dims = []
    while types.is_fixed_size_list(arrow_type):
        if arrow_type.list_size <= 0:
            return None
        dims.append(int(arrow_type.list_size))
        arrow_type = arrow_type.value_type
    kind = "number"
    if not dims and (types.is_list(arrow_type) or types.is_large_list(arrow_type)):
        kind, arrow_type = "ragged", arrow_type.value_type
    if types.is_boolean(arrow_type) or types.is_floating(arrow_type):
        pass
    elif not types.is_integer(arrow_type) or types.is_uint64(arrow_type):
        return None  # uint64 has no torch counterpart HF converts it to exactly
    if style == "python" and types.is_float16(arrow_type) and not _hf_half_as_float():
        return None  # older pyarrow gives numpy float16 scalars, which collate to float16
    return kind, tuple(dims)


def _hf_half_as_float() -> bool:
    pa = _pyarrow()
    try:
        return type(pa.array([0.5], pa.float16())[0].as_py()) is float
    except Exception:  # noqa: BLE001 - no float16 from Python floats: do not guess
        return False


def _hf_view(array: Any, dims: tuple[int, ...]) -> npt.NDArray[Any] | None:
    """A zero-copy ``(len(array), *dims)`` view of the numbers of ``array``, or ``None``."""
    leaf = array
    for _ in dims:
        if leaf.null_count:
            return None
        leaf = leaf.flatten()
    if leaf.null_count or _pyarrow().types.is_boolean(leaf.type):
        return None
    try:
        values: npt.NDArray[Any] = leaf.to_numpy(zero_copy_only=True)
    except Exception:  # noqa: BLE001 - no zero-copy view: take the Arrow route
        return None
    shape = (len(array), *dims)
    if values.size != int(np.prod(shape)):
        return None
    return values.reshape(shape)


def _hf_locate(column: _HFChunks, rows: Indices) -> tuple[Indices, Indices]:
    """The chunk of each row and its position in that chunk."""
    chunk = np.searchsorted(column.starts, rows, side="right") - 1
    return chunk, rows - column.starts[chunk]


def _hf_gather(column: _HFChunks, rows: Indices) -> npt.NDArray[Any] | None:
    """The numbers of rows ``rows`` of a fixed-shape number column, or ``None``."""
    if len(column.arrays) == 1:
        view = column.view(0)
        return None if view is None else view[rows]
    chunk, local = _hf_locate(column, rows)
    touched = np.unique(chunk).tolist()
    views = [v for v in (column.view(c) for c in touched) if v is not None]
    if len(views) < len(touched) or any(v.dtype != views[0].dtype for v in views):
        return None
    out = np.empty((len(rows), *views[0].shape[1:]), dtype=views[0].dtype)
    if 4 * len(touched) <= len(rows):  # many rows per chunk: one gather per chunk
        order = np.argsort(chunk, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(chunk[order])) + 1)
        for view, where in zip(views, groups, strict=True):  # both by ascending chunk
            out[where] = view[local[where]]
    else:  # about one row per chunk: row by row
        by_chunk = dict(zip(touched, views, strict=True))
        for j, (c, i) in enumerate(zip(chunk.tolist(), local.tolist(), strict=True)):
            out[j] = by_chunk[c][i]
    return out


def _hf_take(column: _HFChunks, rows: Indices) -> Any:
    """The rows ``rows`` of a chunked column, as one Arrow array.

    ``ChunkedArray.take`` concatenates every chunk first (a copy of the column per batch);
    with several chunks, one-row slices of the chunks are concatenated instead.
    """
    if len(column.arrays) == 1:
        return column.arrays[0].take(rows)
    chunk, local = _hf_locate(column, rows)
    arrays = column.arrays
    return _pyarrow().concat_arrays(
        [arrays[c].slice(i, 1) for c, i in zip(chunk.tolist(), local.tolist(), strict=True)]
    )


def _hf_collated(array: Any, column: _HFColumn) -> Any | None:
    """``default_collate`` of the samples HF formats from ``array``, or ``None``."""
    if array.null_count:
        return None  # nulls become None, NaN or object arrays depending on the formatter
    if column.kind == "text":
        values = array.to_pylist()
        if column.style == "python":
            return values
        # HF's numpy extraction makes a str_/bytes_ array (dropping trailing NULs); the torch
        # formatter turns it back into Python objects, the numpy one keeps numpy scalars
        as_numpy = np.asarray(values)
        return as_numpy.tolist() if column.style == "torch" else list(as_numpy)
    shape = [len(array), *column.dims]
    for _ in column.dims:
        array = array.flatten()
        if array.null_count:
            return None
    if column.kind == "ragged":
        lengths = np.diff(array.offsets.to_numpy(zero_copy_only=False))
        width = int(lengths[0])
        if width == 0 or bool((lengths != width).any()):
            return None  # empty or ragged rows: HF's path says what default_collate does
        shape.append(width)
        array = array.flatten()
        if array.null_count:
            return None
    return _hf_numbers(array.to_numpy(zero_copy_only=False).reshape(shape), column.style)


def _hf_numbers(values: npt.NDArray[Any], style: str) -> Any:
    """The collated batch of numbers ``values`` (samples along axis 0) in the ``style`` format."""
    kind = values.dtype.kind
    if style == "torch":  # TorchFormatter._tensorize: torch.tensor, to int64 / float32
        if kind == "f":
            return torch.tensor(values, dtype=torch.float32)
        return torch.tensor(np.asarray(values, dtype=np.int64) if kind in "iu" else values)
    if style == "numpy":  # NumpyFormatter._tensorize: np.asarray, to int64 / float32
        target: type[np.generic] = np.float32 if kind == "f" else np.int64
        return torch.tensor(values if kind == "b" else np.asarray(values, dtype=target))
    # python: ints, floats and bools, which the default collator makes int64, float64 and
    # bool tensors; lists of them one [batch, ...] tensor, in the column's Arrow dtype
    if values.ndim > 1:
        return torch.tensor(np.asarray(values, dtype=_hf_list_dtype(values.dtype)))
    target = np.float64 if kind == "f" else np.int64
    return torch.tensor(values if kind == "b" else np.asarray(values, dtype=target))


_WIDER_UNSIGNED = {2: np.int32, 4: np.int64}
"""uint16 and uint32, whose torch tensors lack most operations, widen to a signed dtype."""


def _hf_list_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The numpy dtype of a batch of Python-formatted list rows of Arrow dtype ``dtype``."""
    if dtype.kind == "u" and dtype.itemsize in _WIDER_UNSIGNED:
        return np.dtype(_WIDER_UNSIGNED[dtype.itemsize])
    return dtype


def _hf_list_dtypes(ds: Any) -> dict[str, torch.dtype]:
    """The dtype of each list-of-numbers column HF formats as Python lists (the Arrow rule).

    Those are the columns of the stock python formatter without format kwargs, and the columns
    left out of the format's columns with ``output_all_columns`` (HF formats them with its
    python formatter, whatever the format or transform); a transform's output has no dtype.
    """
    pa = _pyarrow()
    try:
        format_type, format_columns, output_all, kwargs = _hf_format(ds)
        features, schema = ds._info.features, ds._data.table.schema
    except AttributeError:
        return {}
    if features is None:
        return {}
    style = _HF_STYLES.get(format_type)
    stock_python = (
        style == "python" and not kwargs and _hf_stock_formatter(format_type, style, features)
    )
    out = {}
    for name in schema.names:
        formatted = format_columns is None or name in format_columns
        python = stock_python if formatted else output_all
        feature = features.get(name)
        if not python or feature is None or not _hf_plain_feature(feature):
            continue
        arrow_type = schema.field(name).type
        depth = 0
        while (
            pa.types.is_list(arrow_type)
            or pa.types.is_large_list(arrow_type)
            or (pa.types.is_fixed_size_list(arrow_type))
        ):
            arrow_type, depth = arrow_type.value_type, depth + 1
        numeric = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
        if depth == 0 or not (numeric or pa.types.is_boolean(arrow_type)):
            continue
        if pa.types.is_uint64(arrow_type):
            continue  # no torch dtype holds it: Python's int64 rule (overflow is an error)
        dtype = _hf_list_dtype(np.dtype(arrow_type.to_pandas_dtype()))
        out[name] = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
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
