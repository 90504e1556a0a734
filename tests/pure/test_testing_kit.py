"""The test kit itself: readable failures on broken plans, passes on good ones, strategies."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from torch.utils.data import Dataset

import loaderkit.testing.assertions as kit
from loaderkit import DataLoaderBuilder
from loaderkit.testing import (
    assert_batches_equal,
    assert_elastic,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    batches_differ,
    image_datasets,
    sample_datasets,
    tabular_datasets,
    token_datasets,
)
from loaderkit.testing._samples import SampleDataset, TabularDataset

pytestmark = pytest.mark.timeout(180)


# -- deliberately broken datasets ----------------------------------------------------------------


class CounterDataset(Dataset[dict[str, torch.Tensor]]):
    """Sample i is i plus how many samples this process read before: never the same twice."""

    reads = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        CounterDataset.reads += 1
        return {"x": torch.tensor([i, 1000 + CounterDataset.reads])}


class WorkerDataset(Dataset[dict[str, int]]):
    """Sample i carries the id of the worker that read it (-1 in the main process)."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> dict[str, int]:
        info = torch.utils.data.get_worker_info()
        return {"index": i, "worker": -1 if info is None else info.id}


def _plan(dataset: object, *, batch_size: int = 2, shuffle: bool = True) -> Any:
    builder = DataLoaderBuilder().with_dataset(dataset).with_batch_size(batch_size)
    return (builder.with_shuffle() if shuffle else builder).with_seed(3).compile()


# -- batches_differ ------------------------------------------------------------------------------


def test_identical_batches_do_not_differ() -> None:
    batch = {
        "ids": torch.tensor([[1, 2], [3, 4]]),
        "x": np.array([1.0, np.nan]),
        "meta": ["a", (1, 2.5)],
        "nan": float("nan"),
    }
    same = {
        "ids": torch.tensor([[1, 2], [3, 4]]),
        "x": np.array([1.0, np.nan]),
        "meta": ["a", (1, 2.5)],
        "nan": float("nan"),
    }
    assert batches_differ(batch, same) is None


def test_a_differing_value_is_named_by_key_position_and_row() -> None:
    a = {"input_ids": torch.tensor([[3, 4, 5, 0], [3, 4, 5, 6]])}
    b = {"input_ids": torch.tensor([[3, 4, 5, 0], [3, 4, 7, 6]])}
    assert batches_differ(a, b) == (
        "at ['input_ids'][1, 2]: 5 vs 7\n    row [1]: [3, 4, 5, 6] vs [3, 4, 7, 6]"
    )


def test_a_long_row_is_shown_around_the_difference_with_a_count() -> None:
    a = torch.arange(100)
    b = a.clone()
    b[50] = -1
    b[60] = -1
    found = batches_differ([a], [b])
    assert found is not None
    first, row = found.split("\n")
    assert first == "at [0][50]: 50 vs -1; 2 of 100 elements differ"
    assert "..., 46, 47, 48, 49, 50, 51, 52, 53, ..." in row
    assert "..., 46, 47, 48, 49, -1, 51, 52, 53, ..." in row


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        (torch.zeros(2, 3), torch.zeros(2, 4), "at batch: shape (2, 3) vs (2, 4) (float32)"),
        (torch.zeros(2), torch.zeros(2, dtype=torch.float64), "dtype float32 vs float64"),
        ({"a": 1, "b": 2}, {"a": 1, "c": 2}, "keys only in the first: ['b'], only in the second"),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, "the same keys in another order"),
        ([1, 2], [1, 2, 3], "at batch: length 2 vs 3 ([1, 2] vs [1, 2, 3])"),
        ([torch.tensor(1)], [torch.tensor(2)], "at [0]: 1 vs 2"),
        (torch.tensor([1, 2]), [1, 2], "at batch: Tensor vs list (tensor([1, 2]) vs [1, 2])"),
        (np.array([1, 2]), np.array([1, 3]), "at batch[1]: 2 vs 3"),
        ({"s": "x" * 100}, {"s": "y"}, "at ['s']: 'xxxxxxxx"),
    ],
)
def test_each_kind_of_difference_says_what_differs(a: Any, b: Any, message: str) -> None:
    found = batches_differ(a, b)
    assert found is not None
    assert message in found
    assert len(found.splitlines()[0]) < 120  # values are shown briefly


