"""The ``[mixture]`` section: several datasets read as one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._validate import check_bool, check_choice, check_int, check_str
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import (
    RESERVED_BINDINGS,
    binding_name,
)
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import RuleContext, Section, explain_row
from loaderkit.plan.sections.common import callable_problems, function_table
from loaderkit.plan.sections.dataset import (
    dataset_to_dict,
    describe_recorded,
    described,
    read_dataset,
    shown_object,
)
from loaderkit.plan.sections.mixture_weights import source_weights, weights_options
from loaderkit.plan.specs import CURRICULUM_UNITS, CallableSpec, DatasetSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.bucketing import BucketingSpec
    from loaderkit.plan.sections.curriculum import CurriculumSpec
    from loaderkit.plan.sections.sampling_weights import WeightsSpec

__all__ = [
    "MIXTURE_BINDING",
    "MIXTURE_MODES",
    "SECTION",
    "MixtureMode",
    "MixtureSpec",
    "combined_dataset",
    "mixture_bucketing_problems",
    "mixture_calls",
    "mixture_line",
    "mixture_options",
    "mixture_problems",
    "mixture_samples",
    "mixture_spec",
    "mixture_to_dict",
    "read_mixture",
    "source_weights",
]

MixtureMode = Literal["weighted", "sequential", "round_robin", "max_size_cycle", "min_size"]
"""How ``with_mixture`` draws from its sources."""
MIXTURE_MODES: tuple[MixtureMode, ...] = get_args(MixtureMode)

MIXTURE_BINDING = "mixture"
"""The binding name a mixture's combined dataset shows under (no object is bound to it)."""


@attrs.frozen
class MixtureSpec:
    """Several datasets read as one (see ``DataLoaderBuilder.with_mixture``).

    ``sources`` are the datasets, each bound under its own name (``DatasetSpec.binding``); the
    plan's ``dataset`` is then their concatenation (kind ``"mixture"``), source ``s`` sample
    ``i`` being global index ``sum(len(sources[:s])) + i``. ``weights`` are fixed source
    weights (``None``: proportional to the sources' sizes); ``schedule`` is a discrete weight
    schedule ``((until, weights), ...)`` and ``fn`` a weight function of the epoch or step
    (``by``).
    """

    sources: tuple[DatasetSpec, ...]
    mode: str = "weighted"
    weights: tuple[float, ...] | None = None
    schedule: tuple[tuple[float, tuple[float, ...]], ...] = ()
    fn: CallableSpec | None = None
    by: str = "epoch"
    stratified: bool = False
    num_samples: int | None = None
    source_key: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The source names, in source order (source ``s`` has id ``s`` in ``source_key``)."""
        return tuple(s.binding for s in self.sources)

    def bound_names(self) -> tuple[str, ...]:
        """The bindings of the sources and of the weights' function."""
        return self.names + (self.fn.bound_names() if self.fn is not None else ())

    @property
    def sizes(self) -> tuple[int, ...]:
        """The number of samples of each source."""
        return tuple(s.length or 0 for s in self.sources)


def mixture_spec(
    sources: object, **options: object
) -> tuple[MixtureSpec, DatasetSpec, list[tuple[str, object]]]:
    """The mixture spec, the combined dataset spec, and the live objects to bind.

    ``options`` are :func:`mixture_options`' (``with_mixture``'s keywords).
    """
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
            spec = described(obj, name)
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
    mixture, live = mixture_options(specs, **options)
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
    fixed, table, fn, bound = weights_options(weights, names)
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


def mixture_to_dict(spec: MixtureSpec) -> dict[str, Any]:
    """The ``[mixture]`` table of a plan file."""
    out: dict[str, Any] = {
        "mode": spec.mode,
        "by": spec.by,
        "stratified": spec.stratified,
        "sources": [dataset_to_dict(s) for s in spec.sources],
    }
    if spec.weights is not None:
        out["weights"] = dict(zip(spec.names, spec.weights, strict=True))
    if spec.schedule:
        out["schedule"] = [
            [until, dict(zip(spec.names, w, strict=True))] for until, w in spec.schedule
        ]
    if spec.fn is not None:
        out["weights_fn"] = function_table(spec.fn)
    if spec.num_samples is not None:
        out["num_samples"] = spec.num_samples
    if spec.source_key is not None:
        out["source_key"] = spec.source_key
    return out


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    if plan.mixture is None:
        return {}
    data = mixture_to_dict(plan.mixture)
    for table, spec in zip(data["sources"], plan.mixture.sources, strict=True):
        if spec.source is not None:  # where the files are is not what they hold
            table["source"] = spec.source.without_paths()
    return {"mixture": data}


