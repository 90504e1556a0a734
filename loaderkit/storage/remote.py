"""What the remote stores (S3, HTTP) share: options, checked answers, reads many at once.

A remote store implements one *attempt* of a ranged GET (:meth:`RemoteStore._fetch`); this
module makes it safe and fast:

- **Every answer is checked** (:func:`check_answer`): the ETag it carries against the version
  asked for (a difference is an :class:`~loaderkit.storage.base.ObjectChangedError`, never the
  bytes), its ``Content-Range`` against the range asked for, and the body's length against
  both. A body that ends early (a truncated answer, a reset connection) is tried again; if it
  keeps ending early the error names the object. Short data is never returned.
- **Bounded time**: each attempt waits at most ``connect_timeout`` to connect and
  ``read_timeout`` for each piece of the answer, and stops after ``attempt_timeout`` seconds in
  all (a server that trickles bytes is cut off too); failed attempts are retried by
  :mod:`loaderkit.storage.retry`'s bounded policy.
- **Many requests in flight**: :meth:`RemoteStore.read_many` sends up to ``max_in_flight``
  requests at once from a thread pool, and a range larger than ``2 * part_bytes`` is fetched
  as parts in parallel (pinned to one version, so the parts are of one object).

The pool and the client are made on first use, again after a ``fork`` (a worker process gets
its own), and are not pickled.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any, ClassVar, TypeVar

import attrs

from loaderkit._text import shown
from loaderkit._validate import check_int, check_number, unknown_keys
from loaderkit.errors import PlanError
from loaderkit.storage.base import ObjectChangedError, ObjectInfo, RangeRequest, StorageError
from loaderkit.storage.retry import Retry, RetryPolicy, with_retries

_T = TypeVar("_T")

__all__ = [
    "REMOTE_OPTIONS",
    "RemoteOptions",
    "RemoteStore",
    "check_answer",
    "range_header",
    "read_body",
    "shorter",
]

MiB = 1 << 20
CHUNK = 256 * 1024
"""Bytes read from an answer at a time (between two checks of the attempt's deadline)."""


def _in_flight(value: object) -> int:
    return check_int("storage_options.max_in_flight", value, minimum=1, maximum=256, fix="e.g. 16")


def _seconds(name: str, value: object) -> float:
    return check_number(f"storage_options.{name}", value, minimum=0.001, maximum=3600)


def _connect_timeout(value: object) -> float:
    return _seconds("connect_timeout", value)


def _read_timeout(value: object) -> float:
    return _seconds("read_timeout", value)


def _attempt_timeout(value: object) -> float:
    return _seconds("attempt_timeout", value)


def _retries(value: object) -> int:
    return check_int("storage_options.retries", value, minimum=0, maximum=20, fix="e.g. 4")


def _backoff(value: object) -> float:
    return check_number("storage_options.backoff", value, minimum=0, maximum=600)


def _max_backoff(value: object) -> float:
    return check_number("storage_options.max_backoff", value, minimum=0, maximum=600)


def _part_bytes(value: object) -> int:
    return check_int(
        "storage_options.part_bytes",
        value,
        minimum=64 * 1024,
        maximum=5 * 1024 * MiB,
        fix="e.g. 16 * 2**20 (16 MiB)",
    )


@attrs.frozen(kw_only=True)
class RemoteOptions:
    """The options every remote store takes (all safe to record in a plan file)."""

    max_in_flight: int = attrs.field(default=16, converter=_in_flight)
    """Requests in flight at once (``read_many``, and the parts of one large read)."""
    connect_timeout: float = attrs.field(default=10.0, converter=_connect_timeout)
    """Seconds to wait for a connection."""
    read_timeout: float = attrs.field(default=30.0, converter=_read_timeout)
    """Seconds to wait for each piece of an answer (a stalled server: a timeout, then a retry)."""
    attempt_timeout: float = attrs.field(default=300.0, converter=_attempt_timeout)
    """Seconds one attempt may take in all, however the server trickles its bytes."""
    retries: int = attrs.field(default=4, converter=_retries)
    """Attempts after the first failure that may pass (resets, timeouts, 500, 503 SlowDown)."""
    backoff: float = attrs.field(default=0.2, converter=_backoff)
    """Seconds of the first wait before a retry (each next one doubles)."""
    max_backoff: float = attrs.field(default=10.0, converter=_max_backoff)
    """The longest wait before a retry, in seconds."""
    part_bytes: int = attrs.field(default=16 * MiB, converter=_part_bytes)
    """A read of more than twice this is fetched as parts of this size, in parallel."""

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy these options name."""
        return RetryPolicy(self.retries, self.backoff, self.max_backoff)


REMOTE_OPTIONS: frozenset[str] = frozenset(f.name for f in attrs.fields(RemoteOptions))
"""The names of :class:`RemoteOptions`: safe to record in a plan file (no credential)."""


def range_header(request: RangeRequest) -> str | None:
    """The ``Range`` header of ``request`` (``None``: the whole object)."""
    if request.end is None:
        return None if request.start == 0 else f"bytes={request.start}-"
    return f"bytes={request.start}-{request.end - 1}"


_CONTENT_RANGE = re.compile(r"bytes (\d{1,19})-(\d{1,19})/(\d{1,19}|\*)\Z")


def _changed(request: RangeRequest, now: str) -> ObjectChangedError:
    return ObjectChangedError(
        f"{shown(request.url)} changed since the dataset was made (version "
        f"{shown(request.version)}, now {shown(now)}); make the dataset again (or restore the "
        f"object)"
    )


def shorter(request: RangeRequest, size: int | str) -> ObjectChangedError:
    """The error of a range that ends past the object's end (``size`` bytes)."""
    return ObjectChangedError(
        f"{shown(request.url)}: bytes [{request.start}, {request.end}) asked of an object of "
        f"{size} bytes; the object is shorter than the dataset expects: make the dataset again"
    )


def check_answer(
    request: RangeRequest, *, etag: str | None, content_range: str | None, length: int | None
) -> int:
    """The number of bytes the answer to ``request`` must have; raises if it is not the one.

    ``etag`` is the answer's ETag, ``content_range`` its ``Content-Range`` (``None`` for a
    whole object), ``length`` its ``Content-Length``.
    """
    if request.version and etag is not None and etag != request.version:
        raise _changed(request, etag)
    if content_range is None:
        if length is None:
            raise StorageError(
                f"{shown(request.url)}: the server answered without a Content-Length; serve "
                f"the files from a server that states their length"
            )
        if range_header(request) is not None and (request.start, request.end) != (0, length):
            if request.start == 0 and request.end is not None and length < request.end:
                raise shorter(request, length)
            raise StorageError(
                f"{shown(request.url)}: the server answered a request for bytes "
                f"[{request.start}, {request.end}) with the whole object ({length:,} bytes); "
                f"serve the files from a server that answers Range requests (HTTP 206)"
            )
        return length
    found = _CONTENT_RANGE.match(content_range.strip())
    if found is None:
        raise Retry(f"answered an unreadable Content-Range {shown(content_range, 60)}")
    first, last, total = int(found[1]), int(found[2]), found[3]
    if first != request.start:
        raise Retry(f"answered bytes from {first}, not from {request.start}")
    if request.end is not None and last + 1 != request.end:
        if total != "*" and int(total) < request.end:
            raise shorter(request, total)
        raise Retry(f"answered bytes [{first}, {last + 1}), not [{request.start}, {request.end})")
    return last + 1 - first


def read_body(read: Callable[[int], bytes], expected: int, deadline: float) -> bytes:
    """Exactly ``expected`` bytes from ``read``; :class:`Retry` if fewer come, or too late."""
    parts: list[bytes] = []
    got = 0
    while got < expected:
        if time.monotonic() > deadline:
            raise Retry(f"the answer took too long ({got:,} of {expected:,} bytes read)")
        chunk = read(min(CHUNK, expected - got))
        if not chunk:
            raise Retry(f"truncated answer: {got:,} of {expected:,} bytes")
        parts.append(chunk)
        got += len(chunk)
    if got > expected or read(1):
        raise Retry(f"the answer holds more than the {expected:,} bytes asked for")
    return b"".join(parts)


class RemoteStore:
    """The shared half of the remote stores: checked, parallel, bounded reads.

    A subclass defines :meth:`_fetch` (one attempt of one range), ``stat`` (whose version pins
    the parts of a large read), ``glob``, ``write``, and the two option tables
    (``SAFE_OPTIONS``, ``SECRET_OPTIONS``) that :mod:`loaderkit.storage.options` reads.
    """

    scheme: str
    SAFE_OPTIONS: ClassVar[frozenset[str]]
    SECRET_OPTIONS: ClassVar[frozenset[str]]

    def __init__(self, options: Mapping[str, Any]) -> None:
        allowed = sorted(self.SAFE_OPTIONS | self.SECRET_OPTIONS)
        problems = unknown_keys("storage_options", list(options), allowed)
        if problems:
            raise PlanError(problems)
        known = {k: v for k, v in options.items() if k in REMOTE_OPTIONS}
        self.options = RemoteOptions(**known)
        self.retry_fix = (
            "check that the server is up; raise storage_options retries, read_timeout or "
            "attempt_timeout if it is slow"
        )
        self._lock = threading.Lock()
        self._pid = -1
        self._pool: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_lock=None, _pid=-1, _pool=None)
        for name in self._per_process():
            state[name] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _per_process(self) -> tuple[str, ...]:
        """Attributes holding clients or connections (dropped on pickle, remade after fork)."""
        return ()

    def _fresh(self) -> None:
        """Forget what a parent process made (called under the lock, once per process)."""
        for name in self._per_process():
            setattr(self, name, None)
        self._pool = None
        self._pid = os.getpid()

    def _once_per_process(self, name: str, make: Callable[[], _T]) -> _T:
        """``self.<name>``, made by ``make`` on first use in this process (thread-safe).

        After a fork the parent's clients, connections and pool are forgotten first.
        """
        with self._lock:
            if self._pid != os.getpid():
                self._fresh()
            value: _T | None = getattr(self, name)
            if value is None:
                value = make()
                setattr(self, name, value)
            return value

    def _executor(self) -> ThreadPoolExecutor:
        return self._once_per_process(
            "_pool",
            lambda: ThreadPoolExecutor(
                self.options.max_in_flight, thread_name_prefix=f"loaderkit-{self.scheme}"
            ),
        )

    def _fetch(self, request: RangeRequest, deadline: float) -> bytes:
        """One attempt at ``request`` (``Retry`` for what may pass)."""
        raise NotImplementedError

    def stat(self, url: str) -> ObjectInfo:
        """Size and version of ``url``."""
        raise NotImplementedError

    def _attempt(self, request: RangeRequest) -> bytes:
        deadline = time.monotonic() + self.options.attempt_timeout
        return self._fetch(request, deadline)

    def _read_one(self, request: RangeRequest) -> bytes:
        if request.end is not None and request.end == request.start:
            return b""
        return with_retries(
            request.url,
            "GET" if range_header(request) is None else f"GET {range_header(request)}",
            lambda: self._attempt(request),
            self.options.policy,
            self.retry_fix,
        )

    def _parts(self, request: RangeRequest) -> list[RangeRequest]:
        """``request`` as the ranges to fetch (parts of one version for a large one)."""
        if request.start < 0 or (request.end is not None and request.end < request.start):
            raise StorageError(
                f"{shown(request.url)}: bytes [{request.start}, {request.end}) is not a range; "
                f"ask for 0 <= start <= end"
            )
        part = self.options.part_bytes
        if request.end is None or request.end - request.start <= 2 * part:
            return [request]
        version = request.version
        if version is None:
            version = self.stat(request.url).version or None
        starts = range(request.start, request.end, part)
        return [RangeRequest(request.url, s, min(s + part, request.end), version) for s in starts]

    def read(self, request: RangeRequest) -> bytes:
        """The bytes of one range (large ranges fetched as parallel parts), checked."""
        return self.read_many([request])[0]

    def read_many(self, requests: Sequence[RangeRequest]) -> list[bytes]:
        """Several ranges, up to ``max_in_flight`` requests in flight, in request order."""
        split = [self._parts(r) for r in requests]
        flat = [p for parts in split for p in parts]
        if len(flat) <= 1 or self.options.max_in_flight == 1:
            datas = [self._read_one(p) for p in flat]
        else:
            datas = _gather(self._executor(), self._read_one, flat)
        out: list[bytes] = []
        at = 0
        for parts in split:
            out.append(b"".join(datas[at : at + len(parts)]))
            at += len(parts)
        return out


def _gather(
    pool: ThreadPoolExecutor, fn: Callable[[RangeRequest], bytes], items: list[RangeRequest]
) -> list[bytes]:
    """``fn`` of each item on the pool, in order; the first failure cancels what has not begun."""
    futures: list[Future[bytes]] = [pool.submit(fn, item) for item in items]
    done, pending = wait(futures, return_when=FIRST_EXCEPTION)
    for future in futures:
        error = future.exception() if future in done else None
        if error is not None:
            for other in pending:
                other.cancel()
            raise error
    return [f.result() for f in futures]
