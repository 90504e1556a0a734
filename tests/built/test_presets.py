"""Presets: valid batches, reproducible, resumable and worker-invariant, on generated datasets.

Every preset is checked over datasets drawn by ``loaderkit.testing`` with its own assertions,
and the registry / record (repr, plan file, fingerprint) is checked apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError, PlanTypeError, presets
from loaderkit.collators.packed import unpack
from loaderkit.collators.vision import PRESETS as STATS
from loaderkit.registry import UnknownNameError
from loaderkit.testing import (
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
    sample_datasets,
)

pytestmark = pytest.mark.timeout(300)

VOCAB = 30
MASK = VOCAB  # the [MASK] id, outside the drawn ids
seeds = st.integers(0, 2**63 - 1)
batch_sizes = st.integers(1, 4)


def _epoch_samples(loader: Any, dataset: Any, epoch: int = 0) -> list[list[Any]]:
    """The dataset's samples of every batch of ``epoch``, in batch order."""
    return [[dataset[i] for i in loader.batch_indices(epoch, s)] for s in range(len(loader))]


def _check_properties(plan: LoaderPlan, data: Any) -> None:
    """The kit's properties: reproducible, and resumable at a drawn batch."""
    assert_reproducible(plan)
    with plan.build() as loader:
        n = len(loader)
    assert_resumable(plan, at=[data.draw(st.integers(0, n), label="resume at")])


# -- causal_lm_pretraining -----------------------------------------------------------------------


@settings(max_examples=12)
@given(
    sample_datasets("tokens", max_size=14, vocab_size=VOCAB, max_length=12),
    batch_sizes,
    seeds,
    st.booleans(),
    st.data(),
)
def test_causal_lm_pretraining(
    dataset: Any, batch_size: int, seed: int, bucketing: bool, data: Any
) -> None:
    batch_size = min(batch_size, len(dataset))  # drop_last: at least one batch
    plan = presets.causal_lm_pretraining(
        dataset, max_length=10, batch_size=batch_size, seed=seed, bucketing=bucketing
    ).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    assert len(batches) == len(dataset) // batch_size  # drop_last
    for batch, rows in zip(batches, samples, strict=True):
        assert list(batch) == ["input_ids", "attention_mask", "labels"]
        assert all(batch[k].dtype == torch.int64 for k in batch)
        width = batch["input_ids"].shape[1]
        assert batch["input_ids"].shape == (batch_size, width) == batch["labels"].shape
        assert width % 8 == 0  # pad_to_multiple_of
        assert width <= 16
        for r, sample in enumerate(rows):
            ids = sample["input_ids"][:10]
            assert batch["input_ids"][r, : len(ids)].tolist() == ids
            assert batch["attention_mask"][r].tolist() == [1] * len(ids) + [0] * (width - len(ids))
            assert batch["labels"][r].tolist() == ids + [-100] * (width - len(ids))
    if batches:
        plan.check()  # the preset's batch contract holds
    _check_properties(plan, data)


