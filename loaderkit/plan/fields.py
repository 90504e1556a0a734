"""One constructor per plan section, shared by the builder's ``with_*`` methods and plan loading.

Each function checks its own arguments (types, ranges, registry names) and returns the frozen
spec, or raises a :class:`~loaderkit.errors.PlanError` whose problem path names the field. Rules
that involve several sections live in :mod:`loaderkit.plan.rules`.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, get_args

import attrs

from loaderkit._checks import (
    LIMITS,
    FrozenMap,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_optional_bool,
    check_str,
    did_you_mean,
    freeze_value,
)
from loaderkit.datasets import plain_type_name, source_of
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.specs import (
    BUCKET_COSTS,
    CURRICULUM_UNITS,
    DEVICES,
    MIXTURE_BINDING,
    MIXTURE_MODES,
    SCHEDULES,
    START_METHODS,
    BatchSpec,
    BucketingSpec,
    CallableSpec,
    CurriculumSpec,
    DatasetSpec,
    DistributedSpec,
    LengthSource,
    MixtureSpec,
    Modality,
    OrderSpec,
    WeightsSpec,
    WorkersSpec,
    describe_dataset,
)
from loaderkit.plan.workers import num_workers_value
from loaderkit.registry import callable_ref, resolve_ref

__all__ = [
    "batch_schedule_spec",
    "batch_size_value",
    "batch_spec",
    "binding_name",
    "bucketing_spec",
    "collator_spec",
    "dataset_spec",
    "device_spec",
    "distributed_spec",
    "int_schedule",
    "mixture_options",
    "mixture_spec",
    "order_spec",
    "source_weights",
    "transform_spec",
    "weights_spec",
    "workers_spec",
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
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda)(:(0|[1-9][0-9]*))?$")


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
    return _described(dataset, binding)


def _described(dataset: object, binding: str) -> DatasetSpec:
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


def bucketing_spec(
    length: object,
    *,
    num_buckets: object = None,
    max_tokens: object = None,
    max_batch_size: object = None,
    cost: object = "linear",
) -> tuple[BucketingSpec, object | None]:
    """The bucketing spec and the live object to bind (lengths or a length function).

    ``length`` is a column/sample key name, a ``"module:qualname"`` function, a callable taking
    a sample, or a sequence of precomputed lengths (one int per sample).
    """
    source, live = _values_source("bucketing.length", length, "lengths", "length", _lengths_array)
    buckets = (
        None
        if num_buckets is None
        else check_int("bucketing.num_buckets", num_buckets, minimum=1, maximum=LIMITS.batch_size)
    )
    tokens = (
        None
        if max_tokens is None
        else check_int(
            "bucketing.max_tokens",
            max_tokens,
            minimum=1,
            maximum=LIMITS.batch_size,
            fix="a token budget",
        )
    )
    cap = (
        None
        if max_batch_size is None
        else check_int(
            "bucketing.max_batch_size", max_batch_size, minimum=1, maximum=LIMITS.batch_size
        )
    )
    model = check_choice("bucketing.cost", cost, BUCKET_COSTS)
    return BucketingSpec(source, buckets, tokens, cap, model), live


def _values_source(
    path: str, value: object, array_name: str, fn_binding: str, read_array: Callable[..., Any]
) -> tuple[LengthSource, object | None]:
    """A per-sample value source (column, function or precomputed array) and its live object."""
    if is_function(value):
        fn, target = function_spec(path, value, fn_binding)
        return LengthSource("callable", fn=fn), target
    if isinstance(value, str):
        return LengthSource("column", check_str(path, value)), None
    values = read_array(path, value)
    digest = hashlib.sha256(values.tobytes()).hexdigest()
    return LengthSource("array", array_name, digest=digest), values


def weights_spec(
    weights: object, *, replacement: object = True, num_samples: object = None
) -> tuple[WeightsSpec, object | None]:
    """The sampling-weights spec and the live object to bind (weights or a weight function)."""
    source, live = _values_source(
        "sampling_weights.weights", weights, "weights", "weight", _weights_array
    )
    draws = (
        None
        if num_samples is None
        else check_int(
            "sampling_weights.num_samples", num_samples, minimum=1, fix="samples drawn per epoch"
        )
    )
    return (
        WeightsSpec(source, check_bool("sampling_weights.replacement", replacement), draws),
        live,
    )


def curriculum_spec(
    difficulty: object,
    schedule: object = "linear",
    *,
    by: object = "epoch",
    horizon: object = None,
    start: object = 0.1,
    degree: object = 2.0,
    steps: object = (),
) -> tuple[CurriculumSpec, list[tuple[str, object]]]:
    """The curriculum spec and the live objects to bind ``(name, object)``."""
    source, live = _values_source(
        "curriculum.difficulty", difficulty, "difficulty", "difficulty_fn", _difficulty_array
    )
    bound: list[tuple[str, object]] = []
    if live is not None and source.kind != "column":
        key = source.name if source.kind == "array" else (source.fn.name if source.fn else "")
        bound.append((key, live))
    fn: CallableSpec | None = None
    if is_function(schedule):
        fn, target = function_spec("curriculum.schedule", schedule, "schedule")
        bound.append((fn.name, target))
        kind = "callable"
    else:
        kind = check_choice("curriculum.schedule", schedule, SCHEDULES)
    unit = check_choice("curriculum.by", by, CURRICULUM_UNITS)
    span = None if horizon is None else check_number("curriculum.horizon", horizon, minimum=0.0)
    if span is not None and span <= 0:
        raise PlanError.single("curriculum.horizon", f"must be > 0 (got {horizon})")
    if kind in ("linear", "root") and span is None:
        raise PlanError.single(
            "curriculum.horizon",
            f"the {kind!r} schedule needs horizon= (the {unit}s until every sample is eligible)",
        )
    first = check_number("curriculum.start", start, minimum=0.0)
    if not 0 < first <= 1:
        raise PlanError.single("curriculum.start", f"must be in (0, 1] (got {start})")
    power = check_number("curriculum.degree", degree, minimum=1.0)
    table = _steps("curriculum.steps", steps)
    if kind == "discrete" and not table:
        raise PlanError.single(
            "curriculum.steps",
            "the 'discrete' schedule needs steps=[(until, competence), ...]",
        )
    spec = CurriculumSpec(source, kind, fn, unit, span, first, power, table)
    return spec, bound


def _steps(path: str, steps: object) -> tuple[tuple[float, float], ...]:
    if not isinstance(steps, list | tuple):
        raise PlanTypeError.single(
            path, f"must be a list of (until, competence) pairs (got {steps!r})"
        )
    out: list[tuple[float, float]] = []
    for i, pair in enumerate(steps):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise PlanTypeError.single(
                f"{path}[{i}]", f"must be an (until, competence) pair (got {pair!r})"
            )
        until = check_number(f"{path}[{i}]", pair[0], minimum=0.0)
        level = check_number(f"{path}[{i}]", pair[1], minimum=0.0)
        if not 0 < level <= 1:
            raise PlanError.single(f"{path}[{i}]", f"competence must be in (0, 1] (got {pair[1]})")
        if out and until <= out[-1][0]:
            raise PlanError.single(f"{path}[{i}]", "the 'until' values must increase")
        out.append((until, level))
    return tuple(out)


def _float_array(path: str, values: object, what: str) -> Any:
    """One float64 per sample from a sequence; the type problems named at ``path``."""
    import numpy as np

    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise PlanTypeError.single(
            path,
            f"must be a column name, a function of a sample or a sequence of {what} (got "
            f"{type(values).__name__})",
        )
    _check_count(path, values, what)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:  # an int over 1e308
        raise PlanTypeError.single(path, f"cannot read {what} from it: {exc}") from None
    if array.ndim != 1:
        raise PlanTypeError.single(path, f"must be one number per sample (got shape {array.shape})")
    return np.ascontiguousarray(array)


def _check_count(path: str, values: object, what: str) -> None:
    """Refuse a sequence claiming more values than a dataset may hold, before reading it."""
    try:
        count = len(values)  # type: ignore[arg-type]
    except Exception as exc:  # a __len__ too large, negative or failing
        raise PlanTypeError.single(
            path, f"len() of the {what} failed ({type(exc).__name__}: {exc})"
        ) from exc
    if count > LIMITS.dataset_length:
        raise PlanError.single(
            path,
            f"holds {count:,} {what}; at most {LIMITS.dataset_length:,} (one per sample) are "
            f"allowed",
        )


def _difficulty_array(path: str, values: object) -> Any:
    array = _float_array(path, values, "difficulties")
    if array.size and (array != array).any():  # NaN
        raise PlanError.single(path, "difficulties must not be NaN")
    return array


def _weights_array(path: str, values: object) -> Any:
    import numpy as np

    array = _float_array(path, values, "weights")
    if array.size and not np.isfinite(array).all():
        raise PlanError.single(path, "weights must be finite (got NaN or inf)")
    if array.size and float(array.min()) < 0:
        raise PlanError.single(path, f"weights must be >= 0 (got {float(array.min())})")
    if array.size and not array.any():
        raise PlanError.single(path, "all weights are 0; give some sample a positive weight")
    return array


def _lengths_array(path: str, values: object) -> Any:
    import numpy as np

    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise PlanTypeError.single(
            path,
            f"must be a column name, a function of a sample or a sequence of lengths (got "
            f"{type(values).__name__})",
        )
    _check_count(path, values, "lengths")
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError, MemoryError) as exc:
        raise PlanTypeError.single(path, f"cannot read lengths from it: {exc}") from None
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise PlanTypeError.single(
            path, f"must be one int per sample (got an array of {array.dtype}, shape {array.shape})"
        )
    if array.size and int(array.min()) < 0:
        raise PlanError.single(path, f"lengths must be >= 0 (got {int(array.min())})")
    return np.ascontiguousarray(array, dtype=np.int64)


def workers_spec(
    num_workers: object,
    *,
    prefetch_factor: object = None,
    persistent: object = None,
    pin_memory: object = None,
    start_method: object = None,
    timeout: object = None,
) -> WorkersSpec:
    """Worker count (an int or ``"auto"``) and execution settings; ``None`` means automatic."""
    count = num_workers_value(num_workers)
    prefetch = (
        None
        if prefetch_factor is None
        else check_int(
            "workers.prefetch_factor",
            prefetch_factor,
            minimum=1,
            maximum=LIMITS.prefetch_factor,
            fix="it counts batches prefetched per worker",
        )
    )
    if (
        isinstance(count, int)
        and prefetch is not None
        and count * prefetch > (LIMITS.batches_in_flight)
    ):
        raise PlanError.single(
            "workers.prefetch_factor",
            f"{count} workers x prefetch_factor {prefetch} = {count * prefetch:,} batches in "
            f"flight, more than the bound of {LIMITS.batches_in_flight:,}; lower one of them",
        )
    method = (
        None
        if start_method is None
        else check_choice("workers.start_method", start_method, START_METHODS)
    )
    wait = (
        None
        if timeout is None
        else check_number(
            "workers.timeout",
            timeout,
            minimum=0.0,
            maximum=LIMITS.timeout_seconds,
            fix="give seconds to wait for a batch, or None for no limit",
        )
    )
    return WorkersSpec(
        count,
        prefetch,
        check_optional_bool("workers.persistent", persistent),
        check_optional_bool("workers.pin_memory", pin_memory),
        method,
        wait,
    )


def device_spec(device: object) -> str:
    """``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"``, lower-cased."""
    text = check_str("device", device).strip().lower()
    if not _DEVICE.match(text) or text.startswith(("auto:", "cpu:", "mps:")):
        listed = ", ".join(repr(d) for d in DEVICES)
        raise PlanError.single("device", f"must be one of {listed} or 'cuda:N' (got {device!r})")
    _, _, index = text.partition(":")
    if index and (len(index) > 6 or int(index) > LIMITS.device_index):
        raise PlanError.single(
            "device",
            f"the device index must be <= {LIMITS.device_index} (got {text[:40]!r}); name "
            f"a device this machine has, e.g. 'cuda:0', or 'auto'",
        )
    return text


