"""A loader wrapper whose state leaves out the batch its caller has read ahead.

Lightning's fetcher reads a loader without a length one batch ahead of the step that trains
on it. The loader's own ``state_dict()`` then counts a batch not yet trained, and a run resumed
from a checkpoint taken there would skip it. :class:`LookaheadLoader` holds the loader's state
as it was *before* the batch read ahead, and answers ``state_dict()`` with it while a pass
runs; everything else is the wrapped loader's. (Accelerate needs no such wrapper: a loader
that reads ahead for it does so before the batch counts, see
:mod:`loaderkit.runtime.gradient_state`.)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from loaderkit.runtime.epoch_sampler import EpochSampler

__all__ = ["LookaheadLoader"]


class LookaheadLoader:
    """The base of a look-ahead wrapper (Lightning's): the held state and delegation.

    Subclasses set :attr:`_held` while a batch is read ahead (the state after the batches
    really handed over) and reset it when a pass ends. ``load_state_dict`` and
    ``set_epoch`` clear it: they move the loader (and so does ``sampler.set_epoch``, the
    wrapper's :attr:`sampler`). Any other attribute is the loader's.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        """The wrapped loader."""
        self._held: dict[str, Any] | None = None  # the state while a batch is read ahead

    def state_dict(self) -> dict[str, Any]:
        """The position after the batches handed over so far (JSON-serializable)."""
        if self._held is not None:
            return copy.deepcopy(self._held)
        state: dict[str, Any] = self.loader.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Continue from ``state`` (what :meth:`state_dict` returned): the loader's own."""
        self._held = None
        self.loader.load_state_dict(state, strict=strict)

    def set_epoch(self, epoch: int) -> None:
        """The next pass is epoch ``epoch``, from its first batch: the loader's own."""
        self._held = None
        self.loader.set_epoch(epoch)

    @property
    def sampler(self) -> EpochSampler:
        """Where trainers set the epoch (``sampler.set_epoch(e)`` is :meth:`set_epoch`).

        The wrapper's own, so that Lightning's per-epoch ``set_epoch`` clears the held state
        as :meth:`set_epoch` does; see :attr:`Loader.sampler
        <loaderkit.runtime.loader.Loader.sampler>`.
        """
        return EpochSampler(self)

    @property
    def epoch(self) -> int:
        """The loader's epoch (of its current or last pass, or of the pending one)."""
        epoch: int = self.loader.epoch
        return epoch

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)
