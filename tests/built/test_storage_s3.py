"""The s3:// store against a real S3-protocol server (moto on 127.0.0.1), faults on the wire.

Requests go through boto3 to moto's server over sockets; faults are injected between them by
``tests/s3_server.py``'s proxy (a reset mid-body, 500, 503 SlowDown, a stalled server, a
truncated body, a server that ignores If-Match). Each test asserts the bytes a read returns
(the right ones, or an error naming the object: never short or mixed data) and, through the
proxy's log, how many attempts were made. No test times anything.
"""

from __future__ import annotations

import os
import pickle

import pytest
from s3_server import new_bucket, raw_client

from loaderkit import PlanError
from loaderkit.storage import ObjectChangedError, RangeRequest, StorageError, store_for
from loaderkit.storage import s3 as s3_module
from loaderkit.storage.options import check_endpoint

pytestmark = pytest.mark.timeout(180)

MiB = 1 << 20
DATA = os.urandom(300_000)
FAST = {"backoff": 0.01, "max_backoff": 0.05, "addressing_style": "path"}


def _store(endpoint, **options):
    return store_for(
        "s3://x/y",
        {
            "endpoint_url": endpoint,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "region": "us-east-1",
            **FAST,
            **options,
        },
    )


@pytest.fixture
def bucket(moto_server):
    name = new_bucket(moto_server)
    raw_client(moto_server).put_object(Bucket=name, Key="data/a.bin", Body=DATA)
    return name


def test_stat_read_ranges_and_read_many(moto_server, bucket):
    store = _store(moto_server)
    url = f"s3://{bucket}/data/a.bin"
    info = store.stat(url)
    assert info.size == len(DATA) and info.version.startswith('"')
    assert store.read(RangeRequest(url, 0, None, info.version)) == DATA
    assert store.read(RangeRequest(url, 1000, 2000, info.version)) == DATA[1000:2000]
    assert store.read(RangeRequest(url, 299_000)) == DATA[299_000:]
    ranges = [RangeRequest(url, i * 4096, (i + 1) * 4096, info.version) for i in range(64)]
    assert store.read_many(ranges) == [DATA[r.start : r.end] for r in ranges]


def test_a_large_read_is_fetched_as_parts_of_one_version(moto_server, bucket, fault_proxy):
    store = _store(fault_proxy.endpoint, part_bytes=64 * 1024, max_in_flight=4)
    url = f"s3://{bucket}/data/a.bin"
    assert store.read(RangeRequest(url, 0, len(DATA))) == DATA
    gets = fault_proxy.seen("GET")
    assert len(gets) == 5  # ceil(300,000 / 65,536)
    versions = {r.headers.get("If-Match") for r in gets}
    assert len(versions) == 1 and None not in versions  # pinned by a HEAD first


def test_every_read_sends_the_expected_version(moto_server, bucket, fault_proxy):
    store = _store(fault_proxy.endpoint)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    store.read(RangeRequest(url, 0, 10, version))
    assert fault_proxy.seen("GET")[-1].headers["If-Match"] == version


@pytest.mark.parametrize("ignored", [False, True], ids=["if-match", "server-ignores-if-match"])
def test_an_object_replaced_during_the_run_is_a_changed_object(
    moto_server, bucket, fault_proxy, ignored
):
    store = _store(fault_proxy.endpoint)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    assert store.read(RangeRequest(url, 0, 100, version)) == DATA[:100]
    raw_client(moto_server).put_object(Bucket=bucket, Key="data/a.bin", Body=b"n" * len(DATA))
    if ignored:
        fault_proxy.inject("ignore_if_match", method="GET")
    with pytest.raises(ObjectChangedError, match=rf"s3://{bucket}/data/a.bin.*changed"):
        store.read(RangeRequest(url, 0, 100, version))


def test_a_deleted_object_is_a_changed_object_and_a_missing_one_a_storage_error(
    moto_server, bucket
):
    store = _store(moto_server)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    raw_client(moto_server).delete_object(Bucket=bucket, Key="data/a.bin")
    with pytest.raises(ObjectChangedError, match="gone"):
        store.read(RangeRequest(url, 0, 10, version))
    with pytest.raises(StorageError, match="no such object"):
        store.read(RangeRequest(url))
    with pytest.raises(StorageError, match="no such object"):
        store.stat(url)


@pytest.mark.parametrize("fault", ["reset", "truncate", "short", "status500", "slowdown"])
def test_a_fault_in_passing_is_retried_and_the_bytes_are_right(
    moto_server, bucket, fault_proxy, fault
):
    store = _store(fault_proxy.endpoint)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    fault_proxy.inject(fault, times=2, method="GET")
    assert store.read(RangeRequest(url, 0, len(DATA), version)) == DATA
    assert len(fault_proxy.seen("GET", fault)) == 2
    assert len(fault_proxy.seen("GET")) == 3


@pytest.mark.parametrize("fault", ["reset", "truncate", "short", "slowdown"])
def test_a_fault_that_persists_is_an_error_naming_the_object_and_the_attempts(
    moto_server, bucket, fault_proxy, fault
):
    store = _store(fault_proxy.endpoint, retries=2)
    url = f"s3://{bucket}/data/a.bin"
    fault_proxy.inject(fault, times=100, method="GET")
    with pytest.raises(StorageError) as caught:
        store.read(RangeRequest(url, 0, len(DATA)))
    message = str(caught.value)
    assert url in message and "3 time(s)" in message and "retries" in message
    assert len(fault_proxy.seen("GET")) == 3


