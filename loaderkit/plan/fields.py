"""One constructor per plan section, shared by the builder's ``with_*`` methods and plan loading.

Each function checks its own arguments (types, ranges, registry names) and returns the frozen
spec, or raises a :class:`~loaderkit.errors.PlanError` whose problem path names the field. Rules
that involve several sections live in :mod:`loaderkit.plan.rules`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args

import attrs

from loaderkit._checks import (
    LIMITS,
    FrozenMap,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_str,
    freeze_value,
)
from loaderkit.datasets import plain_type_name, source_of
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.specs import (
    CURRICULUM_UNITS,
    BatchSpec,
    CallableSpec,
    DatasetSpec,
    Modality,
    OrderSpec,
    describe_dataset,
)
from loaderkit.registry import callable_ref, resolve_ref

__all__ = [
    "RESERVED_BINDINGS",
    "batch_schedule_spec",
    "batch_size_value",
    "batch_spec",
    "binding_name",
    "collator_spec",
    "dataset_spec",
    "described",
    "int_schedule",
    "order_spec",
    "transform_spec",
]

RESERVED_BINDINGS = (
    "collator",
    "transform",
    "length",
    "lengths",
    "weight",
    "weights",
    "difficulty",
    "difficulty_fn",
    "schedule",
    "mixture",
    "mixture_weights",
    "batch_size_fn",
    "max_length_fn",
)
"""Binding names of callables given without an importable path; datasets cannot take them."""

_BINDING = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def binding_name(path: str, name: object) -> str:
    """Accept a binding name: letters, digits, ``_ . -``, not starting with a digit."""
    text = check_str(path, name)
    if not _BINDING.match(text):
        raise PlanError.single(
            path,
            f"must start with a letter or '_' and use only letters, digits, '_', '.', '-' "
            f"(got {text!r})",
        )
    return text


def dataset_spec(dataset: object, name: object = None) -> DatasetSpec:
    """The spec of a live dataset bound under ``name`` (default ``"dataset"``)."""
    binding = "dataset" if name is None else binding_name("dataset.name", name)
    if binding in RESERVED_BINDINGS:
        raise PlanError.single(
            "dataset.name",
            f"{binding!r} is reserved for an object the builder binds itself (collator, "
            f"transform, length or weight functions, precomputed lengths or weights); name the "
            f"dataset something else",
        )
    if dataset is None:
        raise PlanTypeError.single("dataset", "got None; pass a dataset object")
    return described(dataset, binding)


def described(dataset: object, binding: str) -> DatasetSpec:
    """``describe_dataset``, with the source a ``loaderkit.datasets.load`` result remembers."""
    spec = describe_dataset(dataset, binding)
    type_name = plain_type_name(dataset) or spec.type_name
    return attrs.evolve(spec, source=source_of(dataset), type_name=type_name)


def batch_spec(batch_size: object, drop_last: object = False) -> BatchSpec:
    """Per-rank batch size (an int >= 1) and ``drop_last``."""
    size = batch_size_value(batch_size)
    return BatchSpec(size, check_bool("batch.drop_last", drop_last))


def batch_size_value(value: object, path: str = "batch.batch_size") -> int:
    """One batch size: an int >= 1."""
    return check_int(
        path,
        value,
        minimum=1,
        maximum=LIMITS.batch_size,
        fix="pass a positive number of samples",
    )


def is_function(value: object) -> bool:
    """Whether ``value`` names a function: a callable or a ``"module:qualname"`` string."""
    return callable(value) or (isinstance(value, str) and ":" in value)


def function_spec(path: str, value: object, binding: str) -> tuple[CallableSpec, object]:
    """A function given to the builder as a spec and the object to bind.

    An importable function or a ``"module:qualname"`` string becomes a ``ref``; anything else
    (a lambda, a local function) is bound under ``binding``, labelled by its qualified name.
    """
    if isinstance(value, str):
        target = _resolve(path, value)
        return CallableSpec("ref", callable_ref(target) or value), target
    ref = callable_ref(value)
    if ref is not None:
        return CallableSpec("ref", ref), value
    return CallableSpec("binding", binding, label=_label(value)), value


V = TypeVar("V")


def until_table(
    path: str, value: list[Any] | tuple[Any, ...], what: str, read: Callable[[str, object], V]
) -> tuple[tuple[float, V], ...]:
    """A schedule table ``[(until, value), ...]`` with increasing ``until``.

    Each value is read and checked by ``read(path_of_the_entry, value)``.
    """
    table: list[tuple[float, V]] = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise PlanTypeError.single(
                f"{path}[{i}]", f"must be an (until, {what}) pair (got {pair!r})"
            )
        until = check_number(f"{path}[{i}]", pair[0], minimum=0.0)
        if table and until <= table[-1][0]:
            raise PlanError.single(f"{path}[{i}]", "the 'until' values must increase")
        table.append((until, read(f"{path}[{i}]", pair[1])))
    return tuple(table)


def int_schedule(
    path: str,
    value: object,
    fn_binding: str,
    check: Callable[[object, str], int],
) -> tuple[int | None, tuple[tuple[float, int], ...], CallableSpec | None, object | None]:
    """An int that may follow a schedule: ``(fixed, table, fn, live function)``.

    ``value`` is an int, a list of ``(until, value)`` pairs with increasing ``until``, or a
    function of the epoch or step (a callable or a ``"module:qualname"`` string).
    """
    if is_function(value):
        spec, target = function_spec(path, value, fn_binding)
        return None, (), spec, target
    if isinstance(value, list | tuple):
        if not value:
            raise PlanError.single(path, "an empty schedule; give (until, value) pairs")
        table = until_table(path, value, "value", lambda where, v: check(v, where))
        return None, table, None, None
    return check(value, path), (), None, None


def batch_schedule_spec(
    batch_size: object, drop_last: object = False, by: object = "epoch"
) -> tuple[BatchSpec, object | None]:
    """The batch spec of ``with_batch_size`` (maybe progressive) and a function to bind.

    ``None`` is no fixed batch size: the default (``BatchSpec().batch_size``), which a token
    budget replaces by as many samples as it holds.
    """
    if batch_size is None:
        batch_size = BatchSpec().batch_size
    fixed, table, fn, live = int_schedule(
        "batch.batch_size", batch_size, "batch_size_fn", batch_size_value
    )
    unit = check_choice("batch.by", by, CURRICULUM_UNITS)
    drop = check_bool("batch.drop_last", drop_last)
    if fixed is not None:
        if unit != "epoch":
            raise PlanError.single(
                "batch.by", "only applies to a batch-size schedule (got a fixed batch size)"
            )
        return BatchSpec(fixed, drop), None
    if table:
        first = table[0][1]
    else:
        assert callable(live)
        try:
            first = batch_size_value(live(0))
        except PlanError as exc:
            raise PlanError.single(
                "batch.batch_size",
                f"the batch-size function at {unit} 0: {exc.problems[0].message}",
            ) from None
        except Exception as exc:
            raise PlanError.single(
                "batch.batch_size",
                f"the batch-size function failed at {unit} 0: {type(exc).__name__}: {exc}",
            ) from exc
    return BatchSpec(first, drop, table, fn, unit), live


MAX_SEED = 2**63 - 1
"""The largest seed: seeds are ints in [0, 2**63) so that every plan file is valid TOML."""


def order_spec(shuffle: object, seed: object, buffer_size: object = None) -> OrderSpec:
    """Whether to shuffle (a bool), the seed (an int in ``[0, 2**63)``), the stream buffer."""
    value = check_int(
        "order.seed", seed, minimum=0, maximum=MAX_SEED, fix="seeds are ints in [0, 2**63)"
    )
    buffer = None
    if buffer_size is not None:
        buffer = check_int(
            "order.buffer_size",
            buffer_size,
            minimum=1,
            fix="pass the number of samples the stream shuffle buffer holds",
        )
    return OrderSpec(check_bool("order.shuffle", shuffle), value, buffer)


def _options(path: str, options: Mapping[str, object]) -> FrozenMap:
    frozen = {}
    for key, value in options.items():
        frozen[key] = freeze_value(f"{path}.{key}", value)
    return FrozenMap(frozen)


def collator_spec(
    collator: object, options: Mapping[str, object]
) -> tuple[CallableSpec, object | None]:
    """The spec of a collator given by registry name, ``module:qualname`` or as a callable.

    Returns the spec and the live object to bind (``None`` for registry names). Options are only
    taken with registry names (a callable is already configured).
    """
    from loaderkit.collators import collators

    if isinstance(collator, str):
        if ":" in collator:
            if options:
                raise PlanError.single(
                    "collator.options",
                    f"options are only taken with registry names (got {sorted(options)} with "
                    f"{collator!r}); configure the callable yourself",
                )
            target = _resolve("collator", collator)
            return CallableSpec("ref", callable_ref(target) or collator), target
        name = check_str("collator", collator)
        if name == "auto":  # resolved against the dataset by compile()
            return CallableSpec("registry", "auto", _options("collator.options", options)), None
        if name not in collators:
            raise PlanError.single("collator", collators.unknown_message(name))
        spec = CallableSpec("registry", name, _options("collator.options", options))
        entry = collators.get(name)
        problems = entry.option_problems(dict(spec.options))
        if problems:
            raise PlanError(
                [
                    Problem(f"collator.options.{o}" if o else "collator.options", m)
                    for o, m in problems
                ]
            )
        return spec, None
    if callable(collator):
        if options:
            raise PlanError.single(
                "collator.options",
                f"options are only taken with registry names (got {sorted(options)} with a "
                f"callable); configure the callable yourself, e.g. with functools.partial",
            )
        ref = callable_ref(collator)
        if ref is not None:
            return CallableSpec("ref", ref), collator
        return CallableSpec("binding", "collator", label=_label(collator)), collator
    raise PlanTypeError.single(
        "collator",
        f"must be a registry name, a 'module:qualname' string or a callable (got "
        f"{type(collator).__name__} {collator!r})",
    )


def _resolve(path: str, ref: str) -> Callable[..., Any]:
    """Resolve a ``module:qualname`` string the caller wrote in code (imports allowed)."""
    try:
        target = resolve_ref(ref, allow_imports=True)
    except LookupError as exc:
        raise PlanError.single(path, str(exc)) from None
    if not callable(target):
        raise PlanTypeError.single(path, f"{ref!r} is not callable (got {type(target).__name__})")
    return target


def _label(fn: object) -> str:
    """How a callable without an importable path is told apart: ``module.qualname``."""
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"


MODALITIES: tuple[Modality, ...] = get_args(Modality)
"""What ``with_task(modality=...)`` and ``with_collator("auto")`` choose collators for."""

_TEXT_COLUMNS = ("input_ids",)
_IMAGE_COLUMNS = ("pixel_values", "image", "img")


def collator_for_modality(modality: object, path: str = "task.modality") -> str:
    """The registry name of the collator for ``modality``.

    The built-in collator named after the modality wins; otherwise the first registered
    collator (by name) declaring that modality; ``tabular`` data uses ``default``.
    """
    from loaderkit.collators import collators

    text = check_choice(path, modality, MODALITIES)
    if text == "tabular":
        return "default"
    if text in collators and collators.get(text).modality == text:
        return text
    for entry in collators.entries():
        if entry.modality == text:
            return entry.name
    raise PlanError.single(
        path,
        f"no collator is registered for modality {text!r}; register one with "
        f"@loaderkit.register_collator('my-{text}', modality={text!r}) or name a collator",
    )


def auto_modality(dataset: DatasetSpec) -> tuple[str, str, tuple[str, ...]] | None:
    """(modality, why, the columns that said so) from a dataset's columns and HF features."""
    features = dict(zip(dataset.columns, dataset.features, strict=False))
    image = [c for c in dataset.columns if features.get(c) == "Image" or c in _IMAGE_COLUMNS]
    audio = [c for c in dataset.columns if features.get(c) == "Audio"]
    text = [c for c in dataset.columns if c in _TEXT_COLUMNS]
    found = [(m, cols) for m, cols in (("vision", image), ("audio", audio), ("text", text)) if cols]
    if not found:
        return None
    if len(found) > 1:
        listed = "; ".join(f"{m}: {', '.join(map(repr, cols))}" for m, cols in found)
        return "multimodal", f"columns of several modalities ({listed})", ()
    modality, cols = found[0]
    kinds = [f"{c!r} ({features[c]})" if features.get(c) else repr(c) for c in cols]
    return modality, f"column {', '.join(kinds)}", tuple(cols)


