"""The collator registry and the built-in collators.

A collator turns a list of samples into a batch. Plans name collators (``"text"``) and carry
their options as plain data; :func:`register_collator` adds your own, and installed packages can
contribute collators through the entry-point group ``loaderkit.collators``. A registered entry is
a *factory*: it takes the options as keyword arguments and returns the collate callable (options
arrive frozen: lists as tuples, dicts as read-only mappings). Options
are checked against the factory's signature when the plan compiles; built-in collators also
check their values then (their constructors are pure Python and import torch only when they
make a batch).

Factories and the callables they return must be picklable (module-level functions or instances
of module-level classes) so that workers started with ``spawn`` can receive them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from loaderkit.collators import multimodal, packed, text, vision
from loaderkit.collators.base import BatchContext, Collator
from loaderkit.collators.default import DefaultCollator, TorchDefaultCollator, default_collate
from loaderkit.registry import Registry

__all__ = [
    "BatchContext",
    "Collator",
    "collators",
    "default_collate",
    "register_collator",
]

Collate = Callable[[Sequence[Any]], Any]

collators: Registry[Callable[..., Collate]] = Registry(
    "collator", entry_point_group="loaderkit.collators"
)
"""The registry of collator factories, by name."""

register_collator = collators.register
"""Register a collator factory: ``@register_collator("audio", modality="audio")``."""

collators.register(
    "default",
    DefaultCollator,
    description="torch default_collate semantics (stack tensors/arrays/numbers, recurse into "
    "dicts, tuples, named tuples and dataclasses), but equal-shape lists of numbers become "
    "one [batch, ...] tensor",
    origin="builtin",
    validate=True,
)

collators.register(
    "torch_default",
    TorchDefaultCollator,
    description="exactly torch.utils.data.default_collate (lists of numbers come back "
    "transposed); errors as DataError",
    origin="builtin",
    validate=True,
)

for _module in (text, packed, vision, multimodal):
    for _name, _cls, _modality, _description in _module.BUILTINS:
        collators.register(
            _name,
            _cls,
            description=_description,
            modality=_modality,
            origin="builtin",
            validate=True,
        )
