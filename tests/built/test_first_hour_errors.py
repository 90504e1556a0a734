"""Errors a new user meets in the first hour point at the call to change, not at internals."""

from __future__ import annotations

import pytest
import torch

from loaderkit import DataLoaderBuilder, PlanError


def test_a_key_on_tuple_samples_says_to_give_a_function():
    data = torch.utils.data.TensorDataset(torch.arange(10), torch.arange(10))
    builder = DataLoaderBuilder().with_dataset(data).with_bucketing("input_ids", max_tokens=64)
    with pytest.raises(PlanError) as error:
        builder.build()
    message = str(error.value)
    assert "bucketing.length" in message
    assert "samples of this dataset are tuples of 2 items, not dicts" in message
    assert "with_bucketing(lambda sample: len(sample[0])" in message
    assert "tuple indices must be integers" not in message


class DictSamples(torch.utils.data.Dataset[dict[str, list[int]]]):
    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> dict[str, list[int]]:
        return {"input_ids": [1] * (i + 1)}


def test_a_missing_key_names_the_keys_and_the_nearest():
    builder = (
        DataLoaderBuilder().with_dataset(DictSamples()).with_bucketing("input_id", max_tokens=8)
    )
    with pytest.raises(
        PlanError, match=r"sample 0 has no key 'input_id' \(its keys: 'input_ids'\)"
    ):
        builder.build()
    fixed = (
        DataLoaderBuilder().with_dataset(DictSamples()).with_bucketing("input_ids", max_tokens=8)
    )
    assert len(fixed.build()) >= 1  # the lengths are read at build
