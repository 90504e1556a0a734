"""Batch digests and batch sizes: what the CLI compares and counts, for any batch structure."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["batch_digest", "batch_samples", "batch_tokens", "stream_digest"]


def _leaves(batch: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` for every leaf of a nested batch, in a stable order."""
    if isinstance(batch, Mapping):
        for key in sorted(batch, key=str):
            yield from _leaves(batch[key], f"{path}.{key}" if path else str(key))
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        for field in dataclasses.fields(batch):
            yield from _leaves(getattr(batch, field.name), f"{path}.{field.name}")
    elif isinstance(batch, list | tuple) and not _is_leaf_list(batch):
        for i, item in enumerate(batch):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, batch


def _is_leaf_list(value: list[Any] | tuple[Any, ...]) -> bool:
    return not any(isinstance(v, torch.Tensor | np.ndarray | Mapping | list | tuple) for v in value)


def batch_digest(batch: Any) -> str:
    """sha256 (hex) of a batch: every tensor's path, dtype, shape and bytes, in order.

    Two batches with equal digests hold equal tensors (bit for bit, on any device) under the
    same keys; other leaves (strings, numbers) count by their ``repr``.
    """
    digest = hashlib.sha256()
    for path, value in _leaves(batch):
        digest.update(path.encode())
        if isinstance(value, torch.Tensor):
            host = value.detach().to("cpu").contiguous()
            digest.update(f"{host.dtype}{tuple(host.shape)}".encode())
            digest.update(host.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def stream_digest(digests: list[str]) -> str:
    """sha256 (hex) of a sequence of batch digests: one value for a whole stream."""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _first_tensor(batch: Any) -> torch.Tensor | np.ndarray | None:
    for _, value in _leaves(batch):
        if isinstance(value, torch.Tensor | np.ndarray) and value.ndim >= 1:
            return value
    return None


def batch_samples(batch: Any) -> int:
    """The number of samples in a batch: the first dimension of its first tensor (0 if none)."""
    first = _first_tensor(batch)
    return 0 if first is None else int(first.shape[0])


def batch_tokens(batch: Any) -> int | None:
    """Real (non-padding) tokens of a text batch: ``attention_mask.sum()``, else ``None``.

    Without an ``attention_mask``, the size of ``input_ids`` counts; a batch with neither has
    no tokens to count.
    """
    if not isinstance(batch, Mapping):
        return None
    mask = batch.get("attention_mask")
    if isinstance(mask, torch.Tensor):
        return int(mask.sum())
    ids = batch.get("input_ids")
    if isinstance(ids, torch.Tensor):
        return int(ids.numel())
    return None
