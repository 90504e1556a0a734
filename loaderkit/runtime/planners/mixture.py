"""The mixture planner: batches drawn from several sources (``with_mixture``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from loaderkit.errors import PlanError
from loaderkit.order.batches import EpochBatches
from loaderkit.order.mixture import mixture_batches, mixture_num_batches, source_of
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.sections.mixture import source_weights
from loaderkit.runtime.planners.base import ListPlanner, PlannerContext, Selected, Shard

if TYPE_CHECKING:
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.mixture import MixtureSpec

__all__ = ["MixturePlanner", "make_mixture", "make_mixture_alone"]


class MixturePlanner(ListPlanner):
    """Batches drawn from several sources; weights may follow a schedule of epoch or step."""

    def __init__(
        self,
        spec: MixtureSpec,
        weights_fn: Callable[[int], Any] | None,
        batch: BatchSpec,
        shuffle: bool,
        shard: Shard,
    ) -> None:
        super().__init__(shard, batch.drop_last)
        self.spec = spec
        self.weights_fn = weights_fn
        self.batch = batch
        self.shuffle = shuffle
        self._starts = [0]  # first step of each epoch counted so far

    def per_epoch(self, epoch: int) -> int:
        """Batches in ``epoch`` before sharding (they follow the epoch's batch size)."""
        spec = self.spec
        return mixture_num_batches(
            spec.sizes,
            mode=spec.mode,
            batch_size=self.global_size(epoch),
            num_samples=spec.num_samples,
            drop_last=self.batch.drop_last,
        )

    def first_step(self, epoch: int) -> int:
        """Global batches of the epochs before ``epoch``: the step the weights see first."""
        starts = self._starts
        while len(starts) <= epoch:
            starts.append(starts[-1] + self.per_epoch(len(starts) - 1))
        return starts[epoch]

    def weights_at(self, t: int) -> tuple[float, ...] | None:
        """The source weights at epoch or step ``t`` (``None``: proportional to sizes)."""
        spec = self.spec
        if self.weights_fn is not None:
            value = self.weights_fn(t)
            try:
                return source_weights("mixture.weights", value, spec.names)
            except PlanError as exc:
                raise PlanError.single(
                    "mixture.weights",
                    f"the weight function returned {value!r} for {spec.by} {t}: "
                    f"{exc.problems[0].message}",
                ) from None
        for until, weights in spec.schedule:
            if t < until:
                return weights
        if spec.schedule:
            return spec.schedule[-1][1]
        return spec.weights

    def sequence(self, epoch: int) -> npt.NDArray[Any]:
        """The epoch's global indices in order, before batching.

        For the modes bucketing accepts (weighted with weights fixed for the epoch and not
        stratified, round_robin, max_size_cycle, min_size) the batch size does not change
        them: one batch of all positions gives the sequence.
        """
        spec = self.spec
        assert spec.mode != "sequential"
        assert not spec.stratified
        weights = None
        if spec.mode == "weighted":
            assert spec.by == "epoch" or (spec.fn is None and not spec.schedule)
            weights = self.weights_at(epoch)
        whole = max(len(spec.sizes) * max(spec.sizes), spec.num_samples or 0, 1)
        return self._draw(epoch, whole, weights, drop_last=False).indices

    def reachable(self) -> npt.NDArray[np.bool_] | None:
        """Every sample of every source may be used."""
        return None

    def segments(self, epoch: int, batches: EpochBatches) -> npt.NDArray[np.int64] | None:
        """Sequentially, a source's partial last batch is completed from that source."""
        if self.spec.mode != "sequential" or len(batches) == 0:
            return None
        firsts = batches.indices[batches.offsets[:-1]]
        source = source_of(firsts, self.spec.sizes)
        return np.flatnonzero(np.diff(source, prepend=-1) != 0).astype(np.int64)

    def global_batches(self, epoch: int) -> EpochBatches:
        """The global batches of ``epoch``, before they are dealt to the ranks."""
        spec = self.spec
        weights: Any = None
        if spec.mode == "weighted":
            if spec.by == "step" and (spec.fn is not None or spec.schedule):
                first, count = self.first_step(epoch), self.per_epoch(epoch)
                weights = np.array(
                    [self.weights_at(first + j) for j in range(count)], dtype=np.float64
                ).reshape(count, len(spec.sources))
            else:
                weights = self.weights_at(epoch)
        return self._draw(epoch, self.global_size(epoch), weights, drop_last=self.batch.drop_last)

    def _draw(self, epoch: int, batch_size: int, weights: Any, *, drop_last: bool) -> EpochBatches:
        """The mixture's batches of ``epoch`` of ``batch_size`` samples, drawn with ``weights``."""
        spec = self.spec
        return mixture_batches(
            spec.sizes,
            names=spec.names,
            mode=spec.mode,
            seed=self.seed,
            epoch=epoch,
            batch_size=batch_size,
            shuffle=self.shuffle,
            weights=weights,
            num_samples=spec.num_samples if spec.mode == "weighted" else None,
            stratified=spec.stratified,
            drop_last=drop_last,
        )


def make_mixture(context: PlannerContext) -> Selected:
    """The mixture's batches (an empty epoch is allowed: bucketing regroups it)."""
    plan = context.plan
    assert plan.mixture is not None
    fn = plan.mixture.fn
    weights_fn = None if fn is None else resolve_callable(plan, fn, "mixture.weights")
    planner = MixturePlanner(
        plan.mixture, weights_fn, plan.batch, plan.order.shuffle, context.shard()
    )
    return Selected(planner)


def make_mixture_alone(context: PlannerContext) -> Selected:
    """The mixture's batches; raises :class:`PlanError` if an epoch has none on this rank."""
    selected = make_mixture(context)
    plan = context.plan
    if selected.planner.num_batches(0) == 0:
        raise PlanError.single(
            "batch.drop_last",
            f"with batch_size {plan.batch.batch_size} on {context.world_size} ranks, the "
            f"mixture's epoch leaves 0 batches per rank; lower batch_size or set "
            f"drop_last=False",
        )
    return selected
