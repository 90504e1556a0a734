"""Accelerate's gradient state, told where a loader's pass ends: one place for both loaders.

Accelerate learns where an epoch ends from the data loaders it wraps itself: its
``DataLoaderShard`` registers with the process's ``GradientState`` when a pass starts (it is
then the *active dataloader*), says ``end_of_dataloader`` during the pass's last batch (read
one batch ahead) and the ``remainder`` of the dataset over the total batch size, and leaves
when the pass ends. ``accelerator.accumulate(model)`` syncs the gradients on that last batch
(the last, partial window of an epoch included) and ``gather_for_metrics`` cuts the samples
that evened out the ranks from the last gathered batch. ``accelerator.prepare()`` hands a
loaderkit loader back unchanged (it is sharded already), so a loader's pass does the same
itself: :func:`pass_hook` is told of every pass as it starts (a runtime pass hook,
:mod:`loaderkit.runtime.passes.hooks`, registered by ``import loaderkit``).

When (and only when) an ``Accelerator`` has made the ``GradientState`` in this process (it
is looked up in ``sys.modules``: loaderkit never imports Accelerate), the pass's batches are
handed over through an :class:`EndOfPass` iterator, and an :class:`ActivePass` is registered
as the active dataloader for the pass's duration. Otherwise the pass's iterator is returned
as it is: nothing is added per batch.

The pass's last batch is known

- for a map-style loader, from its batch count: nothing is read ahead;
- under the ``skip`` error policy (a batch whose every sample was skipped is not delivered)
  and for a stream (no length), by reading ahead, past batches that are not delivered, for the
  next batch that is. The read-ahead happens *before* the loader counts a batch as delivered
  (the position moves when the loop receives a batch), so ``state_dict()`` during the pass is
  the position after the batches yielded, as without Accelerate, and a checkpoint resumes
  exactly.

``remainder`` is what ``gather_for_metrics`` cuts the last gathered batch to (``> 0``), or
leaves it whole (``0``, and ``-1``: unknown, with a log line):

- a map-style loader of fixed-size batches (no token budget, weights, bucketing, curriculum,
  mixture or batch size changing by step) without the ``skip`` policy: the samples of the
  epoch's last global batch that are not repeats, ``n mod (batch_size x world_size)``, as
  Accelerate's ``DataLoaderShard`` computes it from the dataset length (0 with ``drop_last``:
  nothing is padded). The ranks' last batches, gathered in rank order, hold those samples
  first and the wrapped-around repeats after them (see :mod:`loaderkit.order.shard`);
- any other map-style loader: 0 when its epoch repeats no sample (one process, or
  ``loader.repeated_samples == 0``), else -1;
- a stream: 0, it never repeats a sample (``even_batches`` trims instead). Accelerate's
  ``DataLoaderDispatcher`` says the size of its last batch there, which cuts nothing either.
"""

from __future__ import annotations

import collections
import sys
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.runtime.passes.hooks import PassInfo, add_pass_hook
from loaderkit.runtime.records import NO_BATCH

if TYPE_CHECKING:
    from loaderkit.runtime.planners import Planner

__all__ = [
    "ActivePass",
    "EndOfPass",
    "accelerate_gradient_state",
    "active_pass",
    "pass_hook",
    "remainder",
]


def accelerate_gradient_state() -> Any | None:
    """Accelerate's ``GradientState`` if it was made in this process, else ``None``.

    Never imports Accelerate: without ``accelerate.state`` in ``sys.modules``, or before an
    ``Accelerator`` (or anything else) initialised the shared state, this is ``None``.
    """
    module = sys.modules.get("accelerate.state")
    cls = getattr(module, "GradientState", None)
    if cls is None or not getattr(cls, "_shared_state", None):
        return None
    return cls()  # an initialised state is only read (its plugin is left as it is)


class ActivePass:
    """One pass of a loader, as Accelerate's ``GradientState`` sees its active dataloader.

    What Accelerate reads of its own ``DataLoaderShard``: ``end_of_dataloader`` and
    ``remainder``. Registered (by :class:`EndOfPass`) while the pass runs.
    """

    __slots__ = ("__weakref__", "end_of_dataloader", "loader", "remainder")

    def __init__(self, loader: object, remainder: int) -> None:
        self.loader = loader
        """The loader whose pass this is."""
        self.end_of_dataloader = False
        """Whether the batch last handed over is the last of the pass."""
        self.remainder = remainder
        """What ``gather_for_metrics`` cuts the last gathered batch to (0: nothing; -1: unknown)."""

    def __repr__(self) -> str:
        return (
            f"ActivePass({self.loader!r}, end_of_dataloader={self.end_of_dataloader}, "
            f"remainder={self.remainder})"
        )


