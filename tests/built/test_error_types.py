"""A DataError is also an instance of the exception the data raised (issue 15).

``except ValueError:`` written for torch's DataLoader must still catch a bad sample, in the
main process and through worker processes (where the failure crosses a pickle), for map-style
and streamed loaders; types that cannot be combined fall back to a plain DataError chained to
the original.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import IterableDataset

import loaderkit as lk
from loaderkit import DataError, DataLoaderBuilder
from loaderkit._text import inert_lines
from loaderkit.errors import data_error, data_error_type
from loaderkit.testing import collect

pytestmark = pytest.mark.timeout(120)


class NeedsTwo(Exception):  # noqa: N818 - a user exception named as users name them
    """A user exception whose ``__init__`` needs two arguments (it cannot be unpickled)."""

    def __init__(self, path: str, code: int) -> None:
        super().__init__(f"{path}: code {code}")
        self.path, self.code = path, code


class Final(Exception):  # noqa: N818
    """A user exception that refuses to be subclassed (the Python way to be final)."""

    def __init_subclass__(cls) -> None:
        raise TypeError("Final cannot be subclassed")


class RefusingNew(Exception):  # noqa: N818
    """A user exception whose ``__new__`` takes exactly two arguments."""

    def __new__(cls, a: str, b: str) -> RefusingNew:
        return super().__new__(cls, a, b)


def _raise(kind: type[BaseException]) -> None:
    if kind is UnicodeDecodeError:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    if kind is NeedsTwo:
        raise NeedsTwo("/data/13.bin", 7)
    if kind is RefusingNew:
        raise RefusingNew("a", "b")
    raise kind("sample 13 is broken")


class Raising(torch.utils.data.Dataset[int]):
    """Samples 0..n-1; sample ``bad`` raises ``kinds[epoch]`` (the epoch told by set_epoch)."""

    def __init__(self, n: int, bad: int, kinds: list[type[BaseException]]) -> None:
        self.n, self.bad, self.kinds = n, bad, kinds
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            _raise(self.kinds[self.epoch])
        return i


def _caught(kinds: list[type[BaseException]], workers: int) -> Iterator[BaseException]:
    """The error each epoch's pass raises; epoch e's sample 13 raises ``kinds[e]``.

    One loader (persistent workers) for every kind: the workers start once.
    """
    plan = (
        DataLoaderBuilder()
        .with_dataset(Raising(32, 13, kinds))
        .with_batch_size(4)
        .with_workers(workers)
        .compile()
    )
    with plan.build() as loader:
        for epoch, kind in enumerate(kinds):
            loader.set_epoch(epoch)
            with pytest.raises(DataError) as caught:
                collect(loader)  # a StopIteration-typed error would end this loop silently
            assert caught.value.original_type is kind
            yield caught.value


TYPED = [ValueError, KeyError, OSError, FileNotFoundError, UnicodeDecodeError, NeedsTwo]
"""Original types a DataError can also be (OSError subclasses and a C type with its own
layout, UnicodeDecodeError, included; NeedsTwo cannot be unpickled)."""

UNTYPED = [StopIteration, RefusingNew, Final]
"""Original types a DataError must not or cannot also be: StopIteration would end the
caller's loop silently; RefusingNew cannot be made with a message alone; Final refuses
subclasses."""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_sample_is_caught_as_its_own_type(workers: int) -> None:
    for kind, error in zip(TYPED, _caught(TYPED, workers), strict=True):
        assert isinstance(error, kind)
        assert type(error) is data_error_type(kind)
        assert type(error).__name__ == f"DataError[{kind.__name__}]"
        assert error.sample_index == 13
        assert error.batch_index == 3
        assert (error.worker_id is None) == (workers == 0)
        assert str(error).startswith("sample 13 (batch 3 of epoch")
        assert str(error) == error.message
        assert f"could not be loaded {'in worker' if workers else 'in the main'}" in str(error)
        assert f"{kind.__name__}: " in str(error)
        if workers == 0 or kind is not NeedsTwo:  # NeedsTwo cannot cross a pickle: no cause
            assert isinstance(error.__cause__, kind)
        else:
            assert error.__cause__ is None
            assert "Original traceback in worker" in str(error)  # its traceback came as text
            assert "NeedsTwo: /data/13.bin: code 7" in str(error)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_types_that_cannot_be_combined_give_a_plain_data_error(workers: int) -> None:
    for kind, error in zip(UNTYPED, _caught(UNTYPED, workers), strict=True):
        assert type(error) is DataError
        assert not isinstance(error, kind)
        assert error.sample_index == 13
        if workers == 0:
            assert isinstance(error.__cause__, kind)


def _collate_fails(samples: list[int]) -> torch.Tensor:
    if 13 in samples:
        raise RuntimeError("stack expects each tensor to be equal size")
    return torch.tensor(samples)


def test_a_collator_failure_is_caught_as_its_own_type() -> None:
    plan = (
        DataLoaderBuilder()
        .with_dataset(list(range(32)))
        .with_batch_size(4)
        .with_collator(_collate_fails)
        .compile()
    )
    with plan.build() as loader, pytest.raises(RuntimeError, match="could not be collated"):
        collect(loader)


class Stream(IterableDataset[int]):
    """The stream 0..n-1 (read whole by every producer)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


