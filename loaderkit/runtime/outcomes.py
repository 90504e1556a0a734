"""What a pass's stream of host batches may hold besides batches: a failure, or no batch."""

from __future__ import annotations

from loaderkit.errors import DataError

__all__ = ["NO_BATCH", "NoBatchType", "Raised"]


class Raised:
    """A :class:`DataError` in the stream of host batches, in the failed batch's place.

    Carried as a value (not raised) so the generators that fetch the pass stay alive: the
    pass raises it from ``next()`` and goes on with the next batch. Not a tuple, mapping or
    dataclass, so moving batches to the device passes it through untouched.
    """

    __slots__ = ("error",)

    def __init__(self, error: DataError) -> None:
        self.error = error


class NoBatchType:
    """Stands for a batch whose every sample the skip policy dropped."""

    def __repr__(self) -> str:
        return "<no batch: every sample was skipped>"


NO_BATCH = NoBatchType()
"""The one :class:`NoBatchType` value."""
