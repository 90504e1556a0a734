"""``loader.sampler``: where trainers call ``set_epoch``, as on a torch ``DataLoader``'s sampler.

A torch ``DataLoader`` is told its epoch through its sampler: DDP scripts call
``train_loader.sampler.set_epoch(epoch)``, and Lightning calls ``set_epoch`` on
``loader.sampler`` and on ``loader.batch_sampler.sampler`` before every training epoch and
every validation pass (``_set_sampler_epoch``), with the epoch it counts, the one it resumes
included. A loaderkit loader plans its batches itself and has no torch sampler; its
:attr:`~loaderkit.runtime.loader.Loader.sampler` is an :class:`EpochSampler`, whose only job
is to pass ``set_epoch`` on to the loader's own ``set_epoch`` (whose rule keeps a loaded,
not yet started resume of that very epoch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["EpochSampler"]


class _Epochs(Protocol):
    """What an :class:`EpochSampler` speaks for: a loader (or a wrapper of one)."""

    @property
    def epoch(self) -> int: ...

    def set_epoch(self, epoch: int) -> None: ...


class EpochSampler:
    """What ``loader.sampler`` is: ``set_epoch(e)`` is the loader's own ``set_epoch(e)``.

    Not a torch ``Sampler``: it yields no indices (iterating it raises ``TypeError``), and it
    is neither a ``RandomSampler`` nor a ``SequentialSampler``, so no tool takes it for one,
    injects a ``DistributedSampler`` around it or rebuilds the loader from it (Lightning,
    Accelerate and transformers rebuild torch ``DataLoader`` objects only, and a loaderkit
    loader is not one). A new one is made at every read of ``loader.sampler``; it holds the
    loader, not a copy of its position.

    ``set_epoch`` can be given instead (Lightning's wrappers in
    :mod:`loaderkit.integrations.lightning` take the epoch Lightning passes their own way).
    """

    def __init__(self, loader: _Epochs, set_epoch: Callable[[int], None] | None = None) -> None:
        self.loader = loader
        """The loader (or loader wrapper) whose epoch this sets."""
        self._set_epoch = loader.set_epoch if set_epoch is None else set_epoch

    def set_epoch(self, epoch: int) -> None:
        """The loader's ``set_epoch(epoch)``: its next pass is epoch ``epoch``, from batch 0.

        Unless a loaded (or interrupted), not yet started resume of that very epoch is
        pending: it is kept, so a trainer that calls ``set_epoch`` with the epoch it resumes
        (Lightning does, after a mid-epoch checkpoint) continues where the state was taken.
        """
        self._set_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The loader's :attr:`~loaderkit.runtime.loader.Loader.epoch`."""
        return self.loader.epoch

    def __repr__(self) -> str:
        return f"EpochSampler(epoch={self.epoch})"