def test_causal_lm_pretraining_under_a_token_budget() -> None:
    corpus = [{"input_ids": list(range(1, 2 + i % 9))} for i in range(40)]
    plan = presets.causal_lm_pretraining(corpus, max_tokens=32, batch_size=6).compile()
    assert plan.bucketing is not None
    assert plan.bucketing.max_tokens == 32
    assert plan.bucketing.max_batch_size == 6
    with plan.build() as loader:
        for batch in loader:
            rows, width = batch["input_ids"].shape
            longest = int(batch["attention_mask"].sum(1).max())
            assert rows <= 6
            assert rows * width <= 32  # the budget bounds the padded batch (issue 16)
            assert width == -(-longest // 8) * 8


# -- instruction_tuning --------------------------------------------------------------------------


@settings(max_examples=12)
@given(
    sample_datasets("tokens", max_size=14, vocab_size=VOCAB, max_length=12, labels="prompt_masked"),
    batch_sizes,
    seeds,
    st.data(),
)
def test_instruction_tuning(dataset: Any, batch_size: int, seed: int, data: Any) -> None:
    plan = presets.instruction_tuning(
        dataset, max_length=8, batch_size=batch_size, seed=seed
    ).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    assert sum(len(rows) for rows in samples) == len(dataset)  # nothing dropped
    for batch, rows in zip(batches, samples, strict=True):
        for key in ("input_ids", "labels", "position_ids", "sequence_ids"):
            assert batch[key].shape == (batch["num_rows"], 8)
            assert batch[key].dtype == torch.int64
        assert batch["cu_seqlens"].dtype == torch.int32
        # truncated to max_length, in batch order
        assert [t.tolist() for t in unpack(batch)] == [s["input_ids"][:8] for s in rows]
        for labels, sample in zip(unpack(batch, "labels"), rows, strict=True):
            given_labels = sample["labels"][:8]
            assert labels.tolist()[1:] == given_labels[1:]  # the first is masked (a boundary)
            assert labels[0] == -100
    if batches:
        plan.check()
    _check_properties(plan, data)


# -- masked_lm -----------------------------------------------------------------------------------


@settings(max_examples=12)
@given(
    sample_datasets("tokens", max_size=14, vocab_size=VOCAB, max_length=12),
    batch_sizes,
    seeds,
    st.data(),
)
def test_masked_lm(dataset: Any, batch_size: int, seed: int, data: Any) -> None:
    batch_size = min(batch_size, len(dataset))  # drop_last: at least one batch
    plan = presets.masked_lm(
        dataset,
        mask_token_id=MASK,
        vocab_size=VOCAB + 1,
        max_length=10,
        batch_size=batch_size,
        seed=seed,
        mlm_probability=0.5,
    ).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    for batch, rows in zip(batches, samples, strict=True):
        assert sorted(batch) == ["attention_mask", "input_ids", "labels"]
        assert batch["labels"].dtype == torch.int64
        assert (
            batch["input_ids"].shape
            == batch["labels"].shape
            == (batch_size, batch["labels"].shape[1])
        )
        for r, sample in enumerate(rows):
            ids = sample["input_ids"][:10]
            n = len(ids)
            got, labels = batch["input_ids"][r].tolist(), batch["labels"][r].tolist()
            assert labels[n:] == [-100] * (len(labels) - n)  # padding is never selected
            for t in range(n):
                if labels[t] == -100:
                    assert got[t] == ids[t]  # not selected: unchanged
                else:
                    assert labels[t] == ids[t]  # selected: the label is the original id
                    assert 0 <= got[t] <= MASK
    if batches:
        plan.check()
    _check_properties(plan, data)


# -- seq2seq -------------------------------------------------------------------------------------


@settings(max_examples=12)
@given(
    sample_datasets("tokens", max_size=12, vocab_size=VOCAB, max_length=10, labels="target"),
    batch_sizes,
    seeds,
    st.data(),
)
def test_seq2seq(dataset: Any, batch_size: int, seed: int, data: Any) -> None:
    plan = presets.seq2seq(
        dataset,
        decoder_start_token_id=VOCAB,
        max_length=8,
        max_target_length=4,
        batch_size=batch_size,
        seed=seed,
    ).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    assert sum(len(rows) for rows in samples) == len(dataset)
    for batch, rows in zip(batches, samples, strict=True):
        b = len(rows)
        assert batch["input_ids"].shape == batch["attention_mask"].shape
        assert batch["input_ids"].shape[0] == b
        assert batch["labels"].shape == batch["decoder_input_ids"].shape == (b, 8)
        assert batch["decoder_input_ids"][:, 0].tolist() == [VOCAB] * b
        for r, sample in enumerate(rows):
            target = sample["labels"][:4]
            assert batch["labels"][r, : len(target)].tolist() == target
            assert (
                batch["input_ids"][r, : len(sample["input_ids"][:8])].tolist()
                == (sample["input_ids"][:8])
            )
    if batches:
        plan.check()
    _check_properties(plan, data)


# -- image_classification ------------------------------------------------------------------------


@settings(max_examples=10)
@given(
    sample_datasets("images", max_size=10, max_side=8, dtype="uint8"),
    batch_sizes,
    seeds,
    st.data(),
)
def test_image_classification(dataset: Any, batch_size: int, seed: int, data: Any) -> None:
    batch_size = min(batch_size, len(dataset))  # drop_last: at least one batch
    plan = presets.image_classification(dataset, batch_size=batch_size, seed=seed).compile()
    mean, std = (torch.tensor(v).view(3, 1, 1) for v in STATS["imagenet"])
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    assert len(batches) == len(dataset) // batch_size
    for batch, rows in zip(batches, samples, strict=True):
        images = batch["pixel_values"]
        assert images.dtype == torch.float32
        assert images.shape == (batch_size, *rows[0]["pixel_values"].shape)
        assert batch["label"].tolist() == [s["label"] for s in rows]
        for image, sample in zip(images, rows, strict=True):
            expected = (sample["pixel_values"].float() / 255 - mean) / std
            torch.testing.assert_close(image, expected, rtol=1e-5, atol=1e-5)
    if batches:
        plan.check()
    _check_properties(plan, data)


def test_image_classification_reads_torchvision_tuples() -> None:
    images = [(torch.full((3, 6, 5), i, dtype=torch.uint8), i) for i in range(6)]
    plan = presets.image_classification(
        images, image_key=None, normalize=None, batch_size=3, shuffle=False
    ).compile()
    report = str(plan.check())
    assert "shapes     0 [B, C, H, W]: B=3, C=3, H=6, W=5" in report
    assert "finite     0: no NaN or Inf" in report
    batch = next(iter(plan.build()))
    assert isinstance(batch, list)
    assert batch[0].shape == (3, 3, 6, 5)
    assert batch[1].tolist() == [0, 1, 2]


# -- tabular -------------------------------------------------------------------------------------


@settings(max_examples=12)
@given(sample_datasets("tabular", max_size=20), st.integers(1, 8), seeds, st.data())
def test_tabular(dataset: Any, batch_size: int, seed: int, data: Any) -> None:
    plan = presets.tabular(dataset, batch_size=batch_size, seed=seed, finite=["0"]).compile()
    features, labels = dataset.tensors
    with plan.build() as loader:
        batches = collect(loader)
        indices = [loader.batch_indices(0, s) for s in range(len(loader))]
    assert sorted(i for batch in indices for i in batch) == list(range(len(dataset)))
    for (x, y), idx in zip(batches, indices, strict=True):
        assert x.dtype == torch.float32
        assert y.dtype == torch.int64
        assert torch.equal(x, features[idx])
        assert torch.equal(y, labels[idx])
    plan.check()
    _check_properties(plan, data)


def test_tabular_finite_check_names_the_key() -> None:
    table = {"x": np.array([[1.0], [np.nan]], dtype=np.float32), "y": np.array([0, 1])}
    plan = presets.tabular(table, batch_size=2, finite=["x"], shuffle=False).compile()
    with pytest.raises(DataError, match=r"batch check failed: 'x' \(finite\)"):
        plan.check()


# -- HF datasets ---------------------------------------------------------------------------------


@settings(max_examples=3)
@given(
    sample_datasets("tokens", min_size=4, max_size=12, vocab_size=VOCAB, backend="hf"), st.data()
)
def test_causal_lm_pretraining_on_hf_datasets(dataset: Any, data: Any) -> None:
    plan = presets.causal_lm_pretraining(dataset, max_length=8, batch_size=2, seed=1).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    for batch, rows in zip(batches, samples, strict=True):
        for r, sample in enumerate(rows):
            ids = sample["input_ids"][:8]
            assert batch["input_ids"][r, : len(ids)].tolist() == ids
    _check_properties(plan, data)


@settings(max_examples=3)
@given(
    sample_datasets("images", min_size=2, max_size=6, max_side=6, pil=True, backend="hf"), st.data()
)
def test_image_classification_on_hf_image_features(dataset: Any, data: Any) -> None:
    plan = presets.image_classification(dataset, batch_size=2, normalize=None).compile()
    with plan.build() as loader:
        batches = collect(loader)
        samples = _epoch_samples(loader, dataset)
    for batch, rows in zip(batches, samples, strict=True):
        expected = torch.stack(
            [torch.from_numpy(np.array(s["pixel_values"])).permute(2, 0, 1) for s in rows]
        )
        torch.testing.assert_close(batch["pixel_values"], expected.float() / 255)
    _check_properties(plan, data)


# -- workers: a few examples per preset ----------------------------------------------------------


def _worker_cases() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    text = {"max_size": 10, "vocab_size": VOCAB, "max_length": 10}
    return [
        ("causal_lm_pretraining", "tokens", text, {"max_length": 8, "batch_size": 2}),
        (
            "instruction_tuning",
            "tokens",
            {**text, "labels": "prompt_masked"},
            {"max_length": 8, "batch_size": 3},
        ),
        (
            "masked_lm",
            "tokens",
            text,
            {"mask_token_id": MASK, "vocab_size": VOCAB + 1, "batch_size": 2},
        ),
        ("seq2seq", "tokens", {**text, "labels": "target"}, {"decoder_start_token_id": 1}),
        ("image_classification", "images", {"max_size": 8, "max_side": 6}, {"batch_size": 2}),
        ("tabular", "tabular", {"max_size": 10}, {"batch_size": 3}),
    ]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("name", "kind", "draw", "options"), _worker_cases(), ids=[c[0] for c in _worker_cases()]
)
def test_presets_are_worker_invariant(
    name: str, kind: str, draw: dict[str, Any], options: dict[str, Any]
) -> None:
    @settings(max_examples=2)
    @given(sample_datasets(kind, min_size=4, **draw))
    def check(dataset: Any) -> None:
        plan = presets.get(name)(dataset, seed=5, **options).compile()
        assert_worker_invariant(plan, workers=(0, 2), epochs=1)

    check()