@dataclasses.dataclass
class Pair:
    left: torch.Tensor
    right: int


def test_dataclass_fields_are_compared() -> None:
    found = batches_differ(Pair(torch.tensor([1.0]), 1), Pair(torch.tensor([1.0]), 2))
    assert found == "at .right: 1 vs 2"


@given(
    st.lists(st.lists(st.integers(-5, 5), min_size=3, max_size=3), min_size=1, max_size=5),
    st.data(),
)
def test_the_first_changed_element_is_found_in_any_matrix(rows: list[list[int]], data: Any) -> None:
    a = torch.tensor(rows)
    i = data.draw(st.integers(0, len(rows) - 1))
    j = data.draw(st.integers(0, 2))
    b = a.clone()
    b[i, j] += 1
    found = batches_differ({"k": a}, {"k": b})
    assert found is not None
    assert found.startswith(f"at ['k'][{i}, {j}]: {rows[i][j]} vs {rows[i][j] + 1}")


def test_assert_batches_equal_counts_batches() -> None:
    with pytest.raises(AssertionError, match=r"^run: 3 batches expected, 2 delivered"):
        assert_batches_equal([1, 2, 3], [1, 2], label="run")
    with pytest.raises(AssertionError, match=r"^batch 4 differs at batch: 2 vs 5$"):
        assert_batches_equal([1, 2], [1, 5], first_batch=3)


# -- the assertions fail on broken plans ---------------------------------------------------------


def test_assert_reproducible_names_the_first_differing_batch() -> None:
    with pytest.raises(AssertionError) as info:
        assert_reproducible(_plan(CounterDataset(6), shuffle=False))
    lines = str(info.value).splitlines()
    assert lines[0] == (
        "assert_reproducible: two loaders built from the same plan delivered different batches"
    )
    assert lines[1].startswith(
        "  epoch 0 (first loader vs second): batch 0 differs at ['x'][0, 1]:"
    )
    assert lines[2].startswith("    row [0]: [0, ")
    assert lines[3].startswith("  hint: a batch must be a function of (seed, epoch, position)")


def test_assert_reproducible_notices_epochs_in_one_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from loaderkit.runtime.loader import Loader

    real = Loader.batch_indices

    def ignores_the_epoch(self: Loader, epoch: int, batch_index: int) -> list[int]:
        return real(self, 0, batch_index)

    plan = _plan(list(range(12)))
    assert_reproducible(plan)
    monkeypatch.setattr(Loader, "batch_indices", ignores_the_epoch)
    with pytest.raises(AssertionError, match="the plan shuffles but epochs 0 and 1 read the"):
        assert_reproducible(plan)


def test_assert_resumable_names_the_resume_point_and_batch() -> None:
    with pytest.raises(AssertionError) as info:
        assert_resumable(_plan(CounterDataset(6)), at=[0])
    message = str(info.value)
    assert message.startswith(
        "assert_resumable: a loader resumed from state_dict() did not continue the stream\n"
        "  resumed after 0 of 3 batches of epoch 0 (uninterrupted vs resumed): batch 0 differs "
        "at ['x']["
    )
    assert "hint: the resumed loader continued differently" in message
    with pytest.raises(AssertionError, match=r"before the resume at 2 \(uninterrupted vs this"):
        assert_resumable(_plan(CounterDataset(6)), at=[2])
    with pytest.raises(ValueError, match=r"at: resume points must be in \[0, 3\]"):
        assert_resumable(_plan(list(range(6))), at=[4])


def test_assert_worker_invariant_names_the_worker_counts() -> None:
    with pytest.raises(AssertionError) as info:
        assert_worker_invariant(_plan(WorkerDataset(), batch_size=3), epochs=1)
    lines = str(info.value).splitlines()
    assert lines[0] == "assert_worker_invariant: the batches depend on the number of workers"
    assert lines[1].startswith("  num_workers 0 vs 2, epoch 0: batch 0 differs at ['worker'][0]:")
    assert " -1 vs " in lines[1]
    assert lines[-1].startswith("  hint: the batches depend on the number of workers")


