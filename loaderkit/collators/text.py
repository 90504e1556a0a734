"""Built-in text collators: dynamic padding, causal LM, masked LM and seq2seq batches.

Every collator here takes mapping samples (``{"input_ids": [...], ...}``) whose sequences are
lists of Python numbers, 1-d numpy arrays or 1-d tensors, and pads them in one vectorized
step per key: the rows of the batch are concatenated once (``np.fromiter`` over all the Python
ints of the batch, or one ``np.concatenate`` / ``torch.cat``), the ``(B, L)`` output is
allocated once, and the rows are scattered into it through a boolean mask built from the
lengths (``arange(L) < lengths[:, None]``, mirrored for left padding). Dtypes are kept: an
``int32`` array stays ``int32``; Python ints become ``int64`` (bools ``bool``, floats
``float32``, as ``torch.tensor`` would make them).

Options are checked in pure Python by the constructors (torch is imported only when a batch
is made), so a plan with bad options fails at ``compile()`` with a
:class:`~loaderkit.PlanError` at ``collator.options.<name>``. See ``docs/collators-text.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.collators.base import (
    BatchContext,
    check_bool_option,
    check_int_list_option,
    check_int_option,
    check_keys,
    check_number_option,
    data_error,
    option_error,
)
from loaderkit.collators.rows import gather, is_sequence, layout, scatter
from loaderkit.collators.text_padding import TextPadding

if TYPE_CHECKING:
    import torch

__all__ = [
    "BUILTINS",
    "CausalLMCollator",
    "MaskedLMCollator",
    "Seq2SeqCollator",
    "TextCollator",
]

TARGET_KEYS = ("labels", "decoder_input_ids", "decoder_attention_mask")
"""The seq2seq target-side keys, padded together on the right."""

MLM_COMPONENT = "masked_lm"
"""The component name masked_lm keys its per-sample random streams by."""


# -- the collators -------------------------------------------------------------------------------

_TEXT_WHAT = (
    "padded keys must have one length per sample (per-sequence label vectors: pass "
    "token_labels=False)"
)


class TextCollator(TextPadding):
    """Dynamic padding of token sequences (``input_ids`` and friends), with attention mask.

    Pads ``keys`` (default ``("input_ids",)``) with ``pad_token_id``, plus the tokenizer outputs
    samples carry (``token_type_ids`` with 0, ``special_tokens_mask`` with 1, ``attention_mask``
    with 0) and sequence ``labels`` (with ``label_pad_token_id``), to the longest row of the
    batch or to ``max_length``. Other keys go through the default collator.
    """

    name = "text"

    def __init__(
        self,
        *,
        keys: Sequence[str] = ("input_ids",),
        pad_token_id: int = 0,
        label_pad_token_id: int = -100,
        padding: str = "longest",
        max_length: int | None = None,
        truncation_side: str = "right",
        padding_side: str = "right",
        pad_to_multiple_of: int | None = None,
        return_attention_mask: bool = True,
        pad_values: Mapping[str, int] | None = None,
        token_labels: bool = True,
    ) -> None:
        self._set_padding_options(
            keys=keys,
            pad_token_id=pad_token_id,
            label_pad_token_id=label_pad_token_id,
            padding=padding,
            max_length=max_length,
            truncation_side=truncation_side,
            padding_side=padding_side,
            pad_to_multiple_of=pad_to_multiple_of,
            return_attention_mask=return_attention_mask,
            pad_values=pad_values,
        )
        self.token_labels = check_bool_option("token_labels", token_labels)

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Pad ``samples`` into a dict of ``(B, L)`` tensors (other keys default-collated)."""
        keys = check_keys(samples, collator=self.name)
        group = self._input_group(keys)
        if self.token_labels and "labels" in keys and is_sequence(samples[0]["labels"]):
            group.append("labels")
        flats, where = self._pad_inputs(samples, group, _TEXT_WHAT)
        padded = {k: scatter(flats[k], where, self._pad_value(k), k, self.name) for k in group}
        if "labels" in keys and "labels" not in group and is_sequence(samples[0]["labels"]):
            padded["labels"] = self._stack(samples, "labels")
        return self._assemble(samples, keys, padded, self._attention(keys, where))

    def _stack(self, samples: Sequence[Any], key: str) -> torch.Tensor:
        """Equal-length sequences (per-sequence label vectors) as one ``(B, K)`` tensor."""
        import torch

        flat, lengths = gather([s[key] for s in samples], key, self.name, None, "right")
        if np.any(lengths != lengths[0]):
            position = int(np.flatnonzero(lengths != lengths[0])[0])
            raise data_error(
                self.name,
                f"{key!r} at batch position {position} has length {int(lengths[position])}, "
                f"position 0 has {int(lengths[0])}; with token_labels=False label vectors are "
                f"stacked, so they must have one length",
            )
        shape = (len(samples), int(lengths[0]))
        if isinstance(flat, np.ndarray):
            return torch.from_numpy(flat.reshape(shape))
        stacked: torch.Tensor = flat.reshape(shape)
        return stacked


