"""Lightning with loaderkit loaders: the one case that needs a wrapper, streamed loaders.

Map-style loaders (``plan.build()`` of a dataset with a length) go to ``Trainer.fit``
directly, and a :class:`~loaderkit.DataModule` through
:meth:`~loaderkit.DataModule.to_lightning`. Lightning reads a loader *with* a length batch by
batch, so the loader's ``state_dict()``, which Lightning stores in its checkpoints, is the
position after the last batch trained.

A loader without a length (a ``StreamLoader``) is read one batch ahead: Lightning's fetcher
prefetches a batch to find out, before the step, whether it is the epoch's last. The loader's
own state then counts that batch, and a run resumed from the checkpoint would skip it.
:func:`for_lightning` wraps such a loader in a :class:`LightningStreamLoader`, whose state is
the position after the batches Lightning has *trained on*. ``DataModule.to_lightning()`` does
this by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loaderkit.integrations._lookahead import LookaheadLoader

__all__ = ["LightningStreamLoader", "for_lightning"]


class LightningStreamLoader(LookaheadLoader):
    """A streamed loader whose state leaves out the batch Lightning has read ahead.

    Iterates exactly like the wrapped loader. While a pass runs (from its second batch on),
    ``state_dict()`` is the loader's state before its last delivered batch (the one
    Lightning's fetcher holds, not yet trained on); otherwise it is the loader's own.
    Everything else
    (``set_epoch``, ``load_state_dict``, ``close``, ...) is the loader's.
    """

    def __init__(self, loader: Any) -> None:
        super().__init__(loader)

    def __iter__(self) -> Iterator[Any]:
        self._held = None
        previous: dict[str, Any] | None = None
        for batch in self.loader:
            self._held = previous  # after the batch before this one
            previous = self.loader.state_dict()
            yield batch
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
