"""Every import path that moved keeps working, as the same objects (loaderkit.runtime.moved)."""

from __future__ import annotations

import importlib
import pickle
import re

import pytest

from loaderkit.runtime.moved import MOVED_MODULES, MOVED_NAMES


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    before = importlib.import_module(old)
    after = importlib.import_module(new)
    assert before is after
    assert after.__spec__ is not None and after.__spec__.name == new  # its own spec kept
    assert after.__name__ == new  # so pickles name the new path


@pytest.mark.parametrize(
    ("package", "name", "module"),
    sorted((p, n, m) for p, names in MOVED_NAMES.items() for n, m in names.items()),
)
def test_an_old_name_reads_from_its_new_module(package: str, name: str, module: str) -> None:
    got = getattr(importlib.import_module(package), name)
    assert got is getattr(importlib.import_module(module), name)
    assert pickle.loads(pickle.dumps(got)) is got


def test_a_name_that_never_was_is_an_attribute_error() -> None:
    stream = importlib.import_module("loaderkit.runtime.stream")
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = stream.Nothing


def test_the_documented_old_paths_are_served() -> None:
    from loaderkit.runtime.outcomes import RESOURCE_ERRNOS
    from loaderkit.runtime.state import STATE_VERSION
    from loaderkit.runtime.stream_read import SHARD_HOOK, WORKER_SPLIT

    from loaderkit.runtime.records import RESOURCE_ERRNOS as NOW
    from loaderkit.runtime.stream import StreamLoader

    assert RESOURCE_ERRNOS is NOW
    assert isinstance(STATE_VERSION, int)
    assert StreamLoader.__module__ == "loaderkit.runtime.stream.loader"
    assert isinstance(SHARD_HOOK, str) and isinstance(WORKER_SPLIT, str)


def test_every_name_of_loaderkit_loaders_is_on_the_api_page_and_is_re_exported() -> None:
    from pathlib import Path

    import loaderkit.loaders as loaders

    page = (Path(__file__).resolve().parents[2] / "docs" / "api" / "loader.md").read_text()
    documented = set(re.findall(r"^::: loaderkit\.loaders\.(\w+)$", page, flags=re.M))
    assert documented == set(loaders.__all__)
    for name in loaders.__all__:
        value = getattr(loaders, name)
        home = getattr(value, "__module__", None)
        if isinstance(value, type):  # a class: re-exported from where it is defined
            assert home is not None and home.startswith("loaderkit."), name
            assert home != "loaderkit.loaders", name
