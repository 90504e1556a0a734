"""The transform registry.

A transform is a per-sample function applied where samples are fetched (in the worker when there
are workers). ``with_transform`` accepts a callable, a ``module:qualname`` string or the name of a
transform registered here with :func:`register_transform`. A registered entry is the transform
function itself. If the function accepts an ``rng`` keyword it receives a
``numpy.random.Generator`` derived from (seed, epoch, sample index), so its randomness does not
depend on the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loaderkit.registry import Registry

__all__ = ["register_transform", "transforms"]

transforms: Registry[Callable[..., Any]] = Registry(
    "transform", entry_point_group="loaderkit.transforms"
)
"""The registry of named per-sample transforms."""

register_transform = transforms.register
"""Register a per-sample transform under a name: ``@register_transform("augment")``."""
