"""Errors about settings a preset made name the preset and the options behind them."""

from __future__ import annotations

import inspect
import pickle
from typing import get_args

import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, PlanError, presets
from loaderkit.plan.plan import Setting

ROWS = [{"input_ids": list(range(1 + i % 9))} for i in range(40)]
IMAGES = [{"pixel_values": [[[0.5] * 4] * 4] * 3, "label": i % 2} for i in range(16)]
BUDGET = "with a token budget (max_tokens=64) the batch size varies (got batch_size=4)"


def _message(builder: DataLoaderBuilder) -> str:
    with pytest.raises(PlanError) as err:
        builder.compile()
    (problem,) = err.value.problems
    return problem.message


def test_a_conflict_with_a_preset_setting_names_the_preset_and_its_options():
    made = presets.image_classification(IMAGES, batch_size=4)
    message = _message(made.with_bucketing([3] * 16, max_tokens=64))
    assert message.startswith(BUDGET)
    assert message.endswith(
        "; with_batch_size was set by the preset image_classification (options batch_size=4, "
        "drop_last=True)"
    )
    made.with_bucketing([3] * 16, max_tokens=64).with_batch_size(None).compile()  # the fix


def test_the_related_section_a_preset_set_is_named_too():
    # the user's fixed size meets the preset's token budget: the budget is the preset's
    message = _message(presets.causal_lm_pretraining(ROWS, max_tokens=256).with_batch_size(32))
    assert message.endswith(
        "; with_bucketing was set by the preset causal_lm_pretraining (options "
        "batch_size=None, max_tokens=256, bucketing=True; pass max_tokens=N for a token budget "
        "(None: a fixed batch_size), or bucketing=False for random batches)"
    )
    # the preset's fixed size meets the user's budget: the size is the preset's
    message = _message(
        presets.causal_lm_pretraining(ROWS).with_bucketing("input_ids", max_tokens=256)
    )
    assert "; with_batch_size was set by the preset causal_lm_pretraining (options " in message
    assert "with_bucketing was set" not in message  # the user's own call


def test_a_setting_the_user_replaced_is_not_the_presets():
    made = presets.image_classification(IMAGES).with_batch_size(4)
    message = _message(made.with_bucketing([3] * 16, max_tokens=64))
    assert "preset" not in message
    assert message == _message(
        DataLoaderBuilder()
        .with_dataset(IMAGES)
        .with_batch_size(4)
        .with_bucketing([3] * 16, max_tokens=64)
    )


def test_a_builder_no_preset_made_keeps_its_message():
    chain = DataLoaderBuilder().with_dataset(IMAGES).with_batch_size(4)
    assert _message(chain.with_bucketing([3] * 16, max_tokens=64)) == (
        f"{BUDGET}; drop the fixed size with .with_batch_size(None), or cap samples per batch "
        f"with .with_bucketing(..., max_batch_size=4)"
    )


def test_a_plan_read_from_a_file_names_no_preset_setting():
    plan = presets.image_classification(IMAGES, batch_size=4).compile()
    again = lk.LoaderPlan.from_dict(plan.to_dict(), bindings=dict(plan.bindings or {}))
    assert again.preset is not None and again.preset.name == "image_classification"
    assert again.to_builder()._preset_notes() == {}
    assert "preset" not in _message(again.to_builder().with_bucketing([3] * 16, max_tokens=64))


def test_the_related_sections_travel_with_the_problem_but_do_not_compare():
    problem = lk.Problem("batch.batch_size", "m", related=("bucketing",))
    assert problem == lk.Problem("batch.batch_size", "m")
    again = pickle.loads(pickle.dumps(PlanError(problem)))
    assert again.problems[0].related == ("bucketing",)
    assert problem.prefixed("x").related == ("bucketing",)


BUILT_IN = sorted(e.name for e in presets.registry.entries() if e.origin == "builtin")


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_option_of_a_built_in_preset_says_what_it_decides(name):
    assert len(BUILT_IN) >= 6
    signature = inspect.signature(presets.get(name))
    options = list(signature.parameters)[1:]
    assert options
    missing = [option for option in options if option not in presets.PRESET_OPTIONS]
    assert not missing, f"{name}: add {missing} to loaderkit.presets.PRESET_OPTIONS"
    settings = set(get_args(Setting))
    for option in options:
        assert set(presets.PRESET_OPTIONS[option].sections) <= settings
