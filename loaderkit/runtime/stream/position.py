"""A stream's position beyond the pass cursor: where each producer stands.

A resume of a stream needs, besides the cursor's (epoch, batches delivered), the batches each
producer delivered, which producer is next, each producer's saved source state (see
:attr:`~loaderkit.runtime.stream.loader.StreamLoader.resume_native`) and whether the pass
delivered its last batch.
"""

from __future__ import annotations

from typing import Any

from loaderkit.runtime.stream.read import StreamItem

__all__ = ["ProducerPositions"]


class ProducerPositions:
    """Where each of a stream's ``producers`` stands in the current (or last) pass."""

    __slots__ = ("done", "next_worker", "producers", "worker_batches", "worker_states")

    def __init__(self, producers: int) -> None:
        self.producers = producers
        self.worker_batches = [0] * producers
        """The batches each producer delivered."""
        self.worker_states: list[dict[str, Any] | None] = [None] * producers
        """Each producer's source state after its last delivered batch (or ``None``)."""
        self.next_worker = 0
        """The producer whose batch is delivered next."""
        self.done = False
        """Whether the pass delivered its last batch."""

    def reset(self) -> None:
        """A pass from batch 0: nothing delivered yet."""
        self.load([0] * self.producers, 0, [None] * self.producers, done=False)

    def load(
        self,
        per_worker: list[int],
        next_worker: int,
        states: list[dict[str, Any] | None],
        *,
        done: bool,
    ) -> None:
        """Move to a checked state's positions."""
        self.worker_batches, self.next_worker = per_worker, next_worker
        self.worker_states = states
        self.done = done

    def count(self, item: StreamItem, last: bool) -> None:
        """Move past ``item``'s batch (delivered, skipped whole, or failed)."""
        self.worker_batches[item.worker] += 1
        self.worker_states[item.worker] = item.state
        self.next_worker = (item.worker + 1) % self.producers
        self.done = last

    def to_state(self) -> dict[str, Any]:
        """The producers' part of a stream's ``state_dict()`` (copied by the writer)."""
        return {
            "worker_batches": self.worker_batches,
            "next_worker": self.next_worker,
            "worker_states": self.worker_states,
        }
