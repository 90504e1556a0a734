"""Copy-on-read, seen before it bites (issue 29): large Python containers a dataset holds.

A ``Dataset`` of the user's own class that holds a large list (``self.items = [...]``) is
copied page by page into each worker that reads it. ``build()`` warns once and ``explain()``
names each such container, its length, the estimated copy per worker and the one-line fix
(:mod:`loaderkit.runtime.workers.copy_on_read`). These tests pin when it speaks and when it does
not,
that it runs none of the dataset's code to find out, and, with ``psutil``, that the growth it
warns about is real and that the fix it names removes it.
"""

from __future__ import annotations

import logging
import multiprocessing
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset

import loaderkit
from loaderkit import DataLoaderBuilder
from loaderkit.runtime.workers import copy_on_read
from loaderkit.runtime.workers.copy_on_read import ATTRIBUTES, held_containers

N = 20_000
"""Items of a container that is reported (at least 10,000 and over 1 MB)."""


def _dicts(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "label": i % 10, "score": i * 0.5, "tag": f"t{i % 97}"} for i in range(n)]


class Annotations(Dataset[Any]):
    """The common case: the samples held as a Python list, read by ``__getitem__``."""

    def __init__(self, items: Any) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self.items[i]


class Held(Annotations):
    """Holds whatever it is given besides the items (``extra``)."""

    def __init__(self, n: int, **extra: Any) -> None:
        super().__init__(list(range(n)))  # small ints: shared objects, nothing copied
        for name, value in extra.items():
            setattr(self, name, value)


def _builder(dataset: Any, workers: int = 2) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(dataset).with_batch_size(64)
    return b.with_workers(workers, timeout=120) if workers else b


