"""The http(s):// store against a real server: moto's S3 server answers plain ranged GETs.

A public-read object in moto is also at ``http://127.0.0.1:<port>/<bucket>/<key>`` (path style, no
signature needed), with ETags, ``Range`` and ``If-Match`` handled as a web server does; faults
are injected on the wire by ``tests/s3_server.py``'s proxy.
"""

from __future__ import annotations

import os

import pytest
from s3_server import new_bucket, raw_client

from loaderkit.storage import ObjectChangedError, RangeRequest, StorageError, store_for

pytestmark = pytest.mark.timeout(180)

DATA = os.urandom(200_000)
FAST = {"backoff": 0.01, "max_backoff": 0.05}


@pytest.fixture
def obj(moto_server):
    bucket = new_bucket(moto_server)
    raw_client(moto_server).put_object(Bucket=bucket, Key="d/a.bin", Body=DATA, ACL="public-read")
    return bucket, "d/a.bin"


def _url(endpoint, obj):
    return f"{endpoint}/{obj[0]}/{obj[1]}"


def test_stat_ranges_and_read_many(moto_server, obj):
    url = _url(moto_server, obj)
    store = store_for(url, FAST)
    info = store.stat(url)
    assert info.size == len(DATA) and info.version
    assert store.read(RangeRequest(url, 0, None, info.version)) == DATA
    assert store.read(RangeRequest(url, 7, 70_000, info.version)) == DATA[7:70_000]
    ranges = [RangeRequest(url, i * 3000, i * 3000 + 2500, info.version) for i in range(30)]
    assert store.read_many(ranges) == [DATA[r.start : r.end] for r in ranges]


@pytest.mark.parametrize("fault", ["reset", "truncate", "short", "slowdown", "stall"])
def test_faults_are_retried_and_the_bytes_are_right(moto_server, obj, fault_proxy, fault):
    url = _url(fault_proxy.endpoint, obj)
    store = store_for(url, {**FAST, "read_timeout": 0.5})
    version = store.stat(url).version
    fault_proxy.inject(fault, times=2, method="GET", seconds=30)
    assert store.read(RangeRequest(url, 100, 150_000, version)) == DATA[100:150_000]
    assert len(fault_proxy.seen("GET")) == 3
    assert fault_proxy.seen("GET")[-1].headers["If-Match"] == version


def test_a_fault_that_persists_is_an_error_naming_the_url(moto_server, obj, fault_proxy):
    url = _url(fault_proxy.endpoint, obj)
    fault_proxy.inject("truncate", times=100, method="GET")
    with pytest.raises(StorageError, match=r"3 time\(s\).*IncompleteRead"):
        store_for(url, {**FAST, "retries": 2}).read(RangeRequest(url, 0, 100_000))


@pytest.mark.parametrize("ignored", [False, True], ids=["if-match", "server-ignores-if-match"])
def test_a_replaced_file_is_a_changed_object(moto_server, obj, fault_proxy, ignored):
    url = _url(fault_proxy.endpoint, obj)
    store = store_for(url, FAST)
    version = store.stat(url).version
    raw_client(moto_server).put_object(
        Bucket=obj[0], Key=obj[1], Body=b"z" * len(DATA), ACL="public-read"
    )
    if ignored:
        fault_proxy.inject("ignore_if_match", method="GET")
    with pytest.raises(ObjectChangedError, match="changed"):
        store.read(RangeRequest(url, 0, 10, version))


def test_a_server_that_ignores_range_is_refused_not_sliced(moto_server, obj, fault_proxy):
    url = _url(fault_proxy.endpoint, obj)
    fault_proxy.inject("ignore_range", method="GET")
    with pytest.raises(StorageError, match="answers Range requests"):
        store_for(url, FAST).read(RangeRequest(url, 10, 20))


def test_glob_is_not_possible_over_http_and_writes_are_refused(moto_server, obj):
    store = store_for(_url(moto_server, obj), FAST)
    with pytest.raises(StorageError, match="list the URLs themselves"):
        store.glob(f"{moto_server}/{obj[0]}/d/*.bin")
    assert [i.size for i in store.glob(_url(moto_server, obj))] == [len(DATA)]
    with pytest.raises(StorageError, match="read-only"):
        store.write(_url(moto_server, obj), b"x")


def test_a_missing_file_and_a_password_in_the_url(moto_server, obj):
    store = store_for(_url(moto_server, obj), FAST)
    with pytest.raises(StorageError, match="404"):
        store.read(RangeRequest(f"{moto_server}/{obj[0]}/nothing"))
    with pytest.raises(ObjectChangedError, match="gone"):
        store.read(RangeRequest(f"{moto_server}/{obj[0]}/nothing", 0, 1, '"v"'))
    with pytest.raises(StorageError, match="user or password"):
        store.read(RangeRequest("http://me:pw@127.0.0.1:1/x"))


def test_headers_are_sent_and_never_shown(moto_server, obj, fault_proxy):
    url = _url(fault_proxy.endpoint, obj)
    store = store_for(url, {"headers": {"Authorization": "Bearer s3cret"}, **FAST})
    assert store.read(RangeRequest(url, 0, 4)) == DATA[:4]
    assert fault_proxy.seen("GET")[-1].headers["Authorization"] == "Bearer s3cret"
    assert "s3cret" not in repr(store)