def distributed_spec(
    *,
    world_size: object = None,
    rank: object = None,
    even_batches: object = True,
    enabled: object = True,
) -> DistributedSpec:
    """Sharding settings; ``None`` sizes are detected when the plan is built."""
    if not check_bool("distributed.enabled", enabled):
        if world_size is not None or rank is not None or even_batches is not True:
            raise PlanError.single(
                "distributed.enabled",
                f"is False but world_size={world_size!r}, rank={rank!r}, even_batches="
                f"{even_batches!r} were given; drop them (.with_distributed(enabled=False)) or "
                f"enable sharding",
            )
        return DistributedSpec()
    size = (
        None if world_size is None else check_int("distributed.world_size", world_size, minimum=1)
    )
    index = None if rank is None else check_int("distributed.rank", rank, minimum=0)
    return DistributedSpec(True, size, index, check_bool("distributed.even_batches", even_batches))


def source_weights(path: str, value: object, names: tuple[str, ...]) -> tuple[float, ...]:
    """One weight per source, from a mapping name -> weight or a sequence in source order."""
    import math

    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in names]
        if unknown:
            name = str(unknown[0])
            raise PlanError.single(
                path,
                f"names no source {name!r}{did_you_mean(name, names)}; the sources are "
                f"{', '.join(repr(n) for n in names)}",
            )
        missing = [n for n in names if n not in value]
        if missing:
            raise PlanError.single(
                path,
                f"has no weight for {', '.join(repr(n) for n in missing)}; give every source "
                f"a weight (0 leaves a source out)",
            )
        raw = [value[n] for n in names]
    elif isinstance(value, list | tuple):
        if len(value) != len(names):
            raise PlanError.single(
                path,
                f"has {len(value)} weights for {len(names)} sources "
                f"({', '.join(repr(n) for n in names)}); give one weight per source",
            )
        raw = list(value)
    else:
        raise PlanTypeError.single(
            path,
            f"must be a mapping of source name to weight or a list of weights (got "
            f"{type(value).__name__})",
        )
    weights = tuple(
        check_number(f"{path}[{n!r}]", w, minimum=0.0, fix="weights are numbers >= 0")
        for n, w in zip(names, raw, strict=True)
    )
    if not all(math.isfinite(w) for w in weights):
        raise PlanError.single(path, f"weights must be finite (got {list(weights)})")
    if not any(weights):
        raise PlanError.single(path, "all weights are 0; give some source a positive weight")
    return weights


