"""The ``[collator]`` section: what makes a batch of samples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._frozen import FrozenMap, freeze_value, thaw_value
from loaderkit._text import inert
from loaderkit._validate import check_choice, check_str
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import callable_label, resolve_function
from loaderkit.plan.sections.base import FingerprintRow, RuleContext, Section, explain_row
from loaderkit.plan.sections.common import callable_problems, callable_to_dict
from loaderkit.plan.specs import CallableSpec, DatasetSpec
from loaderkit.registry import PluginNotImportedError, callable_ref

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "DEFAULT_COLLATOR",
    "MODALITIES",
    "SECTION",
    "Modality",
    "auto_modality",
    "collator_calls",
    "collator_for_modality",
    "collator_line",
    "collator_spec",
    "collator_to_dict",
    "read_collator",
    "resolve_auto",
]

Modality = Literal["text", "vision", "audio", "multimodal", "tabular"]
"""What ``with_task`` collates for."""


DEFAULT_COLLATOR = CallableSpec("registry", "default")


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
            target = resolve_function("collator", collator)
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
        return CallableSpec("binding", "collator", label=callable_label(collator)), collator
    raise PlanTypeError.single(
        "collator",
        f"must be a registry name, a 'module:qualname' string or a callable (got "
        f"{type(collator).__name__} {collator!r})",
    )


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


def collator_to_dict(spec: CallableSpec) -> dict[str, Any]:
    """The ``[collator]`` table of a plan file."""
    return callable_to_dict(spec, with_options=True)


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    spec = plan.collator
    return {
        "collator": {
            "source": spec.source,
            "name": spec.name,
            "options": thaw_value(spec.options),
            "label": spec.label,
        }
    }


def read_collator(reader: Reader, data: Mapping[str, Any]) -> CallableSpec | None:
    """Read the ``[collator]`` table; ``"auto"`` is resolved from the dataset read before."""
    if "collator" not in data:
        return DEFAULT_COLLATOR
    chosen = reader.read_callable(data, "collator", collator_spec)
    dataset: DatasetSpec | None = reader.values.get("dataset")
    if chosen is None or dataset is None:
        return chosen
    try:
        resolved: CallableSpec | None = reader.attempt(lambda: resolve_auto(chosen, dataset))
    except PluginNotImportedError as exc:  # inspecting: 'auto' would import plugins
        reader.problems.append(
            Problem(
                "collator",
                f"'auto' cannot be resolved without importing plugins ({exc}); name the "
                f"collator, or load the plan to build",
            )
        )
        return chosen
    return resolved


def collator_calls(spec: CallableSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_collator`` call (none for the default collator)."""
    if spec == DEFAULT_COLLATOR:
        return ()
    return (f".with_collator({ctx.callable_arg(spec, with_options=True)})",)


def collator_line(plan: LoaderPlan) -> str:
    """The ``collator`` line of ``explain()``: the collator, and why ``auto`` chose it."""
    if not plan.batch.batched:
        return "none: no batches to collate (batch_size=None)"
    reason = plan.collator.reason
    return plan.collator.describe() + (f"  ({inert(reason)})" if reason else "")


def _rules(ctx: RuleContext) -> list[Problem]:
    """The collator's problems as a callable (bound, importable, picklable where needed)."""
    return callable_problems("collator", ctx.sections["collator"], ctx.bindings, ctx.needs_pickle)


SECTION: Section[CallableSpec] = Section(
    rules={"collator": _rules},
    name="collator",
    explain=explain_row("collator", collator_line),
    builder_calls=collator_calls,
    read=read_collator,
    to_dict=collator_to_dict,
    bindings=CallableSpec.bound_names,
    fingerprint="stream",
    stream=_stream,
    execution_only=("reason",),
    rows=(
        FingerprintRow(
            "collator", "stream", "source, name, options, label: what a batch is made of"
        ),
    ),
)
