"""Workers fail fast and honestly (issue 22): unpicklable samples, resource errors.

- A sample (or batch) that cannot be pickled, with workers, is a ``DataError`` naming the
  sample and the type that cannot be sent, within seconds; before, the worker's queue dropped
  it (a traceback on stderr) and the main process waited forever. Without workers nothing is
  pickled: the batch is delivered, as torch's ``DataLoader`` delivers it.
- ``MemoryError`` and the other resource errors (:data:`RESOURCE_ERRNOS`) are never skipped
  by ``with_error_policy("skip")`` as bad data: they are raised, naming the sample.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch

from loaderkit import DataError, DataLoaderBuilder
from loaderkit.runtime.records import RESOURCE_ERRNOS, resource_error

pytestmark = pytest.mark.timeout(180)

BAD = 5


def passthrough(samples: list[Any]) -> list[Any]:
    return samples


def lambda_value(i: int) -> Any:
    return lambda: i


def lock_value(i: int) -> Any:
    return threading.Lock()


UNSENDABLE: dict[str, tuple[Callable[[int], Any], str]] = {
    "lambda": (lambda_value, "function"),
    "lock": (lock_value, "_thread.lock"),
}


class Holding(torch.utils.data.Dataset[Any]):
    """16 samples ``{"i": i, "x": ...}``; sample BAD's ``x`` is made by ``make``."""

    def __init__(self, make: Callable[[int], Any]) -> None:
        self.make = make

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"i": i, "x": self.make(i) if i == BAD else i}


class HoldingStream(torch.utils.data.IterableDataset[Any]):
    def __init__(self, make: Callable[[int], Any]) -> None:
        self.make = make

    def __iter__(self) -> Any:
        for i in range(16):
            yield {"i": i, "x": self.make(i) if i == BAD else i}


def drain(loader: Any) -> tuple[list[int], list[DataError]]:
    """Every sample id delivered and every DataError raised, iterating on after each."""
    seen: list[int] = []
    errors: list[DataError] = []
    it = iter(loader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return seen, errors
        except DataError as error:
            errors.append(error)
            continue
        rows = batch if isinstance(batch, list) else [{"i": i} for i in batch["i"]]
        seen.extend(int(row["i"]) for row in rows)


def plan_of(data: Any, workers: int, *, collator: Any = passthrough, skip: bool = False) -> Any:
    builder = DataLoaderBuilder().with_dataset(data).with_batch_size(4).with_workers(workers)
    if collator is not None:
        builder = builder.with_collator(collator)
    if skip:
        builder = builder.with_error_policy("skip")
    return builder.compile()


@pytest.mark.parametrize("kind", sorted(UNSENDABLE))
@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_an_unpicklable_sample_is_a_data_error_naming_it_with_workers(kind, stream):
    make, type_name = UNSENDABLE[kind]
    data = HoldingStream(make) if stream else Holding(make)
    with plan_of(data, 2).build() as loader:
        seen, errors = drain(loader)
    assert len(errors) == 1, errors
    error = errors[0]
    assert error.sample_index == BAD
    assert error.worker_id in (0, 1)
    message = str(error)
    assert f"is a {type_name}" in message
    assert "sample['x']" in message
    assert "cannot be sent from worker" in message
    # the failed batch is the only one missing: the pass went on
    assert len(seen) == 12 and BAD not in seen


@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_without_workers_an_unpicklable_sample_is_delivered(stream):
    data = HoldingStream(lock_value) if stream else Holding(lock_value)
    with plan_of(data, 0).build() as loader:
        seen, errors = drain(loader)
    assert errors == []
    assert sorted(seen) == list(range(16))


def locked(sample: dict[str, Any]) -> dict[str, Any]:
    return {**sample, "x": threading.Lock()} if sample["i"] == BAD else sample


def test_a_sample_the_transform_made_unpicklable_is_named():
    plan = (
        DataLoaderBuilder()
        .with_dataset(Holding(int))
        .with_batch_size(4)
        .with_workers(2)
        .with_collator(passthrough)
        .with_transform(locked)
        .compile()
    )
    with plan.build() as loader:
        _, errors = drain(loader)
    assert [e.sample_index for e in errors] == [BAD]
    assert "sample['x'] is a _thread.lock" in str(errors[0])


def lock_batch(samples: list[Any]) -> dict[str, Any]:
    return {"i": [s["i"] for s in samples], "guard": threading.Lock()}


@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_a_batch_the_collator_made_unpicklable_names_the_collator(stream):
    data = HoldingStream(int) if stream else Holding(int)
    with plan_of(data, 2, collator=lock_batch).build() as loader:
        seen, errors = drain(loader)
    assert seen == [] and len(errors) == 4
    for error in errors:
        assert error.sample_index is None
        assert "lock_batch" in str(error) and "batch['guard'] is a _thread.lock" in str(error)


def test_the_skip_policy_does_not_drop_an_unpicklable_sample():
    # with 0 workers it would be delivered: dropping it would make batches depend on workers
    with plan_of(Holding(lambda_value), 2, skip=True).build() as loader:
        _, errors = drain(loader)
        assert [e.sample_index for e in errors] == [BAD]
        assert list(loader.skipped) == []


# -- resource errors under the skip policy ----------------------------------------------------


RESOURCES: dict[str, BaseException] = {
    "MemoryError": MemoryError("cannot allocate 1 TB"),
    "ENOSPC": OSError(errno.ENOSPC, "No space left on device"),
    "EMFILE": OSError(errno.EMFILE, "Too many open files"),
}


class Failing(torch.utils.data.Dataset[Any]):
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, int]:
        if i == BAD:
            raise self.exc
        return {"i": i}


