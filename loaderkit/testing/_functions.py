"""The functions :func:`loaderkit.testing.builder_calls` passes where a ``with_*`` takes one.

Module level, so that they are stored in plans as ``"module:qualname"`` references and
unpickle in ``spawn`` workers; kept apart from the strategies (no hypothesis, no torch).
Samples may be ints, dict rows or token samples ``{"input_ids": [...]}``: each function gives
a value for any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "batch_size_schedule",
    "competence_schedule",
    "max_length_schedule",
    "mixture_weights_schedule",
    "sample_collate",
    "sample_difficulty",
    "sample_length",
    "sample_transform_rng",
    "sample_weight",
]


def _number(sample: Any) -> int:
    """A small int read off a sample: an int itself, a token count, or a row's int value."""
    if isinstance(sample, Mapping):
        ids = sample.get("input_ids")
        if ids is not None:
            return len(ids)
        sample = next((v for v in sample.values() if isinstance(v, int | float)), 0)
    if isinstance(sample, int | float):
        return int(sample)
    return 0


def sample_length(sample: Any) -> int:
    """A sample's length for ``with_bucketing``: between 1 and 8."""
    return 1 + _number(sample) % 8


def sample_weight(sample: Any) -> float:
    """A sample's weight for ``with_sampling_weights``: 0.5, 1.0 or 1.5."""
    return 0.5 * (1 + _number(sample) % 3)


def sample_difficulty(sample: Any) -> float:
    """A sample's difficulty for ``with_curriculum`` (lower is easier)."""
    return float(_number(sample) % 5)


def sample_transform_rng(sample: Any, rng: Any = None) -> Any:
    """A transform taking ``rng`` (so a plan marks it random); returns the sample unchanged."""
    del rng
    return sample


def sample_collate(samples: list[Any]) -> list[Any]:
    """A collator: the batch is the list of samples."""
    return list(samples)


def batch_size_schedule(t: int) -> int:
    """A progressive batch size for ``with_batch_size``: 2, 3, 4, 2, ..."""
    return 2 + t % 3


def max_length_schedule(t: int) -> int:
    """A sequence-length schedule for ``with_max_length``: 4, 6, 8, ... up to 32."""
    return min(32, 4 + 2 * t)


def competence_schedule(t: int) -> float:
    """A curriculum's competence for ``with_curriculum``: 0.25, 0.5, 0.75, then 1."""
    return min(1.0, 0.25 * (t + 1))


def mixture_weights_schedule(t: int) -> dict[str, float]:
    """Weights of a two-source mixture ``{"wiki": ..., "code": ...}``: code gains with t."""
    return {"wiki": 1.0, "code": 1.0 + t}
