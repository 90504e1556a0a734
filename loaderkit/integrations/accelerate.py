"""Hugging Face Accelerate with loaderkit loaders: where an epoch ends, skipping, checkpoints.

A loaderkit loader shards itself across processes (``with_distributed()``), so
``accelerator.prepare(model, optimizer, loader)`` hands it back unchanged: nothing is sharded
twice. Two things Accelerate does through its own ``DataLoader`` wrappers need this module:

- :class:`AcceleratedLoader` tells Accelerate's ``GradientState`` which loader is being read
  and, one batch ahead, when the current pass ends, the way Accelerate's ``DataLoaderShard``
  does. ``with accelerator.accumulate(model):`` then syncs gradients on the last batch of
  every epoch even when the epoch is not a multiple of the accumulation steps (a plain loader
  leaves that partial window to be mixed into the next epoch's first one).
- :func:`skip_first_batches` is Accelerate's ``skip_first_batches`` for a loaderkit loader
  (Accelerate's own rebuilds a torch ``DataLoader`` from ``loader.dataset`` and its sampler,
  which a loaderkit loader does not have). For a map-style loader it is O(1): nothing is read
  for the skipped batches.

Checkpoints: ``accelerator.register_for_checkpointing(loader)`` works with a loader or an
:class:`AcceleratedLoader` (both have ``state_dict`` / ``load_state_dict``);
``accelerator.load_state(...)`` then continues the stream exactly, with no skipping at all.
Accelerate saves the main process's state only; every rank of a map-style loader continues
the same *global* stream from it (an elastic resume). Streamed (iterable) loaders keep one
state per rank: save ``loader.state_dict()`` per rank yourself.

Accelerate is imported only when an :class:`AcceleratedLoader` is iterated.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.integrations._lookahead import LookaheadLoader

if TYPE_CHECKING:
    from loaderkit.runtime.loader import Loader

__all__ = ["AcceleratedLoader", "SkippedLoader", "base_loader", "skip_first_batches"]


def base_loader(loader: Any) -> Loader:
    """The loaderkit loader under ``loader`` (an :class:`AcceleratedLoader` or a view)."""
    from loaderkit.runtime.loader import Loader

    inner = loader
    while isinstance(inner, AcceleratedLoader | SkippedLoader):
        inner = inner.loader
    if not isinstance(inner, Loader):
        raise TypeError(
            f"expected a loaderkit loader (what plan.build() returns) or an AcceleratedLoader "
            f"of one (got {type(loader).__name__}); build the loader with plan.build()"
        )
    return inner


class AcceleratedLoader(LookaheadLoader):
    """A loaderkit loader that tells Accelerate where each pass ends.

    ``AcceleratedLoader(plan.build())`` iterates exactly like the loader it wraps (the same
    batches, the same passes: ``set_epoch``, ``state_dict`` / ``load_state_dict``, ``len``,
    ``close`` and everything else are the loader's). While a pass runs it is Accelerate's
    *active dataloader*: ``accelerator.gradient_state.end_of_dataloader`` is true during the
    pass's last batch (read one batch ahead, as Accelerate's ``DataLoaderShard`` does), so
    ``accelerator.accumulate(model)`` syncs there. ``remainder`` is -1 (unknown), as for a
    loader without a length: ``gather_for_metrics`` then keeps every gathered sample.

    ``state_dict()`` during a pass is the position after the batches *yielded* so far (the
    batch read ahead is not counted), so a checkpoint taken mid-pass resumes exactly.
    """

    def __init__(self, loader: Any) -> None:
        base_loader(loader)  # check it is one
        super().__init__(loader)
        self.end_of_dataloader = False
        """Whether the batch last yielded is the last of its pass (Accelerate reads it)."""
        self.remainder = -1
        """Samples added to even out the last batch: -1, unknown (Accelerate reads it)."""

    def __iter__(self) -> Iterator[Any]:
        gradient_state = importlib.import_module("accelerate.state").GradientState()
        iterator = iter(self.loader)  # runs at our first next(): the pass starts there
        self.end_of_dataloader = False
        self._held = None
        gradient_state._add_dataloader(self)  # what DataLoaderShard.begin() does
        try:
            try:
                current = next(iterator)
            except StopIteration:
                return
            while True:
                after_current = self.loader.state_dict()
                try:
                    following = next(iterator)
                except StopIteration:
                    self._held = None
                    self.end_of_dataloader = True
                    yield current
                    return
                self._held = after_current
                yield current
                current = following
        finally:  # the held state stays: a pass given up early stopped after `current`
            gradient_state._remove_dataloader(self)  # DataLoaderShard.end()

    def __len__(self) -> int:
        return len(self.loader)

    def __repr__(self) -> str:
        return f"AcceleratedLoader({self.loader!r})"


class SkippedLoader:
    """One pass of a loader without its first batches: what :func:`skip_first_batches` returns.

    Iterating it starts the loader's next pass (see ``Loader.next_pass``: a loaded state's
    position, the epoch ``set_epoch`` chose, or the epoch after the last pass) ``skip``
    batches later. Like Accelerate's, it is meant for the first epoch
    of a resumed run: later epochs iterate the loader itself. ``len()`` is the loader's
    minus ``skip``; ``set_epoch``, ``state_dict`` and the rest are the loader's.
    """

    def __init__(self, loader: Any, skip: int) -> None:
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ValueError(f"skip_first_batches: num_batches must be an int >= 0 (got {skip!r})")
        base_loader(loader)
        if isinstance(loader, AcceleratedLoader):
            raise TypeError(
                "SkippedLoader takes the loader itself; for an AcceleratedLoader call "
                "skip_first_batches(loader, n), which keeps Accelerate informed of the pass's end"
            )
        self.loader = loader
        """The loader whose pass is read."""
        self.skip = skip
        """Batches skipped at the start of the pass."""

    def __iter__(self) -> Iterator[Any]:
        from loaderkit.runtime.stream import StreamLoader

        base = base_loader(self.loader)
        if self.skip == 0:
            return iter(self.loader)
        if isinstance(base, StreamLoader):  # no random access: read the skipped batches
            return self._replayed()
        epoch, start = base.next_pass  # what the next iter() would read
        state = base.state_dict()
        state["epoch"] = epoch
        state["batches_delivered"] = start + self.skip  # past the epoch's end: ResumeError
        state["pass_ended"] = False  # a position inside that pass, not after it
        self.loader.load_state_dict(state)  # a resume: the next pass starts there
        return iter(self.loader)

    def _replayed(self) -> Iterator[Any]:
        for index, batch in enumerate(self.loader):
            if index >= self.skip:
                yield batch

    def __len__(self) -> int:
        return max(len(self.loader) - self.skip, 0)

    def __getattr__(self, name: str) -> Any:
        if name in ("loader", "skip"):  # not set yet (unpickling): do not recurse
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __repr__(self) -> str:
        return f"skip_first_batches({self.loader!r}, {self.skip})"


def skip_first_batches(loader: Any, num_batches: int = 0) -> Any:
    """The loader's next pass without its first ``num_batches`` batches.

    The loaderkit counterpart of ``accelerate.skip_first_batches`` (and
    ``Accelerator.skip_first_batches``), for a loader of ``plan.build()`` or an
    :class:`AcceleratedLoader` of one (the result is then an :class:`AcceleratedLoader`
    too). Map-style loaders skip in O(1): the pass starts at batch ``num_batches``, nothing
    is read for the batches skipped. A streamed loader has no random access: its skipped
    batches are read and dropped (resume a stream with ``load_state_dict`` instead).

    Usually ``accelerator.load_state(...)`` with the loader registered for checkpointing is
    simpler: the loader then continues by itself and nothing needs skipping.
    """
    if isinstance(loader, AcceleratedLoader):
        return AcceleratedLoader(SkippedLoader(loader.loader, num_batches))
    return SkippedLoader(loader, num_batches)
