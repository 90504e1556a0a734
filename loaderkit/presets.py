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
equality nor in the stream fingerprint.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ParamSpec, cast

import attrs

from loaderkit._checks import FrozenMap, check_bool, did_you_mean, freeze_value
from loaderkit.builder import DataLoaderBuilder
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.plan import Setting
from loaderkit.plan.sections.bucketing import default_num_buckets
from loaderkit.plan.sections.dataset import dataset_arg, dataset_spec
from loaderkit.plan.sections.preset import PresetSpec
from loaderkit.registry import Registry, RegistryEntry

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

P = ParamSpec("P")
Preset = Callable[..., DataLoaderBuilder]

_MARK = "__loaderkit_preset__"
"""Attribute naming the preset a wrapped function records (set on the wrapper)."""


class _PresetRegistry(Registry[Preset]):
    """The registry of presets; unknown names point to ``loaderkit.presets.register``."""

    def unknown_message(self, name: str) -> str:
        known = ", ".join(repr(n) for n in self.names()) or "none"
        return (
            f"unknown preset {name!r}{did_you_mean(name, self.names())}; known: {known}; "
            f"register one with @loaderkit.presets.register({name!r})"
        )


registry: Registry[Preset] = _PresetRegistry("preset", entry_point_group="loaderkit.presets")
"""The registry of presets, by name (``registry.describe()`` lists them with a summary)."""


# -- what each option decides -------------------------------------------------------------------


@attrs.frozen
class PresetOption:
    """What a preset option decides: the plan ``sections`` it sets, and a ``hint`` to change it.

    The hint is how to pass the option, read after "pass" (``"checks=False for no checks"``).
    """

    sections: tuple[Setting, ...]
    hint: str = ""


_COLLATOR = PresetOption(("collator",))

