"""The disk cache folder is untrusted input (issue 15): data not code, checked, never wrong."""

from __future__ import annotations

import functools
import gc
import json
import os
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lk_testdata import IndexDataset, LoggedDataset

from loaderkit import DataError, DataLoaderBuilder, LoaderkitError, PlanError
from loaderkit.runtime.cache.format import CorruptEntryError, code_digest, decode, encode
from loaderkit.runtime.cache.samples import CODE_KEY, IDENTITY_KEY
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(120)

BIG = 10_000  # floats per sample: 40 KB, above diskcache's 32 KB, so each value is a file
MODE_BINARY, MODE_PICKLE = 2, 4  # diskcache's modes of a Cache row


def _builder(ds: Any, workers: int = 0, transform: Any = None) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(ds).with_batch_size(4).with_shuffle().with_seed(5)
    if transform is not None:
        b = b.with_transform(transform)
    return b.with_workers(workers)


def _reference(n: int, dim: int, transform: Any = None) -> list[Any]:
    return collect(_builder(IndexDataset(n, dim=dim), transform=transform).compile().build())


def _rows(folder: Path) -> dict[int, tuple[int, str | None]]:
    """Sample rows of the folder's SQLite file: index -> (mode, value file)."""
    with sqlite3.connect(folder / "cache.db") as con:
        rows = con.execute("SELECT key, mode, filename FROM Cache WHERE typeof(key) = 'integer'")
        out = {key: (mode, filename) for key, mode, filename in rows}
    con.close()
    return out


def _sql(folder: Path, statement: str, *args: Any) -> None:
    con = sqlite3.connect(folder / "cache.db")
    with con:
        con.execute(statement, args)
    con.close()


def _value(folder: Path, key: int) -> bytes:
    with sqlite3.connect(folder / "cache.db") as con:
        ((value,),) = con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchall()
    con.close()
    return bytes(value)