def read_mixture(reader: Reader, data: Mapping[str, Any]) -> MixtureSpec | None:
    """Read the ``[mixture]`` table: its sources, and check the recorded dataset is theirs."""
    if "mixture" not in data:
        return None
    dataset: DatasetSpec | None = reader.values.get("dataset")
    names = (
        "sources",
        "mode",
        "weights",
        "schedule",
        "weights_fn",
        "by",
        "stratified",
        "num_samples",
        "source_key",
    )
    sec = reader.section(data, "mixture", names)
    tables = sec.get("sources")
    if not isinstance(tables, list) or not tables:
        reader.problems.append(
            Problem("mixture.sources", f"must be a non-empty list of tables (got {tables!r})")
        )
        return None
    sources = []
    for i, table in enumerate(tables):
        spec = read_dataset(reader, {f"mixture.sources[{i}]": table}, f"mixture.sources[{i}]")
        if spec is None:
            return None
        sources.append(spec)
    weights: object = None
    given = [k for k in ("weights", "schedule", "weights_fn") if k in sec]
    if len(given) > 1:
        reader.problems.append(
            Problem("mixture", f"give one of weights, schedule, weights_fn (got {given})")
        )
        return None
    fn: CallableSpec | None = None
    if "weights" in sec:
        weights = sec["weights"]
    elif "schedule" in sec:
        weights = sec["schedule"]
        if not isinstance(weights, list) or not weights:
            reader.problems.append(
                Problem(
                    "mixture.schedule",
                    f"must be a list of [until, weights] pairs (got {weights!r})",
                )
            )
            return None
    elif "weights_fn" in sec:
        fn = reader.read_callable(
            {"mixture.weights": sec["weights_fn"]}, "mixture.weights", value_fn
        )
        if fn is None:
            return None
        weights = _equal_weights  # stands in while the other options are checked
    options = {
        k: sec[k] for k in ("mode", "by", "stratified", "num_samples", "source_key") if k in sec
    }
    result = reader.attempt(lambda: mixture_options(sources, weights=weights, **options))
    if result is None:
        return None
    chosen: MixtureSpec = result[0]
    if fn is not None:
        chosen = attrs.evolve(chosen, fn=fn)
    if dataset is not None and dataset.kind == "mixture":
        expected = combined_dataset(chosen)
        if expected != dataset:
            reader.problems.append(
                Problem(
                    "dataset",
                    f"does not match the mixture's sources: "
                    f"{describe_recorded(dataset, expected)} recorded, "
                    f"{describe_recorded(expected, dataset)} from the sources; compile the "
                    f"plan again",
                )
            )
    return chosen


def _equal_weights(t: float) -> float:
    """A weight-schedule stand-in used while a file's mixture options are checked."""
    return 1.0


def mixture_problems(
    mixture: MixtureSpec,
    dataset: DatasetSpec | None,
    bindings: Mapping[str, object] | None,
    needs_pickle: str | None,
    bucketing: BucketingSpec | None,
    sampling_weights: WeightsSpec | None,
    curriculum: CurriculumSpec | None,
) -> list[Problem]:
    """What keeps ``with_mixture`` from mixing these sources with the rest of the plan."""
    problems: list[Problem] = []
    if dataset is not None and dataset.kind != "mixture":
        problems.append(
            Problem(
                "mixture",
                f"the plan reads dataset {dataset.binding!r} and a mixture; with_mixture "
                f"replaces with_dataset, so use one of them",
            )
        )
    elif dataset is not None and dataset.length != sum(mixture.sizes):
        problems.append(
            Problem(
                "dataset.length",
                f"is {dataset.length} but the mixture's sources hold {sum(mixture.sizes)} "
                f"samples; compile the plan again",
            )
        )
    for source in mixture.sources:
        if bindings is not None and source.binding not in bindings:
            problems.append(
                Problem(
                    f"mixture.sources.{source.binding}",
                    f"no object bound to {source.binding!r}; pass bindings="
                    f"{{{source.binding!r}: your_dataset}} when loading",
                )
            )
    if mixture.fn is not None:
        # weight functions run in the main process: no pickling needed
        problems.extend(callable_problems("mixture.weights", mixture.fn, bindings, None))
    if bucketing is not None:
        problems.extend(mixture_bucketing_problems(mixture))
    for other, label in (
        (sampling_weights, "with_sampling_weights"),
        (curriculum, "with_curriculum"),
    ):
        if other is not None:
            problems.append(
                Problem(
                    "mixture",
                    f"cannot be combined with {label} yet; weight the sources with "
                    f"with_mixture(..., weights=...) instead (and .without({label[5:]!r})), or "
                    f"use one dataset",
                )
            )
    if mixture.stratified and mixture.mode != "weighted":
        problems.append(
            Problem("mixture.stratified", f"only applies to mode='weighted' (got {mixture.mode!r})")
        )
    return problems