def _key_error_on_seven(x: int) -> int:
    if x == 7:
        raise KeyError("no field 'text' in element 7")
    return x


class BrokenStream(IterableDataset[int]):
    """A stream whose iterator itself raises FileNotFoundError at element 5."""

    def __iter__(self) -> Iterator[int]:
        for k in range(10):
            if k == 5:
                raise FileNotFoundError("shard-00005.parquet")
            yield k


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(
    ("make", "kind", "words"),
    [
        (lambda b: b.with_dataset(Stream(16)).with_transform(_key_error_on_seven), KeyError, "7"),
        (lambda b: b.with_dataset(BrokenStream()), FileNotFoundError, "stream element 5"),
    ],
    ids=["transform", "source"],
)
def test_a_stream_failure_is_caught_as_its_own_type(
    make: Callable[[DataLoaderBuilder], DataLoaderBuilder],
    kind: type[BaseException],
    words: str,
    workers: int,
) -> None:
    plan = make(DataLoaderBuilder()).with_batch_size(4).with_workers(workers).compile()
    with plan.build() as loader, pytest.raises(kind) as caught:
        collect(loader)
    error = caught.value
    assert isinstance(error, DataError)
    assert error.original_type is kind
    assert words in error.message
    assert isinstance(error.__cause__, kind)


_KINDS = st.sampled_from([*TYPED, *UNTYPED, RuntimeError, IndexError, PermissionError])
_WHERE = st.none() | st.integers(min_value=0, max_value=2**40)


@given(
    kind=_KINDS,
    message=st.text(max_size=60),
    sample_index=_WHERE,
    worker_id=_WHERE,
    batch_index=_WHERE,
    collator=st.none() | st.text(max_size=10),
    chained=st.booleans(),
)
def test_a_data_error_survives_pickling_whole(
    kind: type[BaseException],
    message: str,
    sample_index: int | None,
    worker_id: int | None,
    batch_index: int | None,
    collator: str | None,
    chained: bool,
) -> None:
    original: BaseException | None = None
    if chained:
        try:
            _raise(kind)
        except BaseException as exc:  # noqa: BLE001 - whichever the kind is
            original = exc
    error = data_error(
        message,
        original if chained else kind,
        sample_index=sample_index,
        worker_id=worker_id,
        batch_index=batch_index,
        collator=collator,
    )
    error.__cause__ = original
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert isinstance(back, DataError)
    assert isinstance(back, kind) == (kind in TYPED or kind not in UNTYPED)
    shown = inert_lines(message)  # a message is made inert (issue 22), then kept as it is
    assert (error.message, back.message, str(back)) == (shown, shown, shown)
    assert (back.sample_index, back.worker_id, back.batch_index, back.collator) == (
        sample_index,
        worker_id,
        batch_index,
        collator,
    )
    assert back.original_type is kind
    if original is not None and kind is not NeedsTwo:  # NeedsTwo cannot be unpickled
        assert type(back.__cause__) is kind
        assert back.__cause__.args == original.args
    else:
        assert back.__cause__ is None


def test_a_data_error_of_a_data_error_keeps_the_first_original_type() -> None:
    inner = data_error("sample 3 failed", ValueError("bad"), sample_index=3)
    outer = data_error("batch 0 failed: sample 3 failed", inner, batch_index=0)
    assert isinstance(outer, ValueError)
    assert outer.original_type is ValueError
    assert data_error_type(lk.PlanError) is DataError  # one of ours: never combined
