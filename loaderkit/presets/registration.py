"""How presets are registered, looked up and recorded: the machinery of :mod:`loaderkit.presets`.

:func:`register` (and :func:`register_builtin`, for loaderkit's own presets) wraps a preset
function so that the builder it returns records the call: the preset's name, its options as
plain data, the head of the builder's repr, and which plan sections each option decides
(:data:`PRESET_OPTIONS`, :func:`preset_controls`). :func:`get`, :func:`names` and
:func:`describe` read the :data:`registry`. ``loaderkit.presets`` re-exports all of these.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ParamSpec, cast

import attrs

from loaderkit._frozen import FrozenMap, freeze_value
from loaderkit._validate import did_you_mean
from loaderkit.builder import DataLoaderBuilder
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.plan import Setting
from loaderkit.plan.sections.dataset import dataset_arg, dataset_spec
from loaderkit.plan.sections.preset import PresetSpec
from loaderkit.registry import Registry, RegistryEntry

__all__ = [
    "PRESET_OPTIONS",
    "Preset",
    "PresetOption",
    "describe",
    "get",
    "names",
    "preset_controls",
    "register",
    "register_builtin",
    "registry",
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


def register_builtin(
    name: str, description: str
) -> Callable[[Callable[P, DataLoaderBuilder]], Callable[P, DataLoaderBuilder]]:
    """Register one of loaderkit's own presets (origin ``builtin``), as :func:`register` does.

    The repr of its builders starts with ``loaderkit.presets.<name>(``.
    """

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
