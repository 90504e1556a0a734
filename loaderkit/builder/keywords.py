"""Keywords a ``with_*`` method does not take, answered with the call that takes them.

A torch user writes ``DataLoader(ds, batch_size=64, shuffle=True, seed=...)`` in one call;
loaderkit has one call per setting, so ``with_shuffle(seed=3)`` or
``with_batch_size(64, shuffle=True)`` are likely first attempts. Python's own answer
("got an unexpected keyword argument 'seed'") does not say where the keyword goes:
:func:`keywords_checked` makes it a :class:`~loaderkit.PlanTypeError` (a ``TypeError`` too)
that names the call to use (:data:`KEYWORD_HOMES`), or else the closest keyword the method
takes. Type checkers still see the method's own signature.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import ParamSpec, TypeVar

from loaderkit._validate import did_you_mean
from loaderkit.errors import PlanTypeError

__all__ = ["KEYWORD_HOMES", "keywords_checked", "misplaced_keyword"]

P = ParamSpec("P")
R = TypeVar("R")

KEYWORD_HOMES: Mapping[str, str] = MappingProxyType(
    {
        "seed": ".with_seed({value})",
        "generator": ".with_seed(n) (a seed number stands for torch's generator)",
        "shuffle": ".with_shuffle({value})",
        "batch_size": ".with_batch_size({value})",
        "drop_last": ".with_batch_size(n, drop_last={value})",
        "collate_fn": ".with_collator({value})",
        "num_workers": ".with_workers({value})",
        "pin_memory": ".with_workers(n, pin_memory={value})",
        "prefetch_factor": ".with_workers(n, prefetch_factor={value})",
        "persistent_workers": ".with_workers(n, persistent={value})",
        "multiprocessing_context": ".with_workers(n, start_method={value})",
        "timeout": ".with_workers(n, timeout={value})",
        "worker_init_fn": (
            "nothing: workers are seeded from the plan's seed, and a transform taking rng gets "
            "a generator keyed by the sample"
        ),
        "sampler": (
            ".with_shuffle(), .with_sampling_weights(w), .with_distributed() or "
            ".with_bucketing(...) (see docs/migration.md)"
        ),
        "batch_sampler": ".with_bucketing(...) (see docs/sampling.md)",
        "transform": ".with_transform({value})",
        "device": ".with_device({value})",
        "max_length": ".with_max_length({value})",
    }
)
"""Where a keyword a ``with_*`` method does not take belongs: the call, ``{value}`` standing
for the value given (torch ``DataLoader`` keywords and loaderkit's own settings)."""


def _shown(value: object) -> str:
    """``value`` as the argument of the call to use: plain data as is, a function by name."""
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    name = getattr(value, "__name__", None)
    if callable(value) and isinstance(name, str) and name.isidentifier():
        return name
    return "..."


def misplaced_keyword(keyword: str, value: object, accepted: list[str]) -> str:
    """The message for ``keyword=value`` given to a method taking the keywords ``accepted``."""
    home = KEYWORD_HOMES.get(keyword)
    takes = ", ".join(accepted) if accepted else "no keywords"
    if home is None:
        return (
            f"takes no keyword {keyword!r} (got {keyword}={_shown(value)}); it takes "
            f"{takes}{did_you_mean(keyword, accepted)}"
        )
    return (
        f"takes no keyword {keyword!r} (got {keyword}={_shown(value)}); use "
        f"{home.format(value=_shown(value))}"
    )


def keywords_checked(method: Callable[P, R]) -> Callable[P, R]:
    """``method``, whose unknown keywords raise a ``PlanTypeError`` naming the call to use.

    The path of the problem is the method's name (``with_shuffle``); the message names the
    value given and the call that takes it (:func:`misplaced_keyword`).
    """
    parameters = inspect.signature(method).parameters.values()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = [p.name for p in parameters if p.kind in kinds and p.name != "self"]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        raise TypeError(f"{method.__name__} takes **keywords: it has no unknown ones to check")
    name = method.__name__

    @functools.wraps(method)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        for keyword, value in kwargs.items():
            if keyword not in accepted:
                raise PlanTypeError.single(name, misplaced_keyword(keyword, value, accepted))
        return method(*args, **kwargs)

    return checked
