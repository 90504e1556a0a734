"""What every collator can rely on: the batch context, the device step, shared checks.

A collator is any callable taking the list of samples. Built-in collators are instances of
:class:`Collator` subclasses whose constructors take the plan's options and check them in pure
Python (no torch), so a plan with bad options fails at ``compile()``; torch is imported only
when a batch is made.

Two optional hooks, used by the loader when a collator has them:

- ``uses_context = True``: the collator is called as ``collate(samples, context=ctx)`` with a
  :class:`BatchContext` that derives random streams from (seed, epoch, sample index), so random
  collators (MLM masking) give the same batch for any number of workers, after a resume, and
  at any world size.
- ``on_device(batch)``: applied in the main process after the batch reached the plan's device
  (e.g. normalizing uint8 images on the GPU, after shipping 4x fewer bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from loaderkit.errors import DataError, PlanError
from loaderkit.order.keys import batch_rng, sample_rng

__all__ = [
    "BatchContext",
    "Collator",
    "check_choice_option",
    "check_int_option",
    "check_keys",
    "describe_shapes",
]


@dataclass(frozen=True)
class BatchContext:
    """Where a batch sits in the stream: what random collators key their randomness by."""

    seed: int
    epoch: int
    batch_index: int
    indices: npt.NDArray[np.int64]

    def sample_rngs(self, component: str) -> list[np.random.Generator]:
        """One generator per sample, keyed by (seed, component, epoch, sample index)."""
        return [sample_rng(self.seed, component, self.epoch, int(i)) for i in self.indices]

    def batch_rng(self, component: str) -> np.random.Generator:
        """One generator for the batch, keyed by (seed, component, epoch, batch index)."""
        return batch_rng(self.seed, component, self.epoch, self.batch_index)


class Collator:
    """Base class of the built-in collators (subclass it for yours, or use any callable)."""

    uses_context: ClassVar[bool] = False
    name: ClassVar[str] = "collator"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Make a batch from ``samples``."""
        raise NotImplementedError

    def on_device(self, batch: Any) -> Any:
        """Finish a batch after it reached its device (default: unchanged)."""
        return batch

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(type(self).__name__)


def _option_error(option: str, message: str) -> PlanError:
    return PlanError.single(f"collator.options.{option}", message)


def check_int_option(
    option: str, value: object, *, minimum: int | None = None, allow_none: bool = False
) -> int | None:
    """An int option (not a bool), at least ``minimum``; ``None`` when ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _option_error(option, f"must be an int (got {type(value).__name__} {value!r})")
    if minimum is not None and value < minimum:
        raise _option_error(option, f"must be >= {minimum} (got {value})")
    return value


def check_choice_option(option: str, value: object, choices: Sequence[str]) -> str:
    """A string option among ``choices``."""
    if not isinstance(value, str) or value not in choices:
        listed = ", ".join(repr(c) for c in choices)
        raise _option_error(option, f"must be one of {listed} (got {value!r})")
    return value


def check_keys(samples: Sequence[Any], *, collator: str) -> list[str]:
    """The keys of a batch of mapping samples (in the first sample's order).

    Raises :class:`DataError` naming the first batch position whose keys differ (as a set)
    from the first sample's, with the keys missing and extra.
    """
    if not samples:
        raise DataError(f"collator {collator!r} got an empty batch", collator=collator)
    first = samples[0]
    if not isinstance(first, Mapping):
        raise DataError(
            f"collator {collator!r} needs samples that are mappings of named fields (got "
            f"{type(first).__name__} at batch position 0)",
            collator=collator,
        )
    keys = list(first)
    wanted = first.keys()
    for position, sample in enumerate(samples):
        if type(sample) is dict or isinstance(sample, Mapping):
            if sample.keys() == wanted:
                continue
            got = list(sample)
            raise DataError(
                f"collator {collator!r}: sample at batch position {position} has keys {got}, "
                f"position 0 has {keys} (missing {sorted(set(keys) - set(got))}, extra "
                f"{sorted(set(got) - set(keys))})",
                collator=collator,
            )
        raise DataError(
            f"collator {collator!r}: sample at batch position {position} is a "
            f"{type(sample).__name__}, not a mapping like position 0",
            collator=collator,
        )
    return keys


def describe_shapes(values: Sequence[Any]) -> str:
    """``'position 0: (3, 4), position 1: (3, 5)'`` for the first values whose shapes differ."""
    shapes = [
        tuple(getattr(v, "shape", ())) or (len(v) if hasattr(v, "__len__") else ()) for v in values
    ]
    first = shapes[0]
    for position, shape in enumerate(shapes):
        if shape != first:
            return f"position 0: {first}, position {position}: {shape}"
    return f"all {first}"
