"""The local store and what every store shares: ranges, versions, globs, atomic writes, options.

The oracle of the glob patterns is the standard library's own ``glob.glob(recursive=True)``:
:func:`loaderkit.storage.patterns.key_matcher` must name exactly the files it finds, so a
pattern means the same on a disk and in a bucket.
"""

from __future__ import annotations

import glob
import os
import pickle
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import PlanError
from loaderkit.storage import (
    SCHEMES,
    ObjectChangedError,
    RangeRequest,
    StorageError,
    Store,
    check_endpoint,
    check_options,
    option_tables,
    recordable_options,
    scheme_of,
    store_for,
)
from loaderkit.storage.local import LocalStore
from loaderkit.storage.patterns import key_matcher, literal_prefix
from loaderkit.storage.remote import RemoteOptions, check_answer, read_body
from loaderkit.storage.retry import Retry, RetryPolicy, with_retries

pytestmark = pytest.mark.timeout(120)


def _file(tmp_path, name="a.bin", data=bytes(range(256)) * 4):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path), data


def test_reads_ranges_of_the_version_it_was_asked_for(tmp_path):
    path, data = _file(tmp_path)
    store = store_for(path)
    assert isinstance(store, LocalStore) and isinstance(store, Store)
    info = store.stat(path)
    assert info.size == len(data)
    assert store.read(RangeRequest(path, 10, 20, info.version)) == data[10:20]
    assert store.read(RangeRequest(path, 1000, None, info.version)) == data[1000:]
    assert store.read_many([RangeRequest(path, 0, 3), RangeRequest(path, 5, 9)]) == [
        data[:3],
        data[5:9],
    ]
    assert store_for("file://" + path).read(RangeRequest("file://" + path)) == data


def test_a_replaced_file_is_a_changed_object_never_its_new_bytes(tmp_path):
    path, _ = _file(tmp_path)
    store = LocalStore()
    before = store.stat(path)
    _file(tmp_path, data=b"x" * 2000)
    with pytest.raises(ObjectChangedError, match="changed since the dataset was made"):
        store.read(RangeRequest(path, 0, 10, before.version))


def test_a_truncated_file_is_refused_with_its_size(tmp_path):
    path, _ = _file(tmp_path)
    store = LocalStore()
    os.truncate(path, 100)
    with pytest.raises(ObjectChangedError, match="100 bytes"):
        store.read(RangeRequest(path, 50, 200))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    store = LocalStore()
    with pytest.raises(StorageError, match="not a regular file"):
        store.read(RangeRequest(str(fifo)))
    with pytest.raises(StorageError, match="not a regular file"):
        store.stat(str(fifo))
    assert store.glob(str(tmp_path / "*")) == []  # listed only as data files are


def test_glob_spans_folders_with_double_star_and_sorts(tmp_path):
    for name in ("b/x.parquet", "a/x.parquet", "a/deep/er/y.parquet", "a/z.txt"):
        _file(tmp_path, name)
    found = LocalStore().glob(str(tmp_path / "**" / "*.parquet"))
    assert [os.path.relpath(f.url, tmp_path) for f in found] == [
        "a/deep/er/y.parquet",
        "a/x.parquet",
        "b/x.parquet",
    ]


def test_an_atomic_write_leaves_no_temporary_file_when_it_fails(tmp_path):
    target = tmp_path / "shard"
    target.mkdir()  # renaming a file over a folder fails
    with pytest.raises(StorageError, match="writing failed"):
        LocalStore().write(str(target), b"data")
    assert os.listdir(tmp_path) == ["shard"]
    assert os.listdir(target) == []


def test_an_atomic_write_replaces_the_file_and_reports_its_version(tmp_path):
    path, _ = _file(tmp_path)
    info = LocalStore().write(path, b"new bytes")
    with open(path, "rb") as f:
        assert f.read() == b"new bytes"
    assert info.size == 9 and info == LocalStore().stat(path)
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]
    assert not stat.S_ISLNK(os.lstat(path).st_mode)


# -- patterns: the stdlib's glob is the oracle -----------------------------------------------

_NAMES = ["a.bin", "b.txt", "d/a.bin", "d/e/a.bin", "d/e/f/c.bin", "dx/a.bin", "[x].bin"]
_PATTERNS = [
    "*.bin",
    "*",
    "?.bin",
    "d/*",
    "d/*.bin",
    "**/*.bin",
    "**/a.bin",
    "d/**/a.bin",
    "d/**",
    "**",
    "d*/*.bin",
    "[ab].*",
    "[!a].*",
    "d/e/?/c.bin",
    "[[]x].bin",
    "d/**/*",
]


@pytest.mark.parametrize("pattern", _PATTERNS)
def test_key_patterns_name_what_glob_finds(tmp_path, pattern):
    for name in _NAMES:
        _file(tmp_path, name, b"1")
    root = str(tmp_path) + os.sep
    expected = sorted(
        p[len(root) :] for p in glob.glob(root + pattern, recursive=True) if os.path.isfile(p)
    )
    matcher = key_matcher(pattern)
    assert sorted(n for n in _NAMES if matcher.match(n)) == expected
    assert all(n.startswith(literal_prefix(pattern)) for n in expected)


# -- answers checked, retries bounded ---------------------------------------------------------


def test_check_answer_refuses_a_wrong_version_or_range_and_sizes_the_body():
    request = RangeRequest("s3://b/k", 10, 20, '"v1"')
    assert check_answer(request, etag='"v1"', content_range="bytes 10-19/100", length=10) == 10
    with pytest.raises(ObjectChangedError, match="changed"):
        check_answer(request, etag='"v2"', content_range="bytes 10-19/100", length=10)
    with pytest.raises(ObjectChangedError, match="shorter"):
        check_answer(request, etag='"v1"', content_range="bytes 10-14/15", length=5)
    with pytest.raises(Retry):
        check_answer(request, etag='"v1"', content_range="bytes 0-9/100", length=10)
    with pytest.raises(StorageError, match="Range requests"):
        check_answer(request, etag='"v1"', content_range=None, length=100)


