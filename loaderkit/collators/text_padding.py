"""The base of the text collators: their padding options and the padding of key groups.

:class:`TextPadding` is what the collators of :mod:`loaderkit.collators.text` (``text``,
``causal_lm``, ``masked_lm``, ``seq2seq``) share: it checks the padding options they all take
(``keys``, ``pad_token_id``, ``padding``, ``max_length``, ``padding_side``, ...), picks the
keys padded together (the configured ``keys`` and the tokenizer outputs in
:data:`AUTO_KEYS`), gathers each group's rows and lays them out with
:mod:`loaderkit.collators.rows`, gives each key its pad value (:data:`DEFAULT_PADS`,
``pad_values``), adds the attention mask and assembles the batch in the samples' key order
(other keys through the default collator). It also states the padding rule a token budget
is computed with (:meth:`TextPadding.padded_length`).

Options are checked in pure Python; torch is imported only when a batch is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.collators.base import (
    Collator,
    check_bool_option,
    check_choice_option,
    check_int_option,
    check_mapping_option,
    check_names_option,
    data_error,
    option_error,
)
from loaderkit.collators.default import default_collate
from loaderkit.collators.rows import Flat, Layout, gather, is_sequence, layout
from loaderkit.errors import DataError
from loaderkit.order.padding import PaddedLength

if TYPE_CHECKING:
    import torch

__all__ = ["AUTO_KEYS", "DEFAULT_PADS", "PADDINGS", "SIDES", "TextPadding"]

SIDES = ("right", "left")
PADDINGS = ("longest", "max_length")

AUTO_KEYS = ("token_type_ids", "special_tokens_mask", "attention_mask")
"""Tokenizer outputs padded along with ``keys`` whenever samples carry them."""

DEFAULT_PADS: dict[str, int] = {"attention_mask": 0, "token_type_ids": 0, "special_tokens_mask": 1}
"""Pad values of well-known keys (others get ``pad_token_id``); ``pad_values`` overrides."""


class TextPadding(Collator):
    """Option handling and group padding shared by the text collators (a base class)."""

    supports_max_length = True

    keys: tuple[str, ...]
    pad_token_id: int
    label_pad_token_id: int
    padding: str
    max_length: int | None
    truncation_side: str
    padding_side: str
    pad_to_multiple_of: int | None
    return_attention_mask: bool
    pad_values: dict[str, int]

    def _set_padding_options(
        self,
        *,
        keys: object,
        pad_token_id: object,
        label_pad_token_id: object,
        padding: object,
        max_length: object,
        truncation_side: object,
        padding_side: object,
        pad_to_multiple_of: object,
        return_attention_mask: object,
        pad_values: object,
        reserved: Sequence[str] = ("labels",),
    ) -> None:
        self.keys = check_names_option(
            "keys", keys, what="key names, e.g. ['input_ids', 'token_type_ids']"
        )
        for name in self.keys:
            if name in reserved:
                raise option_error(
                    "keys",
                    f"{name!r} is padded automatically (with its own pad value); leave it out "
                    f"of keys",
                )
        self.pad_token_id = check_int_option("pad_token_id", pad_token_id, minimum=0)
        self.label_pad_token_id = check_int_option("label_pad_token_id", label_pad_token_id)
        self.padding = check_choice_option("padding", padding, PADDINGS)
        self.max_length = check_int_option("max_length", max_length, minimum=1, allow_none=True)
        if self.padding == "max_length" and self.max_length is None:
            raise option_error(
                "padding", "'max_length' pads every batch to max_length: set max_length too"
            )
        self.truncation_side = check_choice_option("truncation_side", truncation_side, SIDES)
        self.padding_side = check_choice_option("padding_side", padding_side, SIDES)
        self.pad_to_multiple_of = check_int_option(
            "pad_to_multiple_of", pad_to_multiple_of, minimum=1, allow_none=True
        )
        self.return_attention_mask = check_bool_option(
            "return_attention_mask", return_attention_mask
        )
        self.pad_values = (
            {}
            if pad_values is None
            else check_mapping_option(
                "pad_values",
                pad_values,
                what="of key names to pad values, e.g. {'position_ids': 0}",
                value_type=int,
            )
        )

    def padded_length(self) -> PaddedLength:
        """How a batch's ``keys`` are padded: the rule a token budget is computed with.

        ``(B, round_up(min(longest, max_length), pad_to_multiple_of))``, or every batch
        ``round_up(max_length, pad_to_multiple_of)`` wide with ``padding="max_length"``; the
        same :func:`layout` applies. (``seq2seq``: the encoder side, which bucketing measures.)
        """
        return PaddedLength(
            multiple=self.pad_to_multiple_of,
            max_length=self.max_length,
            fixed=self.padding == "max_length",
        )

    def _pad_value(self, key: str) -> int:
        if key in self.pad_values:
            return self.pad_values[key]
        if key in ("labels",):
            return self.label_pad_token_id
        return DEFAULT_PADS.get(key, self.pad_token_id)

    def _input_group(self, keys: list[str]) -> list[str]:
        """The configured keys (all required), then the tokenizer outputs the samples carry."""
        for key in self.keys:
            if key not in keys:
                raise data_error(
                    self.name,
                    f"the samples have no key {key!r} (batch position 0 has {keys}); keys="
                    f"{list(self.keys)} names it",
                )
        return [*self.keys, *(k for k in AUTO_KEYS if k in keys and k not in self.keys)]

    def _gather_group(
        self,
        samples: Sequence[Any],
        group: Sequence[str],
        *,
        max_length: int | None,
        truncation_side: str,
        what: str,
    ) -> tuple[dict[str, Flat], npt.NDArray[np.int64]]:
        """Concatenated rows of each key of ``group``, and the rows' full lengths.

        Every key of a group must have the same length as the group's first key, sample by
        sample (they share one mask).
        """
        flats: dict[str, Flat] = {}
        reference: npt.NDArray[np.int64] | None = None
        for key in group:
            rows = [sample[key] for sample in samples]
            flats[key], lengths = gather(rows, key, self.name, max_length, truncation_side)
            if reference is None:
                reference = lengths
            elif not np.array_equal(lengths, reference):
                position = int(np.flatnonzero(lengths != reference)[0])
                raise data_error(
                    self.name,
                    f"{key!r} at batch position {position} has length {int(lengths[position])} "
                    f"but {group[0]!r} has {int(reference[position])}; {what}",
                )
        assert reference is not None
        return flats, reference

    def _pad_inputs(
        self, samples: Sequence[Any], group: Sequence[str], what: str
    ) -> tuple[dict[str, Flat], Layout]:
        flats, lengths = self._gather_group(
            samples,
            group,
            max_length=self.max_length,
            truncation_side=self.truncation_side,
            what=what,
        )
        where = layout(
            lengths,
            max_length=self.max_length,
            to_max_length=self.padding == "max_length",
            multiple=self.pad_to_multiple_of,
            side=self.padding_side,
        )
        return flats, where

    def _other(self, samples: Sequence[Any], key: str) -> Any:
        """A key that is not padded: the default collator's result."""
        try:
            return default_collate([{key: sample[key]} for sample in samples])[key]
        except DataError as exc:
            hint = ""
            if is_sequence(samples[0][key]):
                hint = (
                    f"; if {key!r} holds sequences to pad, add it to keys= (and to pad_values= "
                    f"if its pad value is not pad_token_id)"
                )
            raise data_error(self.name, f"{exc.message}{hint}") from exc

    def _assemble(
        self,
        samples: Sequence[Any],
        keys: list[str],
        padded: dict[str, torch.Tensor],
        added: dict[str, torch.Tensor],
        drop: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The batch in the samples' key order, then the keys the collator made."""
        batch: dict[str, Any] = {}
        for key in keys:
            if key in drop:
                continue
            batch[key] = padded[key] if key in padded else self._other(samples, key)
        batch.update(added)
        return batch

    def _attention(self, keys: list[str], where: Layout) -> dict[str, torch.Tensor]:
        import torch

        if not self.return_attention_mask or "attention_mask" in keys:
            return {}
        return {"attention_mask": torch.from_numpy(where.mask.astype(np.int64))}
