"""Loader wrappers: :class:`LoaderView`, the delegation they share, and the look-ahead one.

A wrapper for a training stack (``AcceleratedLoader``, Lightning's ``LightningTrainLoader``
and ``LightningStreamLoader``) changes one or two things and is the wrapped loader for the
rest: :class:`LoaderView` is that rest, written once.

Lightning's fetcher reads a loader without a length one batch ahead of the step that trains
on it. The loader's own ``state_dict()`` then counts a batch not yet trained, and a run resumed
from a checkpoint taken there would skip it. :class:`LookaheadLoader` holds the loader's state
as it was *before* the batch read ahead, and answers ``state_dict()`` with it while a pass
runs; everything else is the wrapped loader's. (Accelerate needs no such wrapper: a loader
that reads ahead for it does so before the batch counts, see
:mod:`loaderkit.integrations.gradient_state`.)
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from loaderkit.runtime.passes.epoch_sampler import EpochSampler

__all__ = ["LoaderView", "LookaheadLoader"]


class LoaderView:
    """A wrapper that is its loader: iteration, ``len``, state, epochs and every attribute.

    Subclasses override what they change. :attr:`sampler` is the wrapper's own, so that a
    trainer's ``sampler.set_epoch(e)`` goes through the wrapper's :meth:`set_epoch`.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        """The wrapped loader."""

    def __iter__(self) -> Iterator[Any]:
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        """The loader's position (JSON-serializable): the loader's own ``state_dict()``."""
        state: dict[str, Any] = self.loader.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Continue from ``state``: the loader's own ``load_state_dict``."""
        self.loader.load_state_dict(state, strict=strict)

    def set_epoch(self, epoch: int) -> None:
        """The next pass is epoch ``epoch``, from its first batch: the loader's own."""
        self.loader.set_epoch(epoch)

    @property
    def sampler(self) -> EpochSampler:
        """Where trainers set the epoch (``sampler.set_epoch(e)`` is :meth:`set_epoch`).

        See :attr:`Loader.sampler <loaderkit.runtime.loader.Loader.sampler>`.
        """
        return EpochSampler(self)

    @property
    def epoch(self) -> int:
        """The loader's epoch (of its current or last pass, or of the pending one)."""
        epoch: int = self.loader.epoch
        return epoch

    _own: tuple[str, ...] = ("loader",)
    """The wrapper's own attributes, never looked up on the loader (unpickling sets them
    last: looking them up there would recurse)."""

    def __getattr__(self, name: str) -> Any:
        if name in self._own:
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.loader!r})"


class LookaheadLoader(LoaderView):
    """The base of a look-ahead wrapper (Lightning's): the held state and delegation.

    Subclasses set :attr:`_held` while a batch is read ahead (the state after the batches
    really handed over) and reset it when a pass ends. ``load_state_dict`` and
    ``set_epoch`` clear it: they move the loader (and so does ``sampler.set_epoch``, the
    wrapper's :attr:`sampler`). Any other attribute is the loader's.
    """

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)
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
