"""The S3 store: ``s3://bucket/key`` through boto3, configured the standard way.

boto3 (the ``[s3]`` extra) is imported when the store first talks to a server, never at
``import loaderkit``. Configuration is boto3's own: ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``), ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_PROFILE`` and the files ``~/.aws/config`` and
``~/.aws/credentials`` (or ``AWS_CONFIG_FILE``, ``AWS_SHARED_CREDENTIALS_FILE``), with instance
and container roles after them. ``storage_options`` name the same things explicitly
(:data:`S3Store.SAFE_OPTIONS`, :data:`S3Store.SECRET_OPTIONS`).

Every GET sends the expected version as ``If-Match`` and the answer's ETag and
``Content-Range`` are checked as well (:func:`~loaderkit.storage.remote.check_answer`); boto3's
own retries are off, so that one policy (:mod:`loaderkit.storage.retry`) bounds them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import urlsplit

from loaderkit._text import shown
from loaderkit._validate import check_bool, check_choice, check_str
from loaderkit.storage.base import ObjectChangedError, ObjectInfo, RangeRequest, StorageError
from loaderkit.storage.patterns import has_wildcards, key_matcher, literal_prefix
from loaderkit.storage.remote import (
    REMOTE_OPTIONS,
    RemoteStore,
    check_answer,
    range_header,
    read_body,
)
from loaderkit.storage.retry import Retry, with_retries

__all__ = [
    "LIST_PAGE",
    "MAX_LISTED",
    "MAX_PUT",
    "S3Store",
    "configured_endpoint",
    "same_endpoint",
    "split_url",
]

MAX_LISTED = 10_000_000
"""Objects one glob may list (a listing that goes on past it is an error, not a hang)."""

LIST_PAGE = 1000
"""Keys asked for per listing request (S3's own most)."""

MAX_PUT = 5 * 1024**3
"""Bytes one ``PUT`` may hold (S3's limit for an object written in one request)."""

_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestTimeTooSkewed",
    }
)
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_CREDENTIAL_FIX = (
    "set the credentials the standard way (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
    "AWS_PROFILE, or ~/.aws/credentials), or storage_options={'anonymous': True} for a "
    "public bucket"
)