# -- the registry and the record -----------------------------------------------------------------

CORPUS = [{"input_ids": list(range(1, 3 + i % 6))} for i in range(40)]


@pytest.mark.parametrize("name", presets.names())
def test_a_preset_builder_repr_starts_with_the_preset_call(name: str) -> None:
    corpus = CORPUS
    options: dict[str, Any] = {}
    if name == "masked_lm":
        options = {"mask_token_id": 99, "vocab_size": 100}
    elif name == "seq2seq":
        options = {"decoder_start_token_id": 0}
    elif name == "image_classification":
        corpus = [{"pixel_values": np.zeros((3, 5, 5), np.uint8), "label": 0}] * 40
    builder = presets.get(name)(corpus, **options)
    shown = ", ".join(
        [f"<list: {len(corpus)} samples>", *(f"{k}={v!r}" for k, v in options.items())]
    )
    assert repr(builder) == f"loaderkit.presets.{name}({shown})"
    plan = builder.compile()
    assert plan.preset is not None
    assert plan.preset.name == name
    assert f"  preset      {name}(" in plan.explain()


def test_chained_calls_follow_the_preset_call() -> None:
    builder = presets.causal_lm_pretraining(CORPUS, max_length=16, name="train")
    chained = builder.with_workers(2).with_shuffle(False).with_seed(3)
    assert repr(chained) == (
        "loaderkit.presets.causal_lm_pretraining(<list: 40 samples>, max_length=16, "
        "name='train').with_seed(3).with_workers(2).with_shuffle(False)"
    )
    assert repr(builder) == (
        "loaderkit.presets.causal_lm_pretraining(<list: 40 samples>, max_length=16, name='train')"
    )
    again = chained.with_shuffle().with_workers(0).with_seed(0)  # back to the preset's settings
    assert repr(again) == repr(builder)
    assert again == builder