def mixture_bucketing_problems(mixture: MixtureSpec) -> list[Problem]:
    """What keeps a mixture's epoch from being grouped into length buckets."""
    problems: list[Problem] = []
    if mixture.mode == "sequential":
        problems.append(
            Problem(
                "mixture.mode",
                "mode='sequential' cannot be combined with with_bucketing: its batches never "
                "straddle sources and come source after source, which regrouping the epoch by "
                "length would undo; use mode='round_robin' (every sample of every source "
                "once) or 'weighted', or drop the bucketing with .without('bucketing')",
                related=("bucketing",),
            )
        )
    if mixture.stratified:
        problems.append(
            Problem(
                "mixture.stratified",
                "stratified=True cannot be combined with with_bucketing: stratification sets "
                "each batch's per-source counts, and bucketing regroups the epoch's samples by "
                "length into other batches; pass stratified=False to with_mixture (the weighted "
                "draws still follow the weights over the epoch), or drop the bucketing with "
                ".without('bucketing')",
                related=("bucketing",),
            )
        )
    if mixture.mode == "weighted" and mixture.by == "step" and (mixture.fn or mixture.schedule):
        problems.append(
            Problem(
                "mixture.by",
                "a per-step weight schedule cannot be combined with with_bucketing: the "
                "weights change from batch to batch, and bucketing regroups the whole epoch "
                "by length, so no batch would follow its step's weights; use by='epoch' "
                "(weights that change per epoch) or fixed weights, or drop the bucketing with "
                ".without('bucketing')",
                related=("bucketing",),
            )
        )
    return problems


def mixture_calls(spec: MixtureSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_mixture`` call: the sources, then the options not at defaults."""
    parts = [f"{s.binding!r}: {shown_object(s.type_name, s.length)}" for s in spec.sources]
    args = ["{" + ", ".join(parts) + "}"]
    if spec.fn is not None:
        args.append(f"weights={ctx.callable_arg(spec.fn)}")
    elif spec.schedule:
        table = [(until, dict(zip(spec.names, w, strict=True))) for until, w in spec.schedule]
        args.append(f"weights={table!r}")
    elif spec.weights is not None:
        args.append(f"weights={dict(zip(spec.names, spec.weights, strict=True))!r}")
    defaults = {
        "mode": "weighted",
        "stratified": False,
        "by": "epoch",
        "num_samples": None,
        "source_key": None,
    }
    args.extend(ctx.changed_args(spec, defaults))
    return (f".with_mixture({', '.join(args)})",)


def mixture_samples(plan: LoaderPlan) -> int:
    """The samples of one epoch of a mixture, before batching (``drop_last`` not applied)."""
    spec = plan.mixture
    assert spec is not None
    sizes = spec.sizes
    return {
        "weighted": spec.num_samples or sum(sizes),
        "sequential": sum(sizes),
        "round_robin": sum(sizes),
        "max_size_cycle": len(sizes) * max(sizes),
        "min_size": len(sizes) * min(sizes),
    }[spec.mode]


def mixture_line(plan: LoaderPlan) -> str:
    """The ``mixture`` line of ``explain()``: the sources, their weights and the epoch."""
    spec = plan.mixture
    assert spec is not None
    parts = []
    weights = spec.weights
    total = sum(spec.sizes)
    for i, source in enumerate(spec.sources):
        text = f"{source.binding!r} {source.length:,}"
        if spec.mode == "weighted" and spec.fn is None and not spec.schedule:
            w = (weights[i] / sum(weights)) if weights else (source.length or 0) / total
            text += f" (p={w:.3g})"
        parts.append(text)
    line = f"{len(spec.sources)} sources: {', '.join(parts)}; mode {spec.mode}"
    if spec.mode == "weighted":
        if spec.fn is not None:
            line += f", weights from {spec.fn.describe()} per {spec.by}"
        elif spec.schedule:
            steps = "; ".join(
                f"until {u:g}: " + "/".join(f"{w:g}" for w in ws) for u, ws in spec.schedule
            )
            line += f", weights per {spec.by}: {steps}; then the last"
        elif weights is None:
            line += ", weights proportional to sizes"
        if spec.stratified:
            line += ", stratified (every batch in proportion)"
    line += f"; {mixture_samples(plan):,} samples per epoch"
    if spec.source_key is not None:
        line += f"; source ids in batch[{spec.source_key!r}]"
    return line


def _rules(ctx: RuleContext) -> list[Problem]:
    """The mixture's problems: its sources, weights, and what it is combined with."""
    s = ctx.sections
    return mixture_problems(
        s["mixture"],
        s["dataset"],
        ctx.bindings,
        ctx.needs_pickle,
        s.get("bucketing"),
        s.get("sampling_weights"),
        s.get("curriculum"),
    )


SECTION: Section[MixtureSpec] = Section(
    rules={"mixture": _rules},
    name="mixture",
    builder_calls=mixture_calls,
    calls_set="dataset",
    explain=explain_row("mixture", mixture_line, of="mixture"),
    read=read_mixture,
    to_dict=mixture_to_dict,
    bindings=MixtureSpec.bound_names,
    fingerprint="stream",
    stream=_stream,
    why=(
        "sources (the identity of each, source paths left out), `mode`, weights or their "
        "schedule or function, `by`, `stratified`, `num_samples`, `source_key`"
    ),
)