def _built(
    builder: DataLoaderBuilder, caplog: pytest.LogCaptureFixture, **kw: Any
) -> tuple[str, list[str]]:
    """(explain, the copy-on-read warnings) of the loader ``builder`` builds."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        loader = builder.build(**kw)
    try:
        return loader.explain(), [m for m in caplog.messages if "copy-on-read" in m]
    finally:
        loader.close()


def _storage(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("  storage     ")]


# -- when it speaks -------------------------------------------------------------------------


def test_a_list_a_tuple_and_a_dict_are_each_named_with_length_size_and_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dataset = Held(
        N,
        records=_dicts(N),
        paths=tuple(f"/data/images/{i:08d}.jpg" for i in range(N)),
        by_name={f"name{i}": (i, f"caption {i}") for i in range(N)},
        labels=[i * 1000 for i in range(50_000)],  # 32 bytes an int: 1.6 MB
    )
    text, warnings = _built(_builder(dataset), caplog)
    lines = _storage(text)
    assert len(lines) == 4, text
    records, paths, by_name, labels = lines
    assert "Held.records (list of 20,000 items)" in records
    assert "Held.paths (tuple of 20,000 items)" in paths
    assert "Held.by_name (dict of 20,000 items)" in by_name
    assert "Held.labels (list of 50,000 items)" in labels
    assert "fix: self.records = loaderkit.datasets.flat(self.records) in Held.__init__" in records
    assert "fix: self.paths = loaderkit.datasets.flat(self.paths)" in paths
    assert "self.by_name = loaderkit.datasets.flat(list(self.by_name.values()))" in by_name
    assert "fix: self.labels = numpy.asarray(self.labels)" in labels  # numbers: an array
    for line in lines:
        assert line.startswith("  storage     'dataset': Python objects in Held.")
        mb = float(re.search(r"each worker that reads them copies about ([0-9.]+) MB", line)[1])  # type: ignore[index]
        both = float(re.search(r", ([0-9.]+) MB for 2 workers", line)[1])  # type: ignore[index]
        assert 1.0 <= mb < 50 and both == pytest.approx(2 * mb, abs=0.11), line
    # the estimate of a list of small dicts: ~190 bytes each (the dict and its three objects)
    assert "about 3.8 MB" in records
    assert len(warnings) == 1, warnings  # once per build, naming every container
    (warning,) = warnings
    for where in ("Held.records", "Held.paths", "Held.by_name", "Held.labels"):
        assert where in warning
    assert "each of the 2 workers will copy about" in warning
    assert "loaderkit.datasets.flat(self.records)" in warning


def test_the_fix_named_works_and_silences_it(caplog: pytest.LogCaptureFixture) -> None:
    samples = _dicts(N)
    dataset = Held(N, records=samples, labels=[i * 1000 for i in range(N)])
    dataset.records = loaderkit.datasets.flat(dataset.records)  # the fixes the lines name
    dataset.labels = np.asarray(dataset.labels)
    text, warnings = _built(_builder(dataset), caplog)
    assert _storage(text) == [] and warnings == []
    assert dataset.records[123] == samples[123] and int(dataset.labels[5]) == 5000


def test_nested_datasets_and_small_containers_are_looked_into(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = Held(N, columns={"path": [f"p{i}" for i in range(N)], "label": np.arange(N)})
    dataset = Subset(ConcatDataset([inner, Annotations(_dicts(N))]), list(range(100)))
    text, warnings = _built(_builder(dataset), caplog)
    lines = _storage(text)
    assert len(lines) == 2 and len(warnings) == 1, text
    assert "Held.columns['path'] (in Subset.dataset.datasets[0]) (list of 20,000" in lines[0]
    assert "fix: self.columns['path'] = loaderkit.datasets.flat(self.columns['path'])" in lines[0]
    assert "Annotations.items (in Subset.dataset.datasets[1])" in lines[1]
    assert "label" not in text.split("storage", 1)[1]  # a numpy column is not copied


def test_each_source_of_a_mixture_and_each_part_of_a_split(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mixture = (
        DataLoaderBuilder()
        .with_mixture({"code": Annotations(_dicts(N)), "text": Annotations(_dicts(N))})
        .with_batch_size(64)
        .with_workers(2, timeout=120)
    )
    text, warnings = _built(mixture, caplog)
    lines = _storage(text)
    assert [line.split(":")[0].split()[-1] for line in lines] == ["'code'", "'text'"], text
    assert len(warnings) == 1 and "dataset 'code', 'text'" in warnings[0]
    split = _builder(Annotations(_dicts(N))).with_split(val=0.1)
    for part in ("train", "val"):
        text, warnings = _built(split, caplog, split=part)
        assert len(_storage(text)) == 1 and len(warnings) == 1, part


@pytest.mark.timeout(300)
def test_a_stream_read_by_workers(caplog: pytest.LogCaptureFixture) -> None:
    class Lines(IterableDataset[Any]):
        def __init__(self, lines: list[str]) -> None:
            self.lines = lines

        def __iter__(self) -> Iterator[Any]:
            return iter(self.lines)

    builder = (
        DataLoaderBuilder().with_dataset(Lines([f"line {i}" for i in range(N)])).with_batch_size(64)
    )
    text, warnings = _built(builder.with_workers(2, timeout=120), caplog)
    (line,) = _storage(text)
    assert "Lines.lines (list of 20,000 items)" in line and len(warnings) == 1
    text, warnings = _built(builder, caplog)
    assert _storage(text) == [] and warnings == []


@pytest.mark.timeout(300)
def test_autotune_trials_say_nothing_the_loader_built_after_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = _builder(Annotations(_dicts(N)), workers=1).compile()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        tuned, report = plan.autotune(
            budget_s=60, num_workers=(1,), prefetch_factors=(2,), warmup_batches=1, batches=2
        )
    assert report.trials  # loaders were built and read, with a worker
    assert not [m for m in caplog.messages if "copy-on-read" in m]
    text, warnings = _built(tuned, caplog)  # type: ignore[arg-type]
    assert len(warnings) == 1 and len(_storage(text)) == 1


# -- when it does not ------------------------------------------------------------------------


def test_silent_without_workers(caplog: pytest.LogCaptureFixture) -> None:
    text, warnings = _built(_builder(Annotations(_dicts(N)), workers=0), caplog)
    assert _storage(text) == [] and warnings == []


def test_silent_for_a_source_read_in_the_main_process(caplog: pytest.LogCaptureFixture) -> None:
    dataset = TensorDataset(torch.arange(N))
    dataset.notes = _dicts(N)  # type: ignore[attr-defined]  # held, but never read by workers
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        loader = _builder(dataset).build()
    try:
        assert loader.workers_unused is not None  # no worker starts: nothing is copied
        assert _storage(loader.explain()) == []
        assert not [m for m in caplog.messages if "copy-on-read" in m]
    finally:
        loader.close()


@pytest.mark.parametrize(
    "value",
    [
        np.arange(N * 10),
        torch.arange(N * 10),
        np.asarray([f"s{i}" for i in range(N)]),  # fixed-width strings: one buffer
        "x" * (N * 100),
        b"x" * (N * 100),
        list(range(-5, 257)) * 100,  # shared small ints only: nothing to copy
        _dicts(9_999),  # under 10,000 items
        [None] * (N * 10),
    ],
    ids=["numpy", "tensor", "numpy-str", "str", "bytes", "small-ints", "short", "none"],
)
def test_silent_for_what_workers_do_not_copy(value: Any) -> None:
    assert held_containers(Held(10, value=value)) == ()


def test_a_numpy_array_of_python_objects_is_copied() -> None:
    records = np.empty(N, dtype=object)
    records[:] = _dicts(N)
    ints = np.asarray(range(1000, 1000 + 3 * N), dtype=object)  # Python ints: 1.9 MB
    held, numbers = held_containers(Held(10, records=records, ints=ints))
    assert held.kind == "object array" and held.length == N and not held.numbers
    assert held.fix().startswith("self.records = loaderkit.datasets.flat(list(self.records))")
    assert numbers.kind == "object array" and not numbers.numbers  # numpy.asarray keeps objects
    assert numbers.fix().startswith("self.ints = loaderkit.datasets.flat(list(self.ints))")


def test_flat_samples_and_an_arrow_table_are_not_copied() -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"id": list(range(N)), "tag": [f"t{i}" for i in range(N)]})
    assert held_containers(Held(10, items_flat=loaderkit.datasets.flat(_dicts(N)), t=table)) == ()


def test_loaderkits_own_classes_are_not_reported() -> None:
    tokens = loaderkit.datasets.load("tokens", n=10)
    tokens.cache = _dicts(N)  # type: ignore[attr-defined]  # loaderkit's class: not the user's fix
    assert held_containers(tokens) == ()
    assert len(held_containers(Held(10, wrapped=Annotations(_dicts(N))))) == 1


# -- hostile datasets -----------------------------------------------------------------------


class _Loud(list):  # type: ignore[type-arg]
    """A list whose own ``len()`` and indexing raise."""

    def __len__(self) -> int:
        raise RuntimeError("len() of the user's")

    def __getitem__(self, i: Any) -> Any:
        raise RuntimeError("indexing of the user's")


class Hostile(Dataset[Any]):
    """Every hook that could run code of the user's records it and raises."""

    ran: list[str] = []  # noqa: RUF012 - shared on purpose: what ran, across instances

    def __init__(self) -> None:
        self.items = _Loud(_dicts(N))
        self.__dict__["not an identifier\x1b[31m"] = _dicts(N)
        self.__dict__[7] = _dicts(N)  # not even a string

    @property
    def data(self) -> Any:
        Hostile.ran.append("property")
        raise RuntimeError("a property of the user's")

    def __getattr__(self, name: str) -> Any:
        Hostile.ran.append(f"__getattr__ {name}")
        raise AttributeError(name)

    def __getattribute__(self, name: str) -> Any:
        if name not in ("__dict__", "items", "__class__"):
            Hostile.ran.append(f"__getattribute__ {name}")
        return object.__getattribute__(self, name)

    def __sizeof__(self) -> int:
        Hostile.ran.append("__sizeof__")
        raise RuntimeError("__sizeof__ of the user's")

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> Any:
        return {"i": i}