class Counting(torch.utils.data.IterableDataset[Any]):
    def __iter__(self) -> Any:
        yield from ({"i": i} for i in range(16))


class FailingTransform:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __call__(self, sample: dict[str, int]) -> dict[str, int]:
        if sample["i"] == BAD:
            raise self.exc
        return sample


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("resource", sorted(RESOURCES))
@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_a_resource_error_is_never_skipped(workers, resource, stream):
    exc = RESOURCES[resource]
    builder = DataLoaderBuilder().with_batch_size(4).with_workers(workers)
    if stream:  # a stream's skip policy drops what fails in the transform
        builder = builder.with_dataset(Counting()).with_transform(FailingTransform(exc))
    else:
        builder = builder.with_dataset(Failing(exc))
    with builder.with_error_policy("skip").compile().build() as loader:
        seen, errors = drain(loader)
        assert list(loader.skipped) == []
    assert len(errors) == 1, errors
    error = errors[0]
    assert isinstance(error, type(exc))  # except MemoryError / OSError catches it
    assert error.sample_index == BAD
    assert "not bad data: the skip policy does not drop it" in str(error)
    assert BAD not in seen


@pytest.mark.parametrize("workers", [0, 2])
def test_other_os_errors_are_still_skipped(workers):
    plan = (
        DataLoaderBuilder()
        .with_dataset(Failing(FileNotFoundError(errno.ENOENT, "no such image")))
        .with_batch_size(4)
        .with_workers(workers)
        .with_error_policy("skip")
        .compile()
    )
    with plan.build() as loader:
        seen, errors = drain(loader)
        assert [r.sample_index for r in loader.skipped] == [BAD]
    assert errors == [] and sorted(seen) == [i for i in range(16) if i != BAD]


def test_resource_errors_are_the_declared_ones():
    assert resource_error(MemoryError())
    assert resource_error(torch.OutOfMemoryError("CUDA out of memory"))
    for code in RESOURCE_ERRNOS:
        assert resource_error(OSError(code, "x"))
    assert not resource_error(OSError(errno.ENOENT, "x"))
    assert not resource_error(ValueError("bad record"))
    assert not resource_error(RecursionError())


# -- a batch that pickles in its worker but does not unpickle in the main process --------------


class WorkerOnly:
    """A value that can be rebuilt only in a worker: its ``__setstate__`` raises elsewhere."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __setstate__(self, state: dict[str, Any]) -> None:
        if torch.utils.data.get_worker_info() is None:
            raise RuntimeError("WorkerOnly is rebuilt only inside a worker")
        self.__dict__.update(state)


def worker_only(i: int) -> Any:
    return WorkerOnly(i)


@pytest.mark.parametrize("stream", [False, True], ids=["map", "stream"])
def test_a_batch_that_does_not_unpickle_in_the_main_process_is_a_data_error(stream):
    data = HoldingStream(worker_only) if stream else Holding(worker_only)
    plan = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(4)
        .with_workers(2, timeout=60)  # a lost batch would time out, not hang
        .with_collator(passthrough)
        .compile()
    )
    with plan.build() as loader:
        for epoch in range(2):  # the loader iterates again after it, as after any DataError
            seen, errors = drain(loader)
            assert len(errors) == 1, errors
            error = errors[0]
            assert isinstance(error, DataError) and isinstance(error, RuntimeError)
            message = str(error)
            assert error.worker_id in (0, 1)
            assert f"pickled in worker {error.worker_id} (pid " in message
            assert "could not be unpickled in the main process" in message
            assert "unpickling test_worker_honesty.WorkerOnly raised RuntimeError" in message
            assert "WorkerOnly is rebuilt only inside a worker" in message
            assert "__setstate__ work outside a worker" in message  # the fix
            if stream:  # element k to worker k % 2: BAD is in worker 1's first batch
                assert error.worker_id == 1
                assert f"batch 0 of worker 1 on rank 0 in epoch {epoch} " in message
                assert "(stream elements 1, 3, 5, 7)" in message
            else:
                assert error.batch_index == 1
                assert f"batch 1 of epoch {epoch} (samples 4, 5, 6, 7)" in message
            # only the batch that failed is missing: the pass went on
            assert sorted(seen) == sorted(
                set(range(16)) - ({1, 3, 5, 7} if stream else {4, 5, 6, 7})
            )
        state = loader.state_dict()
    assert state["epoch"] == 1 and state["pass_ended"]