def _weights_table(
    path: str, value: object, names: tuple[str, ...]
) -> tuple[tuple[float, tuple[float, ...]], ...]:
    """A discrete weight schedule ``[(until, weights), ...]`` with increasing ``until``."""
    assert isinstance(value, list | tuple)
    out = until_table(path, value, "weights", lambda where, v: source_weights(where, v, names))
    if not out:
        raise PlanError.single(path, "an empty weight schedule; give (until, weights) pairs")
    return out


def _is_schedule_table(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(p, list | tuple) and len(p) == 2 for p in value)
        and all(isinstance(p[1], Mapping | list | tuple) for p in value)
    )


def mixture_spec(
    sources: object,
    *,
    weights: object = None,
    mode: object = "weighted",
    stratified: object = False,
    by: object = "epoch",
    num_samples: object = None,
    source_key: object = None,
) -> tuple[MixtureSpec, DatasetSpec, list[tuple[str, object]]]:
    """The mixture spec, the combined dataset spec, and the live objects to bind."""
    if not isinstance(sources, Mapping) or not sources:
        raise PlanTypeError.single(
            "mixture.sources",
            f"must be a non-empty mapping of source name to dataset, e.g. {{'wiki': wiki_ds, "
            f"'code': code_ds}} (got {type(sources).__name__})",
        )
    specs: list[DatasetSpec] = []
    bound: list[tuple[str, object]] = []
    for key, obj in sources.items():
        name = binding_name("mixture.sources", key)
        path = f"mixture.sources.{name}"
        if name in RESERVED_BINDINGS:
            raise PlanError.single(
                path, f"{name!r} is reserved for an object the builder binds itself; rename it"
            )
        if obj is None:
            raise PlanTypeError.single(path, "got None; pass a dataset object")
        try:
            spec = _described(obj, name)
        except PlanError as exc:
            raise type(exc)(
                [Problem(p.path.replace("dataset", path, 1), p.message) for p in exc.problems]
            ) from None
        if spec.iterable:
            raise PlanError.single(
                path,
                f"{name!r} is an iterable (streaming) dataset; mixtures draw by index, so pass "
                f"map-style datasets",
            )
        if spec.length == 0:
            raise PlanError.single(path, f"{name!r} has 0 samples; drop it from the mixture")
        specs.append(spec)
        bound.append((name, obj))
    mixture, live = mixture_options(
        specs,
        weights=weights,
        mode=mode,
        stratified=stratified,
        by=by,
        num_samples=num_samples,
        source_key=source_key,
    )
    return mixture, combined_dataset(mixture), bound + live


