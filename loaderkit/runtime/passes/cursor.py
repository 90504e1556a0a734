"""The pass cursor both loaders hold: their position and the rule of their passes.

A loader's position is ``(epoch, batches delivered)`` of its current (or last, or pending)
pass. What the next ``iter()`` starts is the *pending* pass: ``"set"`` (``set_epoch``: that
epoch from batch 0), ``"resume"`` (``load_state_dict``, or a pass a loader error
interrupted: that epoch from the batches delivered) or ``"next"`` (the epoch after the last
pass, from batch 0). The rule is the one :class:`~loaderkit.runtime.loader.Loader` documents.

Two counters tie the passes' iterators to the cursor: the *generation* changes whenever an
open iterator must stop delivering (a newer pass, ``set_epoch``, ``load_state_dict``,
``check``, ``close``), the *moves* whenever the position itself moved (every one of those but
``close``). An iterator remembers both from its start: a superseded one raises, and what it
reports (interrupted, ended, went on) counts only while the position is still its own.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from loaderkit.runtime.passes.state import check_epoch

__all__ = ["PassCursor", "PassStart", "Pending"]

Pending = Literal["set", "resume", "next"]
"""What the next ``iter()`` starts (see the module docstring)."""


class PassStart(NamedTuple):
    """Where a pass starts, and the counters its iterator keeps (see :class:`PassCursor`)."""

    epoch: int
    start: int
    generation: int
    moves: int


class PassCursor:
    """A loader's position, its pending pass and the bookkeeping of its passes' iterators."""

    __slots__ = ("delivered", "ended", "epoch", "generation", "moves", "pending")

    def __init__(self) -> None:
        self.epoch = 0
        """The epoch of the current (or last, or pending) pass."""
        self.delivered = 0
        """Batches of :attr:`epoch` delivered to the caller (or the position to resume)."""
        self.pending: Pending = "set"
        """What the next ``iter()`` starts (see the module docstring)."""
        self.ended = False
        """Whether the pass at :attr:`epoch` ended (its iterator raised ``StopIteration``)."""
        self.generation = 0
        """Changes whenever an open iterator is superseded."""
        self.moves = 0
        """Counts the moves of the position (passes started, set_epoch, load_state_dict)."""

    @property
    def position(self) -> tuple[int, int]:
        """(epoch, batches delivered) of the current or last pass, or of the pending one."""
        return self.epoch, self.delivered

    @property
    def next_pass(self) -> tuple[int, int]:
        """(epoch, first batch) of the pass the next ``iter()`` reads; nothing is started."""
        if self.pending == "next":
            return self.epoch + 1, 0
        if self.pending == "set":
            return self.epoch, 0
        return self.epoch, self.delivered

    @property
    def resuming(self) -> bool:
        """Whether the next pass resumes inside its epoch (a load, or an interrupted pass)."""
        return self.pending == "resume"

    def start(self) -> PassStart:
        """Start the pending pass: the position moves to it, and it is the current one."""
        self.epoch, self.delivered = self.next_pass
        self.pending = "next"
        self.ended = False
        self.supersede()
        self.moves += 1
        return PassStart(self.epoch, self.delivered, self.generation, self.moves)

    def set_epoch(self, epoch: object) -> bool:
        """The next pass is ``epoch`` (an int >= 0) from batch 0; ``False`` if kept instead.

        A pending resume of that very epoch is kept (trainers call ``set_epoch`` with the
        epoch they resume): nothing moves and ``False`` is returned.
        """
        epoch = check_epoch(epoch)
        if self.pending == "resume" and epoch == self.epoch:
            return False
        self.epoch, self.delivered = epoch, 0
        self.pending = "set"
        self.ended = False
        self.supersede()
        self.moves += 1
        return True

    def load(self, epoch: int, delivered: int, *, ended: bool) -> None:
        """Move to a loaded state's position: the next pass resumes it (or, ended, the next)."""
        self.epoch, self.delivered = epoch, delivered
        # as the saving loader stood: after its loop ended the next pass is the next epoch,
        # whole; otherwise the pass resumes where the state was taken
        self.pending = "next" if ended else "resume"
        self.ended = ended
        self.supersede()
        self.moves += 1

    def snapshot(self) -> tuple[int, int, Pending, bool]:
        """The position and pending pass, for :meth:`restore` (``Loader.check``)."""
        return self.epoch, self.delivered, self.pending, self.ended

    def restore(self, kept: tuple[int, int, Pending, bool]) -> None:
        """Put back what :meth:`snapshot` kept; an iterator in progress is superseded."""
        self.epoch, self.delivered, self.pending, self.ended = kept
        self.supersede()
        self.moves += 1

    def deliver(self) -> int:
        """Move past the batch delivered now (or consumed by a failure); its index."""
        index = self.delivered
        self.delivered += 1
        return index

    def take_back(self, index: int) -> None:
        """Batch ``index`` was not delivered after all: the position is back before it."""
        self.delivered = index

    def supersede(self) -> None:
        """An iterator still open delivers nothing more (``close``, or a move)."""
        self.generation += 1

    def current(self, generation: int) -> bool:
        """Whether the pass of ``generation`` is still the current one."""
        return generation == self.generation

    def superseded(self, generation: int) -> None:
        """Raise ``RuntimeError`` if the pass of ``generation`` is no longer the current one."""
        if generation != self.generation:
            raise RuntimeError(
                "this iterator was superseded: iter(), set_epoch(), load_state_dict(), check() "
                "or close() was called on the loader since it started; its pass ended there "
                "and it delivers nothing more (no batch of the newer pass is taken from it); "
                "iterate the newest one"
            )

    def interrupted(self, moves: int) -> None:
        """After a loader error in a pass: the next ``iter()`` resumes it where it stopped.

        ``moves`` is :attr:`moves` when the pass started; if the position was moved since
        (``set_epoch``, ``load_state_dict``, a newer pass), that move stands. A broken pool's
        ``close()`` does not move the position. After a raise-policy ``DataError`` the failed
        batch is already consumed (as in torch): the resumed pass goes on after it.
        """
        if moves == self.moves:
            self.pending = "resume"

    def end(self, moves: int) -> None:
        """The pass of ``moves`` ended (its iterator raised ``StopIteration``).

        A state taken from now on (until the position moves) says so, and resumes with the
        next epoch, whole; one taken at the last batch, inside the loop, resumes as the
        empty rest of this epoch.
        """
        if moves == self.moves:
            self.ended = True

    def went_on(self, moves: int) -> None:
        """The pass a loader error interrupted goes on: it is no longer to be resumed."""
        if moves == self.moves and self.pending == "resume":
            self.pending = "next"
