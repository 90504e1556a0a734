"""The disk cache in a hostile environment (issue 22): other writers, planted links, a damaged
index while a run goes, a full disk.

Another user is simulated in two ways: by rewriting the folder with plain file and SQLite
operations (no loaderkit code, re-signing entries with whatever the folder holds: what any
writer of the folder can do), and, where the tests run as root, by a forked child that has
switched to the ``nobody`` user with ``os.setuid``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lk_testdata import IndexDataset

from loaderkit import DataError, DataLoaderBuilder, LoaderkitError, PlanError
from loaderkit.runtime.cache.samples import CODE_KEY, IDENTITY_KEY
from loaderkit.runtime.cache.trust import KEY_BYTES, key_path
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(180)

BIG = 10_000  # floats per sample: 40 KB, above diskcache's 32 KB, so each value is a file
ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


@pytest.fixture(autouse=True)
def _own_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder of this test: the key of shared folders is made there."""
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config


def _builder(n: int, dim: int = 3, workers: int = 0) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(n, dim=dim))
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(5)
        .with_workers(workers)
    )


def _reference(n: int, dim: int = 3) -> list[Any]:
    return collect(_builder(n, dim).compile().build())


def _run(folder: Path, n: int, dim: int = 3, workers: int = 0, shared: bool = False) -> Any:
    """One run over the cache at ``folder``: its batches and stats."""
    plan = _builder(n, dim, workers).with_cache("disk", path=str(folder), shared=shared)
    loader = plan.compile().build()
    batches = collect(loader)
    stats = loader.cache_stats
    loader.close()
    del loader
    gc.collect()  # closes the loader's SQLite connection
    return batches, stats


def _delivered(batches: list[Any], reference: list[Any]) -> dict[int, tuple[int, list[float]]]:
    """Sample index (as the reference orders them) -> ``(index, x)`` the batches delivered."""
    out: dict[int, tuple[int, list[float]]] = {}
    for batch, expected in zip(batches, reference, strict=True):
        pairs = zip(expected["index"].tolist(), batch["index"].tolist(), batch["x"], strict=True)
        for wanted, index, x in pairs:
            out[wanted] = (index, x.tolist())
    return out


# -- the attack: rewrite and re-sign entries with what the folder holds ---------------------


def _resign(entry: bytes, key: bytes) -> bytes:
    """The entry re-signed for ``key`` the way the folder's entries are (a sha256)."""
    body = entry[40:]
    return entry[:8] + hashlib.sha256(key + body).digest() + body


def _set_first_float(entry: bytes, value: float) -> bytes:
    """The entry with the first float of its ``x`` tensor replaced by ``value``."""
    body = entry[40:]
    (size,) = struct.unpack_from("<I", body)
    header = json.loads(body[4 : 4 + size])
    start = 4 + size + (-(40 + 4 + size) % 64)
    x_node = header[header.index("x") + 1]  # ["T", "float32", shape, offset, length]
    at = 40 + start + x_node[3]
    return entry[:at] + struct.pack("<f", value) + entry[at + 4 :]


def forge(folder: Path) -> None:
    """Serve sample 3 as sample 5 and sample 4 with x[0] = 666.0: SQLite and hashlib only.

    What any writer of the folder can do: the checksum of an entry covers its key, which is
    ``generation:index`` where the generation is a sha256 of two rows the folder holds.
    """
    db = folder / "cache.db"
    forged = folder / "forged.db"
    shutil.copyfile(db, forged)
    con = sqlite3.connect(forged)
    rows = dict(con.execute("SELECT key, value FROM Cache WHERE typeof(key) = 'text'"))
    identity, code = rows[IDENTITY_KEY], rows[CODE_KEY].split("\n")[0]
    generation = hashlib.sha256(f"{identity}\n{code}".encode()).hexdigest()[:32]

    def key(index: int) -> bytes:
        return f"{generation}:{index}".encode()

    def value(index: int) -> bytes:
        ((found,),) = con.execute("SELECT value FROM Cache WHERE key = ?", (index,))
        return bytes(found)

    three, four = value(3), value(4)
    with con:
        con.execute("UPDATE Cache SET value = ? WHERE key = 5", (_resign(three, key(5)),))
        poisoned = _resign(_set_first_float(four, 666.0), key(4))
        con.execute("UPDATE Cache SET value = ? WHERE key = 4", (poisoned,))
    con.close()
    os.replace(forged, db)  # a writer of the folder replaces the index