@pytest.mark.parametrize("fault", ["stall", "stall_body"])
def test_a_stalled_server_is_a_timeout_then_a_retry(moto_server, bucket, fault_proxy, fault):
    store = _store(fault_proxy.endpoint, read_timeout=0.5, connect_timeout=2)
    url = f"s3://{bucket}/data/a.bin"
    fault_proxy.inject(fault, method="GET", seconds=30)
    assert store.read(RangeRequest(url, 0, 5000)) == DATA[:5000]
    assert len(fault_proxy.seen("GET")) == 2
    fault_proxy.inject(fault, times=100, method="GET", seconds=30)
    with pytest.raises(StorageError, match=r"2 time\(s\)"):
        _store(fault_proxy.endpoint, read_timeout=0.5, retries=1).read(RangeRequest(url, 0, 10))


def test_read_many_with_faults_among_many_requests(moto_server, bucket, fault_proxy):
    store = _store(fault_proxy.endpoint, max_in_flight=8)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    fault_proxy.inject("reset", times=3, method="GET")
    fault_proxy.inject("slowdown", times=3, method="GET")
    ranges = [RangeRequest(url, i * 1000, i * 1000 + 999, version) for i in range(40)]
    assert store.read_many(ranges) == [DATA[r.start : r.end] for r in ranges]


def test_a_range_past_the_end_is_a_shorter_object(moto_server, bucket):
    store = _store(moto_server)
    url = f"s3://{bucket}/data/a.bin"
    version = store.stat(url).version
    with pytest.raises(ObjectChangedError, match="shorter"):
        store.read(RangeRequest(url, len(DATA) - 10, len(DATA) + 10, version))
    with pytest.raises(ObjectChangedError, match="shorter"):
        store.read(RangeRequest(url, len(DATA) + 10, len(DATA) + 20, version))


def test_glob_lists_every_page_and_matches_keys(moto_server, monkeypatch):
    bucket = new_bucket(moto_server)
    client = raw_client(moto_server)
    keys = [f"train/{i % 3}/part-{i:03}.parquet" for i in range(20)] + ["train/x.txt", "t.parquet"]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    monkeypatch.setattr(s3_module, "LIST_PAGE", 3)  # 7 pages for the 20 keys under train/
    store = _store(moto_server)
    found = store.glob(f"s3://{bucket}/train/**/*.parquet")
    assert [f.url for f in found] == sorted(f"s3://{bucket}/{k}" for k in keys[:20])
    assert all(f.size == len(f.url) - len(f"s3://{bucket}/") for f in found)
    assert [f.url for f in store.glob(f"s3://{bucket}/train/1/*")] == sorted(
        f"s3://{bucket}/{k}" for k in keys[:20] if k.startswith("train/1/")
    )
    assert store.glob(f"s3://{bucket}/nothing/*") == []
    assert [f.url for f in store.glob(f"s3://{bucket}/t.parquet")] == [f"s3://{bucket}/t.parquet"]


def test_write_is_one_put_and_reads_back(moto_server):
    bucket = new_bucket(moto_server)
    store = _store(moto_server)
    info = store.write(f"s3://{bucket}/out/shard-0", b"payload")
    assert info == store.stat(f"s3://{bucket}/out/shard-0")
    assert store.read(RangeRequest(info.url, 0, None, info.version)) == b"payload"


def test_the_standard_configuration_is_enough(moto_server, bucket, aws_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    store = store_for(f"s3://{bucket}/data/a.bin", {"addressing_style": "path"})
    assert store.read(RangeRequest(f"s3://{bucket}/data/a.bin", 0, 5)) == DATA[:5]
    check_endpoint(
        f"s3://{bucket}/data/a.bin", {"endpoint_url": moto_server + "/"}, from_plan_file=True
    )


def test_the_config_files_endpoint_counts_as_the_users(moto_server, aws_env, tmp_path):
    config = tmp_path / "aws-config"
    config.write_text(f"[default]\nendpoint_url = {moto_server}\n")
    check_endpoint("s3://b/k", {"endpoint_url": moto_server}, from_plan_file=True)
    with pytest.raises(PlanError, match="AWS config file"):
        check_endpoint("s3://b/k", {"endpoint_url": "http://127.0.0.2:1"}, from_plan_file=True)


def test_missing_credentials_say_how_to_set_them(moto_server, bucket, aws_env, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    store = store_for(
        f"s3://{bucket}/data/a.bin", {"endpoint_url": moto_server, "retries": 0, **FAST}
    )
    with pytest.raises(StorageError, match="AWS_ACCESS_KEY_ID"):
        store.stat(f"s3://{bucket}/data/a.bin")
    raw_client(moto_server).put_object(
        Bucket=bucket, Key="public.bin", Body=DATA, ACL="public-read"
    )
    anonymous = store_for(
        f"s3://{bucket}/public.bin", {"endpoint_url": moto_server, "anonymous": True, **FAST}
    )
    assert anonymous.read(RangeRequest(f"s3://{bucket}/public.bin", 0, 3)) == DATA[:3]


def test_a_store_crosses_to_another_process_by_pickle(moto_server, bucket):
    store = _store(moto_server)
    url = f"s3://{bucket}/data/a.bin"
    store.read(RangeRequest(url, 0, 1))  # the client and pool exist now
    again = pickle.loads(pickle.dumps(store))
    assert again.read(RangeRequest(url, 5, 9)) == DATA[5:9]


def test_a_server_that_is_not_there_is_a_storage_error_naming_the_endpoint():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = _store(f"http://127.0.0.1:{port}", retries=1, connect_timeout=1)
    with pytest.raises(StorageError, match=rf"127.0.0.1:{port}.*is up"):
        store.read(RangeRequest("s3://b/k", 0, 10))
