"""The vectorized core of the text collators: rows gathered once, padded by one scatter.

A group of sequences (one key of a batch) is turned into one padded ``(B, L)`` tensor in one
vectorized step: :func:`gather` concatenates the rows once (``np.fromiter`` over all the
Python ints of the batch, or one ``np.concatenate`` / ``torch.cat``) after truncation,
:func:`layout` computes each row's kept length, the padded width and the ``(B, L)`` mask of
real tokens (``arange(L) < lengths[:, None]``, mirrored for left padding), and
:func:`scatter` allocates the output once and writes the rows through the mask. Dtypes are
kept: an ``int32`` array stays ``int32``; Python ints become ``int64`` (bools ``bool``, floats
``float32``, as ``torch.tensor`` would make them). Used by :mod:`loaderkit.collators.text`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from loaderkit.collators.base import data_error
from loaderkit.errors import DataError

if TYPE_CHECKING:
    import torch

__all__ = ["Flat", "Layout", "gather", "is_sequence", "layout", "scatter"]

Flat = Any  # np.ndarray, or a torch.Tensor whose dtype/device numpy cannot hold
"""A group's rows concatenated: a numpy array, or a tensor numpy cannot hold."""


class Layout(NamedTuple):
    """Where a group of sequences sits in its padded ``(B, width)`` block."""

    lengths: npt.NDArray[np.int64]
    """Kept length of each row (after truncation)."""
    width: int
    mask: npt.NDArray[np.bool_]
    """``(B, width)``: True at real tokens."""