def test_the_record_is_information_not_part_of_the_stream() -> None:
    plan = presets.causal_lm_pretraining(CORPUS, max_length=16, batch_size=4).compile()
    by_hand = (
        DataLoaderBuilder()
        .with_dataset(CORPUS)
        .with_batch_size(4, drop_last=True)
        .with_shuffle()
        .with_collator("causal_lm", max_length=16, pad_token_id=0, pad_to_multiple_of=8)
        .with_bucketing("input_ids")
        .with_checks(
            keys=["input_ids", "attention_mask", "labels"],
            shapes={k: ["B", "T"] for k in ("input_ids", "attention_mask", "labels")},
            label_pad={"mode": "only_pad"},
        )
        .compile()
    )
    assert by_hand.preset is None
    assert plan == by_hand
    assert plan.fingerprint == by_hand.fingerprint
    assert plan.to_dict()["preset"] == {
        "name": "causal_lm_pretraining",
        "options": {"batch_size": 4, "max_length": 16},
    }
    assert "preset" not in by_hand.to_dict()
    assert plan.diff(by_hand) == [
        "preset.name: 'causal_lm_pretraining' -> <unset>",
        "preset.options.batch_size: 4 -> <unset>",
        "preset.options.max_length: 16 -> <unset>",
    ]


