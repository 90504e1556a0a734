"""Dropping a call: ``without(*settings)``, ``with_batch_size(None)``; fixes as one call."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder, PlanError, PlanTypeError, presets
from loaderkit.plan.plan import PLAN_SECTIONS, SETTINGS, Setting
from loaderkit.testing.strategies import apply_calls, builder_calls, sample_transform

DATA = [{"input_ids": list(range(1 + i % 7)), "label": i % 3} for i in range(64)]
LENGTHS = [1 + i % 7 for i in range(64)]

# the with_* call that sets each setting, the way a user writes it (none at its default)
SET_BY = {
    "batch": lambda b: b.with_batch_size(8, drop_last=True),
    "order": lambda b: b.with_shuffle().with_seed(3),
    "collator": lambda b: b.with_collator("text"),
    "transform": lambda b: b.with_transform(sample_transform),
    "global_rngs": lambda b: b.with_global_rngs("per_worker"),
    "workers": lambda b: b.with_workers(2, start_method="spawn"),
    "device": lambda b: b.with_device("cuda"),
    "distributed": lambda b: b.with_distributed(world_size=2, rank=0),
    "bucketing": lambda b: b.with_bucketing(LENGTHS, num_buckets=4),
    "sampling_weights": lambda b: b.with_sampling_weights([1.0] * 64),
    "curriculum": lambda b: b.with_curriculum(LENGTHS, horizon=3),
    "max_length": lambda b: b.with_max_length(4),
    "split": lambda b: b.with_split(0.25),
    "checks": lambda b: b.with_checks(keys=["input_ids"]),
    "error_policy": lambda b: b.with_error_policy("skip", max_errors=2),
    "cache": lambda b: b.with_cache("memory"),
}
BASE = DataLoaderBuilder().with_dataset(DATA)

# the section each method of the generated chains sets (all but the source's)
METHOD_SETS = {
    "with_batch_size": "batch",
    "with_shuffle": "order",
    "with_seed": "order",
    "with_collator": "collator",
    "with_task": "collator",
    "with_transform": "transform",
    "with_global_rngs": "global_rngs",
    "with_workers": "workers",
    "with_device": "device",
    "with_distributed": "distributed",
    "with_bucketing": "bucketing",
    "with_sampling_weights": "sampling_weights",
    "with_curriculum": "curriculum",
    "with_max_length": "max_length",
    "with_split": "split",
    "with_checks": "checks",
    "with_error_policy": "error_policy",
    "with_cache": "cache",
}


def _bound(builder: DataLoaderBuilder) -> dict[str, object]:
    # precomputed values are bound as numpy arrays, made anew by each call: compare contents
    return {
        k: ("ndarray", v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v
        for k, v in builder._bound.items()
    }


def _state(builder: DataLoaderBuilder) -> tuple[object, ...]:
    return (builder, _bound(builder), repr(builder))


def test_the_settings_are_every_plan_section_but_the_source_and_the_preset_record():
    assert get_args(Setting) == SETTINGS
    assert set(SETTINGS) == set(PLAN_SECTIONS) - {"dataset", "mixture", "preset"}
    assert set(SET_BY) == set(SETTINGS)  # this test covers every one
    assert set(METHOD_SETS.values()) == set(SETTINGS)
    methods = {m for m in dir(DataLoaderBuilder) if m.startswith("with_")}
    assert set(METHOD_SETS) == methods - {"with_dataset", "with_mixture"}
    assert lk.SETTINGS == SETTINGS


@pytest.mark.parametrize("setting", SETTINGS)
def test_without_is_never_having_called_it(setting):
    others = [s for s in SETTINGS if s != setting and s not in ("split", "sampling_weights")]
    full = BASE
    for name in others:
        full = SET_BY[name](full)
    with_it = SET_BY[setting](full)
    assert with_it != full  # the call changed something...
    assert _state(with_it.without(setting)) == _state(full)  # ...and without() undoes it all
    assert with_it.without(setting)._section_calls() == full._section_calls()


def test_without_unbinds_what_only_the_reset_setting_used():
    b = BASE.with_bucketing(LENGTHS).with_curriculum(LENGTHS, horizon=2)
    assert len(b._bound) == 3  # the dataset, the bucketing's and the curriculum's lengths
    assert len(b.without("bucketing")._bound) == 2
    assert dict(b.without("bucketing", "curriculum")._bound) == {"dataset": DATA}
    assert b.without("bucketing", "curriculum") == BASE


@given(builder_calls(), st.sampled_from(sorted(set(METHOD_SETS.values()))))
def test_without_equals_the_chain_without_the_calls_that_set_it(calls, setting):
    kept = [call for call in calls if METHOD_SETS.get(call[0]) != setting]
    try:
        with_all = apply_calls(calls)
    except PlanError:  # an invalid argument in the chain: nothing to compare
        return
    assert _state(with_all.without(setting)) == _state(apply_calls(kept))


def test_without_an_empty_name_gives_a_problem_with_a_path():
    with pytest.raises(PlanError) as err:
        BASE.without("")
    assert [p.path for p in err.value.problems] == ["without"]


def test_without_an_unknown_name_puts_the_problem_on_the_call():
    with pytest.raises(PlanError) as err:
        BASE.without("bogus")  # type: ignore[arg-type]
    assert [p.path for p in err.value.problems] == ["without"]
    assert "'bogus'" in str(err.value)


@pytest.mark.parametrize(
    ("name", "error", "words"),
    [
        ("dataset", PlanError, "replace it with .with_dataset(ds)"),
        ("mixture", PlanError, "replace it with .with_dataset(ds)"),
        ("preset", PlanError, "it takes 'batch', 'order'"),
        ("chekcs", PlanError, "did you mean 'checks'?"),
        ("batch_size", PlanError, "did you mean 'batch'?"),
        (3, PlanTypeError, "takes setting names as strings (got int 3)"),
    ],
)
def test_without_refuses_what_is_not_a_setting_naming_the_valid_ones(name, error, words):
    with pytest.raises(error) as err:
        BASE.without(name)
    assert words in str(err.value)
    if name not in ("dataset", "mixture"):
        assert "'cache'" in str(err.value)  # every valid name is listed


def test_without_needs_a_setting():
    with pytest.raises(PlanTypeError, match="name at least one setting"):
        BASE.without()


def test_with_batch_size_none_turns_batching_off_and_the_default_is_one_call_away():
    sized = BASE.with_batch_size(32, drop_last=True)
    unbatched = sized.with_batch_size(None)
    assert unbatched != BASE  # torch's batch_size=None, not the default batch_size=1
    assert repr(unbatched) == repr(BASE) + ".with_batch_size(None)"
    assert not unbatched.compile().batch.batched
    assert sized.without("batch") == BASE == sized.with_batch_size(1)
    with pytest.raises(PlanError, match="only applies to a batch-size schedule"):
        BASE.with_batch_size(None, by="step")


def test_with_batch_size_none_under_a_token_budget_lets_it_size_batches_keeping_drop_last():
    budget = BASE.with_batch_size(32).with_bucketing("input_ids", max_tokens=64)
    plain = BASE.with_bucketing("input_ids", max_tokens=64).compile()
    assert budget.with_batch_size(None).compile() == plain  # one plan for one stream
    assert budget.with_batch_size(None).compile().fingerprint == plain.fingerprint
    kept = budget.with_batch_size(None, drop_last=True).compile()
    assert kept.batch.drop_last
    assert kept.batch.batched
    assert kept.batch.batch_size == 1


def test_the_token_budget_error_names_the_one_call_that_fixes_it():
    chain = BASE.with_batch_size(32).with_bucketing("input_ids", max_tokens=64)
    with pytest.raises(PlanError) as err:
        chain.compile()
    message = str(err.value)
    assert "drop the fixed size with .with_batch_size(None)" in message
    assert ".with_bucketing(..., max_batch_size=32)" in message
    assert chain.with_batch_size(None).compile().bucketing.max_tokens == 64  # the fix works
    assert chain.with_bucketing("input_ids", max_tokens=64, max_batch_size=32).without("batch")


@pytest.mark.parametrize(
    ("chain", "fix"),
    [
        (
            DataLoaderBuilder()
            .with_mixture({"a": DATA[:32], "b": DATA[32:]})
            .with_sampling_weights([1.0] * 64),
            "without('sampling_weights')",
        ),
        (
            BASE.with_sampling_weights([1.0] * 64).with_curriculum(LENGTHS, horizon=2),
            "without('curriculum')",
        ),
        (BASE.with_workers(0, prefetch_factor=2), "with_workers(0)"),
        (
            DataLoaderBuilder().with_dataset(DATA[:4]).with_batch_size(8, drop_last=True),
            "with_batch_size(8)",
        ),
    ],
)
def test_each_drop_fix_is_a_call_that_compiles(chain, fix):
    with pytest.raises(PlanError) as err:
        chain.compile()
    assert fix in str(err.value)
    fixed = eval(f"chain.{fix}", {"chain": chain})
    fixed.compile()


def test_a_preset_repr_writes_a_dropped_setting_as_without():
    made = presets.image_classification(DATA, image_key=None)
    head = "loaderkit.presets.image_classification(<list: 64 samples>, image_key=None)"
    assert repr(made.without("checks")) == head + ".without('checks')"
    assert repr(made.with_batch_size(None)) == head + ".with_batch_size(None)"
    assert repr(made.without("order")) == head + ".with_shuffle(False)"
    assert made.without("checks").compile().checks is None
