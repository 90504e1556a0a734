"""The builder's state: every plan section's value in one map, and the one way to change it.

:class:`BuilderState` holds the sections' values and the bound live objects. Every ``with_*``
method of :class:`~loaderkit.DataLoaderBuilder` (written in :mod:`loaderkit.builder` and its
mixins :mod:`~loaderkit.builder.sampling` and :mod:`~loaderkit.builder.execution`) returns
``self._with(...)``, which also unbinds the objects no section refers to any more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol, Self, TypeAlias

import attrs
import numpy as np
import numpy.typing as npt

from loaderkit._frozen import Bindings, FrozenMap
from loaderkit.plan.plan import PLAN_SECTIONS, LoaderPlan
from loaderkit.plan.sections import bound_names
from loaderkit.plan.sections.preset import PresetSpec

__all__ = [
    "SECTION_DEFAULTS",
    "BuilderState",
    "MixtureWeights",
    "PerSample",
    "Refers",
    "bind_one",
]

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


SECTION_DEFAULTS: Mapping[str, object] = MappingProxyType(
    {
        f.name: None if f.default is attrs.NOTHING else f.default
        for f in attrs.fields(LoaderPlan)
        if f.name in PLAN_SECTIONS and f.name != "preset"
    }
)
"""Each plan section's value in a new builder: ``LoaderPlan``'s default (the dataset: none)."""


def _all_sections(value: Mapping[str, object]) -> Mapping[str, object]:
    """Every section's value: those given, and :data:`SECTION_DEFAULTS` for the others."""
    unknown = set(value) - set(SECTION_DEFAULTS)
    if unknown:  # a with_* method naming a section LoaderPlan does not have
        raise TypeError(f"not plan sections: {sorted(unknown)}; see LoaderPlan's fields")
    return FrozenMap((k, value.get(k, default)) for k, default in SECTION_DEFAULTS.items())


@attrs.frozen(repr=False)
class BuilderState:
    """The sections' values of a builder and its bound objects.

    ``_sections`` holds every plan section's value (read through :meth:`_value`), starting
    from ``LoaderPlan``'s defaults: the builder keeps no second list of sections or defaults.
    ``_preset`` records the preset that made the builder (display only, not compared) and
    ``_bound`` the live objects. The base of :class:`~loaderkit.DataLoaderBuilder`; not used
    on its own.
    """

    _sections: Mapping[str, object] = attrs.field(factory=FrozenMap, converter=_all_sections)
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
        new = attrs.evolve(self, sections={**self._sections, **sections})
        used = bound_names(new._value)
        added = dict(live)
        bound = {k: v for k, v in self._bound.items() if k in used and k not in added}
        bound.update(added)
        return attrs.evolve(new, bound=bound)

    def _value(self, section: str) -> object:
        """The builder's value of plan section ``section`` (its default when not set)."""
        if section == "preset":  # a record, kept apart: builders compare without it
            return self._preset
        return self._sections[section]
