"""Lightning with loaderkit loaders: the one case that needs a wrapper, streamed loaders.

A loader has what Lightning reads on a torch ``DataLoader`` to tell it its epoch: a
``sampler`` whose ``set_epoch`` Lightning calls before every training epoch
(:attr:`~loaderkit.runtime.loader.Loader.sampler`). Lightning also stores the loader's
``state_dict()`` in its checkpoints and reloads it when it restarts inside an epoch. So
map-style loaders (``plan.build()`` of a dataset with a length) go to ``Trainer.fit``
directly, and a :class:`~loaderkit.DataModule` through
:meth:`~loaderkit.DataModule.to_lightning`.

A loader without a length (a ``StreamLoader``) is read one batch ahead: Lightning's fetcher
prefetches a batch to find out, before the step, whether it is the epoch's last. The loader's
own state then counts that batch, and a run resumed from the checkpoint would skip it.
:func:`for_lightning` wraps such a loader in a :class:`LightningStreamLoader`, whose state is
the position after the batches Lightning has *trained on*. ``DataModule.to_lightning()`` does
this by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from loaderkit.integrations._lookahead import LookaheadLoader
from loaderkit.runtime.epoch_sampler import EpochSampler

__all__ = ["LightningStreamLoader", "for_lightning"]

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


def for_lightning(loader: Any) -> Any:
    """The loader to give Lightning: ``loader`` itself, or a :class:`LightningStreamLoader`.

    A loader with a length is returned as it is (Lightning reads it batch by batch); a
    streamed one, which Lightning reads one batch ahead, is wrapped so that checkpoints
    resume exactly.
    """
    from loaderkit.runtime.stream import StreamLoader

    if isinstance(loader, StreamLoader):
        return LightningStreamLoader(loader)
    return loader
