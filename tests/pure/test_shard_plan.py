"""The plan side of the shard-aware shuffle: ``with_shuffle(window_shards=N)`` and sharded datasets.

How a plan knows its dataset is sharded (``DatasetSpec.shards``, from ``ShardLayout``), the
checks of ``order.window_shards``, the fingerprint, plan files, ``repr`` and ``explain``.
"""

from __future__ import annotations

import json

import pytest

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.datasets.shards.layout import ShardInfo, ShardLayout
from loaderkit.order import DEFAULT_WINDOW_SHARDS
from loaderkit.plan.sections.order import shard_window
from loaderkit.plan.specs import describe_dataset


class Shards:
    """A sharded dataset of ``counts[k]`` samples per shard (a ``ShardLayout``)."""

    def __init__(self, counts: tuple[int, ...], total: int | None = None) -> None:
        self.counts = counts
        self.total = sum(counts) if total is None else total

    @property
    def shard_counts(self) -> tuple[int, ...]:
        return self.counts

    @property
    def shard_infos(self) -> tuple[ShardInfo, ...]:
        return tuple(ShardInfo(f"memory://{k}", c, "v1", c) for k, c in enumerate(self.counts))

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: int) -> int:
        return index


COUNTS = (10, 0, 7, 12, 9, 5)
SHARDS = Shards(COUNTS)


def sharded() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(SHARDS, name="train").with_batch_size(4)


def plain() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(list(range(43)), name="train").with_batch_size(4)


def problems(builder: DataLoaderBuilder) -> dict[str, str]:
    with pytest.raises(PlanError) as info:
        builder.compile()
    return {p.path: p.message for p in info.value.problems}


def test_a_sharded_dataset_is_described_as_one() -> None:
    assert isinstance(SHARDS, ShardLayout)
    spec = describe_dataset(SHARDS, "train")
    assert (spec.kind, spec.length, spec.shards, spec.sharded) == ("torch_map", 43, 6, True)
    assert describe_dataset(list(range(4)), "x").shards is None


def test_shard_counts_must_add_up() -> None:
    with pytest.raises(PlanError, match="shard_counts sum to 43 but len\\(\\) is 44"):
        describe_dataset(Shards(COUNTS, total=44), "train")
    with pytest.raises(PlanError, match="tuple of ints >= 0"):
        describe_dataset(Shards((3, -1), total=2), "train")


def test_the_window_applies_only_where_the_order_is_shard_aware() -> None:
    assert shard_window(sharded().with_shuffle().compile()) == DEFAULT_WINDOW_SHARDS
    assert shard_window(sharded().with_shuffle(window_shards=2).compile()) == 2
    assert shard_window(sharded().compile()) is None  # not shuffled: read in shard order
    assert shard_window(plain().with_shuffle().compile()) is None
    weighted = sharded().with_shuffle().with_sampling_weights([1.0] * 43)
    assert shard_window(weighted.compile()) is None  # the weights decide the epoch


def test_window_shards_on_a_dataset_that_is_not_sharded() -> None:
    found = problems(plain().with_shuffle(window_shards=4))
    message = found["order.window_shards"]
    assert "'train' is a samples dataset that is not made of shards" in message
    assert "drop window_shards: .with_shuffle()" in message


def test_window_shards_without_a_shuffle() -> None:
    found = problems(sharded().with_shuffle(False, window_shards=4))
    assert "not shuffled" in found["order.window_shards"]
    assert ".with_shuffle(window_shards=4)" in found["order.window_shards"]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda b: b.with_sampling_weights([1.0] * 43), "sampling_weights"),
        (lambda b: b.with_split(0.5), "split"),
    ],
)
def test_window_shards_with_a_sampler_that_decides_the_epoch(call, name) -> None:
    found = problems(call(sharded().with_shuffle(window_shards=4)))
    message = found["order.window_shards"]
    assert f"{name} decides the epoch's samples itself" in message
    assert "drop window_shards" in message


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "4"])
def test_window_shards_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(PlanError) as info:
        sharded().with_shuffle(window_shards=bad)  # type: ignore[arg-type]
    assert info.value.problems[0].path == "order.window_shards"


def test_the_window_is_in_the_fingerprint() -> None:
    base = sharded().with_shuffle()
    prints = {
        "default": base.compile().fingerprint,
        "2": base.with_shuffle(window_shards=2).compile().fingerprint,
        "3": base.with_shuffle(window_shards=3).compile().fingerprint,
        "seed": base.with_seed(5).compile().fingerprint,
    }
    assert len(set(prints.values())) == len(prints)
    explicit = base.with_shuffle(window_shards=DEFAULT_WINDOW_SHARDS).compile().fingerprint
    assert explicit == prints["default"]  # the same batches: the same fingerprint
    not_sharded = DataLoaderBuilder().with_dataset(list(range(43)), name="train")
    assert not_sharded.with_batch_size(4).with_shuffle().compile().fingerprint != prints["default"]


def test_a_non_sharded_plan_is_unchanged() -> None:
    """No new key in the file or the fingerprint of a plan over a dataset that has no shards."""
    plan = plain().with_shuffle().compile()
    data = plan.to_dict()
    assert "window_shards" not in data["order"]
    assert "shards" not in data["dataset"]


def test_plan_files_keep_the_window_and_the_shards() -> None:
    plan = sharded().with_shuffle(window_shards=3).with_seed(9).compile()
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["order"]["window_shards"] == 3
    assert data["dataset"]["shards"] == 6
    again = LoaderPlan.from_dict(data, bindings={"train": SHARDS})
    assert again.fingerprint == plan.fingerprint
    assert again.order.window_shards == 3
    default = sharded().with_shuffle().compile().to_dict()
    assert "window_shards" not in default["order"]  # the file records what the user set


def test_a_bound_dataset_with_other_shards_is_refused() -> None:
    data = sharded().with_shuffle().compile().to_dict()
    other = Shards((10, 7, 12, 9, 5))  # one shard fewer, the same 43 samples
    with pytest.raises(PlanError, match="5 shards"):
        LoaderPlan.from_dict(data, bindings={"train": other})


def test_repr_and_with_seed_keep_the_window() -> None:
    builder = sharded().with_shuffle(window_shards=3).with_seed(4)
    assert builder.compile().order.window_shards == 3
    assert ".with_shuffle(window_shards=3)" in repr(builder)
    assert ".with_shuffle(False, window_shards=3)" in repr(
        sharded().with_shuffle(False, window_shards=3)
    )


def test_explain_says_the_order() -> None:
    text = sharded().with_shuffle().compile().explain()
    assert f"shards shuffled, then samples shuffled within windows of {DEFAULT_WINDOW_SHARDS}" in (
        text
    )
    assert "(the default)" in text
    assert "in 6 shards" in text
    text = sharded().with_shuffle(window_shards=1).compile().explain()
    assert "windows of 1 shard (keyed" in text
