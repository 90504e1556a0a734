"""A stream's pass in the main process: the producers' items in round-robin order, one pass.

See :mod:`loaderkit.runtime.stream.loader` for the order the producers' batches are delivered in.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from loaderkit.errors import DataError, WorkerError
from loaderkit.runtime.records import Raised
from loaderkit.runtime.stream.read import StreamItem

if TYPE_CHECKING:
    from loaderkit.runtime.passes.cursor import PassCursor, PassStart

__all__ = ["StreamPass", "position_indices", "round_robin", "while_current", "with_last"]


def round_robin(items: Iterator[StreamItem], producers: int, first: int) -> Iterator[StreamItem]:
    """The producers' batches round-robin from producer ``first``, skipping ended ones.

    Items arrive in whatever order torch delivers them; the ones ahead of their turn wait
    (at most a round of them), so the order is the same from any starting producer.
    """
    pending: list[collections.deque[StreamItem]] = [collections.deque() for _ in range(producers)]
    ended = [False] * producers
    turn = first % producers
    while not all(ended):
        if ended[turn]:
            turn = (turn + 1) % producers
            continue
        queue = pending[turn]
        while not queue:
            item = next(items, None)
            if item is None:  # torch stopped: every producer has ended
                return
            pending[item.worker].append(item)
        item = queue.popleft()
        if item.end:
            ended[turn] = True
        else:
            yield item
        turn = (turn + 1) % producers


def position_indices(positions: tuple[int, ...]) -> Callable[[int, int], list[int]]:
    """What the batch checks report as a batch's samples: its stream positions."""

    def indices(_epoch: int, _batch_index: int) -> list[int]:
        return list(positions)

    return indices


def while_current(
    items: Iterator[StreamItem], superseded: Callable[[int], None], generation: int
) -> Iterator[StreamItem]:
    """``items`` while the pass of ``generation`` is current: checked before every read.

    A superseded pass then takes nothing more from a shared source.
    """
    while True:
        superseded(generation)
        item = next(items, None)
        if item is None:
            return
        yield item


def with_last(items: Iterator[StreamItem]) -> Iterator[tuple[StreamItem, bool]]:
    """Each item and whether it is the last (one item of look-ahead)."""
    previous: StreamItem | None = None
    for item in items:
        if previous is not None:
            yield previous, False
        previous = item
    if previous is not None:
        yield previous, True


class StreamPass:
    """One pass over a stream, as an iterator object rather than a generator.

    A generator that raised is finished; this raises a failed batch's ``DataError`` from its
    ``next()`` while the generators behind it stay alive, so the next ``next()`` goes on with
    the following batch (as torch's iterator does after a worker reported an exception).
    Anything raised from those generators (a dead worker, a spent error budget, a superseded
    pass, a source whose streams differ) ends the pass. The pass starts at its first
    ``next()``; dropping it mid-pass while it is the loader's current one stops its workers.

    ``begin`` starts the loader's pending pass (its batches, ``None`` for a resumed pass with
    nothing left); ``close`` stops the loader's workers.
    """

    def __init__(
        self,
        cursor: PassCursor,
        begin: Callable[[], tuple[Iterator[Any] | None, PassStart]],
        close: Callable[[], None],
    ) -> None:
        self._cursor = cursor
        self._begin = begin
        self._close = close
        self._batches: Iterator[Any] | None = None
        self._started = False
        self._generation = -1
        self._moves = -1

    def __iter__(self) -> StreamPass:
        return self

    def __next__(self) -> Any:
        cursor = self._cursor
        if not self._started:
            self._started = True
            self._batches, start = self._begin()
            self._generation, self._moves = start.generation, start.moves
            if self._batches is None:  # a resumed pass with nothing left: it ends here
                cursor.end(self._moves)
        batches = self._batches
        if batches is None:
            raise StopIteration
        try:
            out = next(batches)
        except StopIteration:
            self._batches = None
            self._went_on()
            cursor.end(self._moves)  # a state taken now resumes with the next epoch
            raise
        except (DataError, WorkerError):
            self._batches = None
            cursor.interrupted(self._moves)  # the next iter() resumes where it stopped
            raise
        except BaseException:
            self._batches = None
            raise
        if isinstance(out, Raised):
            cursor.interrupted(self._moves)  # unless this pass goes on
            raise out.error
        self._went_on()
        return out

    def _went_on(self) -> None:
        """After a failed batch, the pass went on: the next ``iter()`` is a new pass again."""
        self._cursor.went_on(self._moves)

    def close(self) -> None:
        """End the pass; if it is the loader's current one, stop its workers now."""
        batches, self._batches = self._batches, None
        if batches is not None and self._cursor.current(self._generation):
            self._close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report at garbage collection
            return
