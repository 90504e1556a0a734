"""The per-sample step the map-style fetcher and the stream producer share.

One sample's transform, run with the rng keyed by (seed, epoch, sample), after the global RNGs
are seeded for it where the plan says; the two policies over a batch of samples (``"raise"``:
the first failure is a :class:`~loaderkit.errors.DataError`; ``"skip"``: a failure becomes a
:class:`~loaderkit.runtime.records.Skipped` record, unless the machine failed rather than the
sample); and the naming of the part of a batch that will not pickle.

The words differ between the paths (a map-style sample is "sample 7 (batch 1 of epoch 0)", a
stream element "element 7 of rank 0's stream"): each caller passes the functions that make its
error and its record, called only when a sample failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from loaderkit.errors import DataError
from loaderkit.order.keys import sample_rng
from loaderkit.runtime.records import NOT_SKIPPED, Skipped, resource_error
from loaderkit.runtime.workers.crossing import type_name, unpicklable

__all__ = [
    "Failed",
    "Recorded",
    "SampleStep",
    "skipped_or_raised",
    "unsendable_batch",
    "unsendable_sample",
]

Failed = Callable[[int, BaseException, str], DataError]
"""``(index, exc, why)``: the error for sample ``index`` whose transform raised ``exc``;
``why`` is ``""``, or :data:`~loaderkit.runtime.records.NOT_SKIPPED` where the skip policy
raised it all the same."""

Recorded = Callable[[int, Exception], Skipped]
"""``(index, exc)``: the record of sample ``index``, dropped by the skip policy for ``exc``."""


def skipped_or_raised(index: int, exc: Exception, failed: Failed, recorded: Recorded) -> Skipped:
    """The skip policy's record of sample ``index``, which failed with ``exc``.

    A resource error (memory, open files, disk: :func:`~loaderkit.runtime.records.
    resource_error`) is the machine's failure, not the sample's: raised as ``failed`` makes it,
    with :data:`~loaderkit.runtime.records.NOT_SKIPPED` as its ``why``.
    """
    if resource_error(exc):
        raise failed(index, exc, NOT_SKIPPED) from exc
    return recorded(index, exc)


class SampleStep:
    """One sample's transform: the keyed rng, the global RNGs seeded before it, the policies.

    ``rng``: the transform takes ``rng=``, a generator keyed by (``seed``, ``"transform"``,
    epoch, sample index), so a sample transforms the same in any worker. ``before(epoch,
    index)``, where given, seeds the global RNGs for the transform of that sample.
    """

    __slots__ = ("before", "rng", "seed", "transform")

    def __init__(
        self,
        transform: Callable[..., Any],
        *,
        rng: bool,
        seed: int,
        before: Callable[[int, int], None] | None = None,
    ) -> None:
        self.transform = transform
        self.rng = rng
        self.seed = seed
        self.before = before

    def __call__(self, epoch: int, index: int, sample: Any) -> Any:
        """The transform of sample ``index`` of ``epoch``."""
        if self.before is not None:
            self.before(epoch, index)
        if self.rng:
            return self.transform(sample, rng=sample_rng(self.seed, "transform", epoch, index))
        return self.transform(sample)

    def all(
        self, epoch: int, indices: Sequence[int], samples: Sequence[Any], failed: Failed
    ) -> list[Any]:
        """Every sample transformed (the ``"raise"`` policy): a failure raises ``failed``'s."""
        transform, before, rng, seed = self.transform, self.before, self.rng, self.seed
        out = []
        for index, sample in zip(indices, samples, strict=True):  # __call__, inlined
            try:
                if before is not None:
                    before(epoch, index)
                if rng:
                    out.append(transform(sample, rng=sample_rng(seed, "transform", epoch, index)))
                else:
                    out.append(transform(sample))
            except Exception as exc:
                raise failed(index, exc, "") from exc
        return out

    def skipping(
        self,
        epoch: int,
        indices: Sequence[int],
        samples: Sequence[Any],
        failed: Failed,
        recorded: Recorded,
    ) -> tuple[list[int], list[Any], list[Skipped]]:
        """The samples that transform, their indices, and the records of the others (skip)."""
        transform, before, rng, seed = self.transform, self.before, self.rng, self.seed
        kept: list[int] = []
        out: list[Any] = []
        skipped: list[Skipped] = []
        for index, sample in zip(indices, samples, strict=True):  # __call__, inlined
            try:
                if before is not None:
                    before(epoch, index)
                if rng:
                    out.append(transform(sample, rng=sample_rng(seed, "transform", epoch, index)))
                else:
                    out.append(transform(sample))
                kept.append(index)
            except Exception as exc:  # noqa: BLE001 - recorded, or raised by skipped_or_raised
                skipped.append(skipped_or_raised(index, exc, failed, recorded))
        return kept, out, skipped


def unsendable_sample(samples: Iterable[tuple[int, Any]]) -> tuple[int, tuple[str, str]] | None:
    """The first ``(index, sample)`` of ``samples`` that does not pickle, and its culprit.

    The culprit is :func:`~loaderkit.runtime.workers.crossing.unpicklable`'s (where in the
    sample, and the type that cannot be sent); ``None`` where every sample pickles.
    """
    for index, sample in samples:
        found = unpicklable(sample)
        if found is not None:
            return index, found
    return None


def unsendable_batch(batch: Any) -> tuple[str, str]:
    """The part of ``batch`` that does not pickle (the batch itself, if none is found)."""
    return unpicklable(batch) or ("", type_name(batch))
