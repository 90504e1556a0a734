"""Data files that are not files (issue 22), and what loading a file source writes.

A plan's ``hf_files`` data file is opened only if it is a regular file: a FIFO, a device, a
socket, a directory, a ``/proc`` or ``/sys`` entry, or a link to any of them is refused with a
``PlanError`` naming the file, within seconds, by ``LoaderPlan.load`` (what ``build()`` needs)
and by ``loaderkit validate --data``. Each case runs in a subprocess with a timeout: before
the check, a link to ``/proc/self/pagemap`` made both hang until killed.

Inspecting such a plan writes nothing; building one writes HF ``datasets``'s Arrow cache in
the folder the user chose (``cache_dir``) or in ``HF_DATASETS_CACHE``, and nowhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, PlanError
from loaderkit.datasets import files as lk_files

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, devices and /proc are POSIX"),
]

TIMEOUT = 90
"""Seconds a refusal may take in a subprocess before it counts as a hang (generous: the
machine may be loaded; a refusal takes well under one)."""


def write_rows(path: Path, n: int = 10) -> None:
    path.write_text("".join(json.dumps({"x": i}) + "\n" for i in range(n)), encoding="utf-8")


def make_plan(folder: Path, *, cache_dir: str | None = None) -> Path:
    """A plan file in ``folder`` whose dataset is ``folder/data.jsonl`` (from_files)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_rows(folder / "data.jsonl")
    cache = cache_dir if cache_dir is not None else str(folder / "hf-cache")
    ds = lkd.from_files(folder / "data.jsonl", cache_dir=cache)
    plan = DataLoaderBuilder().with_dataset(ds, name="train").with_batch_size(4).compile()
    path = folder / "plan.toml"
    plan.save(path)
    return path


def env_for(tmp: Path) -> dict[str, str]:
    """The environment of a subprocess whose HF cache, HF home and temp folder are ``tmp``'s."""
    env = dict(os.environ)
    for name in ("HF_DATASETS_CACHE", "HF_HOME", "TMPDIR"):
        (tmp / name).mkdir(parents=True, exist_ok=True)
        env[name] = str(tmp / name)
    env["HF_DATASETS_OFFLINE"] = "1"
    return env


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} did not finish within {TIMEOUT} s (it hangs)")


LOAD = (
    "import sys\n"
    "from loaderkit import LoaderPlan, PlanError\n"
    "try:\n"
    "    LoaderPlan.load(sys.argv[1]).build().close()\n"
    "except PlanError as exc:\n"
    "    print('PlanError', exc)\n"
    "    sys.exit(3)\n"
    "print('built')\n"
)


def _sys_entry() -> str | None:
    for candidate in ("/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/uevent_seqnum"):
        if os.path.isfile(candidate):
            return candidate
    found = next(Path("/sys/kernel").glob("*"), None) if os.path.isdir("/sys/kernel") else None
    return None if found is None else str(found)


def plant(target: Path, kind: str) -> str:
    """Put a ``kind`` of non-file at ``target``; returns what the refusal must name."""
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
        return "a FIFO"
    if kind == "directory":
        target.mkdir()
        return "a directory"
    if kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()  # the socket file stays
        return "a socket"
    links = {
        "dev-zero": "/dev/zero",
        "dev-urandom": "/dev/urandom",
        "proc-pagemap": "/proc/self/pagemap",
        "sys-entry": _sys_entry(),
    }
    link = links[kind]
    if link is None or not os.path.exists(link):
        pytest.skip(f"{kind}: no such file on this machine")
    target.symlink_to(link)
    named = {"proc-pagemap": "an entry of /proc", "sys-entry": "an entry of /sys"}
    return named.get(kind, "a character device")


