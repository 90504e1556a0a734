"""The ``default`` collator, and ``torch_default`` (exactly torch's ``default_collate``).

``default`` follows torch ``default_collate`` semantics, plus dataclasses, with one change: a
batch of equal-shape (nested) Python lists of one number type becomes one ``[batch, ...]``
tensor instead of torch's transposed lists of tensors. Its errors name the key path, the batch
position and the shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from loaderkit.collators.base import BatchContext, Collator, describe_shapes
from loaderkit.errors import DataError

__all__ = ["DefaultCollator", "TorchDefaultCollator", "default_collate"]


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


def _collate(samples: Sequence[Any], path: str, lists: bool = True) -> Any:
    """Collate ``samples`` found at ``path``; ``lists=False``: lists the torch way (transposed)."""
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
                f.name: _collate([getattr(s, f.name) for s in samples], f"{path}.{f.name}", lists)
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
        items = {k: _collate(columns[k], f"{path}[{k!r}]", lists) for k in keys}
        try:
            return type(elem)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(
            *(
                _collate(column, f"{path}.{name}", lists)
                for name, column in zip(elem._fields, zip(*samples, strict=True), strict=True)
            )
        )
    if lists and isinstance(elem, list):
        number = _number_lists(samples)
        if number is not None:
            return _number_tensor(samples, number, path)
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
            _collate(column, f"{path}[{i}]", lists)
            for i, column in enumerate(zip(*samples, strict=True))
        ]
    return _leaf(samples, path, _torch_collate or _torch_default_collate())


_LEAF_TYPES = (int, float, bool, str, bytes)

_NUMBER_DTYPES = {bool: "bool", int: "int64", float: "float64"}
"""The tensor dtype of a list batch by the Python type of its numbers: torch's number rules."""


def _number_lists(samples: Sequence[Any]) -> type | None:
    """The number type of a batch of equal-shape nested lists of one Python number type.

    ``None`` (torch's transposing semantics apply) unless every sample is a list, every list at
    a depth has the same non-zero length, and every leaf has the same exact type, ``bool``,
    ``int`` or ``float`` (so ``[0.5, 3]``, a record of a float and an int, is not stacked).
    """
    level: Sequence[Any] = samples
    while isinstance(level[0], list):
        width = len(level[0])
        if width == 0 or not all(isinstance(v, list) and len(v) == width for v in level):
            return None
        level = list(chain.from_iterable(level))
    kinds = set(map(type, level))
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    return kind if kind in _NUMBER_DTYPES else None


def _number_tensor(samples: Sequence[Any], number: type, path: str) -> Any:
    """The ``[batch, ...]`` tensor of equal-shape lists of ``number`` values."""
    _torch_default_collate()  # imports torch on first use
    try:
        return _torch.tensor(samples, dtype=getattr(_torch, _NUMBER_DTYPES[number]))
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:
        raise DataError(
            f"at {path or 'batch'}: cannot stack lists of {number.__name__} "
            f"({describe_shapes(samples)}): {exc}",
            collator="default",
        ) from exc


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
    """Collate with torch ``default_collate`` semantics, dataclasses included, lists stacked.

    Tensors, numpy arrays and numbers are stacked; mappings, named tuples and dataclasses keep
    their type; a batch of equal-shape (nested) lists of one Python number type (``bool``,
    ``int``, ``float``) becomes one ``[batch, ...]`` tensor (bool, int64, float64); tuples and
    other lists become lists of collated columns; strings stay lists. A mismatch raises
    :class:`~loaderkit.DataError` naming the key path and batch position.
    """
    if not samples:
        raise DataError("the default collator got an empty batch", collator="default")
    return _collate(samples, "")


class DefaultCollator(Collator):
    """torch default_collate semantics, plus dataclasses; number lists become one tensor."""

    name = "default"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Collate ``samples``."""
        return default_collate(samples)


class TorchDefaultCollator(Collator):
    """Exactly ``torch.utils.data.default_collate``; its errors become ``DataError``s.

    On an error, loaderkit's own walk (with torch's list semantics) names the key path, the
    batch position and the shapes where it can; otherwise torch's message is kept.
    """

    name = "torch_default"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Collate ``samples`` with torch's ``default_collate``."""
        collate = _torch_collate or _torch_default_collate()
        try:
            return collate(samples)
        except Exception as exc:
            message = f"torch default_collate failed: {type(exc).__name__}: {exc}"
            try:
                if samples:
                    _collate(samples, "", lists=False)
            except DataError as found:  # the same walk names the key path and positions
                message = f"{found.message} (torch default_collate: {type(exc).__name__})"
            raise DataError(message, collator=self.name) from exc