class CausalLMCollator(TextPadding):
    """Padding plus next-token ``labels``: ``input_ids`` with padding set to -100.

    A sample's own ``labels`` are used instead when it has them (padded, never overwritten).
    ``shift=True`` shifts the labels left by one (``labels[t] = input_ids[t + 1]``, the last
    real position -100) for models that do not shift internally.
    """

    name = "causal_lm"

    def __init__(
        self,
        *,
        keys: Sequence[str] = ("input_ids",),
        pad_token_id: int = 0,
        label_pad_token_id: int = -100,
        padding: str = "longest",
        max_length: int | None = None,
        truncation_side: str = "right",
        padding_side: str = "right",
        pad_to_multiple_of: int | None = None,
        return_attention_mask: bool = True,
        pad_values: Mapping[str, int] | None = None,
        shift: bool = False,
    ) -> None:
        self._set_padding_options(
            keys=keys,
            pad_token_id=pad_token_id,
            label_pad_token_id=label_pad_token_id,
            padding=padding,
            max_length=max_length,
            truncation_side=truncation_side,
            padding_side=padding_side,
            pad_to_multiple_of=pad_to_multiple_of,
            return_attention_mask=return_attention_mask,
            pad_values=pad_values,
        )
        self.shift = check_bool_option("shift", shift)

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Pad ``samples`` and add ``labels`` (int64 unless the samples gave their own)."""
        import torch

        keys = check_keys(samples, collator=self.name)
        group = self._input_group(keys)
        if "labels" in keys:
            group.append("labels")
        flats, where = self._pad_inputs(
            samples, group, "labels must have one label per token of input_ids"
        )
        padded = {k: scatter(flats[k], where, self._pad_value(k), k, self.name) for k in group}
        added = self._attention(keys, where)
        mask = torch.from_numpy(where.mask)
        pad = self.label_pad_token_id
        if "labels" in padded:
            labels = padded["labels"]
        else:
            ids = padded[self.keys[0]]
            if ids.is_floating_point() or ids.dtype == torch.bool:
                raise data_error(
                    self.name, f"{self.keys[0]!r} must hold integer ids (got {ids.dtype})"
                )
            labels = torch.where(mask, ids.to(torch.int64), pad)
        if self.shift:
            shifted = torch.full_like(labels, pad)
            valid = mask[:, 1:] & mask[:, :-1]
            shifted[:, :-1] = torch.where(valid, labels[:, 1:], pad)
            labels = shifted
        if "labels" in padded:
            padded["labels"] = labels
        else:
            added["labels"] = labels
        return self._assemble(samples, keys, padded, added)


class MaskedLMCollator(TextPadding):
    """Padding plus BERT-style masking: ``labels`` hold the original ids where masked.

    Each real, non-special token is selected with probability ``mlm_probability``; of the
    selected, 80% become ``mask_token_id``, 10% a random id in ``[0, vocab_size)``, 10% stay.
    The draws come from one generator per sample keyed by (seed, epoch, sample index), so the
    masking is the same for any number of workers, after a resume and at any world size.
    """

    name = "masked_lm"
    uses_context = True

    def __init__(
        self,
        *,
        mask_token_id: int,
        vocab_size: int,
        mlm_probability: float = 0.15,
        special_token_ids: Sequence[int] = (),
        keys: Sequence[str] = ("input_ids",),
        pad_token_id: int = 0,
        label_pad_token_id: int = -100,
        padding: str = "longest",
        max_length: int | None = None,
        truncation_side: str = "right",
        padding_side: str = "right",
        pad_to_multiple_of: int | None = None,
        return_attention_mask: bool = True,
        pad_values: Mapping[str, int] | None = None,
    ) -> None:
        self._set_padding_options(
            keys=keys,
            pad_token_id=pad_token_id,
            label_pad_token_id=label_pad_token_id,
            padding=padding,
            max_length=max_length,
            truncation_side=truncation_side,
            padding_side=padding_side,
            pad_to_multiple_of=pad_to_multiple_of,
            return_attention_mask=return_attention_mask,
            pad_values=pad_values,
        )
        self.vocab_size = check_int_option("vocab_size", vocab_size, minimum=1)
        self.mask_token_id = check_int_option("mask_token_id", mask_token_id, minimum=0)
        if self.mask_token_id >= self.vocab_size:
            raise option_error(
                "mask_token_id",
                f"must be < vocab_size={self.vocab_size} (got {self.mask_token_id})",
            )
        self.mlm_probability = check_number_option(
            "mlm_probability",
            mlm_probability,
            minimum=0,
            maximum=1,
            exclusive_minimum=True,
            exclusive_maximum=True,
        )
        self.special_token_ids = check_int_list_option(
            "special_token_ids", special_token_ids, minimum=0
        )

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Pad and mask ``samples``; ``context`` (given by the loader) keys the randomness."""
        if context is None:
            raise TypeError(
                "the masked_lm collator draws its masks from the batch context (seed, epoch, "
                "sample indices) so that they do not depend on the workers; the loader passes "
                "it. To call the collator yourself pass one: collate(samples, context="
                "loaderkit.collators.BatchContext(seed, epoch, batch_index, indices))"
            )
        keys = check_keys(samples, collator=self.name)
        if "labels" in keys:
            raise data_error(
                self.name,
                "the samples have a 'labels' key, but masked_lm makes the labels itself; drop "
                "that column (or use the 'text' collator)",
            )
        if len(context.indices) != len(samples):
            raise ValueError(
                f"the context names {len(context.indices)} sample indices for a batch of "
                f"{len(samples)}"
            )
        rngs = context.sample_rngs(MLM_COMPONENT)
        group = self._input_group(keys)
        flats, where = self._pad_inputs(
            samples, group, "padded keys must have one length per sample"
        )
        main = self.keys[0]
        ids = flats[main]
        if not isinstance(ids, np.ndarray):
            ids = ids.cpu().numpy()
        if ids.dtype.kind not in "iu":
            raise data_error(self.name, f"{main!r} must hold integer ids (got {ids.dtype})")
        if ids.dtype.kind == "u" or ids.dtype.itemsize < 8:
            largest = int(np.iinfo(ids.dtype).max)
            if max(self.mask_token_id, self.vocab_size - 1) > largest:
                raise data_error(
                    self.name,
                    f"{main!r} is {ids.dtype}, which cannot hold mask_token_id="
                    f"{self.mask_token_id} or random ids up to vocab_size-1={self.vocab_size - 1}",
                )
        protected = np.isin(ids, np.asarray(self.special_token_ids, dtype=np.int64))
        if "special_tokens_mask" in flats:
            protected |= np.asarray(flats["special_tokens_mask"]).astype(bool)
        masked, labels = self._mask(ids, protected, where.lengths, rngs)
        flats[main] = masked
        group = [k for k in group if k != "special_tokens_mask"]  # used, and not a model input
        padded = {k: scatter(flats[k], where, self._pad_value(k), k, self.name) for k in group}
        added = self._attention(keys, where)
        added["labels"] = scatter(labels, where, self.label_pad_token_id, "labels", self.name)
        return self._assemble(samples, keys, padded, added, drop=("special_tokens_mask",))

    def _mask(
        self,
        ids: npt.NDArray[Any],
        protected: npt.NDArray[np.bool_],
        lengths: npt.NDArray[np.int64],
        rngs: Sequence[np.random.Generator],
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
        """Masked ids and labels of the concatenated rows (the draws: see the docs)."""
        total = len(ids)
        select = np.empty(total)
        action = np.empty(total)
        tokens = np.empty(total, dtype=np.int64)
        start = 0
        for rng, length in zip(rngs, lengths.tolist(), strict=True):
            stop = start + length
            rng.random(out=select[start:stop])
            rng.random(out=action[start:stop])
            tokens[start:stop] = rng.integers(0, self.vocab_size, length)
            start = stop
        chosen = (select < self.mlm_probability) & ~protected
        labels = np.where(chosen, ids, self.label_pad_token_id).astype(np.int64)
        out = ids.copy()
        out[chosen & (action < 0.8)] = self.mask_token_id
        randomized = chosen & (action >= 0.8) & (action < 0.9)
        out[randomized] = tokens[randomized].astype(ids.dtype)
        return out, labels


class Seq2SeqCollator(TextPadding):
    """Encoder inputs padded as by ``text``; ``labels`` padded with -100; decoder inputs.

    ``decoder_input_ids`` are the labels shifted right behind ``decoder_start_token_id``, with
    -100 replaced by ``pad_token_id``; samples that carry their own are padded instead.
    Target-side keys are padded (and truncated to ``max_target_length``) on the right.
    """

    name = "seq2seq"

    def __init__(
        self,
        *,
        decoder_start_token_id: int,
        keys: Sequence[str] = ("input_ids",),
        pad_token_id: int = 0,
        label_pad_token_id: int = -100,
        padding: str = "longest",
        max_length: int | None = None,
        max_target_length: int | None = None,
        truncation_side: str = "right",
        padding_side: str = "right",
        pad_to_multiple_of: int | None = None,
        return_attention_mask: bool = True,
        pad_values: Mapping[str, int] | None = None,
        make_decoder_input_ids: bool = True,
    ) -> None:
        self._set_padding_options(
            keys=keys,
            pad_token_id=pad_token_id,
            label_pad_token_id=label_pad_token_id,
            padding=padding,
            max_length=max_length,
            truncation_side=truncation_side,
            padding_side=padding_side,
            pad_to_multiple_of=pad_to_multiple_of,
            return_attention_mask=return_attention_mask,
            pad_values=pad_values,
            reserved=TARGET_KEYS,
        )
        self.decoder_start_token_id = check_int_option(
            "decoder_start_token_id", decoder_start_token_id, minimum=0
        )
        self.max_target_length = check_int_option(
            "max_target_length", max_target_length, minimum=1, allow_none=True
        )
        self.make_decoder_input_ids = check_bool_option(
            "make_decoder_input_ids", make_decoder_input_ids
        )

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Pad encoder and target sides; add ``decoder_input_ids`` from the labels."""
        import torch

        keys = check_keys(samples, collator=self.name)
        group = self._input_group(keys)
        flats, where = self._pad_inputs(
            samples, group, "padded keys must have one length per sample"
        )
        padded = {k: scatter(flats[k], where, self._pad_value(k), k, self.name) for k in group}
        added = self._attention(keys, where)
        targets = [k for k in TARGET_KEYS if k in keys]
        if targets:
            flats, lengths = self._gather_group(
                samples,
                targets,
                max_length=self.max_target_length,
                truncation_side="right",
                what="target-side keys must have one length per sample",
            )
            target_where = layout(
                lengths,
                max_length=self.max_target_length,
                to_max_length=self.padding == "max_length",
                multiple=self.pad_to_multiple_of,
                side="right",
            )
            for key in targets:
                padded[key] = scatter(
                    flats[key], target_where, self._pad_value(key), key, self.name
                )
        if "labels" in padded and "decoder_input_ids" not in padded and self.make_decoder_input_ids:
            labels = padded["labels"]
            decoder = torch.empty_like(labels)
            if labels.shape[1]:
                decoder[:, 0] = self.decoder_start_token_id
                decoder[:, 1:] = labels[:, :-1]
                decoder.masked_fill_(decoder == self.label_pad_token_id, self.pad_token_id)
            added["decoder_input_ids"] = decoder
        return self._assemble(samples, keys, padded, added)


BUILTINS: list[tuple[str, type, str | None, str]] = [
    (
        "text",
        TextCollator,
        "text",
        "dynamic padding of token sequences (input_ids, labels, ...) with attention_mask, "
        "left/right, max_length truncation, pad_to_multiple_of",
    ),
    (
        "causal_lm",
        CausalLMCollator,
        "text",
        "text padding plus next-token labels (padding -100; shift=True for models that do not "
        "shift)",
    ),
    (
        "masked_lm",
        MaskedLMCollator,
        "text",
        "text padding plus 80/10/10 MLM masking, keyed per sample by (seed, epoch, index)",
    ),
    (
        "seq2seq",
        Seq2SeqCollator,
        "text",
        "encoder inputs padded as text, labels padded -100, decoder_input_ids shifted right",
    ),
]
"""(registry name, collator class, modality, one-line description) of this module's collators."""
