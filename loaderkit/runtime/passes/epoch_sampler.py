"""``loader.sampler``: where trainers call ``set_epoch``, as on a torch ``DataLoader``'s sampler.

A torch ``DataLoader`` is told its epoch through its sampler: DDP scripts call
``train_loader.sampler.set_epoch(epoch)``, and Lightning calls ``set_epoch`` on
``loader.sampler`` and on ``loader.batch_sampler.sampler`` before every training epoch and
every validation pass (``_set_sampler_epoch``), with the epoch it counts, the one it resumes
included. A loaderkit loader plans its batches itself and has no torch sampler; its
:attr:`~loaderkit.runtime.loader.Loader.sampler` is an :class:`EpochSampler`, whose only job
is to pass ``set_epoch`` on to the loader's own ``set_epoch`` (whose rule keeps a loaded,
not yet started resume of that very epoch).

Lightning passes the epoch it counts in ``epoch_progress.current.processed``, which is
``trainer.current_epoch`` except after a restart by steps (``max_steps``) from a checkpoint
taken at an epoch's end: there it re-enters the finished epoch and counts one ahead from then
on (a torch ``DataLoader`` with a ``DistributedSampler`` is off the same way). When Lightning's
fit loop is the caller, :meth:`EpochSampler.set_epoch` takes the epoch from that loop's
trainer (:func:`calling_trainer`), so a loader given to ``Trainer.fit`` as it is resumes
exactly there too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["EpochSampler", "calling_trainer"]

_LIGHTNING_LOOPS = ("lightning.pytorch.loops.", "pytorch_lightning.loops.")
_STACK_DEPTH = 32  # Lightning's loops call set_epoch 2 frames up, iter() about 10


def calling_trainer() -> Any | None:
    """The Lightning ``Trainer`` whose loop is calling, or ``None`` outside Lightning.

    Looks up the call stack (at most a few dozen frames, only where a trainer may call:
    ``set_epoch`` and ``iter()``) for a method of one of Lightning's loops
    (``lightning.pytorch.loops`` or ``pytorch_lightning.loops``) and returns that loop's
    ``trainer``. Nothing is imported: without Lightning on the stack the answer is ``None``.
    """
    frame = sys._getframe(1)
    for _ in range(_STACK_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_varnames[:1] == ("self",):
            owner = frame.f_locals.get("self")
            if type(owner).__module__.startswith(_LIGHTNING_LOOPS):
                trainer = getattr(owner, "trainer", None)
                if trainer is not None:
                    return trainer
        frame = frame.f_back  # type: ignore[assignment]
    return None


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
        self._own_rule = set_epoch is not None

    def set_epoch(self, epoch: int) -> None:
        """The loader's ``set_epoch(epoch)``: its next pass is epoch ``epoch``, from batch 0.

        Unless a loaded (or interrupted), not yet started resume of that very epoch is
        pending: it is kept, so a trainer that calls ``set_epoch`` with the epoch it resumes
        (Lightning does, after a mid-epoch checkpoint) continues where the state was taken.
        Called by Lightning's fit loop, the epoch is that loop's ``trainer.current_epoch``
        rather than ``epoch`` (see the module docstring); a ``set_epoch`` given to the
        constructor gets ``epoch`` as it is.
        """
        if not self._own_rule:
            trainer = calling_trainer()
            current = getattr(trainer, "current_epoch", None)
            if isinstance(current, int):
                epoch = current
        self._set_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The loader's :attr:`~loaderkit.runtime.loader.Loader.epoch`."""
        return self.loader.epoch

    def __repr__(self) -> str:
        return f"EpochSampler(epoch={self.epoch})"
