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

import copy
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["LightningStreamLoader", "for_lightning"]


class LightningStreamLoader:
    """A streamed loader whose state leaves out the batch Lightning has read ahead.

    Iterates exactly like the wrapped loader. While a pass runs (from its second batch on),
    ``state_dict()`` is the loader's state before its last delivered batch (the one
    Lightning's fetcher holds, not yet trained on); otherwise it is the loader's own.
    Everything else
    (``set_epoch``, ``load_state_dict``, ``close``, ...) is the loader's.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        """The wrapped loader."""
        self._lagged: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        self._lagged = None
        previous: dict[str, Any] | None = None
        for batch in self.loader:
            self._lagged = previous  # after the batch before this one
            previous = self.loader.state_dict()
            yield batch
        self._lagged = None  # the pass ended: Lightning trains on what it holds first

    def state_dict(self) -> dict[str, Any]:
        """The position after the batches Lightning has trained on (JSON-serializable)."""
        if self._lagged is not None:
            return copy.deepcopy(self._lagged)
        state: dict[str, Any] = self.loader.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Continue from ``state``: the loader's own ``load_state_dict``."""
        self._lagged = None
        self.loader.load_state_dict(state, strict=strict)

    def set_epoch(self, epoch: int) -> None:
        """The next pass is epoch ``epoch``: the loader's own ``set_epoch``."""
        self._lagged = None
        self.loader.set_epoch(epoch)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __repr__(self) -> str:
        return f"for_lightning({self.loader!r})"


def for_lightning(loader: Any) -> Any:
    """The loader to give Lightning: ``loader`` itself, or a :class:`LightningStreamLoader`.

    A loader with a length is returned as it is (Lightning reads it batch by batch); a
    streamed one, which Lightning reads one batch ahead, is wrapped so that checkpoints
    resume exactly.
    """
    from loaderkit.build.stream import StreamLoader

    if isinstance(loader, StreamLoader):
        return LightningStreamLoader(loader)
    return loader
