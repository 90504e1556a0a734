"""Cross-field rules: every problem of a whole plan, found at once.

:func:`plan_problems` is run whenever a :class:`~loaderkit.plan.LoaderPlan` is created (by
``compile()``, by loading a file, by ``attrs.evolve``), so a plan that exists is a plan that
builds. Nothing here spawns a process or loads data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loaderkit._limits import LIMITS
from loaderkit.errors import Problem
from loaderkit.plan.sections import section_named
from loaderkit.plan.sections.base import RuleContext
from loaderkit.plan.sections.common import default_start_method
from loaderkit.plan.sections.mixture import MixtureSpec
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec

__all__ = ["NO_DATASET", "RULE_ORDER", "default_start_method", "plan_problems"]

NO_DATASET = "no dataset; call .with_dataset(ds) (or .with_mixture({...})) on the builder"
"""The problem of a plan without a source, whether ``compile()`` or ``build()`` meets it."""

RULE_ORDER: tuple[str, ...] = (
    "dataset",
    "batch",
    "order",
    "workers",
    "distributed",
    "collator",
    "transform",
    "batch.schedule",
    "bucketing",
    "sampling_weights",
    "curriculum",
    "mixture",
    "max_length",
    "split",
    "batch.unbatched",
    "global_rngs",
    "checks",
    "cache",
)
"""The order the sections' rule groups run in (a key of some ``Section.rules``): a plan's
problems are reported in this order. A group is ``"<section>"`` or ``"<section>.<group>"``."""


def _needs_pickle(workers: WorkersSpec) -> str | None:
    """The start method of workers that pickle what they receive (``None``: none do)."""
    if workers.num_workers == "auto" or workers.num_workers > 0:  # "auto" may start workers
        method = workers.start_method or default_start_method()
        if method != "fork":
            return method
    return None


def _length_problems(dataset: DatasetSpec, mixture: MixtureSpec | None) -> list[Problem]:
    """The dataset, and each mixture source, beyond the length a plan describes."""
    parts = (
        [] if mixture is None else [(f"mixture.sources.{s.binding}", s) for s in mixture.sources]
    )
    return [
        Problem(  # the bound a plan file's dataset.length is read with
            where,
            f"holds {spec.length:,} samples; a plan describes at most "
            f"{LIMITS.dataset_length:,} (LIMITS.dataset_length): split it into parts",
        )
        for where, spec in [("dataset", dataset), *parts]
        if spec.length is not None and spec.length > LIMITS.dataset_length
    ]


def _binding_name_problems(sections: Mapping[str, Any]) -> list[Problem]:
    """Two parts of the plan (dataset, mixture sources, collator, transform) bound to one name."""
    dataset: DatasetSpec | None = sections["dataset"]
    collator: CallableSpec = sections["collator"]
    transform: CallableSpec | None = sections["transform"]
    mixture: MixtureSpec | None = sections.get("mixture")
    problems: list[Problem] = []
    names: dict[str, str] = {}
    sources = [(f"mixture.sources.{n}", n) for n in (mixture.names if mixture else ())]
    for path, name in (
        ("dataset", dataset.binding if dataset and dataset.kind != "mixture" else None),
        *sources,
        ("collator", collator.name if collator.source == "binding" else None),
        ("transform", transform.name if transform and transform.source == "binding" else None),
    ):
        if name is None:
            continue
        if name in names:
            fix = (
                "rename the source in with_mixture({...})"
                if path.startswith("mixture") or names[name].startswith("mixture")
                else "give the dataset another name with with_dataset(ds, name=...)"
            )
            problems.append(
                Problem(path, f"binding name {name!r} is already used by {names[name]}; {fix}")
            )
        names[name] = path
    return problems


def plan_problems(
    sections: Mapping[str, Any], bindings: Mapping[str, object] | None
) -> list[Problem]:
    """All problems of a plan, in section order. ``bindings=None`` skips binding checks.

    ``sections`` maps each section's name (:data:`~loaderkit.plan.sections.SECTIONS`) to its
    value in the plan. Each section's own rules are its declared ``rules`` groups, run in
    :data:`RULE_ORDER` for each section that is set; the rules that involve the plan as a
    whole (no dataset, a dataset too long, one binding name used twice) are written here.
    """
    dataset: DatasetSpec | None = sections["dataset"]
    problems: list[Problem] = []
    if dataset is None:
        problems.append(Problem("dataset", NO_DATASET))
    else:
        problems.extend(_length_problems(dataset, sections.get("mixture")))
    ctx = RuleContext(sections, bindings, _needs_pickle(sections["workers"]))
    for group in RULE_ORDER:
        section = section_named(group.split(".")[0])
        if sections.get(section.name) is not None:
            problems.extend(section.rules[group](ctx))
    problems.extend(_binding_name_problems(sections))
    return problems
