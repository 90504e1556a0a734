"""Typos the type checker must catch: each line is an error, silenced by its ignore.

mypy runs with ``--warn-unused-ignores`` (tests/test_typing.py): a line that stopped being an
error leaves its ``# type: ignore[arg-type]`` unused, and that fails the check.
"""

from __future__ import annotations

from loaderkit import DataLoaderBuilder

b = DataLoaderBuilder().with_dataset([1, 2, 3])
b.with_workers(2, start_method="forkk")  # type: ignore[arg-type]
b.with_device("gpu")  # type: ignore[arg-type]
b.with_device("cuda1")  # type: ignore[arg-type]
b.with_mixture({"a": [1], "b": [2]}, mode="weigthed")  # type: ignore[arg-type]
b.with_error_policy("skp")  # type: ignore[arg-type]
b.with_dataset([1, 2, 3], storage="flatt")  # type: ignore[arg-type]
b.with_cache("memroy")  # type: ignore[arg-type]
b.with_cache("disk", stage="transfomed", path="x")  # type: ignore[arg-type]
b.with_bucketing("input_ids", cost="quadratik")  # type: ignore[arg-type]
b.with_batch_size(4, by="steps")  # type: ignore[arg-type]
b.with_batch_size("4")  # type: ignore[arg-type]
b.with_task("image")  # type: ignore[arg-type]
b.without("chekcs")  # type: ignore[arg-type]
b.without("dataset")  # type: ignore[arg-type]
b.build(split="validation")  # type: ignore[arg-type]
b.compile().build(split="tain")  # type: ignore[arg-type]
