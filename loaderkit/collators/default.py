"""The ``default`` collator: torch ``default_collate`` semantics, plus dataclasses.

Errors name the key path, the batch position and the shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from loaderkit.collators.base import BatchContext, Collator, describe_shapes
from loaderkit.errors import DataError

__all__ = ["DefaultCollator", "default_collate"]


_torch: Any = None
"""The torch module, imported on first use (the plan layer imports this module)."""
_torch_collate: Any = None
"""torch's ``default_collate``, imported with it."""


def _torch_default_collate() -> Any:
    global _torch, _torch_collate
    if _torch_collate is None:
        import torch
        from torch.utils.data import default_collate

        _torch, _torch_collate = torch, default_collate
    return _torch_collate


def _collate(samples: Sequence[Any], path: str) -> Any:
    elem = samples[0]
    if type(elem) in _LEAF_TYPES or _is_tensor(elem):
        return _leaf(samples, path, _torch_collate or _torch_default_collate())
    if dataclasses.is_dataclass(elem) and not isinstance(elem, type):
        cls = type(elem)
        for position, sample in enumerate(samples):
            if type(sample) is not cls:
                raise DataError(
                    f"at {path or 'batch'}: sample at batch position {position} is a "
                    f"{type(sample).__name__}, position 0 a {cls.__name__}",
                    collator="default",
                )
        fields = [f for f in dataclasses.fields(elem) if f.init]
        return cls(
            **{
                f.name: _collate([getattr(s, f.name) for s in samples], f"{path}.{f.name}")
                for f in fields
            }
        )
    if isinstance(elem, Mapping):
        keys = list(elem)
        mapping_type, count = type(elem), len(keys)
        columns: dict[Any, list[Any]] | None = None
        # the common case at C speed: samples of the first's mapping type, each with as many
        # keys as it and all of its keys (itemgetter raises KeyError for a missing one)
        if all(map(mapping_type.__instancecheck__, samples)) and all(
            map(count.__eq__, map(len, samples))
        ):
            try:
                columns = {k: list(map(itemgetter(k), samples)) for k in keys}
            except KeyError:
                columns = None
        if columns is None:
            for position, sample in enumerate(samples):
                if not isinstance(sample, Mapping) or set(sample) != set(keys):
                    got = sorted(sample) if isinstance(sample, Mapping) else type(sample).__name__
                    raise DataError(
                        f"at {path or 'batch'}: sample at batch position {position} has keys "
                        f"{got}, position 0 has {sorted(keys)}",
                        collator="default",
                    )
            columns = {k: [s[k] for s in samples] for k in keys}
        items = {k: _collate(columns[k], f"{path}[{k!r}]") for k in keys}
        try:
            return type(elem)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(
            *(
                _collate(column, f"{path}.{name}")
                for name, column in zip(elem._fields, zip(*samples, strict=True), strict=True)
            )
        )
    if isinstance(elem, list | tuple) and not isinstance(elem, str):
        same_length = len(set(map(len, samples))) == 1
        for position, sample in enumerate(() if same_length else samples):
            if len(sample) != len(elem):
                raise DataError(
                    f"at {path or 'batch'}: sample at batch position {position} has "
                    f"{len(sample)} elements, position 0 has {len(elem)}",
                    collator="default",
                )
        # torch semantics: a batch of tuples or lists becomes a list of collated columns
        return [
            _collate(column, f"{path}[{i}]") for i, column in enumerate(zip(*samples, strict=True))
        ]
    return _leaf(samples, path, _torch_collate or _torch_default_collate())


_LEAF_TYPES = (int, float, bool, str, bytes)


def _is_tensor(value: object) -> bool:
    return type(value).__name__ in ("Tensor", "ndarray") and hasattr(value, "shape")


def _leaf(samples: Sequence[Any], path: str, collate: Any) -> Any:
    elem = samples[0]
    try:
        kind = type(elem)
        if kind is float or kind is int:  # what torch's collate_{float,int}_fn do, directly
            return _torch.tensor(samples, dtype=_torch.float64 if kind is float else None)
        return collate(samples)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise DataError(
            f"at {path or 'batch'}: cannot stack {type(elem).__name__} values "
            f"({describe_shapes(samples)}): {exc}",
            collator="default",
        ) from exc


def default_collate(samples: Sequence[Any]) -> Any:
    """Collate with torch ``default_collate`` semantics, dataclasses included.

    Tensors, numpy arrays and numbers are stacked; mappings, named tuples and dataclasses keep
    their type; other sequences become lists of collated columns; strings stay lists. A
    mismatch raises :class:`~loaderkit.DataError` naming the key path and batch position.
    """
    if not samples:
        raise DataError("the default collator got an empty batch", collator="default")
    return _collate(samples, "")


class DefaultCollator(Collator):
    """torch default_collate semantics, plus dataclasses."""

    name = "default"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Collate ``samples``."""
        return default_collate(samples)
