"""Sequence-length curricula: with_max_length(schedule) applied by the collator."""

from __future__ import annotations

import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.collators import Collator
from loaderkit.testing import (
    assert_batches_equal,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(240)

SAMPLES = [{"input_ids": list(range(1, 40 + i))} for i in range(24)]  # 39 .. 62 tokens


def growing(step: int) -> int:
    return 8 * (step + 1)


def base() -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(SAMPLES)
        .with_batch_size(4)
        .with_shuffle()
        .with_collator("text", pad_token_id=0)
    )


def widths(batches) -> list[int]:
    return [int(b["input_ids"].shape[1]) for b in batches]


def test_an_epoch_table_cuts_every_batch_of_the_epoch():
    loader = base().with_max_length([(1, 16), (2, 32)]).compile().build()
    assert set(widths(collect(loader))) == {16}
    assert set(widths(collect(loader))) == {32}
    third = collect(loader)
    assert max(widths(third)) == 32  # the last entry's length holds after the table
    for batch in third:
        assert batch["attention_mask"].sum(1).max() <= 32


def test_a_step_function_grows_across_epochs():
    loader = base().with_max_length(growing, by="step").compile().build()
    first, second = collect(loader), collect(loader)
    assert widths(first) == [8, 16, 24, 32, 40, 48]  # steps 0..5: every sample is longer
    # the second epoch's steps are 6..11: the cut stops biting at the samples' own lengths
    for i, width in enumerate(widths(second)):
        longest = max(len(SAMPLES[j]["input_ids"]) for j in loader.batch_indices(1, i))
        assert width == min(growing(6 + i), longest)


def test_the_collators_own_max_length_still_caps():
    plan = (
        base()
        .with_collator("text", pad_token_id=0, max_length=20)
        .with_max_length([(1, 64)])
        .compile()
    )
    assert set(widths(collect(plan.build()))) == {20}


def test_the_packed_collator_packs_into_scheduled_rows():
    plan = (
        DataLoaderBuilder()
        .with_dataset(SAMPLES)
        .with_batch_size(4)
        .with_collator("packed", max_length=256, overflow="truncate")
        .with_max_length([(1, 64), (2, 128)])
        .compile()
    )
    loader = plan.build()
    assert {int(b["input_ids"].shape[1]) for b in collect(loader)} == {64}
    assert {int(b["input_ids"].shape[1]) for b in collect(loader)} == {128}


def test_length_schedules_resume_and_do_not_depend_on_workers():
    plan = base().with_max_length(growing, by="step").compile()
    assert_resumable(plan, epoch=1)
    assert_worker_invariant(plan, workers=(0, 2), epochs=2)


def test_a_collator_without_max_length_is_refused_at_compile():
    with pytest.raises(PlanError, match="collator 'default' has no max_length") as info:
        DataLoaderBuilder().with_dataset(SAMPLES).with_max_length(16).compile()
    assert "text" in str(info.value)

    def plain(samples):
        return samples

    with pytest.raises(PlanError, match="has no with_max_length"):
        DataLoaderBuilder().with_dataset(SAMPLES).with_collator(plain).with_max_length(16).compile()


class Cutting(Collator):
    """A user collator that supports the schedule through the base class."""

    name = "cutting"
    supports_max_length = True

    def __init__(self) -> None:
        self.max_length: int | None = None

    def __call__(self, samples, context=None):
        return [s["input_ids"][: self.max_length] for s in samples]


def test_a_user_collator_gets_its_copy_per_length():
    plan = (
        DataLoaderBuilder()
        .with_dataset(SAMPLES)
        .with_batch_size(2)
        .with_collator(Cutting())
        .with_max_length([(1, 5), (2, 7)])
        .compile()
    )
    loader = plan.build()
    assert {len(row) for batch in collect(loader) for row in batch} == {5}
    assert {len(row) for batch in collect(loader) for row in batch} == {7}


@pytest.mark.parametrize(
    ("value", "path", "words"),
    [
        (0, "max_length", ">= 1"),
        ([], "max_length", "empty schedule"),
        ([(2, 8), (1, 16)], "max_length[1]", "must increase"),
        ([(1, 0)], "max_length[0]", ">= 1"),
        ("nope", "max_length", "int"),
    ],
)
def test_bad_length_schedules_name_the_field(value, path, words):
    with pytest.raises(PlanError) as info:
        base().with_max_length(value)
    assert info.value.problems[0].path == path
    assert words in info.value.problems[0].message


def test_a_bad_length_from_the_function_names_its_step():
    loader = base().with_max_length(lambda t: 16 - 8 * t, by="step").compile().build()
    with pytest.raises(PlanError, match=r"max_length: the function returned 0 for step 2"):
        collect(loader)


def test_length_schedules_round_trip_and_change_the_fingerprint(tmp_path):
    plan = base().with_max_length([(1, 16), (3, 32)], by="step").compile()
    assert plan.fingerprint != base().compile().fingerprint
    assert plan.fingerprint != base().with_max_length([(1, 16), (3, 32)]).compile().fingerprint
    assert "max length  by step: 16 until 1, then 32 tokens, applied by the collator" in (
        plan.explain()
    )
    for suffix in (".json", ".toml"):
        path = tmp_path / f"plan{suffix}"
        plan.save(path)
        again = LoaderPlan.load(path, bindings=plan.bindings)
        assert again == plan
        assert_batches_equal(collect(plan.build()), collect(again.build()))
    assert repr(plan.to_builder()).endswith(".with_max_length([(1.0, 16), (3.0, 32)], by='step')")


def test_a_function_collator_given_by_reference_cannot_take_a_length_schedule() -> None:
    """A collator function named by ``module:qualname`` has no with_max_length: compile says so.

    (It compiled, and every batch then failed with an AttributeError from inside the fetch.)
    """
    from loaderkit.testing._functions import sample_collate

    builder = (
        DataLoaderBuilder()
        .with_dataset([{"input_ids": [1, 2, 3]}] * 4)
        .with_collator(sample_collate)
        .with_max_length(2)
    )
    with pytest.raises(PlanError, match=r"max_length: the collator .*has no with_max_length"):
        builder.compile()
