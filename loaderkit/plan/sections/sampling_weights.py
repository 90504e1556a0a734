"""The ``[sampling_weights]`` section: weighted sampling of the dataset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_bool, check_int
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.sections.base import RuleContext, Section, explain_row
from loaderkit.plan.sections.common import (
    float_array,
    source_problems,
    source_to_dict,
    values_source,
)
from loaderkit.plan.specs import DatasetSpec, LengthSource

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "SECTION",
    "WeightsSpec",
    "read_weights",
    "weights_calls",
    "weights_line",
    "weights_problems",
    "weights_spec",
    "weights_to_dict",
]


@attrs.frozen
class WeightsSpec:
    """Per-sample sampling weights (see ``DataLoaderBuilder.with_sampling_weights``).

    ``source`` reads one number per sample, the same ways bucketing reads lengths (a column, a
    function of a sample, or precomputed values bound as ``"weights"``).
    """

    source: LengthSource
    replacement: bool = True
    num_samples: int | None = None

    def bound_names(self) -> tuple[str, ...]:
        """The binding of the weights (precomputed values or a function; none for a column)."""
        return self.source.bound_names()


def weights_spec(
    weights: object, *, replacement: object = True, num_samples: object = None
) -> tuple[WeightsSpec, object | None]:
    """The sampling-weights spec and the live object to bind (weights or a weight function)."""
    source, live = values_source(
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


def _weights_array(path: str, values: object) -> Any:
    import numpy as np

    array = float_array(path, values, "weights")
    if array.size and not np.isfinite(array).all():
        raise PlanError.single(path, "weights must be finite (got NaN or inf)")
    if array.size and float(array.min()) < 0:
        raise PlanError.single(path, f"weights must be >= 0 (got {float(array.min())})")
    if array.size and not array.any():
        raise PlanError.single(path, "all weights are 0; give some sample a positive weight")
    return array


def weights_to_dict(spec: WeightsSpec) -> dict[str, Any]:
    """The ``[sampling_weights]`` table of a plan file (also what the fingerprint hashes)."""
    out: dict[str, Any] = {"weights": source_to_dict(spec.source), "replacement": spec.replacement}
    if spec.num_samples is not None:
        out["num_samples"] = spec.num_samples
    return out


def read_weights(reader: Reader, data: Mapping[str, Any]) -> WeightsSpec | None:
    """Read the ``[sampling_weights]`` table: the weight source and the options."""
    options = ("replacement", "num_samples")
    return reader.values_section(
        data, "sampling_weights", "weights", "source", options, weights_spec
    )


def weights_problems(
    spec: WeightsSpec,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
) -> list[Problem]:
    """What keeps ``with_sampling_weights`` from drawing this dataset's samples."""
    problems = source_problems(
        "sampling_weights.weights", spec.source, dataset, bindings, needs_pickle
    )
    if dataset is not None and dataset.iterable:
        problems.append(
            Problem(
                "sampling_weights",
                f"needs random access to draw samples, and {dataset.binding!r} is an iterable "
                f"dataset; pass a map-style dataset",
            )
        )
    size = dataset.length if dataset is not None else None
    if not spec.replacement and size and spec.num_samples is not None and spec.num_samples > size:
        problems.append(
            Problem(
                "sampling_weights.num_samples",
                f"draws {spec.num_samples} samples without replacement from {size}; lower "
                f"num_samples or set replacement=True",
            )
        )
    return problems


def weights_line(plan: LoaderPlan) -> str:
    """The ``sampling`` line of ``explain()``: the weights and the draws per epoch."""
    spec = plan.sampling_weights
    assert spec is not None
    draws = f"{spec.num_samples:,}" if spec.num_samples else "dataset-size"
    how = "with replacement" if spec.replacement else "without replacement (a weighted order)"
    return (
        f"weighted by {spec.source.describe()}, {draws} draws per epoch {how}; keyed by "
        f"(seed, epoch)"
    )


def weights_calls(spec: WeightsSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_sampling_weights`` call."""
    args = [ctx.source_arg(spec.source, "weights")]
    if not spec.replacement:
        args.append("replacement=False")
    if spec.num_samples is not None:
        args.append(f"num_samples={spec.num_samples}")
    return (f".with_sampling_weights({', '.join(args)})",)


def _rules(ctx: RuleContext) -> list[Problem]:
    """The weights' problems: their source, its length, the number of draws."""
    return weights_problems(
        ctx.sections["sampling_weights"], ctx.sections["dataset"], ctx.bindings, ctx.needs_pickle
    )


SECTION: Section[WeightsSpec] = Section(
    rules={"sampling_weights": _rules},
    name="sampling_weights",
    explain=explain_row("sampling", weights_line, of="sampling_weights"),
    builder_calls=weights_calls,
    read=read_weights,
    to_dict=weights_to_dict,
    bindings=WeightsSpec.bound_names,
    fingerprint="stream",
    why="weight source (column, function or digest), `replacement`, `num_samples`",
)