def resolve_auto(spec: CallableSpec, dataset: DatasetSpec | None) -> CallableSpec:
    """Replace ``with_collator("auto")`` by the collator the dataset calls for.

    Raises a ``PlanError`` at ``collator`` when the dataset does not say (a map-style dataset is
    never read at compile time): the fix names ``with_task``.
    """
    if spec.source != "registry" or spec.name != "auto":
        return spec
    found = None if dataset is None else auto_modality(dataset)
    if found is None:
        what = "no dataset" if dataset is None else f"dataset {dataset.binding!r}"
        raise PlanError.single(
            "collator",
            f"'auto' cannot tell the modality of {what} (no input_ids, image or audio "
            f"column); use with_task(modality=...) or name a collator",
        )
    modality, why, columns = found
    if modality == "multimodal":
        raise PlanError.single(
            "collator",
            f"'auto' found {why}; configure with_collator('multimodal', collators={{...}}) "
            f"with one collator per key",
        )
    name = collator_for_modality(modality, "collator")
    options = dict(spec.options)
    if modality == "vision" and "image_key" not in options and len(columns) == 1:
        from loaderkit.collators import collators

        if not collators.get(name).signature_problems({"image_key": columns[0]}):
            options["image_key"] = columns[0]  # the column the images are in
    chosen, _ = collator_spec(name, options)
    return attrs.evolve(chosen, reason=f"auto: {why} -> {modality}")


