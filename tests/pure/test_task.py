"""with_task and with_collator("auto"): choosing collators by modality or from the dataset."""

from __future__ import annotations

import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan, register_collator
from loaderkit.collators import collators


@pytest.fixture
def audio_collator():
    @register_collator("test-audio", modality="audio", description="pads waveforms")
    def factory(*, sample_rate: int = 16_000):
        return list

    yield "test-audio"
    collators.unregister("test-audio")


def test_tabular_uses_the_default_collator():
    plan = DataLoaderBuilder().with_dataset([1, 2]).with_task("tabular").compile()
    assert plan.collator.name == "default"
    assert "with_task(modality='tabular')" in plan.explain()


def test_a_registered_modality_is_found(audio_collator):
    plan = DataLoaderBuilder().with_dataset([1, 2]).with_task("audio", sample_rate=8000).compile()
    assert plan.collator.name == audio_collator
    assert dict(plan.collator.options) == {"sample_rate": 8000}


def test_a_modality_without_collator_is_an_error_naming_the_fix():
    if any(e.modality == "audio" for e in collators.entries()):
        pytest.skip("an audio collator is installed")
    with pytest.raises(lk.PlanError) as err:
        DataLoaderBuilder().with_task("audio")
    assert err.value.paths == ("task.modality",)
    assert "register_collator" in str(err.value)


def test_unknown_modalities_are_refused():
    with pytest.raises(lk.PlanError, match="did you mean 'vision'"):
        DataLoaderBuilder().with_task("visoin")


def test_auto_reads_the_columns_of_list_samples(audio_collator):
    samples = [{"input_ids": [1, 2], "label": 0}]
    builder = DataLoaderBuilder().with_dataset(samples).with_collator("auto")
    if "text" not in collators:
        with pytest.raises(lk.PlanError, match="modality 'text'"):
            builder.compile()
        return
    plan = builder.compile()
    assert plan.collator.name == "text"
    assert "auto: column 'input_ids' -> text" in plan.explain()


def test_auto_reads_hf_features(audio_collator):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"clip": [[0.0, 1.0]], "y": [1]})
    ds = ds.cast_column("clip", datasets.Sequence(datasets.Value("float32")))
    # no audio feature: auto cannot tell
    with pytest.raises(lk.PlanError, match="with_task"):
        DataLoaderBuilder().with_dataset(ds).with_collator("auto").compile()
    spec = DataLoaderBuilder().with_dataset(ds).compile().dataset
    assert spec.columns == ("clip", "y")
    assert len(spec.features) == 2


def test_auto_with_several_modalities_asks_for_multimodal():
    samples = [{"input_ids": [1], "pixel_values": [0.0]}]
    with pytest.raises(lk.PlanError, match="multimodal") as err:
        DataLoaderBuilder().with_dataset(samples).with_collator("auto").compile()
    assert err.value.paths == ("collator",)


def test_auto_reports_with_the_other_problems():
    with pytest.raises(lk.PlanError) as err:
        DataLoaderBuilder().with_dataset([1]).with_collator("auto").with_workers(
            0, prefetch_factor=2
        ).compile()
    assert err.value.paths == ("collator", "workers.prefetch_factor")


def test_the_choice_and_its_reason_survive_files(tmp_path, audio_collator):
    plan = DataLoaderBuilder().with_dataset([1, 2], name="d").with_task("audio").compile()
    path = tmp_path / "p.toml"
    plan.save(path)
    again = LoaderPlan.load(path, bindings={"d": [1, 2]})
    assert again == plan
    assert again.collator.reason == plan.collator.reason


def test_auto_in_a_file_is_resolved_at_load(audio_collator):
    plan = DataLoaderBuilder().with_dataset([1, 2], name="d").compile()
    data = plan.to_dict()
    data["collator"] = {"name": "auto"}
    with pytest.raises(lk.PlanError, match="cannot tell"):
        LoaderPlan.from_dict(data, bindings={"d": [1, 2]})


def test_auto_points_the_vision_collator_at_the_image_column():
    if "vision" not in collators:
        pytest.skip("vision collator not registered")
    samples = [{"image": [[0, 0, 0]], "label": 1}]
    plan = DataLoaderBuilder().with_dataset(samples).with_collator("auto").compile()
    assert plan.collator.name == "vision"
    assert dict(plan.collator.options) == {"image_key": "image"}
