"""Lightning with loaderkit loaders: epochs, checkpoints, and the two wrappers that need them.

A loader (map-style or streamed) has what Lightning reads on a torch ``DataLoader`` to tell it
its epoch: a ``sampler`` whose ``set_epoch`` Lightning calls before every training epoch
(:attr:`~loaderkit.runtime.loader.Loader.sampler`). Lightning also stores the loader's
``state_dict()`` in its checkpoints and reloads it when it restarts inside an epoch. So
map-style loaders (``plan.build()`` of a dataset with a length) go to ``Trainer.fit``
directly, and a :class:`~loaderkit.DataModule` through
:meth:`~loaderkit.DataModule.to_lightning`; a run resumed with ``fit(..., ckpt_path=...)``
continues the uninterrupted run's batches, from a checkpoint taken inside an epoch or at its
end (the table of docs/integrations.md, "Lightning", says which resume needs which wrapper,
and the two stream cases Lightning's read-ahead keeps from being exact).

Two things need a wrapper, which :func:`for_lightning` makes:

- A loader without a length (a ``StreamLoader``) is read one batch ahead: Lightning's
  fetcher prefetches a batch to find out, before the step, whether it is the epoch's last.
  The loader's own state then counts that batch, and a run resumed from the checkpoint would
  skip it. A :class:`LightningStreamLoader`'s state is the position after the batches
  Lightning has *trained on*.
- Lightning tells the sampler ``epoch_progress.current.processed``, which is
  ``trainer.current_epoch`` except after a restart by steps (``max_steps``) from a checkpoint
  taken at an epoch's end (``every_n_epochs``, ``on_train_epoch_end``, ``last.ckpt``): there
  Lightning re-enters the finished epoch, reads one batch past its end, and counts one epoch
  ahead of the one it trains (a torch ``DataLoader`` with a ``DistributedSampler`` is off the
  same way). A :class:`LightningTrainLoader` takes the epoch from the trainer's
  ``current_epoch`` instead, and that run is exact too.

``DataModule.to_lightning()`` gives Lightning both by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from loaderkit.integrations._lookahead import LoaderView, LookaheadLoader
from loaderkit.runtime.epoch_sampler import EpochSampler

__all__ = ["LightningStreamLoader", "LightningTrainLoader", "for_lightning"]

_LOG = logging.getLogger("loaderkit")


class LightningStreamLoader(LookaheadLoader):
    """A streamed loader whose state leaves out the batch Lightning has read ahead.

    Iterates exactly like the wrapped loader. While a pass runs (from its second batch on),
    ``state_dict()`` is the loader's state before its last delivered batch (the one
    Lightning's fetcher holds, not yet trained on); otherwise it is the loader's own.
    ``set_epoch``, ``load_state_dict``, ``close`` and everything else are the loader's.

    Lightning's own ``sampler.set_epoch(e)``, before every epoch, follows the stream:

    - once Lightning reloaded a state (it restarted inside an epoch, or by steps): ignored;
      the loaded position goes on, then the next epochs (Lightning's count can run one ahead
      after such a restart, see the module docstring);
    - else, while a pass runs (Lightning's fetcher starts the first pass, and reads a batch
      of it ahead, before it tells the epoch): kept if it reads epoch ``e``; otherwise the
      pass goes on with epoch ``e`` from its first batch, after the batch already read
      ahead, which belonged to the other epoch (logged as a warning: a run resumed by epochs
      from a checkpoint at an epoch's end, which Lightning does not reload; give Lightning
      ``DataModule.to_lightning()`` for an exact resume);
    - else: the loader's ``set_epoch(e)``.
    """

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)
        self._running = False  # a pass of this wrapper is in progress
        self._loaded = False  # a state was loaded: the stream's position decides the epochs
        self._switch: int | None = None  # the epoch the running pass goes on with

    @property
    def sampler(self) -> EpochSampler:
        """Where Lightning sets the epoch, by the rule of the class docstring."""
        return EpochSampler(self, self._lightning_epoch)

    def _lightning_epoch(self, epoch: int) -> None:
        if self._loaded:
            return
        if not self._running:
            self.set_epoch(epoch)
        elif self.loader.epoch != epoch:
            self._switch = epoch

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Continue from ``state`` (the loader's own); Lightning's epochs follow it from now."""
        super().load_state_dict(state, strict=strict)
        self._loaded = True

    def __iter__(self) -> Iterator[Any]:
        self._held = None
        self._switch = None
        previous: dict[str, Any] | None = None
        self._running = True
        try:
            batches = iter(self.loader)
            while True:
                if self._switch is not None:  # Lightning named another epoch: go on with it
                    _LOG.warning(
                        "loaderkit: Lightning read a batch of epoch %d of this stream ahead "
                        "before it set epoch %d (it did not reload the loader's state); that "
                        "batch is trained, then epoch %d from its start. Give Lightning "
                        "DataModule.to_lightning() for an exact resume",
                        self.loader.epoch,
                        self._switch,
                        self._switch,
                    )
                    self.loader.set_epoch(self._switch)
                    self._switch = None
                    batches = iter(self.loader)
                    previous = self.loader.state_dict()
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                self._held = previous  # after the batch before this one
                previous = self.loader.state_dict()
                yield batch
        finally:
            self._running = False
        self._held = None  # the pass ended: Lightning trains on what it holds first

    def __repr__(self) -> str:
        return f"for_lightning({self.loader!r})"