def _shape_of(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return str(tuple(shape))
    try:
        array = np.asarray(value, dtype=object)
    except Exception:  # noqa: BLE001 - only for the message
        return "unknown"
    if array.ndim == 1 and any(isinstance(x, list | tuple | np.ndarray) for x in array):
        return f"({len(array)}, ...) (a ragged nested list)"
    return str(array.shape)


def _not_1d(collator: str, key: str, position: int, value: Any) -> DataError:
    return data_error(
        collator,
        f"{key!r} at batch position {position} has shape {_shape_of(value)}; sequences must be "
        f"1-d (a list of numbers, a 1-d array or a 1-d tensor)",
    )


def _list_dtype(rows: Sequence[Any]) -> type[np.generic]:
    """int64 for Python ints, bool for bools, float32 for floats (what torch.tensor makes).

    Decided by the type of the first element of each row.
    """
    types = {type(row[0]) for row in rows if len(row)}
    if types <= {int}:  # the common case, and a batch of empty rows
        return np.int64
    if all(issubclass(t, bool | np.bool_) for t in types):
        return np.bool_
    if all(issubclass(t, int | np.integer) for t in types):
        return np.int64
    return np.float32


def _diagnose_lists(rows: Sequence[Any], key: str, collator: str, exc: Exception) -> DataError:
    for position, row in enumerate(rows):
        try:
            array = np.asarray(row)
        except Exception:  # noqa: BLE001 - ragged nested lists cannot become arrays
            return _not_1d(collator, key, position, row)
        if array.ndim != 1:
            return _not_1d(collator, key, position, row)
        if array.dtype.kind not in "biuf":
            return data_error(
                collator,
                f"{key!r} at batch position {position} holds {array.dtype} values, not numbers",
            )
    return data_error(collator, f"{key!r} could not be converted: {type(exc).__name__}: {exc}")


def _truncate(row: Any, max_length: int, side: str) -> Any:
    if len(row) <= max_length:
        return row
    return row[:max_length] if side == "right" else row[len(row) - max_length :]


def gather(
    rows: Sequence[Any], key: str, collator: str, max_length: int | None, side: str
) -> tuple[Flat, npt.NDArray[np.int64]]:
    """Concatenate the (truncated) rows of one key; also return the rows' full lengths.

    The result is a numpy array (lists of Python numbers are converted in one ``np.fromiter``
    call), or a torch tensor when the rows are tensors numpy cannot hold (bfloat16, CUDA).
    """
    import torch

    if all(isinstance(r, (list, tuple)) for r in rows):  # a tuple: faster than a union
        kind = "list"
    elif all(isinstance(r, torch.Tensor) for r in rows):
        kind = "tensor"
    elif all(isinstance(r, np.ndarray) for r in rows):
        kind = "array"
    else:
        kind = "mixed"
        converted: list[Any] = []
        for position, row in enumerate(rows):
            if isinstance(row, torch.Tensor):
                converted.append(row.detach().cpu().numpy())
            elif isinstance(row, np.ndarray):
                converted.append(row)
            elif isinstance(row, list | tuple):
                try:
                    converted.append(np.asarray(row) if len(row) else None)  # typed below
                except ValueError:  # a ragged nested list
                    raise _not_1d(collator, key, position, row) from None
            else:
                raise data_error(
                    collator,
                    f"{key!r} at batch position {position} is a {type(row).__name__}, not a "
                    f"sequence (a list of numbers, a 1-d array or a 1-d tensor)",
                )
        typed = next((r.dtype for r in converted if r is not None and r.ndim == 1), np.int64)
        rows = [np.empty(0, dtype=typed) if r is None else r for r in converted]
    if kind == "list":
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    else:
        for position, row in enumerate(rows):
            if row.ndim != 1:
                raise _not_1d(collator, key, position, row)
        lengths = np.array([r.shape[0] for r in rows], dtype=np.int64)
    kept = rows
    if max_length is not None and len(lengths) and int(lengths.max()) > max_length:
        kept = [_truncate(r, max_length, side) for r in rows]
    if kind == "tensor":
        flat_t = torch.cat(list(kept))
        try:
            return flat_t.numpy(), lengths
        except (TypeError, RuntimeError):  # bfloat16, CUDA, ...: stay in torch
            return flat_t, lengths
    if kind in ("array", "mixed"):
        flat = np.concatenate(kept)
        if flat.dtype.kind not in "biuf":
            position = next(i for i, r in enumerate(rows) if r.dtype.kind not in "biuf")
            raise data_error(
                collator,
                f"{key!r} at batch position {position} holds {rows[position].dtype} values, "
                f"not numbers",
            )
        return flat, lengths
    total = int(np.minimum(lengths, max_length).sum()) if max_length else int(lengths.sum())
    try:
        flat = np.fromiter(
            itertools.chain.from_iterable(kept), dtype=_list_dtype(kept), count=total
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise _diagnose_lists(rows, key, collator, exc) from exc
    return flat, lengths


def layout(
    lengths: npt.NDArray[np.int64],
    *,
    max_length: int | None,
    to_max_length: bool,
    multiple: int | None,
    side: str,
) -> Layout:
    """The padded width and the real-token mask of rows of full ``lengths``."""
    kept = lengths if max_length is None else np.minimum(lengths, max_length)
    if to_max_length and max_length is not None:
        width = max_length
    else:
        width = int(kept.max()) if len(kept) else 0
    if multiple is not None and width % multiple:
        width += multiple - width % multiple
    # the narrowest integer type that holds the width: the (B, width) comparison is the
    # costliest step of the layout, and int16 makes it ~4x cheaper than int64
    small: type[np.signedinteger[Any]] = (
        np.int16 if width < 2**15 else np.int32 if width < 2**31 else np.int64
    )
    columns: npt.NDArray[np.signedinteger[Any]] = np.arange(width, dtype=small)
    if side == "right":
        mask = columns < kept.astype(small)[:, None]
    else:
        mask = columns >= (width - kept).astype(small)[:, None]
    return Layout(kept, width, mask)


def _check_pad_fits(pad: int, dtype: np.dtype[Any], key: str, collator: str) -> None:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= pad <= info.max:
            raise data_error(
                collator,
                f"cannot pad {key!r} ({dtype}) with {pad}: out of the dtype's range "
                f"[{info.min}, {info.max}]; give the sequences a wider dtype or set "
                f"pad_values={{{key!r}: ...}}",
            )
    elif dtype.kind == "b" and pad not in (0, 1):
        raise data_error(collator, f"cannot pad {key!r} (bool) with {pad}; use 0 or 1")


def scatter(flat: Flat, where: Layout, pad: int, key: str, collator: str) -> torch.Tensor:
    """The ``(B, width)`` tensor: ``pad`` everywhere, the rows of ``flat`` where ``mask`` is."""
    import torch

    rows = where.mask.shape[0]
    if isinstance(flat, np.ndarray):
        _check_pad_fits(pad, flat.dtype, key, collator)
        shape = (rows, where.width)
        out = np.zeros(shape, flat.dtype) if pad == 0 else np.full(shape, pad, flat.dtype)
        out[where.mask] = flat
        return torch.from_numpy(out)
    try:
        out_t = torch.full((rows, where.width), pad, dtype=flat.dtype, device=flat.device)
    except RuntimeError as exc:
        raise data_error(collator, f"cannot pad {key!r} ({flat.dtype}) with {pad}: {exc}") from exc
    out_t.masked_scatter_(torch.from_numpy(where.mask).to(flat.device), flat)
    return out_t


def is_sequence(value: Any) -> bool:
    """Whether ``value`` is a sequence of tokens (a list, tuple, or an array of >= 1 dims)."""
    if isinstance(value, list | tuple):
        return True
    ndim = getattr(value, "ndim", None)
    return isinstance(ndim, int) and ndim >= 1
