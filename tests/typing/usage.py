"""Typed usage of the public API: mypy --strict must accept it (tests/test_typing.py).

Never run and not collected by pytest. Each ``reveal_type`` line ends with the type mypy must
report, after ``# revealed:``.
"""

from __future__ import annotations

from typing import reveal_type

import loaderkit as lk
from loaderkit import DataLoaderBuilder, presets

rows = [{"input_ids": [1, 2, 3], "label": 0}] * 8
builder = (
    DataLoaderBuilder()
    .with_dataset(rows)
    .with_batch_size(4, drop_last=True)
    .with_shuffle()
    .with_seed(1)
    .with_collator("text")
    .with_workers(2, start_method="spawn", prefetch_factor=2)
    .with_device("cuda:1")
    .with_bucketing("input_ids", max_tokens=64, max_batch_size=8, cost="quadratic")
    .with_error_policy("skip", max_errors=2, per="run")
    .with_cache("disk", stage="fetched", path="/tmp/cache")
    .with_checks(keys=["input_ids"], shapes={"input_ids": ["B", "T"]}, ranges={"label": [0, 1]})
    .with_max_length([(1, 16), (2, 32)], by="epoch")
    .without("checks", "cache")
)
reveal_type(builder)  # revealed: loaderkit.builder.DataLoaderBuilder
reveal_type(builder.with_batch_size(None))  # revealed: loaderkit.builder.DataLoaderBuilder
reveal_type(builder.with_batch_size(lambda t: 4 * (t + 1), by="step"))  # revealed: loaderkit.builder.DataLoaderBuilder
mixed = DataLoaderBuilder().with_mixture(
    {"a": rows, "b": rows}, weights={"a": 0.3, "b": 0.7}, mode="round_robin", by="step"
)
plan = builder.with_task("text").with_device("auto").compile()
reveal_type(plan)  # revealed: loaderkit.plan.plan.LoaderPlan
reveal_type(plan.build(split="val"))  # revealed: loaderkit.runtime.loader.Loader
reveal_type(lk.SETTINGS)  # revealed: tuple[Literal['batch'] | Literal['order'] | Literal['collator'] | Literal['transform'] | Literal['global_rngs'] | Literal['workers'] | Literal['device'] | Literal['distributed'] | Literal['bucketing'] | Literal['sampling_weights'] | Literal['curriculum'] | Literal['max_length'] | Literal['split'] | Literal['checks'] | Literal['error_policy'] | Literal['cache'], ...]
reveal_type(presets.image_classification(rows, image_key=None))  # revealed: loaderkit.builder.DataLoaderBuilder
