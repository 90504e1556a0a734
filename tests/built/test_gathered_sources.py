"""Workers never cost a batched source throughput (issue 24).

A source whose every batch is one vectorized gather running none of the user's code
(tensors, arrays, a dict of columns, an HF dataset read by its Arrow table; the ``default``
collator, no transform) is read in the main process whatever ``num_workers`` says: sending
such a batch from a worker costs more than reading it. Everything else keeps its workers, and
a small tensor a worker sends crosses by value rather than through a shared-memory handle.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import numpy as np
import pytest
import torch

from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.runtime.workers.crossing import BY_VALUE_BYTES, pickled
from loaderkit.testing import assert_resumable, assert_worker_invariant, collect

datasets = pytest.importorskip("datasets")

pytestmark = pytest.mark.timeout(180)

N = 96


def _sources() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    x = rng.random((N, 4), dtype=np.float32)
    label = rng.integers(0, 10, N)
    return {
        "tensors": torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(label)),
        "columns": {"x": x, "label": label},
        "hf": datasets.Dataset.from_dict({"x": x, "label": label}).with_format("torch"),
    }


SOURCES = _sources()


def _plan(source: Any, workers: int, **options: Any) -> LoaderPlan:
    builder = (
        DataLoaderBuilder()
        .with_dataset(source)
        .with_batch_size(16)
        .with_shuffle()
        .with_seed(4)
        .with_workers(workers)
    )
    if "transform" in options:
        builder = builder.with_transform(options["transform"])
    return builder.compile()


@pytest.mark.parametrize("name", list(SOURCES))
def test_a_gathered_source_starts_no_worker_and_says_so(name: str) -> None:
    earlier = set(multiprocessing.active_children())  # an earlier test's, still exiting
    with _plan(SOURCES[name], 2).build() as loader:
        assert loader.workers.num_workers == 0
        assert loader.workers_unused is not None
        assert "2 worker(s) given, none started" in loader.workers_unused
        line = next(x for x in loader.explain().splitlines() if "none started" in x)
        assert line.startswith("  workers     ")
        batches = collect(loader)
        started = set(multiprocessing.active_children()) - earlier
        assert not started  # nothing was started behind the batches
    with _plan(SOURCES[name], 0).build() as none:
        assert none.workers_unused is None
        expected = collect(none)
    assert len(batches) == len(expected) == N // 16
    for got, want in zip(batches, expected, strict=True):
        flat_got = got.values() if isinstance(got, dict) else got
        flat_want = want.values() if isinstance(want, dict) else want
        for a, b in zip(flat_got, flat_want, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("name", list(SOURCES))
def test_batches_states_and_fingerprints_do_not_depend_on_the_worker_count(name: str) -> None:
    plan = _plan(SOURCES[name], 2)
    assert plan.fingerprint == _plan(SOURCES[name], 0).fingerprint
    assert_worker_invariant(plan, workers=(0, 1, 2))
    assert_resumable(plan, at=[0, 2, N // 16])  # mid-epoch, the epoch's end, after the loop


def _double(sample: Any) -> Any:
    return {key: value * 2 for key, value in sample.items()}


def test_a_source_with_code_of_yours_keeps_its_workers() -> None:
    with _plan(SOURCES["columns"], 2, transform=_double).build() as loader:
        assert loader.workers.num_workers == 2
        assert loader.workers_unused is None
        assert "none started" not in loader.explain()
        assert len(collect(loader)) == N // 16
    images = datasets.Dataset.from_dict({"x": [[1, 2]] * 8}).with_transform(lambda b: b)
    with _plan(images, 1).build() as custom:  # an HF transform is code of the user's
        assert custom.workers.num_workers == 1
        assert custom.workers_unused is None


def test_auto_workers_on_a_gathered_source_say_what_was_chosen_and_start_none() -> None:
    plan = DataLoaderBuilder().with_dataset(SOURCES["hf"]).with_workers("auto").compile()
    with plan.build() as loader:
        assert loader.workers.num_workers == 0
        if loader.workers.auto is not None and loader.workers.auto.num_workers > 0:
            assert "chosen, none started" in (loader.workers_unused or "")


def test_autotune_keeps_no_workers_for_a_gathered_source() -> None:
    _tuned, report = _plan(SOURCES["tensors"], 0).autotune(
        num_workers=[0, 2], budget_s=6, warmup_batches=1, batches=5
    )
    assert report.chosen is not None and report.chosen.num_workers == 0
    two = [t for t in report.trials if t.num_workers == 2]
    assert two and all("no worker started" in t.note for t in two)


@pytest.mark.parametrize(
    "tensor",
    [
        torch.arange(12, dtype=torch.float32).reshape(3, 4),
        torch.arange(12, dtype=torch.int64).reshape(4, 3).t(),  # not contiguous
        torch.tensor([[1.5, -2.25]], dtype=torch.bfloat16),
        torch.tensor([1, 65535], dtype=torch.uint16),
        torch.tensor([True, False]),
        torch.zeros(0, 3),
        torch.tensor(7),
    ],
    ids=["float", "strided", "bfloat16", "uint16", "bool", "empty", "scalar"],
)
def test_a_small_tensor_crosses_by_value_and_comes_back_equal(tensor: torch.Tensor) -> None:
    sent = pickled({"t": tensor, "rest": [1, "a"]})
    assert b"resource_sharer" not in sent.payload  # no shared-memory handle to fetch
    back = pickle_round_trip(sent)
    assert back["rest"] == [1, "a"]
    assert back["t"].dtype == tensor.dtype and back["t"].shape == tensor.shape
    assert torch.equal(back["t"], tensor)
    back["t"].zero_()  # it owns writable memory (no warning, no read-only buffer)


def test_a_large_tensor_still_crosses_through_shared_memory() -> None:
    big = torch.zeros(BY_VALUE_BYTES // 4 + 1)
    sent = pickled(big)
    assert len(sent.payload) < 4096  # a handle, not the values
    assert torch.equal(pickle_round_trip(sent), big)


def pickle_round_trip(sent: Any) -> Any:
    import pickle

    return pickle.loads(pickle.dumps(sent))


def test_loaderkit_bench_marks_the_counts_that_started_no_worker() -> None:
    from rich.console import Console

    from loaderkit.cli.bench import measure_workers, results_table

    plan = _plan(SOURCES["columns"], 0)
    results = [measure_workers(plan, count, 3) for count in (0, 2)]
    assert results[0].unused is None and results[1].unused is not None
    console = Console(width=400, record=True)
    console.print(results_table(results))
    text = " ".join(console.export_text().split())
    assert "│ 2* │" in text
    assert "* 2 worker(s) given, none started: every batch of this source is one vectorized" in text
