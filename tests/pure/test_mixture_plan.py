"""Mixtures in the plan layer: builder, rules, files, fingerprint and explain()."""

from __future__ import annotations

import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError

WIKI = [{"x": i} for i in range(30)]
CODE = [{"x": 100 + i} for i in range(10)]


def weights_of(t: int) -> dict[str, float]:
    return {"wiki": 1.0, "code": float(t + 1)}


def mixed(**kw) -> DataLoaderBuilder:
    return DataLoaderBuilder().with_mixture({"wiki": WIKI, "code": CODE}, **kw).with_batch_size(4)


def test_a_mixture_reads_as_the_concatenation_of_its_sources():
    plan = mixed(weights={"wiki": 3, "code": 1}).compile()
    assert plan.dataset.kind == "mixture"
    assert plan.dataset.length == 40
    assert plan.dataset.columns == ("x",)
    assert plan.mixture is not None
    assert plan.mixture.names == ("wiki", "code")
    assert plan.mixture.weights == (3.0, 1.0)
    assert set(plan.bindings) == {"wiki", "code"}


def test_the_builder_repr_shows_the_mixture_call():
    text = repr(mixed(weights=[3, 1], stratified=True, source_key="source"))
    assert text.startswith(
        "DataLoaderBuilder().with_mixture({'wiki': <list: 30 samples>, 'code': <list: 10 "
        "samples>}, weights={'wiki': 3.0, 'code': 1.0}, stratified=True, source_key='source')"
    )


def test_with_dataset_replaces_a_mixture_and_back():
    builder = mixed()
    single = builder.with_dataset(list(range(5)))
    plan = single.compile()
    assert plan.mixture is None
    assert set(plan.bindings) == {"dataset"}
    again = single.with_mixture({"a": [1, 2], "b": [3]}).compile()
    assert set(again.bindings) == {"a", "b"}
    assert builder.compile().mixture is not None  # the old builder is untouched


@pytest.mark.parametrize(
    ("kwargs", "path", "words"),
    [
        ({"sources": {}}, "mixture.sources", "non-empty mapping"),
        ({"sources": [WIKI]}, "mixture.sources", "mapping of source name"),
        ({"sources": {"1bad": WIKI}}, "mixture.sources", "must start with a letter"),
        ({"sources": {"a": []}}, "mixture.sources.a", "0 samples"),
        ({"sources": {"a": None}}, "mixture.sources.a", "got None"),
        ({"sources": {"a": 42}}, "mixture.sources.a", "cannot load samples"),
        ({"sources": {"collator": WIKI}}, "mixture.sources.collator", "reserved"),
        ({"mode": "zip"}, "mixture.mode", "round_robin"),
        ({"weights": {"wiki": 1, "cod": 1}}, "mixture.weights", "did you mean 'code'"),
        ({"weights": {"wiki": 1}}, "mixture.weights", "no weight for 'code'"),
        ({"weights": [1, 2, 3]}, "mixture.weights", "3 weights for 2 sources"),
        ({"weights": [1, -1]}, "mixture.weights['code']", ">= 0"),
        ({"weights": [0, 0]}, "mixture.weights", "all weights are 0"),
        ({"weights": [1, float("nan")]}, "mixture.weights['code']", "finite"),
        ({"weights": 3}, "mixture.weights", "mapping of source name"),
        ({"weights": [(5, [1, 1]), (2, [1, 2])]}, "mixture.weights[1]", "must increase"),
        ({"mode": "round_robin", "weights": [1, 2]}, "mixture.weights", "mode='weighted'"),
        ({"mode": "min_size", "stratified": True}, "mixture.stratified", "mode='weighted'"),
        ({"mode": "sequential", "num_samples": 5}, "mixture.num_samples", "mode='weighted'"),
        ({"num_samples": 0}, "mixture.num_samples", ">= 1"),
        ({"by": "batch"}, "mixture.by", "epoch"),
        ({"source_key": "x"}, "mixture.source_key", "already a column"),
        ({"stratified": 1}, "mixture.stratified", "True or False"),
    ],
)
def test_bad_mixtures_name_the_field(kwargs, path, words):
    args = {"sources": {"wiki": WIKI, "code": CODE}, **kwargs}
    sources = args.pop("sources")
    with pytest.raises(PlanError) as info:
        DataLoaderBuilder().with_mixture(sources, **args)
    problem = info.value.problems[0]
    assert problem.path == path, info.value
    assert words in problem.message, info.value