def test_read_body_never_returns_short_or_long_data():
    chunks = iter([b"abc", b""])
    with pytest.raises(Retry, match="truncated answer: 3 of 5"):
        read_body(lambda n: next(chunks), 5, float("inf"))
    data = iter([b"abcde", b"f"])
    with pytest.raises(Retry, match="more than"):
        read_body(lambda n: next(data), 5, float("inf"))
    with pytest.raises(Retry, match="too long"):
        read_body(lambda n: b"a", 5, 0.0)


def test_retries_are_bounded_and_the_error_names_the_url_and_the_attempts():
    calls = []

    def attempt() -> bytes:
        calls.append(1)
        raise Retry("503 SlowDown")

    with pytest.raises(StorageError) as caught:
        with_retries("s3://b/k", "GET", attempt, RetryPolicy(2, 0.001, 0.002), "the fix")
    assert len(calls) == 3
    message = str(caught.value)
    assert "'s3://b/k'" in message and "3 time(s)" in message and message.endswith("the fix")
    assert isinstance(caught.value, OSError)


def test_remote_options_are_checked_with_their_path():
    with pytest.raises(PlanError, match=r"storage_options.max_in_flight: must be >= 1"):
        RemoteOptions(max_in_flight=0)
    with pytest.raises(PlanError, match=r"storage_options.read_timeout"):
        RemoteOptions(read_timeout=float("nan"))


# -- schemes and options ----------------------------------------------------------------------


def test_schemes_and_their_errors():
    assert scheme_of("/x") == scheme_of("c:/x") == scheme_of("file:///x") == "file"
    assert scheme_of("S3://b/k") == "s3"
    assert {"file", "s3", "http", "https"} <= set(SCHEMES)
    with pytest.raises(StorageError, match=r"storage\.googleapis\.com"):
        store_for("gs://bucket/key")
    with pytest.raises(StorageError, match="supported: file, http, https, s3"):
        store_for("ftp://host/x")


def test_unknown_options_are_refused_with_a_suggestion():
    with pytest.raises(PlanError, match=r"storage_options.endpoint: unknown key.*endpoint_url"):
        check_options("s3://b/k", {"endpoint": "http://x"})
    with pytest.raises(PlanError, match="local paths take no storage_options"):
        store_for("/data/x", {"region": "eu"})


def test_secrets_are_declared_once_and_never_recorded():
    safe, secret = option_tables("s3://b/k")
    assert "endpoint_url" in safe and "aws_secret_access_key" in secret and not safe & secret
    assert option_tables("https://h/x")[1] == {"headers"}
    assert recordable_options("s3://b/k", {"region": "eu-west-1"}) == {"region": "eu-west-1"}
    with pytest.raises(PlanError, match="credentials never go into"):
        recordable_options("s3://b/k", {"region": "x", "aws_secret_access_key": "s"})
    with pytest.raises(PlanError, match=r"storage_options\.headers"):
        recordable_options("https://h/x", {"headers": {"Authorization": "Bearer t"}})


def test_a_plan_file_cannot_send_credentials_to_an_endpoint_the_user_did_not_name(monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    evil = {"endpoint_url": "https://evil.example"}
    check_endpoint("s3://b/k", evil, from_plan_file=False)  # the caller's own options
    with pytest.raises(PlanError) as caught:
        check_endpoint("s3://b/k", evil, from_plan_file=True)
    assert caught.value.paths == ("storage_options.endpoint_url",)
    assert "https://evil.example" in str(caught.value) and "trusted" in str(caught.value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://evil.example:443/")
    check_endpoint("s3://b/k", evil, from_plan_file=True)  # the user names it too
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://mine.example")
    with pytest.raises(PlanError, match=r"your configuration names 'https://mine\.example'"):
        check_endpoint("s3://b/k", evil, from_plan_file=True)
    check_endpoint("s3://b/k", {**evil, "anonymous": True}, from_plan_file=True)
    check_endpoint("s3://b/k", evil, from_plan_file=True, caller_options=evil)
    check_endpoint("s3://b/k", {"region": "x"}, from_plan_file=True)  # the user's endpoint
    with pytest.raises(PlanError, match="a plan file holds a credential"):
        check_endpoint("s3://b/k", {"aws_access_key_id": "k"}, from_plan_file=True)
    with pytest.raises(PlanError, match=r"storage_options\.headers"):
        check_endpoint(
            "https://evil.example/x",
            {},
            from_plan_file=True,
            caller_options={"headers": {"Authorization": "Bearer t"}},
        )


@settings(max_examples=30)
@given(start=st.integers(0, 2000), length=st.integers(0, 2000))
def test_any_range_reads_the_bytes_or_refuses(tmp_path_factory, start, length):
    path, data = _file(tmp_path_factory.mktemp("r"))
    end = start + length
    request = RangeRequest(path, start, end)
    if end <= len(data):
        assert LocalStore().read(request) == data[start:end]
    else:
        with pytest.raises(ObjectChangedError):
            LocalStore().read(request)


def test_stores_pickle_without_their_clients():
    from loaderkit.storage.s3 import S3Store

    store = S3Store(endpoint_url="http://127.0.0.1:1", aws_secret_access_key="s3cret")
    assert "s3cret" not in repr(store)
    again = pickle.loads(pickle.dumps(store))
    assert again.endpoint_url == "http://127.0.0.1:1" and again._client is None