def test_the_record_survives_plan_files(tmp_path: Any) -> None:
    plan = presets.instruction_tuning(CORPUS, max_length=32, name="sft").compile()
    path = tmp_path / "plan.toml"
    plan.save(path)
    assert '[preset]\nname = "instruction_tuning"' in path.read_text()
    loaded = LoaderPlan.load(path, bindings={"sft": CORPUS})
    assert loaded == plan
    assert loaded.preset == plan.preset
    # a plan read from a file explains its preset; its builder shows the plain chain
    assert "  preset      instruction_tuning(max_length=32, name='sft')" in loaded.explain()
    assert repr(loaded.to_builder()).startswith("DataLoaderBuilder().with_dataset(")
    assert repr(plan.to_builder()).startswith("loaderkit.presets.instruction_tuning(")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"name": 3}, "preset.name: must be the non-empty name of a preset (got int 3)"),
        ({"name": "x", "options": [1]}, "preset.options: must be a table of option = value"),
        ({"nmae": "x"}, "preset.nmae: unknown key 'nmae'; did you mean 'name'?"),
    ],
)
def test_a_bad_preset_table_is_refused(section: dict[str, Any], message: str) -> None:
    data = DataLoaderBuilder().with_dataset(CORPUS).compile().to_dict()
    data["preset"] = section
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"dataset": CORPUS})
    assert message in str(info.value)


def test_options_are_checked_with_the_fix() -> None:
    with pytest.raises(PlanTypeError) as info:
        presets.causal_lm_pretraining(CORPUS, max_len=12)
    assert str(info.value).startswith(
        "preset.options.max_len: preset 'causal_lm_pretraining' does not take option "
        "'max_len'; did you mean 'max_length'?; it accepts: name, max_length,"
    )
    with pytest.raises(PlanTypeError) as info:
        presets.masked_lm(CORPUS)
    assert [p.path for p in info.value.problems] == [
        "preset.options.mask_token_id",
        "preset.options.vocab_size",
    ]
    with pytest.raises(PlanTypeError, match=r"preset.options.bucketing: must be True or False"):
        presets.causal_lm_pretraining(CORPUS, bucketing="yes")
    with pytest.raises(PlanError, match=r"collator.options.overflow: must be one of"):
        presets.instruction_tuning(CORPUS, overflow="wrap")


