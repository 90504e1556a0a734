"""The HTTP store: ``http://`` and ``https://`` URLs read with ranged GETs (urllib3).

urllib3 (the ``[http]`` extra; boto3 brings it too) is imported when the store first talks to
a server. A read sends ``Range: bytes=a-b`` and, for a strong ETag, ``If-Match``; the answer's
status, ETag, ``Content-Range`` and length are checked (a server that ignores ``Range`` is an
error saying so, never a slice of the wrong bytes). ``Accept-Encoding: identity`` is sent, so
the bytes are the file's, not a compressed form of them.

Plain HTTP has no listing: :meth:`HttpStore.glob` of a pattern with wildcards is an error
saying to list the URLs (a pattern without wildcards names one object). Nothing is written:
``write`` is an error naming the stores that write. Redirects are followed (at most
:data:`MAX_REDIRECTS`), and urllib3 drops ``Authorization`` and cookies on a redirect to
another host.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

from loaderkit._text import shown
from loaderkit.errors import PlanError
from loaderkit.storage.base import ObjectChangedError, ObjectInfo, RangeRequest, StorageError
from loaderkit.storage.patterns import has_wildcards
from loaderkit.storage.remote import (
    REMOTE_OPTIONS,
    RemoteStore,
    check_answer,
    range_header,
    read_body,
    shorter,
)
from loaderkit.storage.retry import Retry, with_retries

__all__ = ["MAX_REDIRECTS", "HttpStore"]

MAX_REDIRECTS = 5
"""Redirects one request follows."""

_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_HEADERS_FIX = "pass the headers the server needs in storage_options={'headers': {...}}"


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise StorageError(f"{shown(url)}: an HTTP URL is http(s)://host/path; name the host")
    if parts.username or parts.password:
        raise StorageError(
            f"{shown(url)}: the URL holds a user or password, which would be recorded with the "
            f"dataset; {_HEADERS_FIX} (e.g. an Authorization header) and drop it from the URL"
        )
    return url


def _headers(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise PlanError.single(
            "storage_options.headers",
            f"must be a dict of header names to strings (got {type(value).__name__}); e.g. "
            f"{{'Authorization': 'Bearer ...'}}",
        )
    return dict(value)


def _strong(etag: str) -> bool:
    return etag.startswith('"') and not etag.startswith("W/")


class HttpStore(RemoteStore):
    """:class:`~loaderkit.storage.base.Store` over ``http(s)://`` (read-only, no listing)."""

    scheme = "http"
    SAFE_OPTIONS: ClassVar[frozenset[str]] = REMOTE_OPTIONS
    """Options that hold no credential: a plan file may record them."""
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset({"headers"})
    """Headers may carry credentials (``Authorization``, cookies): never in a plan file."""

    def __init__(self, **options: Any) -> None:
        super().__init__(options)
        self._headers = _headers(options.get("headers"))
        self._manager: Any = None

    def __repr__(self) -> str:
        return "HttpStore()"  # never the headers

    def _per_process(self) -> tuple[str, ...]:
        return ("_manager",)

    def manager(self) -> Any:
        """The urllib3 pool manager (made on first use, once per process; thread-safe)."""
        return self._once_per_process("_manager", self._make_manager)

    def _make_manager(self) -> Any:
        try:
            import urllib3
        except ImportError as e:
            raise StorageError("http(s):// URLs need urllib3: pip install 'loaderkit[http]'") from e
        return urllib3.PoolManager(
            maxsize=self.options.max_in_flight,
            timeout=urllib3.Timeout(
                connect=self.options.connect_timeout, read=self.options.read_timeout
            ),
            retries=urllib3.Retry(
                total=None, connect=0, read=0, status=0, other=0, redirect=MAX_REDIRECTS
            ),
        )

    def _request(self, method: str, url: str, headers: dict[str, str]) -> Any:
        import urllib3

        sent = {**self._headers, "Accept-Encoding": "identity", **headers}
        try:
            return self.manager().request(
                method, _check_url(url), headers=sent, preload_content=False, decode_content=False
            )
        except urllib3.exceptions.HTTPError as e:
            raise Retry(f"{type(e).__name__}: {e}") from e

    def _status(self, url: str, version: str | None, answer: Any) -> None:
        """Raise what an error status means (Retry for what may pass)."""
        status = int(answer.status)
        if status in (200, 206):
            encoding = answer.headers.get("Content-Encoding", "identity").lower()
            if encoding not in ("identity", ""):
                raise StorageError(
                    f"{shown(url)}: the server sent the bytes encoded ({shown(encoding)}) "
                    f"though asked for identity; serve the files as they are"
                )
            return
        if status in _TRANSIENT_STATUS:
            raise Retry(f"the server answered {status}")
        if status == 412:
            raise ObjectChangedError(
                f"{shown(url)} changed since the dataset was made (it is no longer version "
                f"{shown(version)}); make the dataset again (or restore the file)"
            )
        if status in (404, 410) and version:
            raise ObjectChangedError(
                f"{shown(url)} is gone since the dataset was made ({status}); make the dataset "
                f"again (or restore the file)"
            )
        if status in (401, 403):
            raise StorageError(f"{shown(url)}: access refused ({status}); {_HEADERS_FIX}")
        raise StorageError(f"{shown(url)}: the server answered {status}; check the URL")

    def _fetch(self, request: RangeRequest, deadline: float) -> bytes:
        import urllib3

        headers: dict[str, str] = {}
        header = range_header(request)
        if header is not None:
            headers["Range"] = header
        if request.version and _strong(request.version):
            headers["If-Match"] = request.version
        answer = self._request("GET", request.url, headers)
        complete = False
        try:
            if int(answer.status) == 416:
                total = answer.headers.get("Content-Range", "").rpartition("/")[2]
                raise shorter(request, total if total.isdigit() else "fewer")
            self._status(request.url, request.version, answer)
            length = answer.headers.get("Content-Length")
            expected = check_answer(
                request,
                etag=answer.headers.get("ETag"),
                content_range=answer.headers.get("Content-Range") if answer.status == 206 else None,
                length=None if length is None or not length.isdigit() else int(length),
            )
            data = read_body(answer.read, expected, deadline)
            complete = True
            return data
        except StorageError:
            raise  # an OSError too, but final
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise Retry(f"reading the answer: {type(e).__name__}: {e}") from e
        finally:
            if not complete:
                answer.close()  # never hand a half-read connection back to the pool
            answer.release_conn()

    def stat(self, url: str) -> ObjectInfo:
        """Size and ETag of ``url``: a ``HEAD`` (or, where it says nothing, a 1-byte GET)."""

        def head() -> ObjectInfo:
            answer = self._request("HEAD", url, {})
            try:
                self._status(url, None, answer)
                length = answer.headers.get("Content-Length")
                etag = answer.headers.get("ETag", "")
            finally:
                answer.release_conn()
            if length is not None and length.isdigit():
                return ObjectInfo(url=url, size=int(length), version=etag)
            return self._probe(url)

        return with_retries(url, "HEAD", head, self.options.policy, self.retry_fix)

    def _probe(self, url: str) -> ObjectInfo:
        """Size and ETag from a ``GET`` of byte 0 (its ``Content-Range`` holds the size)."""
        answer = self._request("GET", url, {"Range": "bytes=0-0"})
        try:
            self._status(url, None, answer)
            total = answer.headers.get("Content-Range", "").rpartition("/")[2]
            etag = answer.headers.get("ETag", "")
        finally:
            answer.close()
            answer.release_conn()
        if answer.status != 206 or not total.isdigit():
            raise StorageError(
                f"{shown(url)}: the server states no size (no Content-Length, no Content-Range); "
                f"serve the files from a server that answers Range requests"
            )
        return ObjectInfo(url=url, size=int(total), version=etag)

    def glob(self, pattern: str) -> list[ObjectInfo]:
        """The one object a pattern without wildcards names; wildcards are an error."""
        if has_wildcards(urlsplit(pattern).path):
            raise StorageError(
                f"{shown(pattern)}: plain HTTP cannot list a folder, so a glob cannot be "
                f"expanded; list the URLs themselves (shards(['https://host/a.parquet', ...])), "
                f"or use the object store's own URLs (s3://bucket/prefix/*.parquet)"
            )
        return [self.stat(pattern)]

    def write(self, url: str, data: bytes) -> ObjectInfo:
        """Refused: HTTP URLs are read-only here."""
        raise StorageError(
            f"{shown(url)}: http(s):// URLs are read-only; write to a local path or an s3:// URL"
        )
