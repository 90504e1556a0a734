"""The two loaders compose what they share (cursor, skip ledger, state format, pass hooks).

``StreamLoader`` no longer inherits ``Loader``; what users could rely on stays: a stream
loader is still ``isinstance(..., Loader)`` (both implement ``LoaderSurface``, which ``Loader``
recognises, so neither loader module imports the other) and has every
public name a ``Loader`` has, and code above the runtime (Accelerate's gradient state) is
told of every pass of either loader through a pass hook.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import IterableDataset

from loaderkit import DataLoaderBuilder, Loader
from loaderkit.runtime.passes.hooks import PassInfo, add_pass_hook, remove_pass_hook
from loaderkit.runtime.stream.loader import StreamLoader

pytestmark = pytest.mark.timeout(120)


class Numbers(IterableDataset[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def _map() -> Loader:
    return DataLoaderBuilder().with_dataset(torch.arange(10.0)).with_batch_size(4).compile().build()


def _stream() -> Loader:
    return DataLoaderBuilder().with_dataset(Numbers(10)).with_batch_size(4).compile().build()


def test_a_stream_loader_is_a_loader_without_inheriting_one():
    stream = _stream()
    assert type(stream) is StreamLoader
    assert isinstance(stream, Loader) and issubclass(StreamLoader, Loader)
    assert Loader not in StreamLoader.__mro__  # composed, not inherited


def test_a_stream_loader_has_every_public_name_of_a_loader():
    loader, stream = _map(), _stream()
    names = {n for n in dir(loader) if not n.startswith("_")}
    names.discard("global_fingerprint")  # a map-style elastic resume's; a stream has none
    missing = sorted(n for n in names if not hasattr(type(stream), n) and n not in vars(stream))
    assert missing == []
    assert stream.split is None and stream.cache_stats is None and stream.workers_unused is None
    assert stream.sampler.epoch == 0 and stream.repeated_samples == 0


def test_a_pass_hook_sees_every_pass_of_both_loaders_and_hands_its_items_on():
    seen: list[tuple[str, int, int, bool]] = []

    def hook(info: PassInfo, items: Iterator[Any]) -> Iterator[Any]:
        kind = "map" if info.planner is not None else "stream"
        seen.append((kind, info.epoch, info.start, info.skipping))
        return (item for item in items)  # another iterator: what it yields is delivered

    add_pass_hook(hook)
    try:
        loader, stream = _map(), _stream()
        state = loader.state_dict()
        assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        state["batches_delivered"] = 2
        loader.load_state_dict(state)
        assert [b.tolist() for b in loader] == [[8, 9]]
        assert [b.tolist() for b in stream] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    finally:
        remove_pass_hook(hook)
    assert seen == [("map", 0, 0, False), ("map", 0, 2, False), ("stream", 0, 0, False)]
    list(_map())
    assert len(seen) == 3  # removed: told of nothing more


def test_import_loaderkit_registers_accelerates_hook_without_importing_accelerate():
    code = (
        "import sys, loaderkit\n"
        "from loaderkit.runtime.passes import hooks\n"
        "from loaderkit.integrations.gradient_state import pass_hook\n"
        "print(pass_hook in hooks._HOOKS, 'accelerate' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["True", "False", "False"]


def test_a_stream_loader_made_directly_is_a_loader_and_neither_module_imports_the_other():
    code = (
        "import sys\n"
        "from loaderkit.runtime.stream.loader import StreamLoader\n"
        "mods = sys.modules\n"
        "print('loaderkit.runtime.loader' in mods, 'loaderkit.runtime.build' in mods)\n"
        "from loaderkit.runtime.loader import Loader\n"
        "print(issubclass(StreamLoader, Loader), 'loaderkit.runtime.build' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["False", "False", "True", "False"]


def test_the_loader_surface_is_what_either_loader_must_implement():
    from loaderkit.runtime.passes.surface import LoaderSurface

    class Partial(LoaderSurface):
        def __iter__(self) -> Iterator[Any]:
            return iter(())

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]
    assert issubclass(Loader, LoaderSurface) and issubclass(StreamLoader, LoaderSurface)
    assert issubclass(Partial, Loader)  # what Loader recognises: the surface, not a registry
    assert not issubclass(int, Loader)
