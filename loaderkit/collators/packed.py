"""The ``packed`` collator: sequence packing into fixed-length rows, without cross-contamination.

A batch of token sequences becomes ``R`` rows of ``max_length`` tokens. Sequences are placed
**next-fit in batch order**: each sequence goes into the current row if it fits, otherwise it
opens a new row (the rest of the current row is padding). So the order of sequences along the
flattened rows is the batch order, and :func:`unpack` gives the original sequences back.

The packing plan is computed in Python over the lengths alone (one step per sequence, not per
token); the output is built with numpy in one allocation per key and one flat copy of all
tokens, then handed to torch without a copy.

Every row's padding is a segment of its own, so the segments tile the flattened
``input_ids.view(-1)`` exactly: ``cu_seqlens`` is what ``flash_attn_varlen_func`` takes for
that flattened tensor, and ``position_ids`` restart at 0 at every segment (padding included),
which is also how Hugging Face models find packed sequences from ``position_ids`` alone.

Labels: the first token of every sequence is labelled ``ignore_index`` (a causal LM shifts
labels, so that label would be predicted from the previous sequence's last token), and so is
padding. ``shift_labels=True`` gives labels already shifted for models that do not shift.
See docs/collators-packed.md for the full rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.collators.base import (
    BatchContext,
    Collator,
    check_bool_option,
    check_choice_option,
    check_int_option,
    check_keys,
    data_error,
)
from loaderkit.errors import DataError
from loaderkit.order.padding import PackedRows

if TYPE_CHECKING:
    import torch

__all__ = ["BUILTINS", "OVERFLOW_MODES", "PackedCollator", "unpack"]

OVERFLOW_MODES = ("error", "truncate", "split")
"""What ``overflow`` may say about a sequence longer than ``max_length``."""

ATTENTION_MASKS = ("none", "padding")
"""What ``attention_mask`` may ask for: no mask (varlen kernels) or a per-row 1/0 mask."""

_NAME = "packed"


def _as_tokens(value: object, key: str, position: int) -> npt.NDArray[np.integer[Any]]:
    """A 1-d integer numpy array (a view where possible) from a list, array or tensor."""
    import torch

    where = f"{key!r} of the sample at batch position {position}"
    if isinstance(value, torch.Tensor):
        if (
            value.dim() != 1
            or value.dtype == torch.bool
            or value.is_floating_point()
            or value.is_complex()
        ):
            raise data_error(
                _NAME,
                f"{where} must be a 1-d tensor of integer token ids (got a {value.dtype} "
                f"tensor of shape {tuple(value.shape)})",
            )
        array: npt.NDArray[Any] = value.detach().cpu().numpy()
    elif isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        try:
            array = np.asarray(value) if len(value) else np.zeros(0, dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise data_error(
                _NAME, f"{where} must be a flat list of integer token ids ({exc})"
            ) from exc
        if array.ndim == 1 and array.dtype.kind in "iu":
            array = array.astype(np.int64, copy=False)
    else:
        raise data_error(
            _NAME,
            f"{where} must be a list, numpy array or tensor of token ids (got "
            f"{type(value).__name__})",
        )
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise data_error(
            _NAME,
            f"{where} must be a 1-d sequence of integer token ids (got dtype {array.dtype}, "
            f"shape {array.shape})",
        )
    return array


def _common_dtype(arrays: Sequence[npt.NDArray[Any]], key: str) -> np.dtype[Any]:
    dtypes = {a.dtype for a in arrays}  # few distinct ones: result_type takes at most 32-64
    dtype = np.result_type(*dtypes)
    if dtype.kind not in "iu":
        kinds = sorted(str(d) for d in dtypes)
        raise data_error(
            _NAME,
            f"the samples' {key!r} have dtypes {kinds} that do not combine into an integer "
            f"dtype (they promote to {dtype}); give them one dtype",
        )
    return np.dtype(dtype.type)  # native byte order, which torch.from_numpy needs


def _fits(value: int, dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


def _next_fit(
    seg_sample: list[int], seg_len: list[int], width: int
) -> tuple[int, list[int], list[int], list[int]]:
    """Place segments next-fit, in order, into rows of ``width``.

    Returns the number of rows and, for every segment of the flattened rows in order (each
    row's padding being a segment of its own, owner -1): its flat start, length and owner.
    """
    starts: list[int] = []
    lengths: list[int] = []
    owners: list[int] = []
    rows = 0
    used = width  # no open row yet

    def close_row() -> None:
        if rows and used < width:
            starts.append(rows * width - (width - used))
            lengths.append(width - used)
            owners.append(-1)

    for owner, length in zip(seg_sample, seg_len, strict=True):
        if used + length > width:
            close_row()
            rows += 1
            used = 0
        starts.append((rows - 1) * width + used)
        lengths.append(length)
        owners.append(owner)
        used += length
    close_row()
    return rows, starts, lengths, owners


class PackedCollator(Collator):
    """Pack token sequences next-fit, in batch order, into rows of ``max_length`` tokens.

    Samples are mappings with ``input_ids`` and optionally ``labels`` (same length); other keys
    are dropped. Returns ``input_ids``, ``labels`` and ``position_ids`` of shape
    ``(R, max_length)``, ``cu_seqlens`` (int32, every row's padding a segment of its own),
    ``max_seqlen`` (int), ``sequence_ids`` (the batch position of each token, -1 at padding),
    ``num_rows`` (int), ``packing_efficiency`` (float) and, with ``attention_mask="padding"``,
    a 1/0 ``attention_mask``. See docs/collators-packed.md.

    Options: ``max_length`` (tokens per row, required); ``pad_token_id`` (default 0);
    ``ignore_index`` (the label of tokens without a loss, default -100); ``overflow``
    (``"error"``, ``"truncate"`` or ``"split"`` a sequence longer than ``max_length``);
    ``shift_labels`` (labels already shifted by one, for models that do not shift);
    ``attention_mask`` (``"none"`` or ``"padding"``).
    """

    name = _NAME
    supports_max_length = True

    def __init__(
        self,
        *,
        max_length: int,
        pad_token_id: int = 0,
        ignore_index: int = -100,
        overflow: str = "error",
        shift_labels: bool = False,
        attention_mask: str = "none",
    ) -> None:
        self.max_length = check_int_option("max_length", max_length, minimum=1)
        self.pad_token_id = check_int_option("pad_token_id", pad_token_id, minimum=0)
        self.ignore_index = check_int_option("ignore_index", ignore_index)
        self.overflow = check_choice_option("overflow", overflow, OVERFLOW_MODES)
        self.shift_labels = check_bool_option("shift_labels", shift_labels)
        self.attention_mask = check_choice_option("attention_mask", attention_mask, ATTENTION_MASKS)

    def padded_length(self) -> PackedRows:
        """How a batch is laid out: rows of ``max_length`` filled next-fit in batch order.

        The rule a token budget is computed with (``overflow="split"`` splits long sequences
        over rows; otherwise one row holds the cut sequence, or the batch is refused).
        """
        return PackedRows(row_length=self.max_length, split=self.overflow == "split")

    def __call__(
        self, samples: Sequence[Any], context: BatchContext | None = None
    ) -> dict[str, Any]:
        """Pack ``samples`` (mappings with ``input_ids`` and optionally ``labels``)."""
        import torch

        keys = check_keys(samples, collator=_NAME)
        if "input_ids" not in keys:
            raise DataError(
                f"collator {_NAME!r} needs an 'input_ids' key in every sample (got keys {keys})",
                collator=_NAME,
            )
        has_labels = "labels" in keys
        ids = [_as_tokens(s["input_ids"], "input_ids", p) for p, s in enumerate(samples)]
        labels = (
            [_as_tokens(s["labels"], "labels", p) for p, s in enumerate(samples)]
            if has_labels
            else ids
        )
        seg_sample, seg_len = self._segments(ids, labels)
        width = self.max_length

        rows, starts, lengths, owners = _next_fit(seg_sample, seg_len, width)
        real_starts = [start for start, owner in zip(starts, owners, strict=True) if owner >= 0]
        total = rows * width
        real_tokens = sum(seg_len)

        # the tokens, concatenated once (truncated sequences are views)
        id_dtype = _common_dtype(ids, "input_ids")
        if not _fits(self.pad_token_id, id_dtype):
            raise data_error(
                _NAME,
                f"pad_token_id={self.pad_token_id} does not fit the input_ids dtype {id_dtype}",
            )
        label_dtype = _common_dtype(labels, "labels") if has_labels else id_dtype
        if not _fits(self.ignore_index, label_dtype):
            label_dtype = np.dtype(np.int64)
        kept = self._kept(ids)
        flat_ids = np.concatenate(kept, dtype=id_dtype)
        flat_labels = np.concatenate(self._kept(labels), dtype=label_dtype) if has_labels else None

        seg_lengths = np.asarray(lengths, dtype=np.int64)
        seg_starts = np.asarray(starts, dtype=np.int64)
        sequence_ids = np.repeat(np.asarray(owners, dtype=np.int64), seg_lengths)
        real = sequence_ids >= 0
        position_ids = np.arange(total, dtype=np.int64) - np.repeat(seg_starts, seg_lengths)

        input_ids = np.full(total, self.pad_token_id, dtype=id_dtype)
        input_ids[real] = flat_ids
        out_labels = np.full(total, self.ignore_index, dtype=label_dtype)
        out_labels[real] = flat_ids if flat_labels is None else flat_labels
        first = np.asarray(real_starts, dtype=np.int64)
        if self.shift_labels:
            # position t is labelled with the next token of its own sequence; the last token
            # of a sequence (whose "next" is another sequence's first token) has no label
            shifted = np.full(total, self.ignore_index, dtype=label_dtype)
            shifted[:-1] = out_labels[1:]
            shifted[first + np.asarray(seg_len, dtype=np.int64) - 1] = self.ignore_index
            shifted[~real] = self.ignore_index
            out_labels = shifted
        else:
            # a model that shifts labels predicts labels[t] from the tokens up to t - 1: the
            # first token of a sequence would be predicted from the previous sequence
            out_labels[first] = self.ignore_index

        shape = (rows, width)
        batch: dict[str, Any] = {
            "input_ids": torch.from_numpy(input_ids.reshape(shape)),
            "labels": torch.from_numpy(out_labels.reshape(shape)),
            "position_ids": torch.from_numpy(position_ids.reshape(shape)),
        }
        if self.attention_mask == "padding":
            batch["attention_mask"] = torch.from_numpy(real.astype(np.int64).reshape(shape))
        cu_seqlens = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(seg_lengths, out=cu_seqlens[1:], dtype=np.int32)
        batch["cu_seqlens"] = torch.from_numpy(cu_seqlens)
        batch["max_seqlen"] = int(seg_lengths.max())
        batch["sequence_ids"] = torch.from_numpy(sequence_ids.reshape(shape))
        batch["num_rows"] = rows
        batch["packing_efficiency"] = real_tokens / total
        return batch

    def _segments(
        self, ids: list[npt.NDArray[Any]], labels: list[npt.NDArray[Any]]
    ) -> tuple[list[int], list[int]]:
        """(batch position, length) of each segment, in order, after the overflow rule."""
        width = self.max_length
        seg_sample: list[int] = []
        seg_len: list[int] = []
        for position, (tokens, targets) in enumerate(zip(ids, labels, strict=True)):
            length = len(tokens)
            if len(targets) != length:
                raise data_error(
                    _NAME,
                    f"the sample at batch position {position} has {len(targets)} labels for "
                    f"{length} input_ids; they must match one to one",
                )
            if length == 0:
                raise data_error(
                    _NAME,
                    f"the sample at batch position {position} has no input_ids (length 0); "
                    f"filter empty samples out before packing",
                )
            if length <= width:
                seg_sample.append(position)
                seg_len.append(length)
            elif self.overflow == "error":
                raise data_error(
                    _NAME,
                    f"the sample at batch position {position} has {length} tokens, more than "
                    f"max_length={width}; pass overflow='truncate' or overflow='split', or raise "
                    f"max_length",
                )
            elif self.overflow == "truncate":
                seg_sample.append(position)
                seg_len.append(width)
            else:  # split into chunks of max_length, the remainder last
                full, rest = divmod(length, width)
                seg_sample.extend([position] * (full + (rest > 0)))
                seg_len.extend([width] * full + ([rest] if rest else []))
        return seg_sample, seg_len

    def _kept(self, arrays: list[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
        """The tokens that go into the rows (views of the first max_length when truncating)."""
        if self.overflow != "truncate":
            return arrays
        return [a[: self.max_length] for a in arrays]


def unpack(batch: Mapping[str, Any], key: str = "input_ids") -> list[torch.Tensor]:
    """The sequences of a ``packed`` batch, in batch order (``batch[key]`` without padding).

    ``key="input_ids"`` gives the original token sequences (cut to ``max_length`` under
    ``overflow="truncate"``; the chunks of a split sequence are joined again). Any other
    ``(R, max_length)`` key (``labels``, ``position_ids``) is cut the same way.
    """
    import torch

    for needed in (key, "sequence_ids"):
        if needed not in batch:
            raise KeyError(f"unpack needs a batch made by the 'packed' collator (no {needed!r})")
    owners = batch["sequence_ids"].reshape(-1)
    values = batch[key].reshape(-1)
    if values.shape != owners.shape:
        raise ValueError(
            f"batch[{key!r}] has {values.numel()} values, sequence_ids {owners.numel()}"
        )
    real = owners >= 0
    tokens = values[real]
    counts = torch.bincount(owners[real])
    return list(torch.split(tokens, counts.tolist()))


BUILTINS: list[tuple[str, type, str | None, str]] = [
    (
        "packed",
        PackedCollator,
        "text",
        "sequence packing: input_ids (+labels) next-fit into rows of max_length tokens, with "
        "position_ids, boundary-masked labels and cu_seqlens for varlen attention",
    )
]
"""(registry name, collator class, modality, one-line description) of this module's collators."""