def _fill(folder: Path, n: int, dim: int, workers: int = 0) -> None:
    loader = _builder(IndexDataset(n, dim=dim), workers).with_cache("disk", path=str(folder))
    built = loader.compile().build()
    collect(built)
    built.close()
    del built
    gc.collect()  # closes the loader's SQLite connection
    con = sqlite3.connect(folder / "cache.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole cache in cache.db, as on a copy
    con.close()


class Canary:
    """Unpickling this creates the file at ``path``: code run by reading a cache."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


# -- swapped values ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("where", ["file", "row"])
def test_swapped_values_never_deliver_another_sample(tmp_path, where, workers):
    dim = BIG if where == "file" else 3  # small samples live in the SQLite rows
    folder = tmp_path / "cache"
    _fill(folder, 12, dim)
    rows = _rows(folder)
    assert len(rows) == 12
    if where == "file":
        a, b = rows[2][1], rows[9][1]
        assert a is not None and b is not None
        pa, pb = folder / a, folder / b
        da, db = pa.read_bytes(), pb.read_bytes()
        pa.write_bytes(db)
        pb.write_bytes(da)
    else:
        assert rows[2][1] is None
        va, vb = _value(folder, 2), _value(folder, 9)
        _sql(folder, "UPDATE Cache SET value = ? WHERE key = 2", vb)
        _sql(folder, "UPDATE Cache SET value = ? WHERE key = 9", va)
    loader = _builder(IndexDataset(12, dim=dim), workers).with_cache("disk", path=str(folder))
    built = loader.compile().build()
    assert_batches_equal(collect(built), _reference(12, dim))
    assert built.cache_stats == (10, 2, 0, 2)  # both entries failed their check: reloaded
    again = loader.compile().build()
    assert_batches_equal(collect(again), _reference(12, dim))
    assert again.cache_stats == (12, 0, 0, 0)  # and were stored anew


def test_a_value_stored_under_another_index_is_refused_even_when_identical_in_shape(tmp_path):
    folder = tmp_path / "cache"
    _fill(folder, 6, 3)
    # copy row 1 onto row 4: same format, valid checksum for key 1, wrong for key 4
    _sql(folder, "UPDATE Cache SET value = (SELECT value FROM Cache WHERE key = 1) WHERE key = 4")
    built = _builder(IndexDataset(6), 0).with_cache("disk", path=str(folder)).compile().build()
    batches = collect(built)
    assert_batches_equal(batches, _reference(6, 3))
    assert built.cache_stats is not None and built.cache_stats.corrupt == 1


# -- a damaged SQLite file -----------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "emptied"])
def test_a_damaged_sqlite_file_is_a_loaderkit_error_naming_the_folder(tmp_path, damage, workers):
    folder = tmp_path / "cache"
    _fill(folder, 200, 64)
    db = folder / "cache.db"
    assert not (folder / "cache.db-wal").exists() or (folder / "cache.db-wal").stat().st_size == 0
    data = db.read_bytes()
    if damage == "garbage":
        db.write_bytes(np.random.default_rng(0).bytes(len(data)))
    elif damage == "truncated":
        db.write_bytes(data[: len(data) // 3])
    else:
        db.write_bytes(data[:100])
    plan = _builder(IndexDataset(200, dim=64), workers).with_cache("disk", path=str(folder))
    with pytest.raises(LoaderkitError) as caught:
        collect(plan.compile().build())
    message = str(caught.value)
    assert str(folder) in message and "delete the folder" in message, message
    assert isinstance(caught.value, PlanError | DataError)
    if isinstance(caught.value, PlanError):
        assert caught.value.paths == ("cache.path",)


@pytest.mark.parametrize("policy", ["raise", "skip"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_sqlite_file_damaged_during_a_run_is_a_data_error_naming_the_folder(
    tmp_path, workers, policy
):
    folder = tmp_path / "cache"
    _fill(folder, 40, 64)
    plan = (
        _builder(IndexDataset(40, dim=64), workers)
        .with_error_policy(policy)  # skip: the folder is not a bad sample, never skipped
        .with_cache("disk", path=str(folder))
    )
    loader = plan.compile().build()  # the folder is checked and opened here
    db = folder / "cache.db"
    db.write_bytes(np.random.default_rng(1).bytes(db.stat().st_size))
    with pytest.raises(DataError) as caught:
        collect(loader)
    message = str(caught.value)
    assert f"the disk cache at {str(folder)!r} cannot be used" in message, message
    assert "delete the folder to rebuild the cache" in message


def test_a_cache_path_naming_an_environment_variable_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LK_ELSEWHERE", str(tmp_path / "elsewhere"))
    plan = _builder(IndexDataset(4)).with_cache("disk", path=str(tmp_path / "$LK_ELSEWHERE"))
    with pytest.raises(PlanError, match=r"cache\.path: .* names an environment variable"):
        plan.compile().build()
    assert not (tmp_path / "elsewhere").exists()


def test_a_cache_path_in_the_home_folder_is_the_one_checked_and_used(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    loader = _builder(IndexDataset(4)).with_cache("disk", path="~/cache").compile().build()
    collect(loader)
    assert (tmp_path / "cache" / "cache.db").exists()
    assert list((tmp_path / "work").iterdir()) == []  # no literal "~" folder


def test_inspecting_a_plan_never_opens_its_cache_folder(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "cache.db").write_bytes(b"not a database" * 100)
    plan = _builder(IndexDataset(8)).with_cache("disk", path=str(folder)).compile()
    plan.explain()
    assert plan.fingerprint
    plan.save(tmp_path / "plan.json")
    assert (folder / "cache.db").read_bytes() == b"not a database" * 100
    with pytest.raises(PlanError, match=r"cache\.path: the disk cache at .* delete the folder"):
        plan.build()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO Settings VALUES ('sqlite_temp_store', 2)",
        "INSERT INTO Settings VALUES ('_disk', 'x')",
        "CREATE TRIGGER planted AFTER INSERT ON Cache BEGIN DELETE FROM Cache; END",
        "CREATE VIEW planted AS SELECT 1",
    ],
)
def test_a_sqlite_file_diskcache_did_not_write_is_refused(tmp_path, statement):
    folder = tmp_path / "cache"
    _fill(folder, 6, 3)
    _sql(folder, statement)
    with pytest.raises(PlanError, match=r"cache\.path: the disk cache at .*not a loaderkit"):
        _builder(IndexDataset(6)).with_cache("disk", path=str(folder)).compile().build()


# -- planted pickles and paths -------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("where", ["file", "row"])
def test_a_planted_pickle_never_runs_and_the_sample_is_reloaded(tmp_path, where, workers):
    canary = tmp_path / "canary"
    payload = pickle.dumps(Canary(str(canary)))
    dim = BIG if where == "file" else 3
    folder = tmp_path / "cache"
    _fill(folder, 8, dim)
    rows = _rows(folder)
    if where == "file":  # the value file holds the pickle, its row says "pickled"
        filename = rows[3][1]
        assert filename is not None
        (folder / filename).write_bytes(payload)
        _sql(folder, "UPDATE Cache SET mode = ? WHERE key = 3", MODE_PICKLE)
    else:
        _sql(folder, "UPDATE Cache SET mode = ?, value = ? WHERE key = 3", MODE_PICKLE, payload)
    # the old format exactly: a pickle stored by diskcache for a sample (what loaderkit wrote)
    _sql(folder, "UPDATE Cache SET mode = ?, value = ? WHERE key = 5", MODE_PICKLE, payload)
    loader = _builder(IndexDataset(8, dim=dim), workers).with_cache("disk", path=str(folder))
    built = loader.compile().build()
    assert_batches_equal(collect(built), _reference(8, dim))
    assert not canary.exists()
    assert built.cache_stats == (6, 2, 0, 2)
    assert MODE_PICKLE not in {mode for mode, _ in _rows(folder).values()}


def test_a_planted_pickle_in_the_identity_row_never_runs(tmp_path):
    canary = tmp_path / "canary"
    folder = tmp_path / "cache"
    _fill(folder, 4, 3)
    payload = pickle.dumps(Canary(str(canary)))
    row = "UPDATE Cache SET mode = ?, value = ? WHERE key = ?"
    _sql(folder, row, MODE_PICKLE, payload, IDENTITY_KEY)
    with pytest.raises(PlanError, match=r"cache\.path: the folder .* another dataset"):
        _builder(IndexDataset(4)).with_cache("disk", path=str(folder)).compile().build()
    assert not canary.exists()


def test_a_row_naming_a_file_outside_the_folder_is_never_read_nor_deleted(tmp_path):
    folder = tmp_path / "cache"
    _fill(folder, 6, BIG)
    victim = tmp_path / "victim.val"
    filename = _rows(folder)[2][1]
    assert filename is not None
    victim.write_bytes((folder / filename).read_bytes())  # a valid entry for index 2, outside
    _sql(folder, "UPDATE Cache SET filename = ? WHERE key = 2", os.path.join("..", "victim.val"))
    loader = _builder(IndexDataset(6, dim=BIG)).with_cache("disk", path=str(folder))
    built = loader.compile().build()
    assert_batches_equal(collect(built), _reference(6, BIG))
    assert built.cache_stats is not None and built.cache_stats.corrupt == 1  # not read
    assert victim.exists()  # the row was replaced; diskcache did not delete the outside file


def test_a_value_folder_that_is_a_link_out_of_the_cache_is_never_followed(tmp_path):
    folder = tmp_path / "cache"
    _fill(folder, 6, BIG)
    filename = _rows(folder)[4][1]
    assert filename is not None
    top = folder / filename[:2]
    outside = tmp_path / "outside"
    loader = _builder(IndexDataset(6, dim=BIG)).with_cache("disk", path=str(folder))
    built = loader.compile().build()  # the folder is checked here (a link then is refused)
    top.rename(outside)  # the value file now lives outside, reached through a link
    top.symlink_to(outside, target_is_directory=True)
    assert_batches_equal(collect(built), _reference(6, BIG))
    assert built.cache_stats is not None and built.cache_stats.corrupt >= 1
    assert (outside / filename[3:]).exists()  # replacing the entry did not delete it


# -- what cannot be stored safely ----------------------------------------------------------


class Tagged:
    """A plain object: not stored by the disk cache (it would need pickle)."""

    def __init__(self, value: int) -> None:
        self.value = value


class ObjectSamples(torch.utils.data.Dataset[dict[str, Any]]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": torch.tensor(float(i)), "tag": Tagged(i)}


def keep_samples(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return samples


def test_a_sample_that_cannot_be_stored_safely_is_loaded_each_time(tmp_path):
    folder = tmp_path / "cache"
    plan = (
        DataLoaderBuilder()
        .with_dataset(ObjectSamples(10))
        .with_batch_size(5)
        .with_collator(keep_samples)
        .with_cache("disk", path=str(folder))
        .compile()
    )
    loader = plan.build()
    for _ in range(2):
        got = [s["tag"].value for batch in collect(loader) for s in batch]
        assert got == list(range(10))
    assert loader.cache_stats == (0, 20, 20, 0)
    assert _rows(folder) == {}


# -- the transform's code ------------------------------------------------------------------


def _transform(body: str, params: str = "sample") -> Any:
    """A function named ``bump`` of module ``user_transforms`` whose body is ``body``."""
    scope: dict[str, Any] = {"__name__": "user_transforms"}
    exec(f"def bump({params}):\n    {body}\n", scope)
    return scope["bump"]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_transform_whose_code_changed_is_a_new_cache(tmp_path, workers):
    folder = str(tmp_path / "cache")
    log = tmp_path / "log"
    log.mkdir()
    plus_one = _transform('return {"index": sample["index"], "x": sample["x"] + 1}')
    plus_two = _transform('return {"index": sample["index"], "x": sample["x"] + 2}')
    assert plus_one.__qualname__ == plus_two.__qualname__ == "bump"

    def run(fn: Any) -> tuple[list[Any], Any]:
        ds = LoggedDataset(12, str(log))
        b = _builder(ds, workers, fn).with_cache("disk", stage="transformed", path=folder)
        loader = b.compile().build()
        return collect(loader), loader.cache_stats

    got, stats = run(plus_one)
    assert_batches_equal(got, _reference(12, 3, plus_one))
    assert stats == (0, 12, 0, 0)
    got, stats = run(plus_two)  # same name, other code: new results, every sample loaded
    assert_batches_equal(got, _reference(12, 3, plus_two))
    assert stats == (0, 12, 0, 0)
    same = _transform('return {"index": sample["index"], "x": sample["x"] + 2}')
    got, stats = run(same)  # a new function object with the same code: hits
    assert_batches_equal(got, _reference(12, 3, plus_two))
    assert stats == (12, 0, 0, 0)


def test_the_fetched_stage_keeps_its_samples_when_the_transform_changes(tmp_path):
    folder = str(tmp_path / "cache")
    one = _transform('return {"index": sample["index"], "x": sample["x"] + 1}')
    two = _transform('return {"index": sample["index"], "x": sample["x"] + 2}')
    collect(_builder(IndexDataset(8), 0, one).with_cache("disk", path=folder).compile().build())
    loader = _builder(IndexDataset(8), 0, two).with_cache("disk", path=folder).compile().build()
    assert_batches_equal(collect(loader), _reference(8, 3, two))
    assert loader.cache_stats == (8, 0, 0, 0)


def _scaled(k: float) -> Any:
    def scale(sample: Any) -> Any:
        return sample * k

    return scale


def _with_default(sample: Any, k: float = 1.0) -> Any:
    return sample * k


class Scaler:
    def __init__(self, k: float) -> None:
        self.k = k

    def __call__(self, sample: Any) -> Any:
        return sample * self.k


def test_code_digest_sees_code_constants_closures_defaults_and_attributes():
    def differ(a: Any, b: Any) -> bool:
        return code_digest(a) != code_digest(b)

    assert not differ(_scaled(2.0), _scaled(2.0))
    assert differ(_scaled(2.0), _scaled(3.0))  # a closure value
    assert differ(functools.partial(_with_default, k=2), functools.partial(_with_default, k=3))
    assert differ(
        _transform("return sample * k", "sample, k=1"),
        _transform("return sample * k", "sample, k=2"),
    )
    assert differ(
        _transform("return sample * k", "sample, *, k=1"),
        _transform("return sample * k", "sample, *, k=2"),
    )
    assert differ(_transform("return sample"), _transform("return sample * 1"))
    assert differ(
        _transform("return [x for x in sample]"), _transform("return [x for x in sample if x]")
    )
    assert differ(
        _transform("return (lambda v: v + 1)(sample)"),
        _transform("return (lambda v: v + 2)(sample)"),
    )
    assert not differ(Scaler(2.0), Scaler(2.0))
    assert differ(Scaler(2.0), Scaler(3.0))
    assert differ(_scaled(np.ones(3)), _scaled(np.zeros(3)))
    assert differ(_scaled(torch.ones(3)), _scaled(torch.zeros(3)))
    assert not differ(len, len)


# -- the format ----------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
_arrays = st.builds(
    lambda shape, dtype, seed: np.random.default_rng(seed).integers(0, 99, shape).astype(dtype),
    st.lists(st.integers(0, 4), max_size=3),
    st.sampled_from(["<f4", ">i2", "|u1", "<c8", "?", "<M8[s]"]),
    st.integers(0, 10),
)
_tensors = st.builds(
    lambda shape, dtype: (torch.arange(int(np.prod(shape))) % 7).reshape(shape).to(dtype),
    st.lists(st.integers(0, 4), max_size=3),
    st.sampled_from([torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.uint8]),
)
_samples = st.recursive(
    _scalars | _arrays | _tensors | st.builds(np.float64, st.floats()),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float | np.floating):
        return bool(np.isnan(a) and np.isnan(b)) or (a == b and str(a) == str(b))
    return bool(a == b)


@given(_samples)
def test_an_entry_gives_back_exactly_the_sample(sample):
    entry = encode(b"gen:7", sample)
    assert entry is not None
    assert _same(decode(b"gen:7", entry), sample)
    with pytest.raises(CorruptEntryError):
        decode(b"gen:8", entry)


@given(_samples, st.data())
def test_any_damaged_byte_is_a_corrupt_entry(sample, data):
    entry = bytearray(encode(b"k", sample) or b"")
    at = data.draw(st.integers(0, len(entry) - 1))
    entry[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptEntryError):
        decode(b"k", bytes(entry))
    with pytest.raises(CorruptEntryError):
        decode(b"k", bytes(entry[: data.draw(st.integers(0, len(entry) - 1))]))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.floats() | st.text(max_size=4),
    lambda inner: st.tuples(
        st.sampled_from(["l", "t", "d", "b", "T", "A", "S", "x"]),
        st.lists(
            inner
            | st.sampled_from(["float32", "int64", "bool", "<f4", "|O", "O", "<U2", "V8"])
            | st.lists(st.integers(-1, 9), max_size=3),
            max_size=5,
        ),
    ).map(lambda node: [node[0], *node[1]]),
    max_leaves=20,
)


def _allowed(value: Any) -> bool:
    if value is None or type(value) in (bool, int, float, str, bytes, torch.Tensor, np.ndarray):
        return not isinstance(value, np.ndarray) or not value.dtype.hasobject
    if isinstance(value, np.generic):
        return not value.dtype.hasobject
    if type(value) in (list, tuple):
        return all(_allowed(v) for v in value)
    if type(value) is dict:
        return all(_allowed(k) and _allowed(v) for k, v in value.items())
    return False


@given(_json.map(lambda tree: json.dumps(tree).encode()))
def test_a_crafted_structure_with_a_valid_checksum_gives_plain_data_or_corrupt(header):
    import hashlib
    import struct

    from loaderkit.runtime.cache.format import MAGIC

    body = struct.pack("<I", len(header)) + header + b"\0" * 64 + bytes(range(64))
    entry = MAGIC + hashlib.sha256(b"k" + body).digest() + body
    try:
        value = decode(b"k", entry)
    except CorruptEntryError:
        return
    assert _allowed(value), value


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_a_crafted_header_with_a_valid_checksum_gives_plain_data_or_corrupt(header):
    import hashlib
    import struct

    from loaderkit.runtime.cache.format import MAGIC

    body = struct.pack("<I", len(header)) + header + b"\0" * 64 + b"\x01" * 64
    entry = MAGIC + hashlib.sha256(b"k" + body).digest() + body
    try:
        value = decode(b"k", entry)
    except CorruptEntryError:
        return
    assert value is None or type(value) in (bool, int, float, str)


def test_samples_the_format_does_not_keep_exactly_are_refused():
    from collections import OrderedDict, namedtuple

    point = namedtuple("point", "x y")
    for sample in (
        Tagged(1),
        OrderedDict(a=1),
        point(1, 2),
        torch.ones(2, requires_grad=True),
        torch.nn.Parameter(torch.ones(2)),
        np.array([object()]),
        np.zeros(2, dtype=[("a", "<i4")]),
        {"deep": functools.reduce(lambda acc, _: [acc], range(70), [])},
        bytearray(b"x"),
    ):
        assert encode(b"k", sample) is None, sample


def test_a_cache_folder_of_the_old_pickle_format_is_emptied_and_reused(tmp_path):
    import diskcache

    from loaderkit.runtime.cache.samples import cache_identity

    plan = _builder(IndexDataset(6)).with_cache("disk", path=str(tmp_path / "c")).compile()
    with diskcache.Cache(str(tmp_path / "c")) as old:  # what loaderkit wrote before issue 15
        old.add(IDENTITY_KEY, cache_identity(plan))
        for i in range(6):
            old.set(i, {"index": torch.tensor(99), "x": torch.zeros(3)})
    loader = plan.build()
    assert_batches_equal(collect(loader), _reference(6, 3))
    assert loader.cache_stats == (0, 6, 0, 0)
    with diskcache.Cache(str(tmp_path / "c")) as kept:
        assert kept.get(CODE_KEY) == ""