def mixture_options(
    specs: Sequence[DatasetSpec],
    *,
    weights: object = None,
    mode: object = "weighted",
    stratified: object = False,
    by: object = "epoch",
    num_samples: object = None,
    source_key: object = None,
) -> tuple[MixtureSpec, list[tuple[str, object]]]:
    """Check a mixture's options against its sources; the spec and a weight function to bind."""
    bound: list[tuple[str, object]] = []
    names = tuple(s.binding for s in specs)
    kind = check_choice("mixture.mode", mode, MIXTURE_MODES)
    unit = check_choice("mixture.by", by, CURRICULUM_UNITS)
    strat = check_bool("mixture.stratified", stratified)
    draws = (
        None
        if num_samples is None
        else check_int("mixture.num_samples", num_samples, minimum=1, fix="samples per epoch")
    )
    key = None if source_key is None else check_str("mixture.source_key", source_key)
    fixed: tuple[float, ...] | None = None
    table: tuple[tuple[float, tuple[float, ...]], ...] = ()
    fn: CallableSpec | None = None
    if weights is None:
        pass
    elif is_function(weights):
        fn, target = function_spec("mixture.weights", weights, "mixture_weights")
        bound.append((fn.name, target))
    elif _is_schedule_table(weights):
        table = _weights_table("mixture.weights", weights, names)
    else:
        fixed = source_weights("mixture.weights", weights, names)
    if kind != "weighted":
        given = [
            label
            for label, value in (
                ("weights", weights),
                ("num_samples", num_samples),
                ("stratified", strat or None),
            )
            if value is not None
        ]
        if given:
            raise PlanError.single(
                f"mixture.{given[0]}",
                f"only applies to mode='weighted' (got mode={kind!r}); drop "
                f"{', '.join(given)} or use mode='weighted'",
            )
    if key is not None:
        clash = [s.binding for s in specs if key in s.columns]
        if clash:
            raise PlanError.single(
                "mixture.source_key",
                f"{key!r} is already a column of {', '.join(repr(c) for c in clash)}; pick "
                f"another key for the source ids",
            )
    mixture = MixtureSpec(tuple(specs), kind, fixed, table, fn, unit, strat, draws, key)
    return mixture, bound


def combined_dataset(mixture: MixtureSpec) -> DatasetSpec:
    """The dataset spec a mixture reads as: the concatenation of its sources."""
    first = mixture.sources[0]
    columns: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    if all(s.columns for s in mixture.sources):
        shared = [c for c in first.columns if all(c in s.columns for s in mixture.sources)]
        columns = tuple(shared)
        if first.features:
            by_name = dict(zip(first.columns, first.features, strict=False))
            features = tuple(by_name[c] for c in shared)
    return DatasetSpec(
        MIXTURE_BINDING,
        "mixture",
        "loaderkit.mixture",
        sum(mixture.sizes),
        None,
        columns,
        features,
    )
