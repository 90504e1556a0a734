"""``LoaderPlan.for_eval()``: the same plan, made to read every sample once, in order.

The edits go through the plan's builder (``plan.to_builder()``), so the bindings that only the
removed sections used are dropped too, and the result is compiled (checked) like any plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaderkit.errors import PlanError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["eval_plan"]


def eval_plan(
    plan: LoaderPlan,
    *,
    batch_size: int | None = None,
    keep_transform: bool = False,
    keep_bucketing: bool = False,
) -> LoaderPlan:
    """The evaluation plan of ``plan`` (see :meth:`LoaderPlan.for_eval` for what changes)."""
    if not plan.bound:
        raise PlanError.single(
            "bindings",
            "for_eval() edits the plan through its builder, which needs the live objects; "
            "load the plan with bindings={...} first",
        )
    b = plan.to_builder()
    if batch_size is not None or plan.batch.batched:  # a plan without batching stays so
        b = b.with_batch_size(plan.batch.batch_size if batch_size is None else batch_size)
    b = b.with_shuffle(False)
    b = b.without("sampling_weights", "curriculum")
    if not keep_bucketing:
        b = b.without("bucketing")
    if plan.transform is not None and plan.transform.accepts_rng and not keep_transform:
        b = b.without("transform")
    lengths = plan.max_length
    if lengths is not None and lengths.fn is not None:
        b = b.without("max_length")
    elif lengths is not None and lengths.schedule:
        b = b.with_max_length(lengths.schedule[-1][1])
    mixture = plan.mixture
    if mixture is not None:
        assert plan.bindings is not None
        bucketed = keep_bucketing and plan.bucketing is not None
        b = b.with_mixture(
            {name: plan.bindings[name] for name in mixture.names},
            mode="round_robin" if bucketed else "sequential",
            source_key=mixture.source_key,
        )
    d = plan.distributed
    if d.enabled and not d.even_batches:
        b = b.with_distributed(world_size=d.world_size, rank=d.rank, even_batches=True)
    return b.compile()
