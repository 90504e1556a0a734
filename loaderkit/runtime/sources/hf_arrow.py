"""HF datasets: batches read straight from the Arrow table.

What :class:`~loaderkit.runtime.sources.access.HFSource` uses for its ``default_batch``: for one
state
of an HF ``datasets.Dataset`` (table, indices mapping, features, format), :class:`HFPlan` says
which output columns the Arrow path reproduces exactly, and :func:`arrow_batch` reads a batch
from it (a numpy gather from zero-copy views of number columns, an Arrow ``take`` for the
others) converted as HF's formatter followed by the ``default`` collator would.
:func:`hf_list_dtypes` gives the Arrow dtype of the list-of-numbers columns HF formats as
Python lists. ``datasets`` and ``pyarrow`` are imported only when an HF dataset is read.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import torch

__all__ = ["HFPlan", "arrow_batch", "hf_list_dtypes"]

Indices = npt.NDArray[np.int64]
"""Sample indices (or table rows), as :data:`loaderkit.runtime.sources.access.Indices`."""

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


class HFPlan:
    """The Arrow path for one state of an HF dataset: table, indices mapping, features, format.

    ``columns`` is ``None`` where the state has anything the Arrow path does not reproduce.
    """

    def __init__(self, ds: Any) -> None:
        self.columns: tuple[_HFColumn, ...] | None = None
        self.format: tuple[Any, ...] | None = None
        self.list_dtypes: dict[str, torch.dtype] | None = None
        """The state's list column dtypes (:func:`hf_list_dtypes`), read on first use."""
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


def hf_list_dtypes(ds: Any) -> dict[str, torch.dtype]:
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


def arrow_batch(plan: HFPlan, indices: Indices) -> dict[str, Any] | None:
    """The batch of ``indices`` read from the Arrow table of ``plan``'s state, or ``None``.

    ``None`` where reading from Arrow would not be exact (the caller then takes HF's path).
    """
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