def test_the_forgery_is_well_formed_and_served_where_the_owner_made_it(tmp_path):
    """The attack works on a folder that only its owner writes (the owner is trusted).

    This is what makes the tests below able to fail: the same forgery, in a folder others
    can write, must be refused or caught.
    """
    folder = tmp_path / "cache"
    _run(folder, 12)
    forge(folder)
    batches, stats = _run(folder, 12)
    served = _delivered(batches, _reference(12))
    assert served[5] == (3, [0.0, 3.0, 6.0])  # sample 3 served as sample 5
    assert served[4] == (4, [666.0, 4.0, 8.0])
    assert stats.corrupt == 0


@pytest.mark.parametrize("mode", [0o777, 0o722])
def test_a_folder_others_can_write_is_refused_naming_it_and_the_fix(tmp_path, mode):
    folder = tmp_path / "cache"
    _run(folder, 12)
    folder.chmod(mode)
    forge(folder)
    with pytest.raises(PlanError) as caught:
        _run(folder, 12)
    assert caught.value.paths == ("cache.path",)
    message = str(caught.value)
    assert repr(str(folder)) in message
    assert f"other users can write {str(folder)!r} (mode {mode:04o})" in message
    assert "private folder" in message and "shared=True" in message


@pytest.mark.parametrize("workers", [0, 2])
def test_a_shared_folder_never_serves_forged_entries(tmp_path, workers):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    _, stats = _run(folder, 12, workers=workers, shared=True)
    assert stats.misses == 12
    forge(folder)
    batches, stats = _run(folder, 12, workers=workers, shared=True)
    assert_batches_equal(batches, _reference(12))
    assert (stats.hits, stats.corrupt) == (10, 2)  # both forged entries caught, recomputed
    again, stats = _run(folder, 12, workers=workers, shared=True)
    assert_batches_equal(again, _reference(12))
    assert (stats.hits, stats.corrupt) == (12, 0)  # and stored anew, signed


def test_a_private_folder_switched_to_shared_starts_anew(tmp_path):
    folder = tmp_path / "cache"
    _run(folder, 8)
    _, stats = _run(folder, 8, shared=True)
    assert (stats.hits, stats.misses, stats.corrupt) == (0, 8, 0)  # emptied, not "corrupt"
    _, stats = _run(folder, 8, shared=True)
    assert stats.hits == 8


def test_the_key_of_shared_folders_is_private_and_outside_the_folder(tmp_path):
    folder = tmp_path / "cache"
    _run(folder, 4, shared=True)
    key = key_path()
    assert key.parent.parent == tmp_path / "config"
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == KEY_BYTES
    assert key.parent.stat().st_mode & 0o777 == 0o700
    assert not any(p.name == key.name for p in folder.rglob("*"))


def _key_readable(key: Path) -> None:
    key.chmod(0o644)


def _key_linked(key: Path) -> None:
    elsewhere = key.parent.parent / "elsewhere.key"
    elsewhere.write_bytes(key.read_bytes())
    elsewhere.chmod(0o600)
    key.unlink()
    key.symlink_to(elsewhere)


def _key_short(key: Path) -> None:
    key.write_bytes(b"short")


def _key_folder_open(key: Path) -> None:
    key.parent.chmod(0o777)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_key_readable, "other users can read or write the key file"),
        (_key_linked, "cannot be opened safely"),
        (_key_short, f"does not hold {KEY_BYTES} bytes"),
        (_key_folder_open, "the folder of the key file"),
    ],
)
def test_a_key_file_others_could_read_or_change_is_refused(tmp_path, damage, said):
    folder = tmp_path / "cache"
    _run(folder, 4, shared=True)
    damage(key_path())
    with pytest.raises(PlanError) as caught:
        _run(folder, 4, shared=True)
    assert caught.value.paths == ("cache.shared",)
    assert said in str(caught.value) and str(key_path()) in str(caught.value)


def test_a_key_file_inside_the_cache_folder_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / "config"))
    with pytest.raises(PlanError, match=r"cache\.shared: .*lies inside the cache folder"):
        _run(folder, 4, shared=True)


def test_a_parent_others_can_write_is_refused_unless_sticky(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)  # others may rename our folder away and put theirs in its place
    with pytest.raises(PlanError, match=r"other users can write .*scratch.* no sticky bit"):
        _run(scratch / "cache", 4)
    scratch.chmod(0o1777)  # as /tmp: others cannot rename what they do not own
    _, stats = _run(scratch / "cache", 4)
    assert stats.misses == 4
    assert (scratch / "cache").stat().st_mode & 0o777 == 0o700  # made private