def split_url(url: str) -> tuple[str, str]:
    """``("bucket", "key")`` of ``s3://bucket/key``; a ``StorageError`` for any other form."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise StorageError(
            f"{shown(url)}: an S3 URL is s3://bucket/key (no query or fragment); name the "
            f"bucket and the key"
        )
    return parts.netloc, parts.path.lstrip("/")


def _normal(endpoint: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(endpoint.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")


def same_endpoint(a: str, b: str) -> bool:
    """Whether two endpoint URLs name the same server (scheme, host, port and path)."""
    return _normal(a) == _normal(b)


def configured_endpoint(profile: str | None = None) -> tuple[str, str] | None:
    """The S3 endpoint the user's own configuration names, and where it is set (or ``None``).

    Read where boto3 reads it: ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, then the
    profile's ``endpoint_url`` (its ``services`` section's ``s3`` first) in the config file.
    """
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if os.environ.get(var):
            return os.environ[var], var
    try:
        import botocore.session
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return None
    try:
        session = botocore.session.Session(profile=profile)
        scoped = session.get_scoped_config()
        services = session.full_config.get("services", {}).get(scoped.get("services", ""), {})
    except (BotoCoreError, OSError, ValueError):
        return None
    for where, found in (
        ("the s3 endpoint_url of the profile's services section", services.get("s3", {})),
        ("the profile's endpoint_url in the AWS config file", scoped),
    ):
        if isinstance(found, dict) and isinstance(found.get("endpoint_url"), str):
            return found["endpoint_url"], where
    return None


class S3Store(RemoteStore):
    """:class:`~loaderkit.storage.base.Store` over ``s3://`` (AWS S3 or any S3-protocol server)."""

    scheme = "s3"
    SAFE_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"endpoint_url", "region", "profile", "anonymous", "addressing_style", *REMOTE_OPTIONS}
    )
    """Options that hold no credential: a plan file may record them."""
    SECRET_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"}
    )
    """Credentials: accepted from code, never written to (or read from) a plan file."""
    ENDPOINT_OPTION: ClassVar[str] = "endpoint_url"
    """The option naming the server credentials are sent to (see ``check_endpoint``)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(options)
        endpoint = options.get("endpoint_url")
        self.endpoint_url = None if endpoint is None else _endpoint(endpoint)
        self.region = _optional_str("region", options.get("region"))
        self.profile = _optional_str("profile", options.get("profile"))
        self.anonymous = check_bool("storage_options.anonymous", options.get("anonymous", False))
        style = options.get("addressing_style", "auto")
        self.addressing_style = check_choice(
            "storage_options.addressing_style", style, ("auto", "path", "virtual")
        )
        self._credentials = {
            k: check_str(f"storage_options.{k}", options[k])
            for k in sorted(self.SECRET_OPTIONS)
            if options.get(k) is not None
        }
        self._client: Any = None
        self.retry_fix = (
            f"check that the server at {shown(self.endpoint_url or 'the configured endpoint')} "
            f"is up; raise storage_options retries, read_timeout or attempt_timeout if it is slow"
        )

    def __repr__(self) -> str:
        shown_options = {"endpoint_url": self.endpoint_url, "region": self.region}
        listed = ", ".join(f"{k}={v!r}" for k, v in shown_options.items() if v is not None)
        return f"S3Store({listed})"  # never the credentials

    def _per_process(self) -> tuple[str, ...]:
        return ("_client",)

    def client(self) -> Any:
        """The boto3 S3 client (made on first use, once per process; thread-safe)."""
        return self._once_per_process("_client", self._make_client)

    def _make_client(self) -> Any:
        try:
            import boto3
            import botocore
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError
        except ImportError as e:
            raise StorageError(
                "s3:// URLs need boto3: pip install 'loaderkit[s3]' (or pip install boto3)"
            ) from e
        config = Config(
            connect_timeout=self.options.connect_timeout,
            read_timeout=self.options.read_timeout,
            retries={"total_max_attempts": 1, "mode": "standard"},  # ours bound them
            max_pool_connections=self.options.max_in_flight,
            s3={"addressing_style": self.addressing_style},
            signature_version=botocore.UNSIGNED if self.anonymous else None,
        )
        try:
            session = boto3.session.Session(profile_name=self.profile, **self._credentials)
            return session.client(
                "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
            )
        except BotoCoreError as e:
            raise StorageError(f"s3: cannot make the S3 client: {e}; {_CREDENTIAL_FIX}") from e

    # -- one attempt ---------------------------------------------------------------------------

    def _call(self, url: str, version: str | None, op: str, **kwargs: Any) -> Any:
        """``client.<op>(**kwargs)``, its failures sorted into Retry and final errors."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client(), op)(**kwargs)
        except ClientError as e:
            raise _client_error(url, version, e) from e
        except BotoCoreError as e:
            raise _botocore_error(url, e) from e

    def _fetch(self, request: RangeRequest, deadline: float) -> bytes:
        from botocore.exceptions import BotoCoreError

        bucket, key = split_url(request.url)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        header = range_header(request)
        if header is not None:
            kwargs["Range"] = header
        if request.version:
            kwargs["IfMatch"] = request.version
        answer = self._call(request.url, request.version, "get_object", **kwargs)
        body = answer["Body"]
        try:
            expected = check_answer(
                request,
                etag=answer.get("ETag"),
                content_range=answer.get("ContentRange"),
                length=answer.get("ContentLength"),
            )
            return read_body(body.read, expected, deadline)
        except StorageError:
            raise  # an OSError too, but final
        except BotoCoreError as e:
            raise _botocore_error(request.url, e) from e
        except OSError as e:  # a reset, a timeout, from below botocore
            raise Retry(f"reading the answer: {type(e).__name__}: {e}") from e
        finally:
            body.close()

    # -- the rest of the Store -------------------------------------------------------------------

    def stat(self, url: str) -> ObjectInfo:
        """Size and ETag of the object (a ``HEAD``), retried like a read."""
        bucket, key = split_url(url)

        def head() -> ObjectInfo:
            answer = self._call(url, None, "head_object", Bucket=bucket, Key=key)
            return ObjectInfo(url=url, size=int(answer["ContentLength"]), version=answer["ETag"])

        return with_retries(url, "HEAD", head, self.options.policy, self.retry_fix)

    def _listed(self, bucket: str, prefix: str, pattern: str) -> Iterator[dict[str, Any]]:
        """The objects under ``prefix``, page by page (continuation tokens), bounded."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": LIST_PAGE}
        listed = 0
        while True:
            page = with_retries(
                pattern,
                "LIST",
                lambda: self._call(pattern, None, "list_objects_v2", **kwargs),
                self.options.policy,
                self.retry_fix,
            )
            contents = page.get("Contents", [])
            listed += len(contents)
            if listed > MAX_LISTED:
                raise StorageError(
                    f"{shown(pattern)}: the listing holds more than {MAX_LISTED:,} objects; "
                    f"name a narrower prefix (the part before the first wildcard)"
                )
            yield from contents
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return
            kwargs["ContinuationToken"] = token

    def glob(self, pattern: str) -> list[ObjectInfo]:
        """The objects whose keys ``pattern`` matches (``**`` spans ``/``), sorted by URL."""
        bucket, key_pattern = split_url(pattern)
        if has_wildcards(bucket):
            raise StorageError(
                f"{shown(pattern)}: a glob matches keys in one bucket; name the bucket itself"
            )
        if not has_wildcards(key_pattern):
            return [self.stat(pattern)]
        matcher = key_matcher(key_pattern)
        found = [
            ObjectInfo(
                url=f"s3://{bucket}/{item['Key']}",
                size=int(item["Size"]),
                version=str(item.get("ETag", "")),
            )
            for item in self._listed(bucket, literal_prefix(key_pattern), pattern)
            if matcher.match(item["Key"])
        ]
        return sorted(found, key=lambda info: info.url)

    def write(self, url: str, data: bytes) -> ObjectInfo:
        """``data`` as the object ``url`` (one ``PUT``: S3 shows the old object or the new)."""
        bucket, key = split_url(url)
        if len(data) > MAX_PUT:
            raise StorageError(
                f"{shown(url)}: {len(data):,} bytes is over the {MAX_PUT:,} one PUT may hold; "
                f"write smaller shards"
            )

        def put() -> ObjectInfo:
            answer = self._call(url, None, "put_object", Bucket=bucket, Key=key, Body=data)
            return ObjectInfo(url=url, size=len(data), version=answer["ETag"])

        return with_retries(url, "PUT", put, self.options.policy, self.retry_fix)


def _optional_str(name: str, value: object) -> str | None:
    return None if value is None else check_str(f"storage_options.{name}", value)


def _endpoint(value: object) -> str:
    from loaderkit.errors import PlanError

    text = check_str("storage_options.endpoint_url", value)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PlanError.single(
            "storage_options.endpoint_url",
            f"must be an http:// or https:// URL of the server (got {shown(text)}); e.g. "
            f"'https://s3.example.com' or 'http://127.0.0.1:9000'",
        )
    if parts.username or parts.password:
        raise PlanError.single(
            "storage_options.endpoint_url",
            "must not hold a user or password; pass credentials the standard way "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile)",
        )
    return text


def _client_error(url: str, version: str | None, error: Any) -> Exception:
    """The error (or :class:`Retry`) of an S3 error answer."""
    info = error.response.get("Error", {})
    code = str(info.get("Code", ""))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    said = str(status) if code in ("", str(status)) else f"{status} {code}"
    if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUS:
        return Retry(f"the server answered {said}")
    if status == 412 or code == "PreconditionFailed":
        return ObjectChangedError(
            f"{shown(url)} changed since the dataset was made (it is no longer version "
            f"{shown(version)}); make the dataset again (or restore the object)"
        )
    if status == 404 and code != "NoSuchBucket" and version:
        return ObjectChangedError(
            f"{shown(url)} is gone since the dataset was made; make the dataset again (or "
            f"restore the object)"
        )
    if status == 404:
        return StorageError(f"{shown(url)}: no such object ({said}); check the bucket and key")
    if status == 416 or code == "InvalidRange":
        return ObjectChangedError(
            f"{shown(url)}: the range asked for starts past the object's end; the object is "
            f"shorter than the dataset expects: make the dataset again"
        )
    if status in (401, 403):
        return StorageError(f"{shown(url)}: access refused ({said}); {_CREDENTIAL_FIX}")
    message = shown(str(info.get("Message", "")), 200)
    return StorageError(f"{shown(url)}: the server answered {said} {message}; check the URL")


def _botocore_error(url: str, error: Exception) -> Exception:
    """The error (or :class:`Retry`) of a botocore failure below an S3 answer."""
    from botocore import exceptions as bx

    final = (
        bx.NoCredentialsError,
        bx.PartialCredentialsError,
        bx.ProfileNotFound,
        bx.ParamValidationError,
        bx.NoRegionError,
        bx.UnknownSignatureVersionError,
        bx.InvalidConfigError,
    )
    if isinstance(error, final):
        return StorageError(f"{shown(url)}: {error}; {_CREDENTIAL_FIX}")
    return Retry(f"{type(error).__name__}: {error}")