PRESET_OPTIONS: Mapping[str, PresetOption] = MappingProxyType(
    {
        "name": PresetOption(()),  # the dataset's binding name: not a setting
        "batch_size": PresetOption(("batch", "bucketing")),  # under a budget: max_batch_size
        "max_tokens": PresetOption(
            ("batch", "bucketing"), "max_tokens=N for a token budget (None: a fixed batch_size)"
        ),
        "drop_last": PresetOption(("batch",)),
        "bucketing": PresetOption(("bucketing",), "bucketing=False for random batches"),
        "shuffle": PresetOption(("order",), "shuffle=False to read in order"),
        "seed": PresetOption(("order",)),
        "checks": PresetOption(("checks",), "checks=False for no checks"),
        "finite": PresetOption(("checks",), "finite=() for no checks"),
        "image_key": PresetOption(
            ("collator", "checks"), "image_key=None for (image, label) tuples"
        ),
        "max_length": PresetOption(("collator", "checks")),
        "max_target_length": _COLLATOR,
        "pad_token_id": _COLLATOR,
        "pad_to_multiple_of": _COLLATOR,
        "overflow": _COLLATOR,
        "shift_labels": _COLLATOR,
        "attention_mask": _COLLATOR,
        "mask_token_id": _COLLATOR,
        "vocab_size": _COLLATOR,
        "mlm_probability": _COLLATOR,
        "special_token_ids": _COLLATOR,
        "decoder_start_token_id": _COLLATOR,
        "normalize": _COLLATOR,
        "to_rgb": _COLLATOR,
        "layout": _COLLATOR,
        "normalize_on_device": _COLLATOR,
    }
)
"""Which plan sections each preset option decides, for every preset (built-in or registered:
an option of the same name means the same). Errors about a section a preset set name the
options behind it (``PresetSpec.note``); an option not listed here is simply not named."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"<{type(value).__name__}>"


def preset_controls(values: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """``(section, "options a=1, b=2; pass hint, or hint")`` for the options in ``values``.

    ``values`` are a preset call's options with the defaults filled in; the sections and
    hints come from :data:`PRESET_OPTIONS`.
    """
    shown: dict[str, list[str]] = {}
    hints: dict[str, list[str]] = {}
    for option, value in values.items():
        declared = PRESET_OPTIONS.get(option)
        if declared is None:
            continue
        for section in declared.sections:
            shown.setdefault(section, []).append(f"{option}={_shown(value)}")
            if declared.hint:
                hints.setdefault(section, []).append(declared.hint)
    out = []
    for where, listed in shown.items():
        text = f"{'option' if len(listed) == 1 else 'options'} {', '.join(listed)}"
        if where in hints:
            text += f"; pass {', or '.join(hints[where])}"
        out.append((where, text))
    return tuple(out)


# -- recording -----------------------------------------------------------------------------------


def _check_options(entry: RegistryEntry, first: str, options: dict[str, Any]) -> None:
    """Raise one ``PlanTypeError`` for every unknown option and missing required option."""
    found = entry.signature_problems(options, positional=(first,))
    if found:
        raise PlanTypeError(
            [Problem(f"preset.options.{option}", f"preset {message}") for option, message in found]
        )


def _plain(value: object) -> object:
    """``value`` as plain data for the record, or ``"<TypeName>"`` when it is not plain data."""
    try:
        return freeze_value("preset.options", value)
    except PlanError:
        return f"<{type(value).__name__}>"


def _dataset_arg(dataset: object) -> str:
    """The dataset as ``with_dataset`` shows it in a builder repr (a dict of columns by rows)."""
    try:
        return dataset_arg(dataset_spec(dataset))
    except PlanError:  # a user's preset may take something else first: a path, a name
        return repr(dataset) if isinstance(dataset, str) else f"<{type(dataset).__name__}>"


def _recording(
    name: str, fn: Callable[P, DataLoaderBuilder], origin: str
) -> Callable[P, DataLoaderBuilder]:
    """Wrap ``fn`` so the builder it returns records the preset ``name`` and its options."""
    signature = inspect.signature(fn)
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(
            f"preset {name!r}: {getattr(fn, '__qualname__', fn)!r} must take the dataset as its "
            f"first positional parameter, then keyword options: def {name}(dataset, *, ...)"
        )
    prefix = (
        f"loaderkit.presets.{name}"
        if origin == "builtin" and name.isidentifier()
        else f"loaderkit.presets.get({name!r})"
    )
    entry = RegistryEntry(name, fn)  # its signature check, for the options of every call

    @functools.wraps(fn)
    def preset(*args: Any, **options: Any) -> DataLoaderBuilder:
        if len(args) == 1:
            dataset = args[0]
        elif not args and first.name in options:
            dataset = options.pop(first.name)
        else:
            raise TypeError(
                f"preset {name!r} takes the dataset, then keyword options (got {len(args)} "
                f"positional arguments): {name}(dataset, option=value, ...)"
            )
        _check_options(entry, first.name, options)
        builder = fn(dataset, **options)
        if not isinstance(builder, DataLoaderBuilder):
            raise TypeError(
                f"preset {name!r} must return a DataLoaderBuilder (got "
                f"{type(builder).__name__}); return the builder, without .compile()"
            )
        shown = [_dataset_arg(dataset), *(f"{k}={v!r}" for k, v in options.items())]
        given = signature.bind(dataset, **options)
        given.apply_defaults()
        values = {k: v for k, v in given.arguments.items() if k != first.name}
        record = PresetSpec(
            name,
            FrozenMap({k: _plain(v) for k, v in options.items()}),
            head=f"{prefix}({', '.join(shown)})",
            calls=tuple(builder._section_calls()),
            controls=preset_controls(values),
        )
        return attrs.evolve(builder, preset=record)

    setattr(preset, _MARK, name)
    return cast("Callable[P, DataLoaderBuilder]", preset)  # the signature of fn (wraps)


def register(
    name: str, *, description: str = "", replace: bool = False
) -> Callable[[Callable[P, DataLoaderBuilder]], Callable[P, DataLoaderBuilder]]:
    """Register a preset under ``name``: ``@loaderkit.presets.register("my_job")``.

    The decorated function takes the dataset first, then keyword options, and returns a
    :class:`~loaderkit.DataLoaderBuilder` (not compiled). The decorator returns it wrapped so
    that its builders record the preset (see the module docs); unknown or missing options then
    raise :class:`~loaderkit.PlanTypeError` at ``preset.options.<option>``. ``description``
    defaults to the first line of the docstring. A taken name raises ``ValueError`` unless
    ``replace=True``.
    """

    def decorate(fn: Callable[P, DataLoaderBuilder]) -> Callable[P, DataLoaderBuilder]:
        wrapped = _recording(name, fn, "user")
        registry.register(name, wrapped, description=description, replace=replace)
        return wrapped

    return decorate


def _builtin(
    name: str, description: str
) -> Callable[[Callable[P, DataLoaderBuilder]], Callable[P, DataLoaderBuilder]]:
    def decorate(fn: Callable[P, DataLoaderBuilder]) -> Callable[P, DataLoaderBuilder]:
        wrapped = _recording(name, fn, "builtin")
        registry.register(name, wrapped, description=description, origin="builtin")
        return wrapped

    return decorate


def get(name: str) -> Preset:
    """The preset registered as ``name``: call it with a dataset and options.

    Raises :class:`~loaderkit.registry.UnknownNameError` naming the closest preset.
    """
    entry = registry.get(name)
    factory = entry.factory
    if getattr(factory, _MARK, None) != name:  # an entry point: record it like the others
        factory = _recording(name, factory, entry.origin)
    return factory


def names() -> list[str]:
    """The names of every registered preset, sorted."""
    return registry.names()


def describe() -> str:
    """One line per preset: name and summary."""
    return "\n".join(f"{e.name:<22} {e.description}" for e in registry.entries())


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


def _by_length(
    builder: DataLoaderBuilder,
    bucketing: bool,
    max_tokens: int | None,
    batch_size: int | None,
    max_length: int,
) -> DataLoaderBuilder:
    """Bucket by the length of ``input_ids``; under a token budget ``batch_size`` is the cap.

    A budget without ``batch_size`` caps batches at ``_BUDGET_CAP`` samples; the buckets are
    then counted for the batches of the longest rows, ``max_tokens // max_length`` samples (at
    most 64), not for the cap: buckets for 256-sample batches would be too wide to keep the
    padding low.
    """
    if max_tokens is not None:
        if batch_size is not None:
            return builder.with_bucketing(
                "input_ids", max_tokens=max_tokens, max_batch_size=batch_size
            )
        spec = builder._dataset
        n = None if spec is None else spec.length
        return builder.with_bucketing(
            "input_ids",
            max_tokens=max_tokens,
            max_batch_size=_BUDGET_CAP,
            num_buckets=default_num_buckets(n, min(64, max(1, max_tokens // max_length)))
            if n
            else None,
        )
    if check_bool("preset.options.bucketing", bucketing):
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


@_builtin(
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
    builder = _start(
        dataset,
        name,
        8 if batch_size is None else batch_size,
        drop_last=True,
        seed=seed,
        max_tokens=max_tokens,
        shuffle=shuffle,
    )
    builder = builder.with_collator(
        "causal_lm",
        max_length=max_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = _by_length(builder, bucketing, max_tokens, batch_size, max_length)
    return _text_checks(builder, checks, _LM_KEYS, label_pad=True)


@_builtin(
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


@_builtin(
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
    builder = _start(
        dataset,
        name,
        32 if batch_size is None else batch_size,
        drop_last=True,
        seed=seed,
        max_tokens=max_tokens,
        shuffle=shuffle,
    )
    builder = builder.with_collator(
        "masked_lm",
        mask_token_id=mask_token_id,
        vocab_size=vocab_size,
        mlm_probability=mlm_probability,
        special_token_ids=list(special_token_ids),
        max_length=max_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = _by_length(builder, bucketing, max_tokens, batch_size, max_length)
    return _text_checks(builder, checks, _LM_KEYS, label_pad=True)


@_builtin(
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
    builder = _start(
        dataset,
        name,
        16 if batch_size is None else batch_size,
        drop_last=False,
        seed=seed,
        max_tokens=max_tokens,
        shuffle=shuffle,
    )
    builder = builder.with_collator(
        "seq2seq",
        decoder_start_token_id=decoder_start_token_id,
        max_length=max_length,
        max_target_length=max_target_length,
        pad_token_id=pad_token_id,
        pad_to_multiple_of=pad_to_multiple_of,
    )
    builder = _by_length(builder, bucketing, max_tokens, batch_size, max_length)
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


@_builtin(
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
    normalize_on_device: bool = False,
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
    3-channel; ``normalize_on_device=True`` ships uint8 and normalizes where the batch lands.
    With ``checks``, each epoch's first batch is checked for finite ``(B, C, H, W)`` images.
    """
    builder = _start(dataset, name, batch_size, drop_last=drop_last, seed=seed, shuffle=shuffle)
    options: dict[str, Any] = {
        "normalize": normalize,
        "to_rgb": to_rgb,
        "layout": layout,
        "normalize_on_device": normalize_on_device,
    }
    if image_key is not None:
        options["image_key"] = image_key
    builder = builder.with_collator("vision", **options)
    if not check_bool("preset.options.checks", checks):
        return builder
    images = image_key if image_key is not None else "0"
    return builder.with_checks(
        keys=[images], shapes={images: ["B", "C", "H", "W"]}, finite=[images]
    )


@_builtin("tabular", "feature vectors or columns: default collator, batches of 256, shuffled")
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
