"""The map-style datasets :func:`loaderkit.testing.sample_datasets` draws (module level: picklable).

Kept apart from the strategies so that worker processes started with ``spawn`` can unpickle
them without hypothesis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset

__all__ = ["SampleDataset", "TabularDataset", "brief"]


def _dtype(value: Any) -> str:
    return str(value.dtype).removeprefix("torch.")


def brief(value: Any, width: int = 48) -> str:
    """A short repr of a sample value: tensors and arrays by dtype and shape."""
    if isinstance(value, torch.Tensor | np.ndarray):
        dtype = _dtype(value)
        if value.ndim == 0 or (value.ndim == 1 and value.shape[0] <= 8):
            return f"{type(value).__name__}({value.tolist()}, {dtype})"
        return f"{type(value).__name__}({dtype}, shape {tuple(value.shape)})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {brief(v, width)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(brief(v, width) for v in value) + ")"
    if type(value).__module__.startswith("PIL"):
        return f"<PIL {getattr(value, 'mode', '?')} {getattr(value, 'size', '?')}>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


class SampleDataset(Dataset[Any]):
    """A map-style torch dataset over a list of samples, with a readable repr.

    What the hypothesis strategies of :mod:`loaderkit.testing` return for ``backend="torch"``:
    ``dataset[i]`` is ``samples[i]`` (the same object every time).
    """

    def __init__(self, samples: Sequence[Any], kind: str = "samples") -> None:
        self.samples = list(samples)
        self.kind = kind

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Any:
        if not -len(self.samples) <= index < len(self.samples):
            raise IndexError(f"index {index} out of range for {len(self.samples)} samples")
        return self.samples[index]

    def __repr__(self) -> str:
        shown = ", ".join(brief(s) for s in self.samples[:4])
        more = f", ... ({len(self.samples) - 4} more)" if len(self.samples) > 4 else ""
        count = f"{len(self.samples)} sample{'' if len(self.samples) == 1 else 's'}"
        return f"SampleDataset({self.kind}, {count}: [{shown}{more}])"


class TabularDataset(TensorDataset):
    """``TensorDataset(features, labels)`` with a readable repr."""

    def __repr__(self) -> str:
        features, labels = self.tensors
        return (
            f"TabularDataset(features {tuple(features.shape)} {_dtype(features)}, labels "
            f"{labels.tolist()[:8]}{'...' if len(labels) > 8 else ''})"
        )