def _leave(active: ActivePass) -> None:
    """Take ``active`` off the gradient state's dataloaders (``DataLoaderShard.end()``)."""
    state = accelerate_gradient_state()  # None if Accelerate's state was reset since
    if state is not None:
        state._remove_dataloader(active)


class EndOfPass:
    """A pass's batches, keeping its :class:`ActivePass`'s ``end_of_dataloader`` up to date.

    Handed a pass's items (batches, :data:`~loaderkit.runtime.records.NO_BATCH` for a batch
    whose every sample the ``skip`` policy dropped, and failed batches), before the loader
    counts them. Each item handed on sets ``end_of_dataloader``: whether no item that is a
    batch follows it. ``last`` is the index of the pass's last item when it is known (then
    nothing is read ahead; ``first`` is the index of the first item), else ``None``: the items
    are read ahead until one that is not ``NO_BATCH``, or the end.

    The pass is registered at once and leaves the gradient state when its items end, when
    :meth:`close` is called, or when this iterator is dropped (a loop left with ``break``).
    An exception raised while reading ahead ends the pass there: the item held was not
    counted, so the loader's position is still before it.
    """

    def __init__(
        self,
        items: Iterator[Any],
        state: Any,
        active: ActivePass,
        *,
        first: int = 0,
        last: int | None = None,
    ) -> None:
        self._items = items
        self._active = active
        self._index = first
        self._last = last
        self._ahead: collections.deque[Any] = collections.deque()
        self._ended = False  # the items are exhausted (found while reading ahead)
        self._leave = weakref.finalize(self, _leave, active)  # keeps `active` alive until then
        self._leave.atexit = False  # nothing to tell at interpreter exit
        state._add_dataloader(active)  # DataLoaderShard.begin()

    def __iter__(self) -> EndOfPass:
        return self

    def __next__(self) -> Any:
        if self._ahead:
            item = self._ahead.popleft()
        else:
            try:
                if self._ended:
                    raise StopIteration
                item = next(self._items)
            except StopIteration:
                self._leave()
                raise
        if self._last is not None:
            self._active.end_of_dataloader = self._index == self._last
            self._index += 1
        else:
            self._active.end_of_dataloader = not self._batch_follows()
        return item

    def _batch_follows(self) -> bool:
        """Whether an item that is not ``NO_BATCH`` follows (read ahead up to it)."""
        ahead = self._ahead
        if ahead and ahead[-1] is not NO_BATCH:  # only NO_BATCH items come before it
            return True
        while not self._ended:
            try:
                item = next(self._items)
            except StopIteration:
                self._ended = True
                break
            ahead.append(item)
            if item is not NO_BATCH:
                return True
        return False

    def close(self) -> None:
        """End the pass: leave the gradient state and close the items (their workers)."""
        self._leave()
        self._ahead.clear()
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


def remainder(planner: Planner, epoch: int, *, skipping: bool) -> int:
    """What Accelerate's ``remainder`` is for ``epoch`` of a map-style pass (-1: unknown).

    See the module docstring: Accelerate's own formula for fixed-size batches without the
    ``skip`` policy, 0 when the epoch repeats no sample, else -1. ``planner`` is the loader's.
    """
    from loaderkit.runtime.planners.plain import PlainPlanner

    if isinstance(planner, PlainPlanner) and not skipping:
        layout = planner.layout(epoch)
        return 0 if layout.drop_last else layout.n % layout.global_batch
    return 0 if planner.repeated(epoch) == 0 else -1


def pass_hook(info: PassInfo, items: Iterator[Any]) -> Iterator[Any]:
    """The items of a pass, Accelerate told of them; ``items`` itself without Accelerate.

    Accelerate is told only when its gradient state was made in this process. A map-style
    pass's last batch is the epoch's last, known from its count, unless the ``skip`` policy
    may leave the last batches undelivered: then the items are read ahead, as a stream's
    (no length; a stream repeats no sample, so its remainder is 0).
    """
    state = accelerate_gradient_state()
    if state is None:
        return items
    planner = info.planner
    if planner is None:
        return EndOfPass(items, state, ActivePass(info.loader, 0))
    last = None if info.skipping else planner.num_batches(info.epoch) - 1
    active = ActivePass(info.loader, remainder(planner, info.epoch, skipping=info.skipping))
    return EndOfPass(items, state, active, first=info.start, last=last)


def active_pass(loader: object) -> ActivePass | None:
    """The latest pass of ``loader`` registered with Accelerate's gradient state, if any."""
    state = accelerate_gradient_state()
    if state is None:
        return None
    for active in reversed(state.dataloader_references):
        if isinstance(active, ActivePass) and active.loader is loader:
            return active
    return None


add_pass_hook(pass_hook)
