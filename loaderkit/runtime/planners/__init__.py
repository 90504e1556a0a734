"""Planners: one per sampler, chosen for a plan by one selection table.

Each planner (:mod:`~.plain`, :mod:`~.step_sized`, :mod:`~.bucketing`, :mod:`~.weighted`,
:mod:`~.curriculum`, :mod:`~.mixture`, :mod:`~.shard_window`) is what the
:class:`~loaderkit.runtime.loader.Loader` asks for one rank's batches, through the
:class:`~.base.Planner` protocol. The loader keeps the cursor, the iteration, the workers and
the state.

:data:`PLANNERS` is read top to bottom: the first row whose condition holds for the plan
makes the planner. Bucketing comes first: combined with weights, a curriculum or a mixture,
it groups the epoch of the sampler :data:`SAMPLERS` selects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from loaderkit.plan.sections import order as order_section
from loaderkit.runtime.planners.base import (
    ListPlanner,
    Planner,
    PlannerContext,
    Selected,
    SequenceSource,
)
from loaderkit.runtime.planners.bucketing import BucketPlanner, make_bucketing
from loaderkit.runtime.planners.curriculum import CurriculumPlanner, make_curriculum
from loaderkit.runtime.planners.mixture import MixturePlanner, make_mixture, make_mixture_alone
from loaderkit.runtime.planners.plain import PlainPlanner, make_plain
from loaderkit.runtime.planners.shard_window import (
    ShardStepSizedPlanner,
    ShardWindowPlanner,
    make_shard_window,
)
from loaderkit.runtime.planners.step_sized import StepSizedPlanner, make_step_sized
from loaderkit.runtime.planners.weighted import WeightedPlanner, make_weighted

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "PLANNERS",
    "SAMPLERS",
    "BucketPlanner",
    "CurriculumPlanner",
    "ListPlanner",
    "MixturePlanner",
    "PlainPlanner",
    "Planner",
    "PlannerContext",
    "Row",
    "Selected",
    "SequencePlanner",
    "SequenceSource",
    "ShardStepSizedPlanner",
    "ShardWindowPlanner",
    "StepSizedPlanner",
    "WeightedPlanner",
    "first_match",
    "select_planner",
]

SequencePlanner = WeightedPlanner | CurriculumPlanner | MixturePlanner
"""The samplers bucketing can combine with (their epoch is a sequence it groups)."""


class Row(NamedTuple):
    """One row of a selection table: the planner ``make`` gives when ``applies(plan)``."""

    name: str
    applies: Callable[[LoaderPlan], bool]
    make: Callable[[PlannerContext], Selected]


SAMPLERS: tuple[Row, ...] = (
    Row("weights", lambda plan: plan.sampling_weights is not None, make_weighted),
    Row("curriculum", lambda plan: plan.curriculum is not None, make_curriculum),
    Row("mixture", lambda plan: plan.mixture is not None, make_mixture),
)
"""The samplers that decide an epoch's samples (alone, or grouped by bucketing)."""


def first_match(table: tuple[Row, ...], context: PlannerContext) -> Selected | None:
    """The first row of ``table`` that applies to the plan makes the planner (or ``None``)."""
    for row in table:
        if row.applies(context.plan):
            return row.make(context)
    return None


def _sized_by_step(plan: LoaderPlan) -> bool:
    return plan.batch.by == "step" and plan.batch.scheduled


def _bucketed(context: PlannerContext) -> Selected:
    return make_bucketing(context, lambda c: first_match(SAMPLERS, c))


PLANNERS: tuple[Row, ...] = (
    Row("bucketing", lambda plan: plan.bucketing is not None, _bucketed),
    Row("weights", lambda plan: plan.sampling_weights is not None, make_weighted),
    Row("curriculum", lambda plan: plan.curriculum is not None, make_curriculum),
    Row("mixture", lambda plan: plan.mixture is not None, make_mixture_alone),
    Row(
        "shard-window",
        lambda plan: order_section.shard_window(plan) is not None,
        make_shard_window,
    ),
    Row("step-sized", _sized_by_step, make_step_sized),
    Row("plain", lambda plan: True, make_plain),
)
"""Which planner a plan gets: the first row that applies (the last one always does)."""


def select_planner(context: PlannerContext) -> Selected:
    """The planner :data:`PLANNERS` selects for ``context.plan``."""
    selected = first_match(PLANNERS, context)
    assert selected is not None  # the last row applies to every plan
    return selected