KINDS = ["fifo", "directory", "socket", "dev-zero", "dev-urandom", "proc-pagemap", "sys-entry"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_data_file_that_is_not_a_regular_file_is_refused_by_load_and_validate(
    tmp_path: Path, kind: str
) -> None:
    plan = make_plan(tmp_path / "plan")
    what = plant(tmp_path / "plan" / "data.jsonl", kind)
    env = env_for(tmp_path / "env")
    loaded = run(["-c", LOAD, str(plan)], env)
    assert loaded.returncode == 3, loaded.stdout + loaded.stderr
    for text in ("dataset.source.options.data_files", "data.jsonl", what, "regular file"):
        assert text in loaded.stdout
    validated = run(["-m", "loaderkit", "validate", "--data", str(plan)], env)
    assert validated.returncode == 1, validated.stdout + validated.stderr
    assert "Traceback" not in validated.stderr
    for text in ("dataset.source.options.data_files", what, "must be a regular file"):
        assert text in validated.stderr


def test_a_glob_matching_a_fifo_is_refused(tmp_path: Path) -> None:
    write_rows(tmp_path / "part-0.jsonl")
    os.mkfifo(tmp_path / "part-1.jsonl")
    with pytest.raises(PlanError, match=r"part-1\.jsonl.* is a FIFO .*must be a regular file"):
        lkd.from_files(str(tmp_path / "part-*.jsonl"), cache_dir=str(tmp_path / "cache"))


def test_a_fifo_put_in_place_after_the_check_is_refused_on_the_open_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "good.jsonl"
    write_rows(good)
    fifo = tmp_path / "data.jsonl"
    os.mkfifo(fifo)
    # the check saw a regular file; by the open, a FIFO is there: the open must not block
    monkeypatch.setattr(lk_files, "regular_file", lambda path: os.stat(good))
    with pytest.raises(PlanError, match="not the regular file it was a moment ago"):
        lk_files.open_regular(str(fifo))


def test_a_regular_file_behind_a_link_is_read(tmp_path: Path) -> None:
    write_rows(tmp_path / "real.jsonl")
    (tmp_path / "data.jsonl").symlink_to(tmp_path / "real.jsonl")
    ds = lkd.from_files(tmp_path / "data.jsonl", cache_dir=str(tmp_path / "cache"))
    assert ds["x"] == list(range(10))


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_inspecting_a_file_source_plan_writes_nothing(tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "plan")
    env = env_for(tmp_path / "env")
    before = _tree(tmp_path / "plan")
    for args in (["explain"], ["validate"], ["diff", str(plan)]):
        result = run(["-m", "loaderkit", *args, str(plan)], env)
        assert result.returncode == 0, result.stdout + result.stderr
    for name in ("HF_DATASETS_CACHE", "HF_HOME", "TMPDIR"):
        assert _tree(tmp_path / "env" / name) == [], name
    assert _tree(tmp_path / "plan") == before


BUILD = (
    "import sys\n"
    "from loaderkit import LoaderPlan\n"
    "with LoaderPlan.load(sys.argv[1]).build() as loader:\n"
    "    print(sum(len(b['x']) for b in loader))\n"
)


def test_building_writes_the_hf_cache_in_cache_dir_and_nowhere_else(tmp_path: Path) -> None:
    folder = tmp_path / "plan"
    plan = make_plan(folder)
    assert 'cache_dir = "hf-cache"' in plan.read_text()  # a path option: relative to the plan
    lk_cache = folder / "hf-cache"
    shutil.rmtree(lk_cache)  # what making the plan wrote: start from nothing
    env = env_for(tmp_path / "env")
    result = run(["-c", BUILD, str(plan)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["10"]
    written = _tree(lk_cache)
    assert any(name.endswith(".arrow") for name in written), written
    assert any(name.endswith("dataset_info.json") for name in written), written
    for name in ("HF_DATASETS_CACHE", "HF_HOME", "TMPDIR"):
        assert _tree(tmp_path / "env" / name) == [], name
    assert sorted(p.name for p in folder.iterdir()) == ["data.jsonl", "hf-cache", "plan.toml"]


def test_without_cache_dir_building_writes_the_hf_cache_in_hf_datasets_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plan"
    folder.mkdir()
    write_rows(folder / "data.jsonl")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "compile-cache")
    ds = lkd.from_files(folder / "data.jsonl")
    plan = folder / "plan.toml"
    DataLoaderBuilder().with_dataset(ds, name="train").with_batch_size(4).compile().save(plan)
    assert "cache_dir" not in plan.read_text()
    env = env_for(tmp_path / "env")
    result = run(["-c", BUILD, str(plan)], env)
    assert result.returncode == 0, result.stdout + result.stderr
    written = _tree(tmp_path / "env" / "HF_DATASETS_CACHE")
    assert any(name.startswith("json") and name.endswith(".arrow") for name in written), written
    assert _tree(tmp_path / "env" / "TMPDIR") == []
    assert sorted(p.name for p in folder.iterdir()) == ["data.jsonl", "plan.toml"]
