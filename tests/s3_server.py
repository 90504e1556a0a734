"""A real S3-protocol server on 127.0.0.1, and a proxy that injects faults on the wire.

Fixtures (registered for the whole suite by ``tests/conftest.py``)::

    def test_x(moto_server, fault_proxy, aws_env):
        # moto_server: the endpoint URL of moto's ThreadedMotoServer (session-scoped, a free
        #   port on 127.0.0.1); a fresh bucket per test from new_bucket(moto_server).
        # fault_proxy: a FaultProxy in front of moto_server (one per test); point a client at
        #   fault_proxy.endpoint, then e.g.
        #     fault_proxy.inject("reset", times=1)         # next answer: reset mid-body
        #     fault_proxy.inject("slowdown", times=2)      # next two: 503 SlowDown
        #     fault_proxy.inject("stall", seconds=5)       # next: no answer for 5 s
        #     fault_proxy.inject("truncate", method="GET") # next GET: body cut, then FIN
        #   faults apply to the next matching requests in order; fault_proxy.requests lists what
        #   passed (method, path, headers, fault) for assertions on retries and headers.
        # aws_env: the standard AWS variables set for moto (and the user's own files hidden).

Faults (:data:`FAULTS`): ``reset`` (headers and half the body, then a TCP reset), ``truncate``
(the headers promise the whole body, half is sent, then the connection closes), ``short``
(the body and its ``Content-Length`` cut to half consistently, the ``Content-Range`` left as
it was: a server that lies), ``status500`` (``500 InternalError``), ``slowdown`` (``503
SlowDown``), ``stall`` (nothing sent for ``seconds``; the proxy lets go at teardown),
``stall_body`` (the headers, then nothing), ``ignore_if_match`` (the request is forwarded
without ``If-Match``: a server that ignores it), ``ignore_range`` (forwarded without
``Range``: a server that answers the whole object). No mock of a client: requests go through
boto3 or urllib3 to moto and back, over sockets.

The shard cache's tests use the same fixtures: a reader pointed at ``fault_proxy.endpoint``
meets the faults a real network has, and ``fault_proxy.requests`` counts what it downloaded.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

FAULTS = (
    "reset",
    "truncate",
    "short",
    "status500",
    "slowdown",
    "stall",
    "stall_body",
    "ignore_if_match",
    "ignore_range",
)

_ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
)


@dataclass
class Fault:
    """One fault waiting for a request: which (method, path substring), how many times."""

    kind: str
    times: int = 1
    method: str | None = None
    path: str | None = None
    seconds: float = 5.0

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or self.path in path
        )


@dataclass
class Seen:
    """One request that passed the proxy, and the fault it met (``None``: none)."""

    method: str
    path: str
    headers: dict[str, str]
    fault: str | None


@dataclass
class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` that injects faults per request."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def inject(
        self,
        kind: str,
        *,
        times: int = 1,
        method: str | None = None,
        path: str | None = None,
        seconds: float = 5.0,
    ) -> None:
        """Make the next ``times`` requests that match (method, path substring) meet ``kind``."""
        assert kind in FAULTS, f"unknown fault {kind!r}; one of {FAULTS}"
        with self.lock:
            self.faults.append(Fault(kind, times, method, path, seconds))

    def take(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    if fault.times <= 0:
                        self.faults.remove(fault)
                    return fault
        return None

    def seen(self, method: str | None = None, fault: str | None = None) -> list[Seen]:
        """The requests that passed, filtered by method and by the fault they met."""
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (fault is None or r.fault == fault)
            ]

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a stalled answer: expected, not news


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: FaultProxy

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest shows what a test prints

    def _body(self) -> bytes | None:
        """The request's body (by its ``Content-Length``, or its chunks)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(length) if length else None

    def _forward(self, headers: dict[str, str]) -> tuple[int, str, list[tuple[str, str]], bytes]:
        body = self._body()
        if body is not None:
            headers = {
                k: v
                for k, v in headers.items()
                if k.lower() not in ("transfer-encoding", "content-length")
            }
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(
            self.owner.upstream.removeprefix("http://"), timeout=60
        )
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            return answer.status, answer.reason, answer.getheaders(), data
        finally:
            upstream.close()

    def _handle(self) -> None:
        fault = self.owner.take(self.command, self.path)
        kind = fault.kind if fault else None
        headers = dict(self.headers.items())
        with self.owner.lock:
            self.owner.requests.append(Seen(self.command, self.path, headers, kind))
        if kind in ("ignore_if_match", "ignore_range"):
            dropped = "if-match" if kind == "ignore_if_match" else "range"
            headers = {k: v for k, v in headers.items() if k.lower() != dropped}
        status, reason, answer_headers, data = self._forward(headers)
        if kind == "stall":
            self.owner.release.wait(fault.seconds if fault else 0)
        if kind in ("status500", "slowdown"):
            self._error(500 if kind == "status500" else 503, kind)
            return
        if kind == "short":
            data = data[: len(data) // 2]
        self.send_response(status, reason)
        for name, value in answer_headers:
            if name.lower() in ("content-length", "transfer-encoding", "connection", "date"):
                continue
            self.send_header(name, value)
        promised = len(data)
        self.send_header("Content-Length", str(promised))
        self.end_headers()
        if kind in ("reset", "truncate") and self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self._cut(reset=kind == "reset")
            return
        if kind == "stall_body":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.owner.release.wait(fault.seconds if fault else 0)
            self._cut(reset=False)
            return
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, kind: str) -> None:
        code = "InternalError" if kind == "status500" else "SlowDown"
        body = _ERROR_XML.format(code=code, message=f"injected {kind}").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _cut(self, *, reset: bool) -> None:
        """Close the client's connection now: a TCP reset (RST) or an ordinary close (FIN)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            if reset:  # SO_LINGER 0: close() sends RST; the files hold the socket open till then
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.rfile.close()
                self.wfile.close()
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_WR)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _handle  # noqa: N815 - the base's names


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """The endpoint of moto's S3 server on a free port of 127.0.0.1 (one per session)."""
    server_module = pytest.importorskip(
        "moto.server", reason="needs moto[server] (the [test] extra)"
    )
    pytest.importorskip("boto3", reason="needs boto3 (the [test] extra)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def fault_proxy(moto_server: str) -> Iterator[FaultProxy]:
    """A :class:`FaultProxy` in front of ``moto_server`` (one per test, stopped after it)."""
    proxy = FaultProxy(moto_server).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> dict[str, str]:
    """The standard AWS variables set for moto; the user's own AWS files and endpoint hidden."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    values = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def new_bucket(endpoint: str) -> str:
    """A new, empty bucket on the server at ``endpoint`` (a unique name per call)."""
    import boto3

    name = f"lk-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=name)
    return name


def raw_client(endpoint: str) -> Any:
    """A plain boto3 client of the server (to put, replace and delete objects behind a store)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
