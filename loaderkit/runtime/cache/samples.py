"""The sample cache of ``with_cache``: samples kept in memory or on disk, safe with workers.

Two stages (``CacheSpec.stage``):

- ``"fetched"``: what the dataset returns for an index, before the transform. The transform
  (and its per-sample ``rng``) still runs every epoch, so random augmentations stay random.
  Implemented as :class:`CachedSource`, a :class:`~loaderkit.runtime.sources.access.Source` in front
  of
  the dataset's.
- ``"transformed"``: the transform's output, so neither the dataset nor the transform runs
  again for that index. Only for a transform that is a pure function of the sample
  (compile() refuses a transform taking ``rng``);
  :class:`~loaderkit.runtime.fetch.fetcher.BatchFetcher` consults it.

Two storages:

- ``"memory"``: a dict of pickled samples in each process that fetches (the main process with
  ``num_workers=0``, else each worker: workers must be persistent to keep theirs). Pickling
  on the way in and out means a transform or collator that changes a sample in place cannot
  change the cached copy. ``max_bytes`` caps the pickled bytes; once full, new samples are not
  stored (counted as ``not_stored``).
- ``"disk"``: a folder every process (workers, ranks on this node, later runs) shares, kept by
  the ``diskcache`` library (SQLite plus files, safe across processes). ``max_bytes`` is its
  size limit (least-recently-stored samples are evicted past it). The folder records what it
  holds (dataset identity and stage); a folder written for something else is refused. The
  folder is untrusted input: samples are stored as data that cannot run code when read
  (:mod:`~loaderkit.runtime.cache.format`), each entry carries a checksum of its key and bytes
  (a mismatch is a miss, counted as ``corrupt``, and the sample is loaded and stored again),
  a sample that format cannot keep exactly is not stored, and ``diskcache`` is kept from
  unpickling or leaving the folder (:mod:`~loaderkit.runtime.cache.disk`). For the
  ``"transformed"`` stage the transform's code is part of every key, and a folder written by
  other code under the same transform name is emptied (:func:`~.cache_format.code_digest`).

A sample that fails to load or transform is never cached. Hits and misses are counted per
process in lock-free shared slots, so :class:`CacheStats` sums them across workers.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import pickle
import sqlite3
from collections.abc import Callable, Sequence
from ctypes import c_int64
from multiprocessing.heap import Arena
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import torch

from loaderkit.errors import DataError, PlanError
from loaderkit.runtime.cache.format import CorruptEntryError, code_digest, decode, encode
from loaderkit.runtime.sources.access import Indices, Source

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.sections.cache import CacheSpec

__all__ = ["CacheStats", "CachedSource", "SampleCache", "cache_identity", "open_cache"]

IDENTITY_KEY = "__loaderkit_cache_identity__"
"""The key under which a disk cache records what it holds (never a sample index)."""

CODE_KEY = "__loaderkit_cache_code__"
"""The key under which a disk cache records the transform code its samples come from."""

_FIELDS = 4  # hits, misses, not stored, corrupt


class CacheStats(NamedTuple):
    """What the sample cache did, summed over the processes that fetched.

    ``hits`` and ``misses`` count samples looked up; ``not_stored`` the misses that were not
    kept, because the cache was full (``max_bytes``) or, on disk, because the sample holds a
    value the cache cannot store safely (see :mod:`~loaderkit.runtime.cache.format`);
    ``corrupt`` the disk entries that failed their checksum or could not be read (each also a
    miss: the sample was loaded again and stored anew).
    """

    hits: int
    misses: int
    not_stored: int
    corrupt: int = 0

    @property
    def hit_rate(self) -> float:
        """``hits / (hits + misses)``, 0.0 before any lookup."""
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0


class _Counters:
    """One slot of (hits, misses, not stored, corrupt) per process: the main one and each worker.

    Each process writes only its own slot, so no lock is needed (a worker killed mid-update
    cannot leave a lock held). Shared memory is inherited by forked workers and passed to
    spawned ones when they start.

    The memory is an arena of its own, not one of ``multiprocessing``'s shared heap: the
    worker pool keeps an array there too, and a spawned worker that is passed two objects of
    one arena is passed its file descriptor twice, which starting the process refuses
    ("bad value(s) in fds_to_keep").
    """

    def __init__(self, processes: int) -> None:
        self.slots = processes
        self._arena = Arena(processes * _FIELDS * ctypes.sizeof(c_int64))
        self.values: Any = self._view(self._arena, processes)

    @staticmethod
    def _view(arena: Arena, processes: int) -> Any:
        return (c_int64 * (processes * _FIELDS)).from_buffer(arena.buffer)

    def __getstate__(self) -> dict[str, Any]:
        return {"slots": self.slots, "arena": self._arena}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.slots = state["slots"]
        self._arena = state["arena"]
        self.values = self._view(self._arena, self.slots)

    def add(self, hits: int, misses: int, not_stored: int, corrupt: int = 0) -> None:
        info = torch.utils.data.get_worker_info()
        slot = 0 if info is None else 1 + int(info.id) % (self.slots - 1)
        base = slot * _FIELDS
        values = self.values
        values[base] += hits
        values[base + 1] += misses
        values[base + 2] += not_stored
        values[base + 3] += corrupt

    def total(self) -> CacheStats:
        values = list(self.values)
        return CacheStats(*(sum(values[k::_FIELDS]) for k in range(_FIELDS)))

    def reset(self) -> None:
        for k in range(len(self.values)):
            self.values[k] = 0


class CacheUnusableError(DataError):
    """The disk cache's folder cannot be read or written while loading (a damaged SQLite file).

    A :class:`~loaderkit.errors.DataError` that is not about one sample: the ``skip`` error
    policy does not skip it (every sample would fail the same way).
    """


class SampleCache(Protocol):
    """Where cached samples live: ``get`` returns ``(True, sample)`` or ``(False, None)``.

    ``(False, CORRUPT)`` is a miss whose entry was there but damaged.
    """

    def get(self, index: int) -> tuple[bool, Any]:
        """The cached sample at ``index``, if there is one."""

    def get_many(self, indices: Sequence[int]) -> list[tuple[bool, Any]]:
        """``get`` of each of ``indices``, at once (one read of a disk cache's index)."""

    def put_many(self, items: Sequence[tuple[int, Any]]) -> int:
        """Store these samples; returns how many were *not* stored (the cache was full)."""

    def prepare(self) -> None:
        """Check or record, in the main process, what this cache holds."""


class MemoryCache:
    """Pickled samples in a dict of this process (see the module docstring)."""

    def __init__(self, max_bytes: int | None) -> None:
        self.max_bytes = max_bytes
        self.items: dict[int, bytes] = {}
        self.nbytes = 0

    def get(self, index: int) -> tuple[bool, Any]:
        blob = self.items.get(index)
        if blob is None:
            return False, None
        return True, pickle.loads(blob)

    def get_many(self, indices: Sequence[int]) -> list[tuple[bool, Any]]:
        return [self.get(index) for index in indices]

    def put_many(self, items: Sequence[tuple[int, Any]]) -> int:
        refused = 0
        for index, sample in items:
            if index in self.items:
                continue
            blob = pickle.dumps(sample, protocol=pickle.HIGHEST_PROTOCOL)
            if self.max_bytes is not None and self.nbytes + len(blob) > self.max_bytes:
                refused += 1
                continue
            self.items[index] = blob
            self.nbytes += len(blob)
        return refused

    def prepare(self) -> None:
        return None


class DiskCache:
    """A ``diskcache.Cache`` folder shared by every process (see the module docstring).

    Samples are stored as :mod:`~loaderkit.runtime.cache.format` entries (data, never pickle)
    whose checksum covers the entry's key: ``generation:index``, where the generation is a
    digest of what the folder holds (:func:`cache_identity`) and of the transform's code for
    the ``"transformed"`` stage. The ``diskcache.Cache`` is opened lazily in each process that
    uses it (an open SQLite connection must not cross a fork) and is not pickled with this
    object.
    """

    def __init__(
        self, path: str, max_bytes: int | None, identity: str, code: str, shared: bool = False
    ) -> None:
        self.path = os.path.expanduser(path)  # as diskcache does: "~/cache" is in the home
        self.max_bytes = max_bytes
        self.identity = identity
        self.code = code
        self.shared = shared
        self.secret: bytes | None = None  # the key of a shared folder, read by prepare()
        self.generation = hashlib.sha256(f"{identity}\n{code}".encode()).hexdigest()[:32]
        self._cache: Any = None
        self._pid: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_cache"] = None
        state["_pid"] = None
        return state

    def _open(self) -> Any:
        if self._cache is None or self._pid != os.getpid():
            from loaderkit.runtime.cache.disk import open_folder

            self._cache = open_folder(self.path, self.max_bytes, private=not self.shared)
            self._pid = os.getpid()
        return self._cache

    def _key(self, index: int) -> bytes:
        return f"{self.generation}:{index}".encode()

    def _failed(self, exc: Exception, index: int | None) -> CacheUnusableError:
        return CacheUnusableError(
            f"the disk cache at {self.path!r} cannot be used ({type(exc).__name__}: {exc}); "
            f"delete the folder to rebuild the cache (it holds nothing but cached samples)",
            sample_index=index,
        )

    def get(self, index: int) -> tuple[bool, Any]:
        try:
            entry = self._open().get(index, default=_MISSING)
        except Exception as exc:  # a damaged SQLite file, a lock held too long
            raise self._failed(exc, index) from exc
        if entry is _MISSING:
            return False, None
        try:
            return True, decode(self._key(index), entry, self.secret)
        except CorruptEntryError:
            return False, CORRUPT

    def get_many(self, indices: Sequence[int]) -> list[tuple[bool, Any]]:
        """``get`` of each of ``indices``, read from the SQLite file by one statement."""
        try:
            entries = self._open().get_many(indices)
        except Exception as exc:  # a damaged SQLite file, a lock held too long
            raise self._failed(exc, indices[0] if indices else None) from exc
        out: list[tuple[bool, Any]] = []
        for index in indices:
            entry = entries.get(index, _MISSING)
            if entry is _MISSING:
                out.append((False, None))
                continue
            try:
                out.append((True, decode(self._key(index), entry, self.secret)))
            except CorruptEntryError:
                out.append((False, CORRUPT))
        return out

    def put_many(self, items: Sequence[tuple[int, Any]]) -> int:
        """Store what can be stored; a disk that cannot take the samples (full) stores none.

        A sample is not stored (counted, never an error) when the format cannot keep it, or
        when writing fails for want of room (a full disk or quota, a file size limit) or
        because a link was planted where a value file goes; the value files of a batch that
        could not be stored are removed. Any other failure is a :class:`CacheUnusableError`.
        """
        entries = [(index, encode(self._key(index), s, self.secret)) for index, s in items]
        kept = [(index, entry) for index, entry in entries if entry is not None]
        if not kept:
            return len(entries)
        try:
            cache = self._open()
        except Exception as exc:
            raise self._failed(exc, kept[0][0]) from exc
        disk = cache.disk
        disk.written.clear()
        try:
            with cache.transact():
                for index, entry in kept:
                    cache.set(index, entry)
        except Exception as exc:  # a full disk, a damaged SQLite file
            for name in disk.written:
                disk.remove(name)
            if not _out_of_room(exc):
                raise self._failed(exc, kept[0][0]) from exc
            return len(entries)
        finally:
            disk.written.clear()
        return len(entries) - len(kept)

    def prepare(self) -> None:
        """Check the folder; record what it holds, or refuse one written for something else.

        The folder is created private (mode 0700) if missing. One that another user could
        change is refused unless ``shared`` (then the caller's key is read, or made). A folder
        whose transform code changed (same dataset, stage and transform name), or that was
        written with the other signing (shared or not), is emptied: its samples do not count.
        """
        from loaderkit.runtime.cache.disk import SUPPORTED, check_folder
        from loaderkit.runtime.cache.trust import (
            KeyFileError,
            folder_problem,
            key_path,
            signing_key,
        )

        if not SUPPORTED:
            raise PlanError.single(
                "cache.storage",
                "a disk cache needs a POSIX system (it opens the files of its folder without "
                "following links, through folder descriptors), which this one is not; use "
                "with_cache('memory')",
            )
        if os.path.expandvars(self.path) != self.path:  # diskcache would open another folder
            raise PlanError.single(
                "cache.path",
                f"{self.path!r} names an environment variable ($...), which the disk cache "
                f"would expand; pass the folder's path without it (expand it in your code)",
            )
        stamp = self.code + ("\nsigned" if self.shared else "")
        try:
            folder = Path(self.path)
            if not folder.is_dir():
                folder.parent.mkdir(parents=True, exist_ok=True)
                folder.mkdir(mode=0o700, exist_ok=True)
            problem = folder_problem(self.path, self.shared)
            if problem is not None:
                raise PlanError.single("cache.path", _untrusted(self.path, *problem))
            if self.shared:
                try:
                    self.secret = signing_key(self.path)
                except KeyFileError as exc:
                    raise PlanError.single(
                        "cache.shared",
                        f"the key that signs the entries of a shared cache cannot be trusted: "
                        f"{exc}; make {str(key_path())!r} a file only you can read (mode "
                        f"0600, in a folder only you can change), or delete it to make a new "
                        f"one",
                    ) from exc
            check_folder(self.path)
            cache = self._open()
            cache.add(IDENTITY_KEY, self.identity)
            found = cache.get(IDENTITY_KEY)
            if found == self.identity:
                with cache.transact():
                    if cache.get(CODE_KEY) != stamp:
                        cache.clear()
                        cache.set(IDENTITY_KEY, self.identity)
                        cache.set(CODE_KEY, stamp)
        except PlanError:
            raise
        except OSError as exc:
            raise PlanError.single(
                "cache.path",
                f"cannot open the disk cache at {self.path!r}: {exc}; pass a writable folder",
            ) from exc
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_READONLY:
                raise self._damaged(exc) from exc
            raise PlanError.single(
                "cache.path",
                f"cannot write the disk cache at {self.path!r}: its SQLite file is read-only "
                f"for you (another user made it, or it was made read-only); pass a folder of "
                f"your own",
            ) from exc
        except Exception as exc:  # FolderError, sqlite3, diskcache: ours
            raise self._damaged(exc) from exc
        if found != self.identity:
            raise PlanError.single(
                "cache.path",
                f"the folder {self.path!r} caches samples of another dataset or stage "
                f"({_describe(found)}; this plan caches {_describe(self.identity)}); pass "
                f"another path, or delete the folder to rebuild the cache",
            )

    def _damaged(self, exc: Exception) -> PlanError:
        """The error for a folder whose SQLite file or layout is not a loaderkit cache's."""
        from loaderkit.runtime.cache.disk import FolderError

        reason = str(exc) if isinstance(exc, FolderError) else f"{type(exc).__name__}: {exc}"
        return PlanError.single(
            "cache.path",
            f"the disk cache at {self.path!r} is damaged or not a loaderkit cache "
            f"({reason}); delete the folder to rebuild the cache (it holds nothing but "
            f"cached samples)",
        )


def _untrusted(path: str, problem: str, shared_helps: bool) -> str:
    """The message refusing a cache folder that someone else could change."""
    if not shared_helps:
        return f"the disk cache at {path!r} cannot be used: {problem}"
    return (
        f"the disk cache at {path!r} is not private: {problem}; a disk cache trusts only what "
        f"you control, since whoever can change the folder can change the samples it serves. "
        f"Use a private folder (owned by you, mode 0700, e.g. a new folder that loaderkit "
        f"creates, under folders no one else can change), or accept this one with "
        f"with_cache('disk', path=..., shared=True) (shared = true in a plan file): every "
        f"entry is then signed and checked with your own key, kept outside the folder"
    )


def _out_of_room(exc: BaseException) -> bool:
    """Whether a write failed for want of room (disk, quota, file size) or at a planted link."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ELOOP, errno.ENOTDIR)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_WRITE)
    return False


class _Missing:
    """The default that tells a missing key from a cached ``None``."""


_MISSING = _Missing()


class _Corrupt:
    """What ``get`` gives with a miss whose entry failed its check."""


CORRUPT = _Corrupt()


def _describe(identity: object) -> str:
    try:
        data = json.loads(str(identity))
        return f"{data['dataset']['binding']!r} ({data['dataset']['type']}), {data['stage']}"
    except (ValueError, KeyError, TypeError):
        return f"unknown contents {str(identity)[:60]!r}"


def cache_identity(plan: LoaderPlan) -> str:
    """What a disk cache of ``plan`` holds: the dataset's identity and the stage, as JSON.

    For the ``"transformed"`` stage the transform is part of it too. The identity of a torch
    ``Dataset`` is its type, name and length only: a changed dataset of the same shape is not
    noticed (delete the folder then).
    """
    from loaderkit.plan.fingerprint import canonical_json, stream_fields

    fields = stream_fields(plan)
    assert plan.cache is not None
    data: dict[str, Any] = {"dataset": fields["dataset"], "stage": plan.cache.stage}
    if plan.mixture is not None:
        data["sources"] = [
            {"binding": s.binding, "type": s.type_name, "length": s.length, "identity": s.identity}
            for s in plan.mixture.sources
        ]
    if plan.cache.stage == "transformed":
        data["transform"] = fields["transform"]
    return canonical_json(data)


class Cache:
    """A storage plus the shared counters: what the source and the fetcher consult."""

    def __init__(self, store: SampleCache, counters: _Counters) -> None:
        self.store = store
        self.counters = counters

    def lookup(self, indices: Sequence[int]) -> tuple[dict[int, Any], list[int]]:
        """The cached samples among ``indices`` and the indices missing (each once, in order)."""
        found: dict[int, Any] = {}
        missing: dict[int, None] = {}
        corrupt = 0
        unique = list(dict.fromkeys(indices))
        for index, (hit, value) in zip(unique, self.store.get_many(unique), strict=True):
            if hit:
                found[index] = value
            else:
                missing[index] = None
                corrupt += value is CORRUPT
        if corrupt:
            self.counters.add(0, 0, 0, corrupt)
        return found, list(missing)

    def store_many(self, items: Sequence[tuple[int, Any]], hits: int) -> None:
        """Keep ``items`` (the misses just loaded) and count this lookup."""
        refused = self.store.put_many(items)
        self.counters.add(hits, len(items), refused)

    def stats(self) -> CacheStats:
        """Hits, misses, samples not stored and corrupt entries, over every process so far."""
        return self.counters.total()


def open_cache(plan: LoaderPlan, processes: int) -> Cache:
    """The cache of ``plan`` (which has one), checked against its folder when on disk."""
    spec: CacheSpec | None = plan.cache
    assert spec is not None
    store: SampleCache
    if spec.storage == "memory":
        store = MemoryCache(spec.max_bytes)
    else:
        assert spec.path is not None
        code = code_digest(_transform_of(plan)) if spec.stage == "transformed" else ""
        path = os.fspath(spec.path)
        store = DiskCache(path, spec.max_bytes, cache_identity(plan), code, spec.shared)
    store.prepare()
    return Cache(store, _Counters(processes))


def _transform_of(plan: LoaderPlan) -> Callable[..., Any] | None:
    """The transform the loader of ``plan`` runs (as the loader resolves it), or ``None``."""
    spec = plan.transform
    if spec is None:
        return None
    if spec.source == "registry":
        from loaderkit.transforms import transforms

        factory: Callable[..., Any] = transforms.get(spec.name).factory
        return factory
    found = None if plan.bindings is None else plan.bindings.get(spec.name)
    return found if callable(found) else None


class CachedSource(Source):
    """A source answering from the cache first: the ``"fetched"`` stage.

    Column-wise batching (``default_batch``) is turned off so that every sample goes through
    the cache.
    """

    def __init__(self, inner: Source, cache: Cache) -> None:
        super().__init__(inner.data)
        self.inner = inner
        self.cache = cache

    def sample(self, index: int) -> Any:
        """The sample at ``index``, from the cache when it holds it."""
        return self.samples(np.asarray([index], dtype=np.int64))[0]

    def samples(self, indices: Indices) -> list[Any]:
        """The samples at ``indices``: cached ones from the cache, the rest loaded and kept."""
        wanted = indices.tolist()
        found, missing = self.cache.lookup(wanted)
        loaded: list[tuple[int, Any]] = []
        if missing:
            fresh = self.inner.samples(np.asarray(missing, dtype=np.int64))
            loaded = list(zip(missing, fresh, strict=True))
            found.update(loaded)
        self.cache.store_many(loaded, len(wanted) - len(missing))
        return [found[i] for i in wanted]

    def default_batch(self, indices: Indices) -> Any | None:
        """Always ``None``: every sample goes through the cache."""
        return None

    def list_dtypes(self) -> dict[str, torch.dtype]:
        """The list column dtypes of the cached source."""
        return self.inner.list_dtypes()

    def epoch_hooks(self) -> list[Callable[[int], Any]]:
        """The ``set_epoch`` hooks of the cached source."""
        return self.inner.epoch_hooks()

    def locate(self, index: int) -> str:
        """Where ``index`` comes from in the cached source."""
        return self.inner.locate(index)
