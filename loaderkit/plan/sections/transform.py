"""The ``[transform]`` section: the per-sample function."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from loaderkit._validate import check_str
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import callable_label, resolve_function
from loaderkit.plan.sections.base import FingerprintRow, RuleContext, Section, explain_row
from loaderkit.plan.sections.common import callable_problems, callable_to_dict
from loaderkit.plan.specs import CallableSpec
from loaderkit.registry import callable_ref

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "SECTION",
    "read_transform",
    "transform_calls",
    "transform_line",
    "transform_spec",
    "transform_to_dict",
]


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
            target = resolve_function("transform", fn)
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
        return CallableSpec(
            "binding", "transform", accepts_rng=accepts, label=callable_label(fn)
        ), fn
    raise PlanTypeError.single(
        "transform",
        f"must be a callable, a 'module:qualname' string or a registered transform name (got "
        f"{type(fn).__name__} {fn!r})",
    )


def transform_to_dict(spec: CallableSpec) -> dict[str, Any]:
    """The ``[transform]`` table of a plan file."""
    return callable_to_dict(spec, with_options=False)


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    spec = plan.transform
    if spec is None:  # hashed as null: unset is a stream of its own
        return {"transform": None}
    return {
        "transform": {
            "source": spec.source,
            "name": spec.name,
            "accepts_rng": spec.accepts_rng,
            "label": spec.label,
        }
    }


def read_transform(reader: Reader, data: Mapping[str, Any]) -> CallableSpec | None:
    """Read the ``[transform]`` table."""
    if "transform" not in data:
        return None
    return reader.read_callable(data, "transform", transform_spec)


def transform_calls(spec: CallableSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_transform`` call."""
    return (f".with_transform({ctx.callable_arg(spec)})",)


def transform_line(plan: LoaderPlan) -> str:
    """The ``transform`` line of ``explain()`` (``none`` without one)."""
    if plan.transform is None:
        return "none"
    text = plan.transform.describe()
    if plan.transform.accepts_rng:
        text += " with a per-sample rng keyed by (seed, epoch, index)"
    return text


def _rules(ctx: RuleContext) -> list[Problem]:
    """The transform's problems as a callable (bound, importable, picklable where needed)."""
    return callable_problems("transform", ctx.sections["transform"], ctx.bindings, ctx.needs_pickle)


SECTION: Section[CallableSpec] = Section(
    rules={"transform": _rules},
    name="transform",
    explain=explain_row("transform", transform_line),
    builder_calls=transform_calls,
    read=read_transform,
    to_dict=transform_to_dict,
    bindings=CallableSpec.bound_names,
    fingerprint="stream",
    stream=_stream,
    execution_only=("reason",),
    rows=(
        FingerprintRow(
            "transform", "stream", "source, name, `accepts_rng`, label: what a sample becomes"
        ),
    ),
)
