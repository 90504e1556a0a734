"""The builder's state: one private field per plan section, and the one way to change them.

:class:`BuilderState` holds the sections' values and the bound live objects. Every ``with_*``
method of :class:`~loaderkit.DataLoaderBuilder` (written in :mod:`loaderkit.builder` and its
mixins :mod:`~loaderkit.builder.sampling` and :mod:`~loaderkit.builder.execution`) returns
``self._with(...)``, which also unbinds the objects no section refers to any more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, Self, TypeAlias

import attrs
import numpy as np
import numpy.typing as npt

from loaderkit._checks import Bindings
from loaderkit.plan.sections import bound_names
from loaderkit.plan.sections.batch import BatchSpec
from loaderkit.plan.sections.bucketing import BucketingSpec
from loaderkit.plan.sections.cache import CacheSpec
from loaderkit.plan.sections.checks import ChecksSpec
from loaderkit.plan.sections.collator import DEFAULT_COLLATOR
from loaderkit.plan.sections.curriculum import CurriculumSpec
from loaderkit.plan.sections.distributed import DistributedSpec
from loaderkit.plan.sections.error_policy import ErrorPolicySpec
from loaderkit.plan.sections.max_length import MaxLengthSpec
from loaderkit.plan.sections.mixture import MixtureSpec
from loaderkit.plan.sections.order import OrderSpec
from loaderkit.plan.sections.preset import PresetSpec
from loaderkit.plan.sections.sampling_weights import WeightsSpec
from loaderkit.plan.sections.split import SplitSpec
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec

__all__ = ["BuilderState", "MixtureWeights", "PerSample", "Refers", "bind_one"]

PerSample: TypeAlias = str | Sequence[float] | npt.NDArray[np.number[Any]] | Callable[[Any], float]
"""One number per sample (lengths, weights, difficulties): a column or sample key, a
sequence or array of precomputed values, or a function of a sample."""

MixtureWeights: TypeAlias = (
    Mapping[str, float]
    | Sequence[float]
    | Sequence[tuple[float, Mapping[str, float]]]
    | Callable[[int], Mapping[str, float] | Sequence[float]]
)
"""``with_mixture(weights=...)``: per source, a schedule of them, or a function of t."""


def _bindings(value: Mapping[str, object]) -> Mapping[str, object]:
    return Bindings(value)


class Refers(Protocol):
    """A spec that names the bindings it refers to (``Section.bindings``)."""

    def bound_names(self) -> tuple[str, ...]:
        """The bindings, in order."""
        ...


def bind_one(spec: Refers, obj: object | None) -> list[tuple[str, object]]:
    """``obj`` bound under the name ``spec`` refers to (``spec.bound_names()``; none: None)."""
    return [(name, obj) for name in spec.bound_names()[:1] if obj is not None]


@attrs.frozen(repr=False)
class BuilderState:
    """The sections' values of a builder (``_<section>``) and its bound objects (``_bound``).

    The base of :class:`~loaderkit.DataLoaderBuilder`; not used on its own.
    """

    _dataset: DatasetSpec | None = None
    _batch: BatchSpec = BatchSpec()
    _order: OrderSpec = OrderSpec()
    _collator: CallableSpec = DEFAULT_COLLATOR
    _transform: CallableSpec | None = None
    _workers: WorkersSpec = WorkersSpec()
    _device: str = "cpu"
    _distributed: DistributedSpec = DistributedSpec()
    _bucketing: BucketingSpec | None = None
    _sampling_weights: WeightsSpec | None = None
    _curriculum: CurriculumSpec | None = None
    _mixture: MixtureSpec | None = None
    _max_length: MaxLengthSpec | None = None
    _split: SplitSpec | None = None
    _checks: ChecksSpec | None = None
    _error_policy: ErrorPolicySpec = ErrorPolicySpec()
    _cache: CacheSpec | None = None
    _preset: PresetSpec | None = attrs.field(default=None, eq=False)
    _bound: Mapping[str, object] = attrs.field(
        factory=Bindings, eq=False, hash=False, converter=_bindings
    )

    # -- helpers ----------------------------------------------------------------------------

    def _with(self, live: Iterable[tuple[str, object]] = (), /, **sections: Any) -> Self:
        """A new builder with ``sections`` set and the ``live`` ``(name, object)`` pairs bound.

        An object no section refers to any more (``Section.bindings``) is unbound: a replaced
        dataset or function is neither kept alive nor saved with the plan.
        """
        new = attrs.evolve(self, **sections)
        used = bound_names(new._value)
        added = dict(live)
        bound = {k: v for k, v in self._bound.items() if k in used and k not in added}
        bound.update(added)
        return attrs.evolve(new, bound=bound)

    def _value(self, section: str) -> object:
        """The builder's value of plan section ``section``."""
        return getattr(self, f"_{section}")
