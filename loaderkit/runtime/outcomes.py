"""What a pass's stream of host batches may hold besides batches: a failure, or no batch.

And which failures are the machine's, not the data's (:func:`resource_error`): the ``skip``
error policy never drops a sample for those.
"""

from __future__ import annotations

import errno

from loaderkit.errors import DataError

__all__ = ["NO_BATCH", "RESOURCE_ERRNOS", "NoBatchType", "Raised", "resource_error"]

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