def _accepts_rng(path: str, fn: Callable[..., Any]) -> bool:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    params = signature.parameters
    rng = params.get("rng")
    takes_rng = rng is not None and rng.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
    try:
        if takes_rng:
            signature.bind(object(), rng=object())
        else:
            signature.bind(object())
    except TypeError:
        raise PlanTypeError.single(
            path,
            f"{getattr(fn, '__name__', fn)!r} must accept one positional argument (the sample); "
            f"its signature is {signature}",
        ) from None
    return takes_rng


def transform_spec(fn: object) -> tuple[CallableSpec, object | None]:
    """The spec of a per-sample transform: a callable, ``module:qualname`` or registry name."""
    from loaderkit.transforms import transforms

    if isinstance(fn, str):
        if ":" in fn:
            target = _resolve("transform", fn)
            accepts = _accepts_rng("transform", target)
            return CallableSpec("ref", callable_ref(target) or fn, accepts_rng=accepts), target
        name = check_str("transform", fn)
        if name not in transforms:
            raise PlanError.single("transform", transforms.unknown_message(name))
        accepts = _accepts_rng("transform", transforms.get(name).factory)
        return CallableSpec("registry", name, accepts_rng=accepts), None
    if callable(fn):
        accepts = _accepts_rng("transform", fn)
        ref = callable_ref(fn)
        if ref is not None:
            return CallableSpec("ref", ref, accepts_rng=accepts), fn
        return CallableSpec("binding", "transform", accepts_rng=accepts, label=_label(fn)), fn
    raise PlanTypeError.single(
        "transform",
        f"must be a callable, a 'module:qualname' string or a registered transform name (got "
        f"{type(fn).__name__} {fn!r})",
    )
