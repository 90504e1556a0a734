"""Plans whose dataset has a source: save, load without bindings, build, same batches."""

from __future__ import annotations

import json
import shutil

import datasets
import pytest

import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import assert_batches_equal

ROWS = [{"id": i, "score": i * 0.5, "text": f"row {i}"} for i in range(23)]


@pytest.fixture(autouse=True)
def hf_cache(tmp_path, monkeypatch):
    """HF datasets writes its Arrow cache here, not in the user's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def write(folder, fmt):
    """ROWS as a json, csv or parquet file in ``folder``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path = folder / "rows.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    elif fmt == "csv":
        path = folder / "rows.csv"
        lines = ["id,score,text", *(f"{r['id']},{r['score']},{r['text']}" for r in ROWS)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path = folder / "rows.parquet"
        datasets.Dataset.from_list(ROWS).to_parquet(str(path))
    return path


def batches(plan, epochs=2):
    with plan.build() as loader:
        out = []
        for epoch in range(epochs):
            loader.set_epoch(epoch)
            out.extend(loader)
        return out


def shuffled(ds, workers=0):
    builder = (
        DataLoaderBuilder()
        .with_dataset(ds, name="train")
        .with_batch_size(5)
        .with_shuffle()
        .with_seed(7)
    )
    if workers:
        builder = builder.with_workers(workers)
    return builder.compile()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_hf_files_plan_rebuilds_the_same_batches_without_bindings(tmp_path, fmt):
    path = write(tmp_path / "plans", fmt)
    ds = lkd.from_files(path)
    assert ds.column_names == ["id", "score", "text"] and len(ds) == 23
    plan = shuffled(ds)
    plan.save(tmp_path / "plans" / "train.toml")
    again = LoaderPlan.load(tmp_path / "plans" / "train.toml")
    assert again == plan and again.fingerprint == plan.fingerprint and again.bound
    assert again.bindings["train"] is not ds
    expected = batches(plan)
    assert len(expected) == 10
    assert sorted(int(i) for b in expected[:5] for i in b["id"]) == list(range(23))
    assert_batches_equal(expected, batches(again), label=fmt)


@pytest.mark.timeout(180)
def test_a_registered_factory_plan_rebuilds_the_same_batches_with_workers(tmp_path):
    ds = lkd.load("tokens", n=40, vocab_size=50, min_length=3, max_length=9, seed=2)
    plan = (
        DataLoaderBuilder()
        .with_dataset(ds, name="train")
        .with_batch_size(6)
        .with_shuffle()
        .with_collator("text", pad_token_id=0)
        .with_workers(2)
        .compile()
    )
    plan.save(tmp_path / "p.json")
    again = LoaderPlan.load(tmp_path / "p.json")
    assert again == plan and again.bound
    expected = batches(plan)
    assert expected[0]["input_ids"].shape[0] == 6
    assert_batches_equal(expected, batches(again), label="tokens")


@pytest.mark.timeout(120)
def test_a_plan_moved_with_its_data_still_loads(tmp_path):
    path = write(tmp_path / "a" / "data", "json")
    plan = shuffled(lkd.from_files(path))
    plan.save(tmp_path / "a" / "plan.json")
    stored = json.loads((tmp_path / "a" / "plan.json").read_text(encoding="utf-8"))
    assert stored["dataset"]["source"] == {
        "name": "hf_files",
        "options": {"data_files": "data/rows.jsonl", "split": "train"},
    }
    expected = batches(plan)
    shutil.move(tmp_path / "a", tmp_path / "b")
    again = LoaderPlan.load(tmp_path / "b" / "plan.json")
    assert again.fingerprint == plan.fingerprint
    assert again.dataset.source.options["data_files"] == str(tmp_path / "b" / "data" / "rows.jsonl")
    assert_batches_equal(expected, batches(again), label="moved")


@pytest.mark.timeout(120)
def test_changed_files_are_refused_with_the_fix(tmp_path):
    path = write(tmp_path, "json")
    plan = shuffled(lkd.from_files(path))
    plan.save(tmp_path / "plan.toml")
    path.write_text(path.read_text(encoding="utf-8").replace("row 3", "row three"), "utf-8")
    with pytest.raises(PlanError) as err:
        LoaderPlan.load(tmp_path / "plan.toml")
    (problem,) = err.value.problems
    assert problem.path == "dataset"
    assert "made by hf_files(" in problem.message
    assert "its data changed: compile a new plan" in problem.message
    assert plan.dataset.identity in problem.message


@pytest.mark.timeout(120)
def test_several_files_and_globs_read_in_order(tmp_path):
    for part in range(3):
        rows = ROWS[part * 8 : (part + 1) * 8]
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (tmp_path / f"part-{part}.jsonl").write_text(text, encoding="utf-8")
    listed = lkd.from_files([tmp_path / f"part-{p}.jsonl" for p in range(3)])
    globbed = lkd.from_files(str(tmp_path / "part-*.jsonl"), format="json")
    assert listed["id"] == globbed["id"] == list(range(23))
    assert listed._fingerprint == globbed._fingerprint  # the same bytes in the same order
    plan = shuffled(globbed)
    plan.save(tmp_path / "plan.toml")
    assert_batches_equal(batches(plan), batches(LoaderPlan.load(tmp_path / "plan.toml")))