def test_assert_elastic_shows_both_global_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(list(range(16)), batch_size=4)
    real = kit.global_batches

    def reversed_on_two_ranks(p: Any, world_size: int, *, epoch: int = 0) -> list[list[int]]:
        batches = real(p, world_size, epoch=epoch)
        return [b[::-1] for b in batches] if world_size == 2 else batches

    monkeypatch.setattr(kit, "global_batches", reversed_on_two_ranks)
    with pytest.raises(AssertionError) as info:
        assert_elastic(plan, world_sizes=(1, 2))
    lines = str(info.value).splitlines()
    assert lines[0] == "assert_elastic: the global batches depend on the world size"
    assert lines[1].startswith(
        "  world 2 x 2 per rank, epoch 0, global batch 0 differs from the single process's; "
        "first difference at position 0: sample "
    )
    assert lines[2].startswith("    single process: [")
    assert lines[3].startswith("    ranks together: [")


# -- ... and pass on good ones -------------------------------------------------------------------


@settings(max_examples=10)
@given(sample_datasets("tabular", max_size=12), st.integers(1, 5), st.integers(0, 2**32))
def test_the_assertions_pass_on_good_plans(dataset: Any, batch_size: int, seed: int) -> None:
    plan = (
        DataLoaderBuilder()
        .with_dataset(dataset)
        .with_batch_size(batch_size)
        .with_shuffle()
        .with_seed(seed)
        .compile()
    )
    assert_reproducible(plan, epochs=2 if len(dataset) > 2 else 1)
    assert_resumable(plan)


@settings(max_examples=3)
@given(sample_datasets("tokens", max_size=10))
def test_worker_invariance_passes_on_good_plans(dataset: Any) -> None:
    plan = DataLoaderBuilder().with_dataset(dataset).with_batch_size(3).with_collator("text")
    assert_worker_invariant(plan.compile(), workers=(0, 2), epochs=1)


# -- the dataset strategies ----------------------------------------------------------------------


@settings(max_examples=25)
@given(
    token_datasets(
        min_size=2, max_size=6, vocab_size=9, min_length=2, max_length=5, labels="prompt_masked"
    )
)
def test_token_datasets_keep_their_promises(dataset: Any) -> None:
    assert isinstance(dataset, SampleDataset)
    assert 2 <= len(dataset) <= 6
    for i in range(len(dataset)):
        sample = dataset[i]
        ids, labels = sample["input_ids"], sample["labels"]
        assert 2 <= len(ids) <= 5
        assert all(0 <= t < 9 for t in ids)
        assert len(labels) == len(ids)
        prompt = labels.count(-100)
        assert labels == [-100] * prompt + ids[prompt:]
        assert prompt < len(ids)
    assert repr(dataset).startswith(f"SampleDataset(tokens, {len(dataset)} samples: [")


@settings(max_examples=15)
@given(st.data())
def test_token_label_kinds_and_tensors(data: Any) -> None:
    target = data.draw(token_datasets(labels="target", max_target_length=3, tensors=True))
    for i in range(len(target)):
        assert target[i]["input_ids"].dtype == torch.int64
        assert 1 <= len(target[i]["labels"]) <= 3
    classes = data.draw(token_datasets(labels="class", num_classes=3))
    assert all(classes[i]["label"] in (0, 1, 2) for i in range(len(classes)))


@settings(max_examples=20)
@given(
    image_datasets(max_size=5, channels=(1, 3), min_side=5, max_side=7, dtype="float32"),
)
def test_image_datasets_are_one_size_in_range(dataset: Any) -> None:
    shapes = {tuple(dataset[i]["pixel_values"].shape) for i in range(len(dataset))}
    assert len(shapes) == 1
    ((c, h, w),) = shapes
    assert c in (1, 3)
    assert 5 <= h <= 7
    assert 5 <= w <= 7
    for i in range(len(dataset)):
        image = dataset[i]["pixel_values"]
        assert image.dtype == torch.float32
        assert float(image.min()) >= 0.0
        assert float(image.max()) <= 1.0
        assert 0 <= dataset[i]["label"] < 10


