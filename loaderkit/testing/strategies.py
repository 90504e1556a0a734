"""Hypothesis strategies for builders and plans.

:func:`builders` and :func:`plans` draw loaderkit configurations, from :func:`builder_calls`
(one strategy per ``with_*`` method, :data:`BUILDER_CALLS`, each made by its maker in
:mod:`loaderkit.testing.call_strategies`). The strategies of sample datasets to run plans on
are in :mod:`loaderkit.testing.dataset_strategies`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from loaderkit.builder import DataLoaderBuilder
from loaderkit.errors import PlanError
from loaderkit.plan.plan import LoaderPlan
from loaderkit.testing._args import check_range, require, st
from loaderkit.testing.call_strategies import (
    CACHE_FOLDER,
    COLUMNS,
    DATASET_SHAPES,
    SOURCE_NAMES,
    BuilderCall,
    batch_size_calls,
    bucketing_calls,
    cache_calls,
    checks_calls,
    collator_calls,
    curriculum_calls,
    dataset_calls,
    device_calls,
    distributed_calls,
    error_policy_calls,
    global_rngs_calls,
    max_length_calls,
    mixture_calls,
    sampling_weights_calls,
    seed_calls,
    shuffle_calls,
    split_calls,
    task_calls,
    transform_calls,
    without_calls,
    workers_calls,
)

__all__ = [
    "BUILDER_CALLS",
    "CACHE_FOLDER",
    "COLUMNS",
    "DATASET_SHAPES",
    "SOURCE_NAMES",
    "BuilderCall",
    "CallStrategy",
    "builder_calls",
    "builders",
    "plans",
    "sample_transform",
    "section_calls",
]


def sample_transform(sample: Any) -> Any:
    """A module-level (picklable) transform the strategies use: the identity."""
    return sample


CallStrategy = Callable[[int, bool], st.SearchStrategy[BuilderCall]]
"""Makes the strategy of one method's calls from ``(length, junk)``: ``length`` is the number
of samples of the chain's datasets (per-sample arrays are that long), ``junk`` as in
:func:`builder_calls`."""


BUILDER_CALLS: dict[str, CallStrategy] = {
    "with_dataset": dataset_calls,
    "with_mixture": mixture_calls,
    "with_batch_size": batch_size_calls,
    "with_shuffle": shuffle_calls,
    "with_seed": seed_calls,
    "with_collator": collator_calls,
    "with_task": task_calls,
    "with_transform": transform_calls,
    "with_bucketing": bucketing_calls,
    "with_sampling_weights": sampling_weights_calls,
    "with_curriculum": curriculum_calls,
    "with_max_length": max_length_calls,
    "with_split": split_calls,
    "with_checks": checks_calls,
    "with_error_policy": error_policy_calls,
    "with_cache": cache_calls,
    "with_workers": workers_calls,
    "with_device": device_calls,
    "with_global_rngs": global_rngs_calls,
    "with_distributed": distributed_calls,
    "without": without_calls,
}
"""One strategy maker per chain method of :class:`~loaderkit.DataLoaderBuilder`: every
``with_*`` and ``without`` (a test checks the keys against the class, so a new method needs
an entry here, and its maker in :mod:`loaderkit.testing.call_strategies`)."""


def section_calls(
    *, length: int = 16, junk: bool = False
) -> dict[str, st.SearchStrategy[BuilderCall]]:
    """The strategy of each method's calls (see :data:`BUILDER_CALLS`) for ``length`` samples.

    Arguments are valid for the method alone, with options present or absent, schedules as
    tables or functions, per-sample values as columns, functions or ``length`` values;
    ``junk=True`` mixes in values of any type and range. Compiling may still refuse a chain
    of them (settings that do not fit together).
    """
    check_range("length", length, "length", length, 1)
    return dict(_section_table(length, junk))


@functools.lru_cache(maxsize=256)
def _section_table(length: int, junk: bool) -> dict[str, st.SearchStrategy[BuilderCall]]:
    return {name: make(length, junk) for name, make in BUILDER_CALLS.items()}


def builder_calls(
    *,
    min_size: int = 1,
    max_length: int = 64,
    junk: bool = False,
    methods: Sequence[str] | None = None,
    max_size: int = 12,
) -> st.SearchStrategy[list[BuilderCall]]:
    """Lists of calls of every chain method of the builder: each ``with_*`` and ``without``.

    One dataset length ``n`` in ``[1, max_length]`` is drawn per list: datasets, mixtures
    (their sources add up to ``n``) and per-sample values are that long. ``methods`` limits
    the draw to some methods (names of :data:`BUILDER_CALLS`); ``junk=True`` mixes in values
    of any type and range.
    """
    return _chains(min_size, max_size, max_length, junk, methods, source=False)


def _chains(
    min_size: int,
    max_size: int,
    max_length: int,
    junk: bool,
    methods: Sequence[str] | None,
    *,
    source: bool,
    include: Sequence[str] = (),
) -> st.SearchStrategy[list[BuilderCall]]:
    chosen = list(BUILDER_CALLS) if methods is None else list(methods)
    for what, names in (("methods", chosen), ("include", list(include))):
        unknown = [m for m in names if m not in BUILDER_CALLS]
        require(
            not unknown and (bool(names) or what == "include"),
            f"{what} must be names of BUILDER_CALLS (got {unknown or names!r})",
        )
    check_range("min_size", min_size, "max_size", max_size, 0)
    check_range("max_length", max_length, "max_length", max_length, 1)

    def chain(n: int) -> st.SearchStrategy[list[BuilderCall]]:
        table = _section_table(n, junk)
        # the method first, then its arguments: each method is drawn as often as another
        # (one_of would weigh them by their number of branches)
        call = st.sampled_from(chosen).flatmap(table.__getitem__)
        calls = st.lists(call, min_size=min_size, max_size=max_size)
        # the included methods last, so that no later call replaces or resets them
        last = st.tuples(*(table[m] for m in include)).map(list)
        if source:
            first = st.sampled_from(["with_dataset"] * 3 + ["with_mixture"]).flatmap(
                table.__getitem__
            )
            calls = st.tuples(first, calls).map(lambda t: [t[0], *t[1]])
        return st.tuples(calls, last).map(lambda t: [*t[0], *t[1]])

    return st.integers(1, max_length).flatmap(chain)


def apply_calls(
    calls: list[BuilderCall], start: DataLoaderBuilder | None = None
) -> DataLoaderBuilder:
    """Apply ``calls`` in order to ``start`` (a fresh builder by default)."""
    builder = start if start is not None else DataLoaderBuilder()
    for name, args, kwargs in calls:
        method: Callable[..., DataLoaderBuilder] = getattr(builder, name)
        builder = method(*args, **kwargs)
    return builder


def builders(
    *, max_length: int = 64, include: Sequence[str] = ()
) -> st.SearchStrategy[DataLoaderBuilder]:
    """Builders made of valid calls of every chain method, always with a dataset.

    Each chain starts with ``with_dataset`` or ``with_mixture`` and goes on with calls drawn
    by :func:`builder_calls` over the same dataset length; ``include`` names methods that
    every chain calls, last (e.g. ``include=["with_cache"]``). The builders may still fail
    cross-field rules in ``compile()``; :func:`plans` gives ones that don't.
    """
    chains = _chains(0, 12, max_length, False, None, source=True, include=include)
    return chains.map(apply_calls)


def _compiles(builder: DataLoaderBuilder) -> LoaderPlan | None:
    try:
        return builder.compile()
    except PlanError:
        return None


def plans(*, max_length: int = 64, include: Sequence[str] = ()) -> st.SearchStrategy[LoaderPlan]:
    """Plans that compile, from :func:`builders` (``include`` as there)."""
    compiled = builders(max_length=max_length, include=include).map(_compiles)
    return compiled.filter(lambda p: p is not None)  # type: ignore[return-value]