def test_none_of_the_datasets_code_runs_and_names_are_escaped() -> None:
    Hostile.ran.clear()
    held = held_containers(Hostile())
    assert Hostile.ran == []
    wheres = [h.where for h in held]
    assert wheres == [
        "Hostile.items",  # the list's own length, not the override's
        "Hostile.__dict__['not an identifier\\x1b[31m']",
        "Hostile.__dict__[7]",
    ]
    assert held[0].length == N
    assert all("\x1b" not in h.describe(2) and "\x1b" not in h.fix() for h in held)


def test_a_class_with_an_odd_name_and_slots() -> None:
    class Slotted(Dataset[Any]):
        __slots__ = ("empty", "rows")

        def __init__(self) -> None:
            self.rows = _dicts(N)

        def __len__(self) -> int:
            return N

        def __getitem__(self, i: int) -> Any:
            return self.rows[i]

    Slotted.__qualname__ = "Slotted\u202e\x07"
    (held,) = held_containers(Slotted())
    assert held.where == "Slotted\\u202e\\x07.rows"  # escaped: text of the user's


def test_bounded_whatever_the_object_holds() -> None:
    many = Held(10, **{f"a{i}": _dicts(20) for i in range(100_000)})
    many.z_last = _dicts(N)  # type: ignore[attr-defined]  # past the first ATTRIBUTES: not seen
    started = time.perf_counter()
    assert held_containers(many) == ()
    assert time.perf_counter() - started < 2
    big = Held(10, **{f"a{i}": _dicts(N) for i in range(ATTRIBUTES // 16)})
    assert len(held_containers(big)) == copy_on_read.REPORTED  # the first ones
    cycle = Held(10)
    cycle.me = cycle  # type: ignore[attr-defined]
    cycle.rows = _dicts(N)  # type: ignore[attr-defined]
    assert len(held_containers(cycle)) == 1
    deep: Any = Annotations(_dicts(N))
    for _ in range(10):
        deep = Subset(deep, [0])
    assert held_containers(deep) == ()  # deeper than DEPTH datasets: not looked into


# -- where loaderkit stores it flat by itself: a dict's Python list columns ------------------


class _Opaque:
    """Pickles only by failing."""

    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle '_Opaque' object")


class _Tagged(list):  # type: ignore[type-arg]
    """A list subclass: its own indexing may differ, so it is left as it is."""


def _columns(n: int) -> dict[str, Any]:
    return {
        "text": [f"line {i}" for i in range(n)],
        "ids": tuple([i, i + 1] for i in range(n)),
        "label": np.arange(n),
    }


def _column_batches(loader: Any) -> list[Any]:
    return [(b["text"], b["ids"].tolist(), b["label"].tolist()) for b in loader]


@pytest.mark.timeout(300)
def test_a_dicts_list_columns_are_stored_flat_for_workers() -> None:
    columns = _columns(N)
    base = DataLoaderBuilder().with_dataset(columns).with_batch_size(500).with_shuffle()
    want = _column_batches(base.build())
    with base.with_workers(2, timeout=120).build() as loader:
        (line,) = _storage(loader.explain())
        assert _column_batches(loader) == want
    assert "'dataset': flat, " in line
    assert "2 workers read 20,000 samples of the Python list columns 'text', 'ids'" in line
    assert "label" not in line  # a numpy column is gathered: nothing to store
    assert _storage(base.build().explain()) == []  # no workers: nothing is copied
    with base.with_dataset(columns, storage="objects").with_workers(2, timeout=120).build() as lo:
        assert _storage(lo.explain()) == [
            "  storage     'dataset': Python objects (storage='objects': the Python list "
            "columns 'text', 'ids')"
        ]
        assert _column_batches(lo) == want
    small = base.with_dataset(_columns(100)).with_workers(2, timeout=120).build()
    with small:
        assert "fewer than the 10,000 it stores flat; storage='flat'" in small.explain()
    with base.with_dataset(_columns(100), storage="flat").build() as flat:
        assert "flat, " in flat.explain()
    assert isinstance(columns["text"], list)  # the user's dict is left as it was


@pytest.mark.timeout(300)
def test_list_columns_that_cannot_be_stored_flat(caplog: pytest.LogCaptureFixture) -> None:
    columns = _columns(N)
    columns["handle"] = [_Opaque() if i == 777 else i for i in range(N)]
    columns["tagged"] = _Tagged(range(N))
    base = DataLoaderBuilder().with_batch_size(100)
    with pytest.raises(loaderkit.DataError, match=r"column 'handle': sample 777 does not pickle"):
        base.with_dataset(columns, storage="flat").build()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        loader = base.with_dataset(columns).with_workers(2, timeout=120).build()
    with loader:
        (line,) = _storage(loader.explain())
        source = loader._fetcher.source.data
    assert "column 'handle': sample 777 does not pickle" in line
    assert any("sample 777 does not pickle" in m for m in caplog.messages)
    assert type(source["handle"]) is list and type(source["tagged"]) is _Tagged
    assert isinstance(source["text"], loaderkit.datasets.FlatSamples)


# -- the scenario: the growth is real, the fix removes it ---------------------------


def _children() -> set[int]:
    import psutil

    return {child.pid for child in psutil.Process().children()}


def _worker_uss_mb(earlier: set[int]) -> list[float]:
    """USS (MB) of this process's forked children (its loader workers) not in ``earlier``."""
    import psutil

    me = psutil.Process()
    line = me.cmdline()
    return [
        child.memory_full_info().uss / 1e6
        for child in me.children()
        if child.pid not in earlier and child.cmdline() == line  # not the resource tracker
    ]


def _epoch_uss(dataset: Any, caplog: pytest.LogCaptureFixture) -> tuple[list[float], str, int]:
    """Worker USS after one shuffled epoch (workers alive), explain, copy-on-read warnings."""
    builder = (
        DataLoaderBuilder()
        .with_dataset(dataset)
        .with_batch_size(1024)
        .with_shuffle()
        .with_workers(2, timeout=300)
    )
    earlier = _children()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loaderkit"):
        loader = builder.build()
    with loader:
        iterator = iter(loader)
        for _ in range(len(loader)):
            next(iterator)
        uss = _worker_uss_mb(earlier)  # after the last batch, the workers still alive
        text = loader.explain()
    assert len(uss) == 2, uss
    return uss, text, sum("copy-on-read" in m for m in caplog.messages)


def _scenario(n: int, caplog: pytest.LogCaptureFixture) -> None:
    samples = _dicts(n)
    uss_list, text, warned = _epoch_uss(Annotations(samples), caplog)
    (line,) = _storage(text)
    estimate = float(re.search(r"copies about ([0-9.,]+) MB", line)[1].replace(",", ""))  # type: ignore[index]
    assert warned == 1
    uss_flat, text, warned = _epoch_uss(Annotations(loaderkit.datasets.flat(samples)), caplog)
    assert _storage(text) == [] and warned == 0
    grown = min(uss_list) - max(uss_flat)
    assert grown > 25, (uss_list, uss_flat)  # each worker copied its own share of the list
    # the estimate is of the right size: within a factor 1.5 of the growth measured
    assert grown / 1.5 < estimate < grown * 1.5, (estimate, uss_list, uss_flat)


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="copy-on-read is a fork problem"
)
def test_a_users_dataset_copied_on_read_and_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    """The issue's scenario scaled down: 300,000 small dicts, 2 forked workers."""
    _scenario(300_000, caplog)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="copy-on-read is a fork problem"
)
def test_a_users_dataset_copied_on_read_and_the_fix_at_full_size(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The issue's scenario: 2,000,000 small dicts, 2 forked workers."""
    _scenario(2_000_000, caplog)
