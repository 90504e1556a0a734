"""Presets: named builders for common training jobs, with documented defaults to chain on.

A preset is a function ``preset(dataset, **options) -> DataLoaderBuilder``: the dataset comes
first, every option is a keyword with a default (a few, such as ``masked_lm``'s
``mask_token_id``, are required). The builder it returns is an ordinary builder: chain more
``with_*`` calls on it (each replaces the preset's setting), then ``compile()``::

    from loaderkit import presets

    plan = presets.causal_lm_pretraining(corpus, max_length=512).with_workers(4).compile()

Built-in presets (see ``docs/presets.md`` for every default):

=======================  =========================================================================
name                     what it sets up
=======================  =========================================================================
causal_lm_pretraining    ``causal_lm`` collator, length bucketing, shuffle, ``drop_last``
instruction_tuning       ``packed`` collator (rows of ``max_length`` tokens), shuffle
masked_lm                ``masked_lm`` collator (80/10/10 masking), length bucketing, shuffle
seq2seq                  ``seq2seq`` collator (shifted ``decoder_input_ids``), length bucketing
image_classification     ``vision`` collator (ImageNet normalization), shuffle, ``drop_last``
tabular                  ``default`` collator, large batches, shuffle
=======================  =========================================================================

Presets are registered by name so that plan files and command lines can refer to them:
:func:`get` returns one, :func:`names` lists them, :func:`register` adds yours (installed
packages can contribute presets through the entry-point group ``loaderkit.presets``). A
builder made by a preset remembers it: ``repr(builder)`` starts with the preset call
(``loaderkit.presets.causal_lm_pretraining(<list: 100 samples>, max_length=512)``) followed by
the calls chained since, and the compiled plan records ``[preset]`` (name and options) for
``explain()`` and plan files. The record is information only: it takes no part in plan
equality nor in the stream fingerprint. The registry and this recording are
:mod:`loaderkit.presets.registration`; this module holds the built-in presets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from loaderkit._validate import check_bool
from loaderkit.builder import DataLoaderBuilder
from loaderkit.plan.sections.bucketing import default_num_buckets
from loaderkit.plan.specs import DatasetSpec
from loaderkit.presets.registration import (
    PRESET_OPTIONS,
    PresetOption,
    describe,
    get,
    names,
    preset_controls,
    register,
    register_builtin,
    registry,
)

__all__ = [
    "PRESET_OPTIONS",
    "PresetOption",
    "causal_lm_pretraining",
    "describe",
    "get",
    "image_classification",
    "instruction_tuning",
    "masked_lm",
    "names",
    "preset_controls",
    "register",
    "registry",
    "seq2seq",
    "tabular",
]

# -- shared steps --------------------------------------------------------------------------------


def _start(
    dataset: object,
    name: str | None,
    batch_size: int | None,
    *,
    drop_last: bool,
    seed: int | None,
    max_tokens: int | None = None,
    shuffle: bool = True,
) -> DataLoaderBuilder:
    builder = DataLoaderBuilder().with_dataset(dataset, name=name)
    if max_tokens is None:  # under a token budget the bucketing decides the batch sizes
        assert batch_size is not None
        builder = builder.with_batch_size(batch_size, drop_last=drop_last)
    if check_bool("preset.options.shuffle", shuffle):
        builder = builder.with_shuffle()
    if seed is not None:
        builder = builder.with_seed(seed)
    return builder


_BUDGET_CAP = 256
"""The most samples per batch under a token budget when the preset's ``batch_size`` is not
given: generous, so that ``max_tokens`` decides (a cap of a few samples would close most
batches before the budget does)."""


@attrs.frozen
class _LengthBatching:
    """How the token-sequence presets (causal LM, masked LM, seq2seq) batch and bucket.

    Shuffled batches of ``batch_size`` samples (``default_size`` when it is not given),
    or under a ``max_tokens`` budget; bucketed by the length of ``input_ids``.
    """

    name: str | None
    batch_size: int | None
    max_tokens: int | None
    bucketing: bool
    shuffle: bool
    seed: int | None
    default_size: int = attrs.field(kw_only=True)
    drop_last: bool = attrs.field(kw_only=True)

    def start(self, dataset: object) -> DataLoaderBuilder:
        """The builder of ``dataset`` with the batch size (none under a budget) and the order."""
        return _start(
            dataset,
            self.name,
            self.default_size if self.batch_size is None else self.batch_size,
            drop_last=self.drop_last,
            seed=self.seed,
            max_tokens=self.max_tokens,
            shuffle=self.shuffle,
        )

    def bucket(self, builder: DataLoaderBuilder, max_length: int) -> DataLoaderBuilder:
        """Bucket by the length of ``input_ids``; under a token budget ``batch_size`` is the cap.

        A budget without ``batch_size`` caps batches at ``_BUDGET_CAP`` samples; the buckets are
        then counted for the batches of the longest rows, ``max_tokens // max_length`` samples
        (at most 64), not for the cap: buckets for 256-sample batches would be too wide to keep
        the padding low.
        """
        max_tokens, batch_size = self.max_tokens, self.batch_size
        if max_tokens is not None:
            if batch_size is not None:
                return builder.with_bucketing(
                    "input_ids", max_tokens=max_tokens, max_batch_size=batch_size
                )
            spec = builder._value("dataset")
            n = spec.length if isinstance(spec, DatasetSpec) else None
            return builder.with_bucketing(
                "input_ids",
                max_tokens=max_tokens,
                max_batch_size=_BUDGET_CAP,
                num_buckets=default_num_buckets(n, min(64, max(1, max_tokens // max_length)))
                if n
                else None,
            )
        if check_bool("preset.options.bucketing", self.bucketing):
            return builder.with_bucketing("input_ids")
        return builder


def _text_checks(
    builder: DataLoaderBuilder, checks: bool, keys: Sequence[str], label_pad: bool
) -> DataLoaderBuilder:
    if not check_bool("preset.options.checks", checks):
        return builder
    return builder.with_checks(
        keys=list(keys),
        shapes={key: ["B", "T"] for key in keys},
        label_pad={"mode": "only_pad"} if label_pad else None,
    )


# -- the built-in presets ------------------------------------------------------------------------

_LM_KEYS = ("input_ids", "attention_mask", "labels")


@register_builtin(
    "causal_lm_pretraining",
    "next-token prediction: causal_lm collator, length bucketing, shuffled, drop_last",
)
def causal_lm_pretraining(
    dataset: object,
    *,
    name: str | None = None,
    max_length: int = 1024,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    bucketing: bool = True,
    pad_token_id: int = 0,
    pad_to_multiple_of: int | None = 8,
    shuffle: bool = True,
    seed: int | None = None,
    checks: bool = True,
) -> DataLoaderBuilder:
    """Causal language-model training on samples with ``input_ids`` (and optional ``labels``).

    Batches of ``batch_size`` samples (default 8, ``drop_last=True``), shuffled every epoch and
    bucketed by the length of ``input_ids`` (``bucketing=False`` for random batches), collated
    by ``causal_lm``: truncated to ``max_length``, padded with ``pad_token_id`` to the longest
    sample rounded up to ``pad_to_multiple_of``, ``labels`` the ids with padding -100 (or the
    samples' own labels). ``max_tokens`` replaces the fixed batch size by a token budget on the
    padded batch (``rows x padded width <= max_tokens``, the width as the collator pads:
    truncated, rounded up to ``pad_to_multiple_of``), at most ``batch_size`` samples per batch
    (default 256, so that the budget decides). With ``checks``, each epoch's first batch is
    checked for ``input_ids``, ``attention_mask`` and ``labels`` of one ``(B, T)`` shape, labels
    -100 at padding.
    """
    batching = _LengthBatching(
        name, batch_size, max_tokens, bucketing, shuffle, seed, default_size=8, drop_last=True
    )
    builder = batching.start(dataset).with_collator(
        "causal_lm",
        max_length=max_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = batching.bucket(builder, max_length)
    return _text_checks(builder, checks, _LM_KEYS, label_pad=True)


@register_builtin(
    "instruction_tuning",
    "supervised fine-tuning: packed collator (rows of max_length tokens, cu_seqlens), shuffled",
)
def instruction_tuning(
    dataset: object,
    *,
    name: str | None = None,
    max_length: int = 2048,
    batch_size: int = 16,
    overflow: str = "truncate",
    pad_token_id: int = 0,
    shift_labels: bool = False,
    attention_mask: str = "none",
    shuffle: bool = True,
    seed: int | None = None,
    checks: bool = True,
) -> DataLoaderBuilder:
    """Instruction tuning on samples with ``input_ids`` and ``labels`` (prompt set to -100).

    Batches of ``batch_size`` samples, shuffled every epoch, packed by the ``packed``
    collator into rows of exactly ``max_length`` tokens (next-fit, in batch order) with
    ``position_ids`` restarting per sample, labels masked at sample boundaries and
    ``cu_seqlens`` for variable-length attention. A sample longer than ``max_length`` is cut
    (``overflow="truncate"``; ``"split"`` or ``"error"`` otherwise). The number of rows varies
    from batch to batch. With ``checks``, each epoch's first batch is checked for
    ``input_ids``, ``labels`` and ``position_ids`` of one ``(R, max_length)`` shape.
    """
    builder = _start(dataset, name, batch_size, drop_last=False, seed=seed, shuffle=shuffle)
    builder = builder.with_collator(
        "packed",
        max_length=max_length,
        overflow=overflow,
        pad_token_id=pad_token_id,
        shift_labels=shift_labels,
        attention_mask=attention_mask,
    )
    if not check_bool("preset.options.checks", checks):
        return builder
    rows = ("input_ids", "labels", "position_ids")
    return builder.with_checks(
        keys=[*rows, "cu_seqlens"], shapes={key: ["R", max_length] for key in rows}
    )


@register_builtin(
    "masked_lm",
    "BERT-style pretraining: masked_lm collator (80/10/10 masking), length bucketing, shuffled",
)
def masked_lm(
    dataset: object,
    *,
    mask_token_id: int,
    vocab_size: int,
    name: str | None = None,
    max_length: int = 512,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    bucketing: bool = True,
    mlm_probability: float = 0.15,
    special_token_ids: Sequence[int] = (),
    pad_token_id: int = 0,
    pad_to_multiple_of: int | None = 8,
    shuffle: bool = True,
    seed: int | None = None,
    checks: bool = True,
) -> DataLoaderBuilder:
    """Masked language modelling on samples with ``input_ids``.

    ``mask_token_id`` and ``vocab_size`` are required. Batches of ``batch_size`` samples
    (default 32, ``drop_last=True``), shuffled every epoch and bucketed by length, collated by
    ``masked_lm``: truncated to ``max_length``, padded, each real token selected with
    ``mlm_probability`` (never padding nor ``special_token_ids``: pass your CLS/SEP ids), 80 %
    of the selected masked, 10 % replaced, 10 % kept; masks keyed by (seed, epoch, sample), so
    they do not depend on workers or resumes. ``max_tokens`` and ``checks`` as for
    :func:`causal_lm_pretraining`.
    """
    batching = _LengthBatching(
        name, batch_size, max_tokens, bucketing, shuffle, seed, default_size=32, drop_last=True
    )
    builder = batching.start(dataset).with_collator(
        "masked_lm",
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        mlm_probability=mlm_probability,
        special_token_ids=list(special_token_ids),
        max_length=max_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = batching.bucket(builder, max_length)
    return _text_checks(builder, checks, _LM_KEYS, label_pad=True)


@register_builtin(
    "seq2seq",
    "encoder-decoder training: seq2seq collator (shifted decoder_input_ids), length bucketing",
)
def seq2seq(
    dataset: object,
    *,
    decoder_start_token_id: int,
    name: str | None = None,
    max_length: int = 1024,
    max_target_length: int | None = 256,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    bucketing: bool = True,
    pad_token_id: int = 0,
    pad_to_multiple_of: int | None = 8,
    shuffle: bool = True,
    seed: int | None = None,
    checks: bool = True,
) -> DataLoaderBuilder:
    """Encoder-decoder training on samples with ``input_ids`` (source) and ``labels`` (target).

    ``decoder_start_token_id`` is required. Batches of ``batch_size`` samples (default 16;
    ``max_tokens``, on the padded sources, as for :func:`causal_lm_pretraining`), shuffled every
    epoch and bucketed by the source length, collated by ``seq2seq``: sources truncated to
    ``max_length``, targets to ``max_target_length``, ``labels`` padded with -100 and
    ``decoder_input_ids`` made from them (shifted right after ``decoder_start_token_id``).
    With ``checks``, each epoch's first batch is checked for ``input_ids`` and
    ``attention_mask`` of one ``(B, S)`` shape and ``labels`` and ``decoder_input_ids`` of one
    ``(B, T)`` shape.
    """
    batching = _LengthBatching(
        name, batch_size, max_tokens, bucketing, shuffle, seed, default_size=16, drop_last=False
    )
    builder = batching.start(dataset).with_collator(
        "seq2seq",
        decoder_start_token_id=decoder_start_token_id,
        max_length=max_length,
        max_target_length=max_target_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = batching.bucket(builder, max_length)
    if not check_bool("preset.options.checks", checks):
        return builder
    return builder.with_checks(
        keys=["input_ids", "attention_mask", "labels", "decoder_input_ids"],
        shapes={
            "input_ids": ["B", "S"],
            "attention_mask": ["B", "S"],
            "labels": ["B", "T"],
            "decoder_input_ids": ["B", "T"],
        },
    )


@register_builtin(
    "image_classification",
    "image batches: vision collator (ImageNet normalization), shuffled, drop_last",
)
def image_classification(
    dataset: object,
    *,
    name: str | None = None,
    batch_size: int = 32,
    image_key: str | None = "pixel_values",
    normalize: str | None = "imagenet",
    to_rgb: bool = False,
    layout: str = "auto",
    normalize_on_device: bool | Literal["auto"] = "auto",
    drop_last: bool = True,
    shuffle: bool = True,
    seed: int | None = None,
    checks: bool = True,
) -> DataLoaderBuilder:
    """Image classification on ``{image_key: image, "label": ...}`` or ``(image, label)`` samples.

    ``image_key=None`` for torchvision-style ``(image, target)`` tuples. Batches of
    ``batch_size`` samples (``drop_last=True``), shuffled every epoch, collated by ``vision``:
    images (numpy, torch or PIL; HWC or CHW; uint8 or float) stacked into a ``(B, C, H, W)``
    float32 tensor normalized with the ``normalize`` statistics (``"imagenet"``,
    ``"cifar10"`` or ``None`` for [0, 1]); ``to_rgb=True`` makes grayscale and RGBA images
    3-channel; ``normalize_on_device=True`` ships uint8 and normalizes where the batch lands
    (``"auto"``: when the loader delivers to a CUDA device).
    With ``checks``, each epoch's first batch is checked for finite ``(B, C, H, W)`` images.
    """
    builder = _start(dataset, name, batch_size, drop_last=drop_last, seed=seed, shuffle=shuffle)
    options: dict[str, Any] = {
        "normalize": normalize,
        "to_rgb": to_rgb,
        "layout": layout,
    }
    if normalize_on_device != "auto":  # the collator's default: plan files leave it out
        options["normalize_on_device"] = normalize_on_device
    if image_key is not None:
        options["image_key"] = image_key
    builder = builder.with_collator("vision", **options)
    if not check_bool("preset.options.checks", checks):
        return builder
    images = image_key if image_key is not None else "0"
    return builder.with_checks(
        keys=[images], shapes={images: ["B", "C", "H", "W"]}, finite=[images]
    )


@register_builtin(
    "tabular", "feature vectors or columns: default collator, batches of 256, shuffled"
)
def tabular(
    dataset: object,
    *,
    name: str | None = None,
    batch_size: int = 256,
    drop_last: bool = False,
    shuffle: bool = True,
    seed: int | None = None,
    finite: Sequence[str] = (),
) -> DataLoaderBuilder:
    """Tabular data: a dict of columns, a tuple of tensors, or samples of features and labels.

    Batches of ``batch_size`` samples, shuffled every epoch, collated by ``default`` (stacked
    per key or per tuple position). ``finite`` names batch keys (``"features"``, or ``"0"``
    for a tuple's first item) whose values must hold no NaN or Inf: checked on each epoch's
    first batch.
    """
    builder = _start(dataset, name, batch_size, drop_last=drop_last, seed=seed, shuffle=shuffle)
    if finite:
        builder = builder.with_checks(finite=list(finite))
    return builder