class LightningTrainLoader(LoaderView):
    """A map-style loader that Lightning tells its epoch by ``trainer.current_epoch``.

    Iterates exactly like the wrapped loader; ``len``, ``state_dict`` / ``load_state_dict``,
    ``set_epoch`` and every other attribute are the loader's. Only :attr:`sampler`, where
    Lightning sets the epoch before every training epoch, differs: its ``set_epoch`` uses
    the trainer's ``current_epoch`` (the number Lightning passes when there is no trainer)
    rather than the number Lightning passes, which runs one ahead after a restart by steps
    from a checkpoint taken at an epoch's end (see the module docstring). A loaded state at
    that epoch's end then resumes as its empty rest, which is what Lightning's restarted
    epoch reads, and the next epoch follows.
    """

    _own = ("loader", "_trainer")

    def __init__(self, loader: Any, trainer: Callable[[], Any]) -> None:
        super().__init__(loader)
        self._trainer = trainer

    @property
    def sampler(self) -> EpochSampler:
        """Where Lightning sets the epoch: the loader's ``set_epoch(trainer.current_epoch)``."""
        return EpochSampler(self.loader, self._trainer_epoch)

    def _trainer_epoch(self, epoch: int) -> None:
        current = getattr(self._trainer(), "current_epoch", None)
        self.loader.set_epoch(epoch if current is None else int(current))


def for_lightning(loader: Any, trainer: Any = None) -> Any:
    """The loader to give Lightning's ``Trainer.fit``.

    - a streamed loader (no length, so Lightning reads it one batch ahead): a
      :class:`LightningStreamLoader`, so that checkpoints resume exactly;
    - a map-style loader with ``trainer`` (the ``Trainer`` that will fit on it): a
      :class:`LightningTrainLoader`, told its epoch by ``trainer.current_epoch``, which a
      run resumed by steps (``max_steps``) from a checkpoint taken at an epoch's end needs;
    - a map-style loader without ``trainer``: ``loader`` itself (every other resume is
      exact with it).

    ``trainer`` is not used for a stream: its pass has ended when Lightning checkpoints at an
    epoch's end (the fetcher read it to its end), so it resumes with the next epoch, which is
    what Lightning's restarted epoch reads.
    """
    from loaderkit.runtime.stream import StreamLoader

    if isinstance(loader, StreamLoader):
        return LightningStreamLoader(loader)
    if trainer is not None:
        return LightningTrainLoader(loader, lambda: trainer)
    return loader
