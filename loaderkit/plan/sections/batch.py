"""The ``[batch]`` section: batch size (fixed, scheduled or a function) and ``drop_last``.

``with_batch_size(None)`` sets no batch size. Under a token budget
(``with_bucketing(..., max_tokens=...)``) the budget then sizes the batches; otherwise
automatic batching is off, as with torch's ``DataLoader(batch_size=None)``: each sample is
delivered on its own, converted by ``torch.utils.data.default_convert``, without a batch
dimension (``BatchSpec.batched`` is ``False``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_bool, check_choice
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.fields import batch_size_value, int_schedule
from loaderkit.plan.reader import value_fn
from loaderkit.plan.sections.base import FingerprintRow, RuleContext, Section
from loaderkit.plan.sections.common import callable_problems, function_table
from loaderkit.plan.specs import CURRICULUM_UNITS, CallableSpec

if TYPE_CHECKING:
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.bucketing import BucketingSpec
    from loaderkit.plan.sections.curriculum import CurriculumSpec
    from loaderkit.plan.sections.distributed import DistributedSpec
    from loaderkit.plan.sections.mixture import MixtureSpec
    from loaderkit.plan.sections.sampling_weights import WeightsSpec
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "SECTION",
    "BatchSpec",
    "batch_calls",
    "batch_schedule_problems",
    "batch_schedule_spec",
    "batch_spec",
    "batch_to_dict",
    "budget_batch",
    "read_batch",
    "unbatched_problems",
]


@attrs.frozen
class BatchSpec:
    """Per-rank batch size and what happens to the final partial batch.

    A progressive batch size follows ``schedule`` (``((until, size), ...)``) or ``fn`` (a
    function of the epoch or step, ``by``); ``batch_size`` is then the size at ``t = 0``.
    ``batched=False`` is ``with_batch_size(None)`` without a token budget (torch's
    ``batch_size=None``): each sample on its own, converted by ``default_convert``, no batch
    dimension; ``batch_size`` is then 1 (a step holds one sample) and ``drop_last`` False.
    """

    batch_size: int = 1
    drop_last: bool = False
    schedule: tuple[tuple[float, int], ...] = ()
    fn: CallableSpec | None = None
    by: str = "epoch"
    batched: bool = True

    @property
    def scheduled(self) -> bool:
        """Whether the batch size follows a schedule."""
        return bool(self.schedule) or self.fn is not None

    def bound_names(self) -> tuple[str, ...]:
        """The binding of its function (none without one, or for a registry name)."""
        return self.fn.bound_names() if self.fn is not None else ()


def batch_spec(batch_size: object, drop_last: object = False) -> BatchSpec:
    """Per-rank batch size (an int >= 1) and ``drop_last``."""
    size = batch_size_value(batch_size)
    return BatchSpec(size, check_bool("batch.drop_last", drop_last))


def batch_schedule_spec(
    batch_size: object, drop_last: object = False, by: object = "epoch"
) -> tuple[BatchSpec, object | None]:
    """The batch spec of ``with_batch_size`` (maybe progressive) and a function to bind.

    ``None`` is no batch size: ``batched=False`` (torch's ``batch_size=None``), which a token
    budget reads as "as many samples as the budget holds" (:func:`budget_batch`).
    """
    if batch_size is None:
        unit = check_choice("batch.by", by, CURRICULUM_UNITS)
        drop = check_bool("batch.drop_last", drop_last)
        if unit != "epoch":
            raise PlanError.single(
                "batch.by", "only applies to a batch-size schedule (got batch_size=None)"
            )
        return BatchSpec(drop_last=drop, batched=False), None
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


def budget_batch(batch: BatchSpec, bucketing: BucketingSpec | None) -> BatchSpec:
    """``batch`` as the plan holds it next to ``bucketing``.

    Under a token budget ``with_batch_size(None)`` means "the budget sizes the batches", which
    is the default batch section (automatic batching stays on; ``drop_last`` as given), so a
    chain that says ``None`` and one that says nothing compile to the same plan.
    """
    if not batch.batched and bucketing is not None and bucketing.max_tokens is not None:
        return attrs.evolve(batch, batch_size=BatchSpec().batch_size, batched=True)
    return batch


def batch_to_dict(spec: BatchSpec) -> dict[str, Any]:
    """The ``[batch]`` table of a plan file (also what the fingerprint hashes).

    Without batching it is ``{"batched": False}`` (and ``drop_last`` only if set, which the
    rules refuse), so plans that batch keep their tables and fingerprints.
    """
    if not spec.batched:
        unbatched: dict[str, Any] = {"batched": False}
        if spec.drop_last:
            unbatched["drop_last"] = True
        if spec.batch_size != BatchSpec().batch_size:
            unbatched["batch_size"] = spec.batch_size
        return unbatched
    out: dict[str, Any] = {"batch_size": spec.batch_size, "drop_last": spec.drop_last}
    if spec.schedule:
        out["schedule"] = [[until, size] for until, size in spec.schedule]
    if spec.fn is not None:
        out["size_fn"] = function_table(spec.fn)
    if spec.scheduled:
        out["by"] = spec.by
    return out


def read_batch(reader: Reader, data: Mapping[str, Any]) -> BatchSpec | None:
    """Read the ``[batch]`` table: a size, a schedule or a size function."""
    sec = reader.section(
        data, "batch", ("batch_size", "drop_last", "schedule", "size_fn", "by", "batched")
    )
    if not sec:
        return None
    drop = sec.get("drop_last", False)
    if "batched" in sec:
        batched = reader.attempt(lambda: check_bool("batch.batched", sec["batched"]))
        if batched is None:
            return None
        if not batched:
            return _read_unbatched(reader, sec, drop)
    if "schedule" in sec and "size_fn" in sec:
        reader.problems.append(Problem("batch", "give schedule or size_fn, not both"))
        return None
    if "size_fn" in sec:
        fn = reader.read_callable(
            {"batch.batch_size": sec["size_fn"]}, "batch.batch_size", value_fn
        )
        if fn is None:
            return None
        size = reader.attempt(lambda: batch_size_value(sec.get("batch_size", 1)))
        base = reader.attempt(lambda: batch_schedule_spec([(1, 1)], drop, sec.get("by", "epoch")))
        if size is None or base is None:
            return None
        timed: BatchSpec = attrs.evolve(base[0], batch_size=size, schedule=(), fn=fn)
        return timed
    if "schedule" in sec:
        spec = reader.attempt(
            lambda: batch_schedule_spec(sec["schedule"], drop, sec.get("by", "epoch"))
        )
        if spec is None:
            return None
        if "batch_size" in sec and sec["batch_size"] != spec[0].batch_size:
            reader.problems.append(
                Problem(
                    "batch.batch_size",
                    f"is {sec['batch_size']!r} but the schedule starts at "
                    f"{spec[0].batch_size}; drop batch_size or make them agree",
                )
            )
        chosen: BatchSpec = spec[0]
        return chosen
    plain: BatchSpec | None = reader.attempt(
        lambda: batch_schedule_spec(sec.get("batch_size", 1), drop, sec.get("by", "epoch"))[0]
    )
    return plain


def _read_unbatched(reader: Reader, sec: Mapping[str, Any], drop: object) -> BatchSpec | None:
    """``batched = false``: no batch size, schedule or ``by`` may come with it."""
    sized = [key for key in ("batch_size", "schedule", "size_fn", "by") if key in sec]
    if sized:
        reader.problems.append(
            Problem(
                f"batch.{sized[0]}",
                f"does not apply with batched = false (each sample on its own, torch's "
                f"batch_size=None; got {sized[0]} = {sec[sized[0]]!r}); drop {sized[0]}, or "
                f"drop batched = false to batch",
            )
        )
        return None
    spec: BatchSpec | None = reader.attempt(lambda: batch_schedule_spec(None, drop)[0])
    return spec


def unbatched_problems(ctx: RuleContext) -> list[Problem]:
    """What keeps a plan without batching (``with_batch_size(None)``) from working.

    Each sample is converted by torch's ``default_convert`` alone, as with
    ``DataLoader(batch_size=None)``: there is no partial batch to drop, no collator (the
    default one stands for the conversion), and a token budget sizes batches itself.
    """
    sections = ctx.sections
    batch: BatchSpec = sections["batch"]
    if batch.batched:
        return []
    problems: list[Problem] = []
    if batch.batch_size != BatchSpec().batch_size or batch.scheduled:
        problems.append(
            Problem(
                "batch.batch_size",
                f"is a size ({batch.batch_size}) but batched is False (no batching); set one "
                f"or the other: .with_batch_size({batch.batch_size}) or .with_batch_size(None)",
            )
        )
    if batch.drop_last:
        problems.append(
            Problem(
                "batch.drop_last",
                "has no partial batch to drop without batching (batch_size=None delivers each "
                "sample on its own; got drop_last=True); drop it: .with_batch_size(None), or "
                "set a batch size",
            )
        )
    collator: CallableSpec = sections["collator"]
    if collator.source != "registry" or collator.name != "default" or collator.options:
        problems.append(
            Problem(
                "collator",
                f"{collator.describe()!r} collates lists of samples, and batch_size=None "
                f"makes no batches (each sample is converted by torch's default_convert, as "
                f"DataLoader(batch_size=None) does); drop the collator with "
                f".without('collator') (a function of one sample goes in with_transform), or "
                f"set a batch size",
                related=("batch",),
            )
        )
    bucketing: BucketingSpec | None = sections.get("bucketing")
    if bucketing is not None and bucketing.max_tokens is not None:
        problems.append(
            Problem(
                "batch.batched",
                f"is False (no batching) under a token budget (max_tokens="
                f"{bucketing.max_tokens}), which sizes the batches; drop batched = false",
                related=("bucketing",),
            )
        )
    return problems


def batch_schedule_problems(
    batch: BatchSpec,
    bindings: Mapping[str, object] | None,
    bucketing: BucketingSpec | None,
    sampling_weights: WeightsSpec | None,
    curriculum: CurriculumSpec | None,
    mixture: MixtureSpec | None,
) -> list[Problem]:
    """What keeps a progressive batch size from working with the rest of the plan."""
    problems: list[Problem] = []
    if batch.fn is not None:  # runs in the main process: no pickling needed
        problems.extend(callable_problems("batch.batch_size", batch.fn, bindings, None))
    if bucketing is not None:
        problems.append(
            Problem(
                "batch.batch_size",
                "a batch-size schedule cannot be combined with with_bucketing yet; use a fixed "
                "batch size (or a token budget, which sizes batches itself)",
                related=("bucketing",),
            )
        )
    if curriculum is not None and curriculum.by == "step":
        problems.append(
            Problem(
                "batch.batch_size",
                "a batch-size schedule cannot be combined with a per-step curriculum yet (its "
                "steps per epoch follow the batch size); use with_curriculum(..., by='epoch')",
            )
        )
    others = [
        label
        for spec, label in (
            (sampling_weights, "with_sampling_weights"),
            (curriculum, "with_curriculum"),
            (mixture, "with_mixture"),
        )
        if spec is not None
    ]
    if batch.by == "step" and others:
        problems.append(
            Problem(
                "batch.by",
                f"a per-step batch-size schedule works with plain (shuffled or sequential) "
                f"order, not yet with {others[0]}; use by='epoch'",
            )
        )
    return problems


def batch_calls(b: BatchSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_batch_size`` call (none at the default)."""
    if b == BatchSpec():
        return ()
    if not b.batched:
        drop = ", drop_last=True" if b.drop_last else ""
        return (f".with_batch_size(None{drop})",)
    shown = str(b.batch_size)
    if b.fn is not None:
        shown = ctx.callable_arg(b.fn)
    elif b.schedule:
        shown = repr([(until, value) for until, value in b.schedule])
    drop = ", drop_last=True" if b.drop_last else ""
    unit = f", by={b.by!r}" if b.scheduled and b.by != "epoch" else ""
    return (f".with_batch_size({shown}{drop}{unit})",)


def batch_problems(ctx: RuleContext) -> list[Problem]:
    """A batch size below 1, or ``drop_last`` that would leave no batch per rank."""
    batch: BatchSpec = ctx.sections["batch"]
    dataset: DatasetSpec | None = ctx.sections["dataset"]
    distributed: DistributedSpec = ctx.sections["distributed"]
    if batch.batch_size < 1:
        return [
            Problem(
                "batch.batch_size",
                f"must be >= 1 (got {batch.batch_size}); pass a positive number of samples",
            )
        ]
    if batch.drop_last and dataset is not None and dataset.length:
        world = distributed.world_size if distributed.enabled and distributed.world_size else 1
        per_rank = dataset.length // world
        if per_rank < batch.batch_size:
            return [
                Problem(
                    "batch.drop_last",
                    f"with batch_size {batch.batch_size} and {per_rank} samples per rank, "
                    f"drop_last=True leaves 0 batches per epoch; lower batch_size or keep the "
                    f"partial batch: .with_batch_size({batch.batch_size})",
                )
            ]
    return []


def _schedule_rules(ctx: RuleContext) -> list[Problem]:
    batch: BatchSpec = ctx.sections["batch"]
    if not batch.scheduled:
        return []
    s = ctx.sections
    return batch_schedule_problems(
        batch,
        ctx.bindings,
        s.get("bucketing"),
        s.get("sampling_weights"),
        s.get("curriculum"),
        s.get("mixture"),
    )


SECTION: Section[BatchSpec] = Section(
    rules={
        "batch": batch_problems,
        "batch.schedule": _schedule_rules,
        "batch.unbatched": unbatched_problems,
    },
    name="batch",
    builder_calls=batch_calls,
    read=read_batch,
    to_dict=batch_to_dict,
    bindings=BatchSpec.bound_names,
    fingerprint="stream",
    rows=(
        FingerprintRow(
            "`batch.batch_size`",
            "stream",
            "batch boundaries (with a schedule: its table or function, and `by`)",
        ),
        FingerprintRow("`batch.drop_last`", "stream", "whether the tail is delivered"),
        FingerprintRow(
            "`batch.batched`",
            "stream",
            "`false` (`with_batch_size(None)`): each sample on its own, no batch dimension; "
            "hashed only when false",
        ),
    ),
)
