"""The records every layer of the runtime shares: batch requests and what becomes of them.

A :class:`BatchRequest` (what the main process asks for), what a fetch returns under the
``skip`` policy (:class:`Fetched`, :class:`Skipped`) and what a pass's stream of host batches
may hold besides batches: a :class:`Failure`, or no batch.

And which failures are the machine's, not the data's (:func:`resource_error`): the ``skip``
error policy never drops a sample for those.
"""

from __future__ import annotations

import errno
from typing import Any, NamedTuple, NoReturn

import numpy as np
import numpy.typing as npt

from loaderkit.errors import DataError, data_error

__all__ = [
    "NOT_SKIPPED",
    "NO_BATCH",
    "RESOURCE_ERRNOS",
    "BatchRequest",
    "Failure",
    "Fetched",
    "NoBatchType",
    "Raised",
    "Skipped",
    "resource_error",
]

RESOURCE_ERRNOS = frozenset(
    code
    for code in (
        getattr(errno, name, None) for name in ("ENOMEM", "EMFILE", "ENFILE", "ENOSPC", "EDQUOT")
    )
    if code is not None
)
"""``OSError`` codes that say the machine ran out of something: memory (``ENOMEM``), file
descriptors of the process or the system (``EMFILE``, ``ENFILE``), disk space or quota
(``ENOSPC``, ``EDQUOT``)."""


def resource_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the machine ran out of a resource, rather than that data is bad.

    ``MemoryError``, an ``OSError`` whose ``errno`` is in :data:`RESOURCE_ERRNOS`, and
    torch's ``OutOfMemoryError`` (CUDA or another accelerator). The same read may succeed
    once the resource is back, so dropping the sample would lose good data, and would make
    the batches depend on the machine: the ``skip`` policy raises these as the ``raise``
    policy does.
    """
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
        return True
    return any(
        kind.__name__ == "OutOfMemoryError" and kind.__module__.split(".")[0] == "torch"
        for kind in type(exc).__mro__
    )


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


class BatchRequest(NamedTuple):
    """What the main process asks for: batch ``batch_index`` of ``epoch``, these samples."""

    epoch: int
    batch_index: int
    indices: npt.NDArray[np.int64]
    max_length: int | None = None
    """The sequence length the collator cuts to (a ``with_max_length`` schedule), if any."""


class Skipped(NamedTuple):
    """A sample the ``skip`` error policy dropped: where, and what went wrong."""

    sample_index: int
    epoch: int
    batch_index: int
    worker_id: int | None
    exc_type: str
    message: str


class Fetched(NamedTuple):
    """A batch made under the ``skip`` policy and the samples dropped from it.

    ``batch`` is ``None`` when every sample of the request failed.
    """

    batch: Any
    skipped: tuple[Skipped, ...]
    requested: int
    """How many samples the request asked for (the good and the skipped)."""


class Failure(NamedTuple):
    """A batch that failed in a worker, sent back as data so nothing about it is lost."""

    message: str
    sample_index: int | None
    worker_id: int | None
    collator: str | None
    batch_index: int
    exc_type: str
    traceback: str
    original_type: type[BaseException] | None = None
    """The type of the exception the data raised, if pickle can name it."""
    cause: BaseException | None = None
    """That exception itself, if it survives pickling (else only its traceback text)."""

    def reraise(self) -> NoReturn:
        """Raise the :class:`DataError` this failure stands for, with the worker's traceback.

        It is also an instance of the original exception's type (see
        :func:`~loaderkit.errors.data_error`), chained to the original when it could be sent.
        """
        raise data_error(
            f"{self.message}\n\nOriginal traceback in worker {self.worker_id}:\n{self.traceback}",
            self.original_type,
            sample_index=self.sample_index,
            worker_id=self.worker_id,
            collator=self.collator,
            batch_index=self.batch_index,
        ) from self.cause


NOT_SKIPPED = (
    "out of a resource, not bad data: the skip policy does not drop it; free memory, file "
    "descriptors or disk space, or lower num_workers"
)
"""Why the ``skip`` policy raised: said in the message of a resource error."""
