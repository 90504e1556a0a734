"""Hugging Face Accelerate with loaderkit loaders: where an epoch ends, skipping, checkpoints.

A loaderkit loader shards itself across processes (``with_distributed()``), so
``accelerator.prepare(model, optimizer, loader)`` hands it back unchanged: nothing is sharded
twice. What Accelerate learns through its own ``DataLoader`` wrappers, a loader tells it
itself (issue 21; :mod:`loaderkit.integrations.gradient_state`):

- Once an ``Accelerator`` exists in the process, every pass of a loader (prepared or not,
  map-style or streamed) is Accelerate's *active dataloader* while it runs:
  ``accelerator.gradient_state.end_of_dataloader`` is true during the pass's last batch, so
  ``with accelerator.accumulate(model):`` syncs the gradients there, the last, partial
  window of every epoch included, exactly where a ``DataLoader`` prepared by Accelerate
  syncs. A map-style loader knows its last batch from its length; a stream, and a loader
  under the ``skip`` error policy (which drops batches whose every sample failed), read one
  batch ahead for it, *before* the batch counts as delivered: ``state_dict()`` stays the
  position after the batches the loop received, and a checkpoint resumes exactly.
- ``gradient_state.remainder``, which ``gather_for_metrics`` cuts the last gathered batch to:
  for fixed-size batches without the ``skip`` policy, Accelerate's own
  ``len % (batch_size x world_size)``, the samples of the last global batch that are not
  repeats added to even out the ranks (0 with ``drop_last``); for any other loader 0 (nothing
  to cut) when its epoch repeats no sample (one process; a stream, always), else -1
  (unknown: ``gather_for_metrics`` keeps every gathered sample).

:class:`AcceleratedLoader` did this before a bare loader did; it is kept for existing code
and adds nothing any more (no second registration, no read-ahead of its own).
:func:`skip_first_batches` is Accelerate's ``skip_first_batches`` for a loaderkit loader
(Accelerate's own rebuilds a torch ``DataLoader`` from ``loader.dataset`` and its sampler,
which a loaderkit loader does not have). For a map-style loader it is O(1): nothing is read
for the skipped batches.

Checkpoints: ``accelerator.register_for_checkpointing(loader)`` works with a loader or an
:class:`AcceleratedLoader` (both have ``state_dict`` / ``load_state_dict``);
``accelerator.load_state(...)`` then continues the stream exactly, with no skipping at all.
Accelerate saves the main process's state only; every rank of a map-style loader continues
the same *global* stream from it (an elastic resume). Streamed (iterable) loaders keep one
state per rank: save ``loader.state_dict()`` per rank yourself.

loaderkit never imports Accelerate itself: a pass looks for it in ``sys.modules``, and only
iterating an :class:`AcceleratedLoader` imports it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.integrations._lookahead import LoaderView

if TYPE_CHECKING:
    from loaderkit.integrations.gradient_state import ActivePass
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


class AcceleratedLoader(LoaderView):
    """A loaderkit loader for Accelerate: kept for existing code, it adds nothing any more.

    A bare loader now tells Accelerate's ``GradientState`` where each pass ends by itself
    (see :mod:`loaderkit.integrations.gradient_state`), so ``AcceleratedLoader(plan.build())``
    iterates exactly like the loader it wraps, with the same effect on Accelerate: the same
    batches, the same passes, the same ``end_of_dataloader`` and ``remainder``.
    ``set_epoch``, ``state_dict`` / ``load_state_dict``, ``len``, ``close`` and everything
    else are the loader's. The one difference: iterating it makes Accelerate's
    ``GradientState`` if no ``Accelerator`` made it yet (which matters to nothing but that
    state).
    """

    def __init__(self, loader: Any) -> None:
        base_loader(loader)  # check it is one
        super().__init__(loader)

    def _active(self) -> ActivePass | None:
        from loaderkit.integrations.gradient_state import active_pass

        return active_pass(base_loader(self.loader))

    @property
    def end_of_dataloader(self) -> bool:
        """Whether the batch last handed over is the last of the pass that runs."""
        active = self._active()
        return active is not None and active.end_of_dataloader

    @property
    def remainder(self) -> int:
        """What ``gather_for_metrics`` cuts the last gathered batch to (0: nothing; -1: unknown)."""
        active = self._active()
        return -1 if active is None else active.remainder

    def __iter__(self) -> Iterator[Any]:
        importlib.import_module("accelerate.state").GradientState()  # the pass then joins it
        return iter(self.loader)


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
        from loaderkit.runtime.stream.loader import StreamLoader

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