def test_unknown_names_suggest_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        presets.get("causal_lm")
    assert "did you mean 'causal_lm_pretraining'?" in str(info.value)
    assert "@loaderkit.presets.register('causal_lm')" in str(info.value)


def test_users_register_their_own_presets() -> None:
    @presets.register("tiny_eval")
    def tiny_eval(dataset: object, *, batch_size: int = 2) -> DataLoaderBuilder:
        """Evaluation in order, small batches."""
        return DataLoaderBuilder().with_dataset(dataset).with_batch_size(batch_size)

    try:
        assert "tiny_eval" in presets.names()
        assert "tiny_eval              Evaluation in order, small batches." in presets.describe()
        builder = presets.get("tiny_eval")(CORPUS, batch_size=4)
        assert (
            repr(builder) == "loaderkit.presets.get('tiny_eval')(<list: 40 samples>, batch_size=4)"
        )
        assert repr(tiny_eval(CORPUS).with_shuffle()) == (
            "loaderkit.presets.get('tiny_eval')(<list: 40 samples>).with_shuffle()"
        )
        with pytest.raises(ValueError, match="already registered"):
            presets.register("tiny_eval")(tiny_eval)
    finally:
        presets.registry.unregister("tiny_eval")


def test_a_preset_must_take_a_dataset_and_return_a_builder() -> None:
    def no_dataset(*, batch_size: int = 2) -> DataLoaderBuilder:
        return DataLoaderBuilder()

    with pytest.raises(TypeError, match="must take the dataset as its first positional"):
        presets.register("no_dataset")(no_dataset)

    @presets.register("compiled")
    def compiled(dataset: object) -> Any:
        return DataLoaderBuilder().with_dataset(dataset).compile()

    try:
        with pytest.raises(TypeError, match=r"must return a DataLoaderBuilder \(got LoaderPlan\)"):
            compiled(CORPUS)
    finally:
        presets.registry.unregister("compiled")


def test_plugin_presets_record_themselves_too() -> None:
    def raw(dataset: object, *, batch_size: int = 2) -> DataLoaderBuilder:
        return DataLoaderBuilder().with_dataset(dataset).with_batch_size(batch_size)

    presets.registry.register("raw_plugin", raw, origin="entry point pkg:raw")
    try:
        builder = presets.get("raw_plugin")(CORPUS, batch_size=3)
        assert repr(builder) == (
            "loaderkit.presets.get('raw_plugin')(<list: 40 samples>, batch_size=3)"
        )
        assert builder.compile().preset is not None
    finally:
        presets.registry.unregister("raw_plugin")


def test_the_dataset_comes_first_or_by_its_name() -> None:
    by_name = presets.tabular(dataset=CORPUS, batch_size=4)
    assert by_name == presets.tabular(CORPUS, batch_size=4)
    assert repr(by_name) == "loaderkit.presets.tabular(<list: 40 samples>, batch_size=4)"
    with pytest.raises(TypeError, match=r"takes the dataset, then keyword options \(got 2"):
        presets.tabular(CORPUS, 4)


def test_the_preset_call_shows_the_dataset_as_with_dataset_does() -> None:
    import loaderkit.datasets as lkd

    columns = {"features": torch.zeros(50, 3), "label": torch.zeros(50)}
    assert repr(presets.tabular(columns)) == "loaderkit.presets.tabular(<dict: 50 samples>)"
    loaded = lkd.load("tokens", n=20)
    assert repr(presets.causal_lm_pretraining(loaded, batch_size=2)) == (
        "loaderkit.presets.causal_lm_pretraining(loaderkit.datasets.load('tokens', n=20), "
        "batch_size=2)"
    )
    plan = presets.masked_lm(
        CORPUS, mask_token_id=99, vocab_size=100, special_token_ids=[1, 2]
    ).compile()
    assert "special_token_ids=[1, 2]" in plan.explain()  # a list, as it was given
