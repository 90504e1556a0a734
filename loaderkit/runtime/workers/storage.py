"""How a list of samples reaches the workers: as the list itself, or stored flat.

A worker that reads a Python list it inherited touches the reference count of every object
it reads, so the pages holding them are copied into the worker: with a large list of dicts
each worker ends up with its own copy of it (torch's copy-on-read growth). Stored flat
(:mod:`loaderkit.datasets.serialized`: one byte buffer plus offsets, made at ``build()``), reading
a sample unpickles a slice of a buffer the workers share. See ``with_dataset(storage=...)``
and ``docs/workers.md``.

A dict of columns has its Python list columns stored flat the same way (loaderkit is their
only reader). A dataset of the user's own class is not stored (its ``__getitem__`` is the
user's): the large Python containers it holds are reported instead
(:mod:`loaderkit.runtime.workers.copy_on_read`), in ``explain()`` and in one warning at ``build()``
(:func:`warn_copies`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any, Literal

import attrs

from loaderkit._text import inert
from loaderkit.datasets.serialized import FlatSamples, NotSerializableError, serialize
from loaderkit.errors import DataError
from loaderkit.plan.specs import AUTO_FLAT_MIN_SAMPLES, DatasetSpec
from loaderkit.runtime.workers.copy_on_read import Held, held_containers

__all__ = ["StorageReport", "held_report", "quiet_copies", "stored", "warn_copies"]

_LOG = logging.getLogger("loaderkit")

_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("quiet_copies", default=False)
"""Whether :func:`warn_copies` is silenced (see :func:`quiet_copies`)."""


@contextlib.contextmanager
def quiet_copies() -> Iterator[None]:
    """Builds inside say nothing of copied containers (``explain()`` still does).

    For loaders that loaderkit builds for its own measuring (``plan.autotune()``'s trials):
    the warning is for the loader the user builds.
    """
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


@attrs.frozen
class StorageReport:
    """What storing one list dataset chose and cost, for ``explain()``."""

    binding: str
    used: Literal["flat", "objects"]
    why: str
    nbytes: int = 0
    seconds: float = 0.0
    held: tuple[Held, ...] = ()
    """The large Python containers a dataset object holds, which each worker copies."""
    num_workers: int = 0

    def lines(self) -> list[str]:
        """The explain lines: :meth:`line`, or one line per container :attr:`held`."""
        if not self.held:
            return [self.line()]
        return [f"{self.binding!r}: {held.describe(self.num_workers)}" for held in self.held]

    def line(self) -> str:
        """``"'train': flat, 131.7 MB serialized in 1.2 s (storage='auto': ...)"``."""
        if self.used == "flat":
            return (
                f"{self.binding!r}: flat, {self.nbytes / 1e6:,.1f} MB serialized in "
                f"{self.seconds:.2f} s ({self.why})"
            )
        return f"{self.binding!r}: Python objects ({self.why})"


def stored(
    data: Any, spec: DatasetSpec, num_workers: int, *, choosable: bool = True
) -> tuple[Any, StorageReport | None]:
    """``data`` as the workers should read it, and what was chosen.

    The report is ``None`` where there is nothing to choose: not a list, or ``"auto"``
    without workers (the list is read in place, nothing is copied). A dict of columns has its
    Python list columns stored the same way (:func:`_stored_columns`); a dataset of the
    user's class is returned as it is, with a report of the large containers it holds that
    workers would copy (:func:`held_report`).

    ``storage="flat"`` raises :class:`~loaderkit.DataError` naming a sample that does not
    pickle; ``"auto"`` then keeps the objects, and says why. ``choosable=False`` for a
    mixture's source, whose storage is always ``"auto"`` (no ``storage=`` to suggest).
    """
    if spec.kind == "torch_map":
        return data, held_report(data, spec, num_workers)
    if spec.kind == "columns":
        return _stored_columns(data, spec, num_workers, choosable)
    if spec.kind != "samples" or isinstance(data, FlatSamples):
        return data, None
    storage = spec.storage
    n = len(data)
    if storage == "objects":
        return data, StorageReport(spec.binding, "objects", "storage='objects'")
    if storage == "auto":
        if num_workers == 0:  # nothing is copied: nothing to say (explain() has no line)
            return data, None
        if n < AUTO_FLAT_MIN_SAMPLES:
            return data, StorageReport(
                spec.binding,
                "objects",
                f"storage='auto': {n:,} samples, fewer than the {AUTO_FLAT_MIN_SAMPLES:,} "
                f"it stores flat"
                + ("; storage='flat' to store them flat anyway" if choosable else ""),
            )
    try:
        flat = serialize(data)
    except NotSerializableError as exc:
        if storage == "flat":
            raise DataError(
                f"dataset {spec.binding!r} (storage='flat'): {exc.describe()}, and flat "
                f"storage pickles every sample; make the sample picklable (plain values, "
                f"tensors, numpy arrays, classes defined in a module), or read the list "
                f"itself with with_dataset(..., storage='objects')",
                sample_index=exc.index,
            ) from exc.cause
        why = f"storage='auto': {exc.describe()}, so the list is read as it is"
        _LOG.warning("loaderkit: dataset %r: %s", spec.binding, why)
        return data, StorageReport(spec.binding, "objects", why)
    why = (
        "storage='flat'"
        if storage == "flat"
        else f"storage='auto': {num_workers} workers read {n:,} samples"
    )
    return flat, StorageReport(spec.binding, "flat", why, flat.nbytes, flat.seconds)


def _stored_columns(
    data: Any, spec: DatasetSpec, num_workers: int, choosable: bool
) -> tuple[Any, StorageReport | None]:
    """A dict of columns with its Python list (or tuple) columns stored as ``storage`` says.

    Provably safe to do by itself: loaderkit reads a column only by ``len`` and
    ``column[i]`` (:class:`~loaderkit.runtime.sources.access.ColumnsSource`), which a
    :class:`FlatSamples` answers with an equal value. Only exact ``list`` and ``tuple``
    columns (a subclass's indexing may be its own); numpy and tensor columns are gathered and
    copy nothing. ``None`` where no column is a list.
    """
    names = [k for k, c in data.items() if type(c) in (list, tuple)]
    if not names:
        return data, None
    n = spec.length or 0
    shown_names = ", ".join(repr(k) for k in names[:8]) + (" ..." if len(names) > 8 else "")
    what = f"the Python list column{'s' if len(names) > 1 else ''} {shown_names}"
    storage = spec.storage
    if storage == "objects":
        return data, StorageReport(spec.binding, "objects", f"storage='objects': {what}")
    if storage == "auto":
        if num_workers == 0:  # nothing is copied: nothing to say
            return data, None
        if n < AUTO_FLAT_MIN_SAMPLES:
            return data, StorageReport(
                spec.binding,
                "objects",
                f"storage='auto': {what} of {n:,} samples, fewer than the "
                f"{AUTO_FLAT_MIN_SAMPLES:,} it stores flat"
                + ("; storage='flat' to store them flat anyway" if choosable else ""),
            )
    columns = dict(data)
    nbytes, seconds, kept = 0, 0.0, []
    for name in names:
        try:
            flat = serialize(columns[name])
        except NotSerializableError as exc:
            if storage == "flat":
                raise DataError(
                    f"dataset {spec.binding!r} (storage='flat'): column {name!r}: "
                    f"{exc.describe()}, and flat storage pickles every value; make it "
                    f"picklable, or read the columns themselves with with_dataset(..., "
                    f"storage='objects')",
                    sample_index=exc.index,
                ) from exc.cause
            kept.append(f"column {name!r}: {exc.describe()}, so it is read as it is")
            continue
        columns[name] = flat
        nbytes, seconds = nbytes + flat.nbytes, seconds + flat.seconds
    why = (
        f"storage='flat': {what}"
        if storage == "flat"
        else f"storage='auto': {num_workers} workers read {n:,} samples of {what}"
    )
    if kept:
        why += "; " + "; ".join(kept)
        _LOG.warning("loaderkit: dataset %r: %s", spec.binding, inert("; ".join(kept), 2000))
    if len(kept) == len(names):
        return data, StorageReport(spec.binding, "objects", why)
    return columns, StorageReport(spec.binding, "flat", why, nbytes, seconds)


def held_report(data: Any, spec: DatasetSpec, num_workers: int) -> StorageReport | None:
    """The large Python containers a dataset of the user's class holds, for workers to copy.

    ``None`` without workers or where it holds none (see
    :mod:`loaderkit.runtime.workers.copy_on_read`). Only ``torch_map`` and ``torch_iterable``
    datasets
    are looked into: the other kinds are loaderkit's to read (a list is stored as
    ``storage`` says, columns are gathered).
    """
    if num_workers == 0 or spec.kind not in ("torch_map", "torch_iterable"):
        return None
    held = held_containers(data)
    if not held:
        return None
    why = "a dataset of your class: its own code reads what it holds"
    return StorageReport(spec.binding, "objects", why, held=held, num_workers=num_workers)


def warn_copies(reports: tuple[StorageReport, ...], num_workers: int) -> None:
    """One warning for all the containers ``reports`` hold that workers copy (none: silent).

    Called at ``build()`` once the loader knows its workers start (``num_workers > 0``).
    """
    held = [(r.binding, h) for r in reports for h in r.held]
    if not held or num_workers == 0 or _QUIET.get():
        return
    total = sum(h.item_bytes for _, h in held) / 1e6
    each = "; ".join(
        f"{h.where} ({h.kind} of {h.length:,} items, about {h.item_bytes / 1e6:,.1f} MB; "
        f"fix: {h.fix()})"
        for _, h in held
    )
    bindings = ", ".join(sorted({repr(b) for b, _ in held}))
    _LOG.warning(
        "%s",
        inert(
            f"loaderkit: dataset {bindings}: each of the {num_workers} workers will copy about "
            f"{total:,.1f} MB of Python objects your dataset holds ({total * num_workers:,.1f} "
            f"MB in all, estimated): a worker that reads a Python object writes its reference "
            f"count, so the pages holding it are copied into the worker (copy-on-read). "
            f"{each}. loaderkit does not store them flat by itself, since your __getitem__ may "
            f"change them or use them as lists; loader.explain() lists them",
            4000,
        ),
    )
