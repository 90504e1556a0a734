"""Issue 21: the messages of a first hour with loaderkit point at the call to make.

A torch user's keywords given to the wrong ``with_*`` method name the method that takes them;
``build()`` without a dataset says to call ``with_dataset``; ``explain()`` says what the batch
size counts. (Plan files naming themselves in their errors: ``test_serde.py``.)
"""

from __future__ import annotations

import inspect
import re

import pytest

from loaderkit import DataLoaderBuilder, PlanError, PlanTypeError
from loaderkit.builder.keywords import KEYWORD_HOMES

BASE = DataLoaderBuilder().with_dataset(list(range(10)))


@pytest.mark.parametrize(
    ("call", "message", "fix"),
    [
        (
            lambda b: b.with_shuffle(seed=3),
            "with_shuffle: takes no keyword 'seed' (got seed=3); use .with_seed(3)",
            ".with_seed(3)",
        ),
        (
            lambda b: b.with_batch_size(64, shuffle=True),
            "with_batch_size: takes no keyword 'shuffle' (got shuffle=True); use "
            ".with_shuffle(True)",
            ".with_shuffle(True)",
        ),
        (
            lambda b: b.with_dataset(list(range(10)), batch_size=64),
            "with_dataset: takes no keyword 'batch_size' (got batch_size=64); use "
            ".with_batch_size(64)",
            ".with_batch_size(64)",
        ),
        (
            lambda b: b.with_batch_size(64, num_workers=2),
            "with_batch_size: takes no keyword 'num_workers' (got num_workers=2); use "
            ".with_workers(2)",
            ".with_workers(2)",
        ),
        (
            lambda b: b.with_workers(2, persistent_workers=False),
            "with_workers: takes no keyword 'persistent_workers' (got persistent_workers=False); "
            "use .with_workers(n, persistent=False)",
            ".with_workers(2, persistent=False)",
        ),
        (
            lambda b: b.with_workers(2, multiprocessing_context="spawn"),
            "with_workers: takes no keyword 'multiprocessing_context' (got "
            "multiprocessing_context='spawn'); use .with_workers(n, start_method='spawn')",
            ".with_workers(2, start_method='spawn')",
        ),
        (
            lambda b: b.with_seed(3, shuffle=True),
            "with_seed: takes no keyword 'shuffle' (got shuffle=True); use .with_shuffle(True)",
            ".with_shuffle(True)",
        ),
    ],
)
def test_a_misplaced_keyword_names_the_call_that_takes_it(call, message, fix):
    with pytest.raises(PlanTypeError) as err:
        call(BASE)
    assert isinstance(err.value, TypeError)  # what Python itself would have raised
    assert str(err.value) == message
    assert fix.split("(")[0] in message
    eval(f"builder{fix}", {"builder": BASE}).compile()  # the named call does it


def test_an_unknown_keyword_lists_the_keywords_with_the_closest():
    with pytest.raises(PlanTypeError) as err:
        BASE.with_workers(2, prefetch=4)
    assert err.value.paths == ("with_workers",)
    assert str(err.value) == (
        "with_workers: takes no keyword 'prefetch' (got prefetch=4); it takes num_workers, "
        "prefetch_factor, persistent, pin_memory, start_method, timeout; did you mean "
        "'prefetch_factor'?"
    )


def test_a_misplaced_callable_or_object_is_shown_by_name_or_elided():
    def pad(samples):
        return samples

    with pytest.raises(PlanTypeError, match=r"use \.with_collator\(pad\)$"):
        BASE.with_batch_size(4, collate_fn=pad)
    with pytest.raises(PlanTypeError, match=r"\(got generator=\.\.\.\); use \.with_seed\(n\)"):
        BASE.with_shuffle(generator=object())


def _methods() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(DataLoaderBuilder, name))
        for name in dir(DataLoaderBuilder)
        if name.startswith("with_")
    }


def test_every_keyword_home_is_a_call_the_builder_has():
    methods = _methods()
    for keyword, home in KEYWORD_HOMES.items():
        for method, args in re.findall(r"\.(with_\w+)\(([^)]*)\)", home):
            assert method in methods, (keyword, home)
            named = re.findall(r"(\w+)=", args)
            for name in named:
                assert name in methods[method].parameters, (keyword, home, name)


def test_the_checked_methods_keep_their_signatures():
    signature = inspect.signature(DataLoaderBuilder.with_shuffle)
    assert list(signature.parameters) == ["self", "enabled", "buffer_size", "window_shards"]
    assert DataLoaderBuilder.with_shuffle.__doc__
    assert BASE.with_shuffle(True, buffer_size=None) == BASE.with_shuffle()


def test_build_without_a_dataset_says_to_call_with_dataset():
    with pytest.raises(PlanError) as err:
        DataLoaderBuilder().with_batch_size(4).build()
    assert err.value.paths == ("dataset",)
    assert ".with_dataset(ds)" in str(err.value)
    assert "compile()" not in str(err.value)  # build() was called, not compile()


def test_explain_says_what_the_batch_size_counts():
    def line(builder: DataLoaderBuilder) -> str:
        (found,) = [x for x in builder.compile().explain().splitlines() if "batches  " in x]
        return found.split(None, 1)[1]

    assert line(BASE.with_batch_size(4)) == (
        "4 samples per batch per rank, drop_last=False -> 3 batches per epoch per rank (last has 2)"
    )
    assert line(BASE).startswith("1 sample per batch per rank, drop_last=False -> 10 batches")
    assert line(BASE.with_batch_size([(1, 2), (3, 4)])) == (
        "progressive by epoch: 2 until 1, then 4 samples per batch per rank, drop_last=False; "
        "batches per epoch follow the schedule"
    )