@pytest.mark.parametrize(
    ("edit", "label"),
    [
        (lambda b: b.with_sampling_weights([1.0] * 40), "with_sampling_weights"),
        (lambda b: b.with_curriculum([1.0] * 40, "discrete", steps=[(1, 0.5)]), "with_curriculum"),
    ],
)
def test_mixtures_refuse_other_samplers_for_now(edit, label):
    with pytest.raises(PlanError) as info:
        edit(mixed()).compile()
    assert any(p.path == "mixture" and label in p.message for p in info.value.problems)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"weights": {"wiki": 3, "code": 1}, "num_samples": 12},
        {"weights": weights_of},
        {"weights": [(2, {"wiki": 1, "code": 0}), (4, [1, 1])]},
        {"weights": [1, 2], "by": "step"},
        {"mode": "round_robin"},
        {"mode": "max_size_cycle"},
        {"mode": "min_size"},
    ],
)
def test_mixtures_can_be_bucketed(kwargs):
    plan = mixed(**kwargs).with_bucketing([1] * 40).compile()
    assert "grouped in length buckets" in plan.explain()


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"mode": "sequential"}, "mixture.mode"),
        ({"stratified": True}, "mixture.stratified"),
        ({"weights": [(2, {"wiki": 1, "code": 0}), (4, [1, 1])], "by": "step"}, "mixture.by"),
        ({"weights": weights_of, "by": "step"}, "mixture.by"),
    ],
)
def test_mixtures_bucketing_cannot_follow_are_refused(kwargs, path):
    with pytest.raises(PlanError) as info:
        mixed(**kwargs).with_bucketing([1] * 40).compile()
    assert info.value.paths == (path,)
    assert "cannot be combined with with_bucketing" in info.value.problems[0].message


def test_explain_shows_sources_weights_and_epoch_size():
    text = mixed(weights={"wiki": 3, "code": 1}, source_key="src").compile().explain()
    assert "'mixture': mixture of datasets" in text
    assert "mixture     2 sources: 'wiki' 30 (p=0.75), 'code' 10 (p=0.25); mode weighted" in text
    assert "40 samples per epoch; source ids in batch['src']" in text
    assert "4 samples per batch per rank, drop_last=False -> 10 batches per epoch per rank" in text


@pytest.mark.parametrize(
    ("mode", "batches"),
    [("sequential", 8 + 3), ("round_robin", 10), ("max_size_cycle", 15), ("min_size", 5)],
)
def test_explain_counts_batches_per_mode(mode, batches):
    text = mixed(mode=mode).compile().explain()
    assert f"-> {batches} batches per epoch per rank" in text


@pytest.mark.parametrize("suffix", [".json", ".toml"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"weights": {"wiki": 2, "code": 1}, "stratified": True, "num_samples": 12},
        {"weights": [(2, {"wiki": 1, "code": 0}), (4, [1, 1])], "by": "step"},
        {"weights": weights_of, "source_key": "source"},
        {"mode": "max_size_cycle"},
    ],
)
def test_mixture_plans_round_trip_through_files(tmp_path, suffix, kwargs):
    plan = mixed(**kwargs).compile()
    path = tmp_path / f"plan{suffix}"
    plan.save(path)
    again = LoaderPlan.load(path, bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    unbound = LoaderPlan.load(path, require_bindings=False)
    assert not unbound.bound
    assert unbound.fingerprint == plan.fingerprint
    assert "mixture" in unbound.explain()


def test_loading_needs_every_source_and_checks_it():
    plan = mixed().compile()
    data = plan.to_dict()
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI})
    assert [p.path for p in info.value.problems] == ["mixture.sources[1]"]
    with pytest.raises(PlanError, match="not the dataset the plan was made for"):
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI, "code": CODE[:5]})
    with pytest.raises(PlanError, match="is not used by this plan"):
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI, "code": CODE, "other": []})


def test_a_file_whose_dataset_disagrees_with_its_sources_is_refused():
    data = mixed().compile().to_dict()
    data["dataset"]["length"] = 41
    with pytest.raises(PlanError, match="does not match the mixture's sources"):
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI, "code": CODE})
    data = mixed().compile().to_dict()
    del data["mixture"]
    with pytest.raises(PlanError, match="has no mixture section"):
        LoaderPlan.from_dict(data, bindings={})


def test_a_bad_mixture_table_is_reported_with_paths():
    data = mixed().compile().to_dict()
    data["mixture"]["mode"] = "zipper"
    data["mixture"]["sources"][0]["kind"] = "mixturez"
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI, "code": CODE})
    assert "mixture.sources[0].kind" in {p.path for p in info.value.problems}
    data = mixed().compile().to_dict()
    data["mixture"]["mode"] = "zipper"
    data["mixture"]["weight"] = 1
    with pytest.raises(PlanError) as info:
        LoaderPlan.from_dict(data, bindings={"wiki": WIKI, "code": CODE})
    paths = {p.path for p in info.value.problems}
    assert {"mixture.weight", "mixture.mode"} <= paths, info.value


@pytest.mark.parametrize(
    "other",
    [
        {"weights": [2, 1]},
        {"weights": [1, 2]},
        {"mode": "round_robin"},
        {"stratified": True},
        {"num_samples": 7},
        {"source_key": "source"},
        {"weights": [(3, [1, 1])]},
        {"weights": [(3, [1, 1])], "by": "step"},
        {"weights": weights_of},
    ],
)
def test_every_mixture_field_is_in_the_fingerprint(other):
    assert mixed(**other).compile().fingerprint != mixed().compile().fingerprint


def test_source_identity_and_order_are_in_the_fingerprint():
    base = mixed().compile().fingerprint
    swapped = DataLoaderBuilder().with_mixture({"code": CODE, "wiki": WIKI}).with_batch_size(4)
    assert swapped.compile().fingerprint != base
    shorter = DataLoaderBuilder().with_mixture({"wiki": WIKI[:-1], "code": CODE}).with_batch_size(4)
    assert shorter.compile().fingerprint != base