def test_a_subfolder_others_can_write_is_refused(tmp_path):
    folder = tmp_path / "cache"
    _run(folder, 6, dim=BIG)
    sub = next(p for p in folder.iterdir() if p.is_dir())
    sub.chmod(0o777)
    with pytest.raises(PlanError, match=r"other users can write .*\(mode 0777\)"):
        _run(folder, 6, dim=BIG)


def test_a_value_file_others_can_write_is_never_read(tmp_path):
    folder = tmp_path / "cache"
    _run(folder, 6, dim=BIG)
    files = list(folder.rglob("*.val"))
    assert len(files) == 6
    files[0].chmod(0o666)
    batches, stats = _run(folder, 6, dim=BIG)
    assert_batches_equal(batches, _reference(6, BIG))
    assert stats.corrupt == 1


# -- a second user, where the tests run as root ----------------------------------------------


def _as_nobody(action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child that has become the ``nobody`` user."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
            code = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit 1
            print(f"the other user's action failed: {exc!r}", file=sys.stderr)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user's action failed"


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to become another user"
)


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder like ``/tmp`` that the other user can reach (pytest's folders are private)."""
    folder = Path(tempfile.mkdtemp(prefix="lk-hostile-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_another_user_writing_a_scratch_folder_is_refused_and_caught_when_shared(reachable):
    folder = reachable / "scratch"
    folder.mkdir()
    folder.chmod(0o777)  # a world-writable team or scratch folder
    _run(folder, 12, shared=True)

    def attack() -> None:
        assert os.getuid() == NOBODY
        forge(folder)  # as nobody: the index is replaced by theirs, re-signed

    _as_nobody(attack)
    assert (folder / "cache.db").stat().st_uid == NOBODY
    with pytest.raises(PlanError, match=r"owned by another user|other users can write"):
        _run(folder, 12)  # without the opt-in: refused
    batches, stats = _run(folder, 12, shared=True)
    assert_batches_equal(batches, _reference(12))
    assert (stats.hits, stats.corrupt) == (10, 2)


@needs_root
def test_a_folder_another_user_owns_is_refused(reachable):
    folder = reachable / "theirs"

    def make() -> None:
        folder.mkdir(mode=0o755)

    _as_nobody(make)
    with pytest.raises(PlanError) as caught:
        _run(folder, 4)
    assert f"{str(folder)!r} is owned by another user (uid {NOBODY})" in str(caught.value)
    assert "shared=True" in str(caught.value)


@needs_root
def test_another_users_index_is_a_clear_error_not_damage(reachable):
    folder = reachable / "scratch"
    folder.mkdir()
    folder.chmod(0o777)
    _run(folder, 4, shared=True)  # root's index: read-only for the other user
    said: list[str] = []

    def use() -> None:
        os.environ["XDG_CONFIG_HOME"] = str(reachable / "nobody-config")
        try:
            _run(folder, 4, shared=True)
        except PlanError as exc:
            said.append(str(exc))
        assert said and "its SQLite file is read-only for you" in said[0], said
        assert "damaged" not in said[0]

    _as_nobody(use)


@needs_root
def test_a_folder_a_group_can_write_is_refused(tmp_path):
    folder = tmp_path / "cache"
    _run(folder, 4)
    os.chown(folder, -1, NOBODY)  # a group other than the user's own
    folder.chmod(0o770)
    with pytest.raises(PlanError, match=r"other users can write .* \(mode 0770\)"):
        _run(folder, 4)


# -- planted links ----------------------------------------------------------------------------


def _plant_value_links(folder: Path, outside: Path) -> None:
    for k in range(256):
        name = folder / f"{k:02x}"
        if name.is_dir() and not name.is_symlink():
            shutil.rmtree(name)
        name.symlink_to(outside, target_is_directory=True)


def test_value_folders_planted_as_links_are_refused_and_nothing_lands_outside(tmp_path):
    folder, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    folder.mkdir(mode=0o700)
    _plant_value_links(folder, outside)
    for _ in range(2):
        with pytest.raises(PlanError, match=r"cache\.path: .* is a symbolic link .*delete it"):
            _run(folder, 10, dim=BIG)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("workers", [0, 2])
def test_links_planted_during_a_run_are_never_followed(tmp_path, workers):
    folder, outside = tmp_path / "cache", tmp_path / "outside"
    outside.mkdir()
    plan = _builder(10, BIG, workers).with_cache("disk", path=str(folder), shared=True)
    for _ in range(2):
        loader = plan.compile().build()  # the folder is checked here
        _plant_value_links(folder, outside)  # and changed before the first sample is stored
        assert_batches_equal(collect(loader), _reference(10, BIG))
        stats = loader.cache_stats
        assert stats is not None and stats.not_stored == 10  # none could be stored safely
        loader.close()
        assert list(outside.iterdir()) == []
        for link in folder.iterdir():
            if link.is_symlink():
                link.unlink()


@pytest.mark.parametrize("name", ["cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal"])
def test_index_files_planted_as_links_are_refused(tmp_path, name):
    folder, other = tmp_path / "cache", tmp_path / "other"
    _run(folder, 6)
    _run(other, 6)  # a valid cache elsewhere: the link would lead to it
    target = other / "cache.db"
    before = target.read_bytes()
    planted = folder / name
    if planted.exists():
        planted.unlink()
    planted.symlink_to(target)
    with pytest.raises(PlanError, match=rf"cache\.path: .*{name}' is a symbolic link"):
        _run(folder, 6)
    assert target.read_bytes() == before


@pytest.mark.parametrize("workers", [0, 2])
def test_a_journal_planted_as_a_link_during_a_run_is_a_loaderkit_error(tmp_path, workers):
    folder, outside = tmp_path / "cache", tmp_path / "outside"
    outside.write_bytes(b"keep")
    loader = _builder(10, 3, workers).with_cache("disk", path=str(folder)).compile().build()
    (folder / "cache.db-journal").symlink_to(outside)
    with pytest.raises(DataError, match=r"the disk cache at .* cannot be used"):
        collect(loader)
    loader.close()
    assert outside.read_bytes() == b"keep"


# -- a damaged index while a run goes ----------------------------------------------------------

_RUNNER = """
import sys
from lk_testdata import IndexDataset
from loaderkit import DataLoaderBuilder, LoaderkitError

from pathlib import Path

folder, workers, stop = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
plan = (
    DataLoaderBuilder().with_dataset(IndexDataset(400, dim=256)).with_batch_size(8)
    .with_shuffle().with_workers(workers).with_cache("disk", path=folder)
)
try:
    loader = plan.compile().build()
    for epoch in range(10_000):
        if stop.exists():
            break
        loader.set_epoch(epoch)
        for batch in loader:
            pass
        print("epoch", epoch, flush=True)
except LoaderkitError as exc:
    print("LOADERKIT", type(exc).__name__, str(exc)[:300], flush=True)
    sys.exit(3)
print("DONE", loader.cache_stats, flush=True)
"""


def _spawn(tmp_path: Path, script: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    path = tmp_path / "runner.py"
    path.write_text(textwrap.dedent(script), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests" / "built")]))
    return subprocess.Popen(
        [sys.executable, str(path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


@pytest.mark.timeout(240)
# each file once and each worker count once by default (every pair: -m slow)
@pytest.mark.parametrize(
    ("target", "workers"),
    [
        pytest.param("cache.db-shm", 0, marks=pytest.mark.slow),
        ("cache.db-shm", 2),
        ("cache.db-wal", 0),
        pytest.param("cache.db-wal", 2, marks=pytest.mark.slow),
        ("cache.db", 0),
        pytest.param("cache.db", 2, marks=pytest.mark.slow),
    ],
)
def test_an_index_truncated_during_a_run_never_kills_the_process(tmp_path, target, workers):
    folder, stop = tmp_path / "cache", tmp_path / "stop"
    proc = _spawn(tmp_path, _RUNNER, str(folder), str(workers), str(stop))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the first epoch filled the cache
        assert line.startswith("epoch"), line + proc.stderr.read() if proc.stderr else ""
        # the index itself: until the run fails (bounded); files it does not use: 3 s
        deadline = time.monotonic() + (120.0 if target == "cache.db" else 3.0)
        while time.monotonic() < deadline and proc.poll() is None:
            with open(folder / target, "wb"):  # truncated to 0 bytes (made if missing)
                pass
            time.sleep(0.01)
        stop.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if target == "cache.db":
        assert proc.returncode == 3, err[-2000:]  # a loaderkit error, named, not a signal
        assert "LOADERKIT DataError" in out and str(folder) in out, out[-1000:]
    else:  # files the index does not use: the run goes on to the end
        assert proc.returncode == 0 and "DONE" in out, (proc.returncode, err[-2000:])


# -- a full disk ----------------------------------------------------------------------------

_FULL = """
import resource, sys
import numpy as np
import torch
from loaderkit import DataLoaderBuilder

folder, dim, workers, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


class Arrays(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return {"index": i, "x": np.arange(dim, dtype=np.float32) * i}


def keep(samples):  # no tensor crosses from a worker: no shared memory file to write
    return samples


def flat(loader):
    return [(s["index"], s["x"].tolist()) for batch in loader for s in batch]


base = (
    DataLoaderBuilder().with_dataset(Arrays()).with_batch_size(4).with_collator(keep)
    .with_shuffle().with_workers(workers)
)
plain = base.compile().build()
loader = base.with_cache("disk", path=folder).compile().build()  # the folder is made here
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
for epoch in range(2):
    plain.set_epoch(epoch)
    loader.set_epoch(epoch)
    assert flat(loader) == flat(plain), epoch
print("STATS", *loader.cache_stats, flush=True)
"""


@pytest.mark.timeout(240)
# value files; rows of the SQLite file: each once and each worker count once by default
@pytest.mark.parametrize(
    ("dim", "workers"),
    [
        (BIG, 0),
        pytest.param(BIG, 2, marks=pytest.mark.slow),
        pytest.param(2_000, 0, marks=pytest.mark.slow),
        (2_000, 2),
    ],
)
def test_a_full_disk_stores_nothing_more_and_the_batches_stay_right(tmp_path, dim, workers):
    folder = tmp_path / "cache"
    limit = 30_000  # bytes a file may hold: a 40 KB value file cannot be written
    proc = _spawn(tmp_path, _FULL, str(folder), str(dim), str(workers), str(limit))
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 0, err[-3000:]
    hits, misses, not_stored, corrupt = map(int, out.split("STATS")[1].split())
    assert hits + misses == 80 and corrupt == 0
    assert not_stored > 0
    if dim == BIG:
        assert (hits, not_stored) == (0, 80)  # no value file could be written
        assert not list(folder.rglob("*.val"))  # and none is left half written


def test_a_write_failure_other_than_room_is_a_loaderkit_error(tmp_path):
    folder = tmp_path / "cache"
    loader = _builder(8).with_cache("disk", path=str(folder)).compile().build()
    con = sqlite3.connect(folder / "cache.db")
    with con:  # planted after the folder was checked: every write now fails
        con.execute("CREATE TRIGGER t BEFORE INSERT ON Cache BEGIN SELECT RAISE(ABORT, 'x'); END")
    con.close()
    with pytest.raises(LoaderkitError, match=r"the disk cache at .* cannot be used"):
        collect(loader)


def test_a_system_that_cannot_refuse_links_gets_no_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setattr("loaderkit.runtime.cache.disk.SUPPORTED", False)
    with pytest.raises(PlanError, match=r"cache\.storage: a disk cache needs a POSIX system"):
        _run(tmp_path / "cache", 4)
    assert not (tmp_path / "cache").exists()


def test_spawned_workers_check_signatures_with_the_same_key(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    folder.chmod(0o777)
    plan = (
        _builder(12)
        .with_workers(2, start_method="spawn")
        .with_cache("disk", path=str(folder), shared=True)
    )
    first = plan.compile().build()
    collect(first)
    first.close()
    forge(folder)
    loader = plan.compile().build()
    assert_batches_equal(collect(loader), _reference(12))
    stats = loader.cache_stats
    assert stats is not None and (stats.hits, stats.corrupt) == (10, 2)
    loader.close()


# -- another process holding the index's lock ------------------------------------------------


def test_every_connection_waits_for_another_writers_lock(tmp_path: Path) -> None:
    """diskcache opens a folder with a timeout of 0 (it retries some statements itself, not
    all); the connection still waits for another process's lock.

    Workers open the folder at once while another one writes: without the wait, opening it
    raised "database is locked" (seen with 2 workers on a loaded machine).
    """
    from loaderkit.runtime.cache.disk import connect

    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    for timeout in (0, 60):  # during diskcache's __init__, then after it
        con = connect(str(folder), timeout)
        try:
            assert con.execute("PRAGMA busy_timeout").fetchone()[0] >= 60_000
        finally:
            con.close()
