"""plan.build(split=...): each part's loader reads exactly its part, reproducibly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError, ResumeError
from loaderkit.order.split import split_parts
from loaderkit.testing import assert_batches_equal, collect

pytestmark = pytest.mark.timeout(240)

N = 60
LABELS = [0] * 36 + [1] * 18 + [2] * 6  # 60%, 30%, 10%
COLUMNS = {"x": torch.arange(N), "label": torch.tensor(LABELS)}
ROWS = [{"x": i, "label": LABELS[i]} for i in range(N)]


def builder(data: object = COLUMNS) -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(data).with_batch_size(4).with_shuffle().with_seed(5)


def read(loader) -> list[int]:
    """Every x the loader delivers in one pass, in order."""
    return [int(v) for batch in collect(loader) for v in batch["x"]]


def indices(loader, epoch: int = 0) -> list[int]:
    return [i for b in range(len(loader)) for i in loader.batch_indices(epoch, b)]


def test_parts_are_disjoint_cover_the_dataset_and_each_loader_reads_its_part():
    plan = builder().with_split(0.2, 0.1).compile()
    expected = split_parts(N, 5, 0.2, 0.1)
    seen = {}
    for part in ("train", "val", "test"):
        loader = plan.build(split=part)
        got = read(loader)
        assert sorted(got) == expected[part].tolist()  # every sample of the part, once
        assert got == indices(loader)
        assert loader.split == part
        seen[part] = set(got)
    assert len(seen["train"]) == 42 and len(seen["val"]) == 12 and len(seen["test"]) == 6
    assert seen["train"] | seen["val"] | seen["test"] == set(range(N))
    assert not (seen["train"] & seen["val"] or seen["train"] & seen["test"])
    assert plan.build().split == "train"


def test_the_train_part_is_shuffled_per_epoch_within_the_part():
    loader = builder().with_split(0.25).compile().build()
    first, second = read(loader), read(loader)
    assert sorted(first) == sorted(second)
    assert first != second


def test_the_split_is_reproducible_across_processes_and_runs():
    plan = builder().with_split(0.2, 0.1, stratify_by="label").compile()
    here = {part: read(plan.build(split=part)) for part in ("train", "val", "test")}
    again = {part: read(plan.build(split=part)) for part in ("train", "val", "test")}
    assert here == again
    # a plan read back from its file gives the same parts
    loaded = LoaderPlan.from_dict(
        json.loads(json.dumps(plan.to_dict())), bindings={"dataset": COLUMNS}
    )
    assert read(loaded.build(split="val")) == here["val"]


def test_the_split_seed_defaults_to_the_plan_seed():
    a = builder().with_split(0.2).compile()
    b = builder().with_seed(6).with_split(0.2).compile()
    c = builder().with_seed(6).with_split(0.2, seed=5).compile()
    assert sorted(read(a.build(split="val"))) != sorted(read(b.build(split="val")))
    assert sorted(read(a.build(split="val"))) == sorted(read(c.build(split="val")))


@pytest.mark.parametrize("data", [COLUMNS, ROWS], ids=["columns", "rows"])
def test_stratified_parts_keep_the_class_proportions(data):
    plan = builder(data).with_split(0.2, 0.1, stratify_by="label").compile()
    labels = np.asarray(LABELS)
    counts = {}
    for part in ("train", "val", "test"):
        got = read(plan.build(split=part))
        counts[part] = np.bincount(labels[got], minlength=3).tolist()
    # test 6: quotas 3.6, 1.8, 0.6 -> 3, 1, 0 and the two left to the largest remainders (0.8,
    # then 0.6 of the smaller label); val 12 of the 54 left (32, 16, 6): 7.1, 3.6, 1.3
    assert counts == {"train": [25, 12, 5], "val": [7, 4, 1], "test": [4, 2, 0]}
    for part, size in (("val", 12), ("test", 6)):
        quota = size * np.asarray([36, 18, 6]) / N
        assert np.all(np.abs(np.asarray(counts[part]) - quota) < 1)


def test_hf_datasets_stratify_by_a_class_label_column():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"x": list(range(N)), "label": LABELS})
    ds = ds.cast_column("label", datasets.ClassLabel(names=["a", "b", "c"]))
    shuffled = ds.shuffle(seed=1)  # an indices mapping: labels are read through it
    plan = builder(shuffled).with_split(0.2, stratify_by="label").compile()
    loader = plan.build(split="val")
    rows = indices(loader)
    got = [shuffled[i]["label"] for i in rows]
    assert np.bincount(got, minlength=3).tolist() == [7, 4, 1]
    assert sorted(int(v) for b in collect(loader) for v in b["x"]) == sorted(
        shuffled[i]["x"] for i in rows
    )


def test_map_style_datasets_stratify_sample_by_sample():
    class Plain(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"x": torch.tensor(i), "label": torch.tensor(LABELS[i])}

    plan = builder(Plain()).with_split(0.2, stratify_by="label").compile()
    got = read(plan.build(split="val"))
    assert np.bincount(np.asarray(LABELS)[got], minlength=3).tolist() == [7, 4, 1]


def test_a_missing_label_key_fails_at_build_with_the_path():
    class Plain(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"x": i}

    plan = builder(Plain()).with_split(0.2, stratify_by="label").compile()
    with pytest.raises(PlanError) as info:
        plan.build(split="val")
    assert info.value.problems[0].path == "split.stratify_by"


def test_building_a_part_that_does_not_exist_is_refused():
    plan = builder().with_split(0.2).compile()
    with pytest.raises(PlanError, match="no 'test' part") as info:
        plan.build(split="test")
    assert info.value.problems[0].path == "split"
    with pytest.raises(PlanError, match="takes 'train', 'val' or 'test'"):
        plan.build(split="validation")
    with pytest.raises(PlanError, match="has no split"):
        builder().compile().build(split="val")
    assert builder().compile().build().split is None


def test_bucketing_weights_and_curricula_read_their_values_for_the_part():
    lengths = [1 + (i * 37) % 50 for i in range(N)]
    plan = (
        DataLoaderBuilder()
        .with_dataset({"x": torch.arange(N), "n": torch.tensor(lengths)})
        .with_seed(5)
        .with_bucketing(lengths, max_tokens=60)
        .with_split(0.25, 0.25)
        .compile()
    )
    expected = split_parts(N, 5, 0.25, 0.25)["val"].tolist()
    loader = plan.build(split="val")
    assert sorted(read(loader)) == expected
    for batch in collect(loader):  # the budget holds for the samples' own lengths
        assert len(batch["n"]) * int(batch["n"].max()) <= 60
    weighted = builder().with_sampling_weights([float(i >= 30) for i in range(N)])
    drawn = read(weighted.with_split(0.5).compile().build(split="val"))
    assert set(drawn) <= {i for i in split_parts(N, 5, 0.5, 0)["val"].tolist() if i >= 30}
    curriculum = builder().with_curriculum([float(i) for i in range(N)], start=0.5, horizon=2)
    part = split_parts(N, 5, 0.5, 0)["train"].tolist()
    easiest = read(curriculum.with_split(0.5).compile().build())
    assert sorted(easiest) == sorted(part)[:15]  # half of the part's 30, easiest first


def test_the_state_records_the_part_and_refuses_another():
    plan = builder().with_split(0.2, 0.1).compile()
    train, val = plan.build(), plan.build(split="val")
    collect(train, 3)
    state = train.state_dict()
    assert state["split"] == "train"
    assert val.state_dict()["split"] == "val"
    with pytest.raises(ResumeError, match="'train' part of the split, this loader reads the 'val'"):
        val.load_state_dict(state)
    resumed = plan.build()
    resumed.load_state_dict(json.loads(json.dumps(state)))
    rest = collect(resumed)
    reference = plan.build()
    assert_batches_equal(collect(reference)[3:], rest)
    # a plan without a split has no part: its states say nothing of one
    assert "split" not in builder().compile().build().state_dict()


def test_workers_do_not_change_a_part():
    plan = builder().with_split(0.2, stratify_by="label").with_transform(_noisy).compile()
    runs = {}
    for workers in (0, 2):
        variant = plan.to_builder().with_workers(workers).compile()
        with variant.build(split="val") as loader:
            runs[workers] = [collect(loader) for _ in range(2)]
    for epoch in range(2):
        assert_batches_equal(runs[0][epoch], runs[2][epoch], label=f"epoch {epoch}")


def _noisy(sample: dict, rng: np.random.Generator) -> dict:
    return {**sample, "noise": float(rng.normal())}


def test_transforms_get_the_dataset_index_whatever_the_part():
    seen: list[int] = []

    def record(sample: dict) -> dict:
        seen.append(int(sample["x"]))
        return sample

    plan = builder().with_transform(record).with_split(0.2).compile()
    loader = plan.build(split="val")
    got = read(loader)
    assert seen == got


def test_the_loader_explains_its_part():
    loader = builder().with_split(0.2).compile().build(split="val")
    assert "part        'val' of the split: 12 of 60 samples" in loader.explain()
    assert len(loader) == 3