@settings(max_examples=5)
@given(image_datasets(max_size=3, pil=True, channels=(1, 4), tuples=True))
def test_pil_images_in_tuples(dataset: Any) -> None:
    for i in range(len(dataset)):
        image, label = dataset[i]
        assert image.mode in ("L", "RGBA")
        assert isinstance(label, int)


@settings(max_examples=20)
@given(tabular_datasets(max_size=8, min_features=2, max_features=3, num_classes=None))
def test_tabular_datasets_as_tensors(dataset: Any) -> None:
    assert isinstance(dataset, TabularDataset)
    features, labels = dataset.tensors
    assert features.dtype == torch.float32
    assert labels.dtype == torch.float32
    assert features.shape[1] in (2, 3)
    assert bool(torch.isfinite(features).all())


@settings(max_examples=10)
@given(tabular_datasets(max_size=5, max_features=2, columns=True, num_classes=2))
def test_tabular_datasets_as_columns(dataset: Any) -> None:
    for i in range(len(dataset)):
        row = dataset[i]
        assert list(row)[-1] == "label"
        assert row["label"] in (0, 1)
        assert all(k.startswith("f") for k in list(row)[:-1])


@settings(max_examples=3)
@given(st.data())
def test_hf_backend(data: Any) -> None:
    import datasets as hf

    tokens = data.draw(sample_datasets("tokens", max_size=4, backend="hf", labels="class"))
    assert isinstance(tokens, hf.Dataset)
    assert set(tokens.column_names) <= {"input_ids", "label"}
    images = data.draw(sample_datasets("images", max_size=3, backend="hf", pil=True))
    assert all(images[i]["pixel_values"].mode == "RGB" for i in range(len(images)))
    table = data.draw(sample_datasets("tabular", min_size=1, max_size=4, backend="hf"))
    assert table.column_names == ["features", "label"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sample_datasets("audio"), "kind must be one of 'tokens', 'images', 'tabular'"),
        (lambda: token_datasets(min_length=5, max_length=2), "min_length must be <= max_length"),
        (lambda: token_datasets(labels="mlm"), "labels must be one of"),
        (lambda: token_datasets(backend="arrow"), "backend must be one of ('torch', 'hf')"),
        (lambda: image_datasets(pil=True, dtype="float32"), "pil=True needs dtype='uint8'"),
        (lambda: image_datasets(channels=0), "channels must be an int >= 1"),
        (lambda: tabular_datasets(num_classes=0), "num_classes must be an int >= 1, or None"),
    ],
)
def test_bad_strategy_options_say_what_to_pass(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=None) as info:
        call()
    assert message in str(info.value)


def test_without_hypothesis_the_strategies_say_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['hypothesis'] = None  # as if it were not installed\n"
        "from loaderkit.testing import assert_reproducible, batches_differ\n"
        "assert batches_differ([1], [1]) is None\n"
        "try:\n"
        "    from loaderkit.testing import sample_datasets\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install 'loaderkit[test]'" in out.stdout
    assert "hypothesis" in out.stdout


def test_the_old_datasets_name_says_it_was_renamed() -> None:
    with pytest.raises(ImportError, match="renamed sample_datasets"):
        from loaderkit.testing import datasets  # noqa: F401


_FAILING_USER_TEST = """
import torch
from loaderkit import DataLoaderBuilder
from loaderkit.testing import assert_reproducible


class Counter(torch.utils.data.Dataset):
    reads = 0

    def __len__(self):
        return 64

    def __getitem__(self, i):
        Counter.reads += 1
        return torch.arange(512) + Counter.reads


def test_mine():
    plan = DataLoaderBuilder().with_dataset(Counter()).with_batch_size(8).compile()
    assert_reproducible(plan)
"""


def test_a_failing_assertion_shows_the_users_line_and_a_short_diff(tmp_path: Any) -> None:
    """Under pytest the kit's own frames are hidden and no batch is dumped as a local."""
    (tmp_path / "test_user.py").write_text(_FAILING_USER_TEST)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=long", "-l"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 1, text[-3000:]
    assert "assert_reproducible(plan)" in text  # the user's own line
    assert "loaderkit/testing/assertions.py" not in text, text[-3000:]
    assert "batch 0 differs" in text
    assert len(text) < 6000, f"{len(text)} characters of failure output:\n{text[-3000:]}"
