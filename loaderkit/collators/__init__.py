"""The collator registry and the built-in collators.

A collator turns a list of samples into a batch. Plans name collators (``"default"``) and carry
their options as plain data; :func:`register_collator` adds your own, and installed packages can
contribute collators through the entry-point group ``loaderkit.collators``. A registered entry is
a *factory*: it takes the options as keyword arguments and returns the collate function. Options
are checked against the factory's signature when the plan compiles.

Factories and the functions they return must be picklable (module-level functions or instances
of module-level classes) so that workers started with ``spawn`` can receive them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from loaderkit.registry import Registry

__all__ = ["collators", "default_collate", "register_collator"]

Collate = Callable[[Sequence[Any]], Any]

collators: Registry[Callable[..., Collate]] = Registry(
    "collator", entry_point_group="loaderkit.collators"
)
"""The registry of collator factories, by name."""

register_collator = collators.register
"""Register a collator factory: ``@register_collator("audio", modality="audio")``."""


def default_collate(samples: Sequence[Any]) -> Any:
    """Collate with ``torch.utils.data.default_collate`` semantics (imported lazily)."""
    from torch.utils.data import default_collate as torch_default_collate

    return torch_default_collate(list(samples))


def _default() -> Collate:
    """Torch default_collate: stacks tensors, arrays and numbers; recurses into dicts and tuples."""
    return default_collate


collators.register(
    "default",
    _default,
    description="torch default_collate: stack tensors/arrays/numbers, recurse into dicts, tuples",
    origin="builtin",
)
