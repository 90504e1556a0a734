"""``with_global_rngs``: code drawing from the global RNGs gives the same batches by design.

A dataset whose ``__getitem__`` draws from torch's, numpy's and Python's global RNGs, a
transform and a collator of the user's doing the same: under ``"per_sample"`` (the default)
the batches are equal for 0 and 2 workers, after a resume at any point, and at world sizes 1
and 2 (per sample); the user's own global RNG state in the main process is as it was. Under
``"per_worker"`` (torch's habit) they depend on the worker count, as torch's do, and the
explain line says so.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import assert_resumable, assert_worker_invariant

pytestmark = pytest.mark.timeout(180)

N = 24


class Noisy(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Each sample draws from all three global RNGs, as augmenting datasets do."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {
            "idx": i,
            "t": torch.rand(2),
            "n": float(np.random.rand()),
            "r": random.random(),
        }


class NoisyBatched(Noisy):
    """The same with ``__getitems__``: read a batch at a time, seeded once per call."""

    def __getitems__(self, indices: list[int]) -> list[dict[str, Any]]:
        return [self[i] for i in indices]


def jitter(sample: dict[str, Any]) -> dict[str, Any]:
    return {**sample, "j": torch.randn(1).item() + random.gauss(0, 1)}


def masking(samples: list[dict[str, Any]]) -> dict[str, Any]:
    batch = torch.utils.data.default_collate(samples)
    batch["mask"] = torch.bernoulli(torch.full((len(samples),), 0.5))
    return batch


def _builder(dataset: Any = None, **options: Any) -> DataLoaderBuilder:
    builder = (
        DataLoaderBuilder()
        .with_dataset(Noisy() if dataset is None else dataset)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(11)
        .with_transform(jitter)
        .with_collator(masking)
    )
    if "global_rngs" in options:
        builder = builder.with_global_rngs(options["global_rngs"])
    return builder


def _epochs(plan: LoaderPlan, workers: int, epochs: int = 2) -> list[list[dict[str, Any]]]:
    with plan.to_builder().with_workers(workers).compile().build() as loader:
        return [list(loader) for _ in range(epochs)]


def _same(a: list[list[dict[str, Any]]], b: list[list[dict[str, Any]]]) -> bool:
    for epoch_a, epoch_b in zip(a, b, strict=True):
        for x, y in zip(epoch_a, epoch_b, strict=True):
            if x.keys() != y.keys():
                return False
            if not all(torch.equal(torch.as_tensor(x[k]), torch.as_tensor(y[k])) for k in x):
                return False
    return True


@pytest.mark.parametrize("dataset", [Noisy(), NoisyBatched()], ids=["getitem", "getitems"])
def test_per_sample_batches_are_the_same_for_any_worker_count(dataset: Any) -> None:
    plan = _builder(dataset).compile()
    assert plan.global_rngs == "per_sample"  # the default
    assert_worker_invariant(plan, workers=(0, 2))


def test_per_sample_batches_resume_exactly() -> None:
    plan = _builder().compile()
    assert_resumable(plan, at=[0, 1, 3, 5, 6])


def test_per_worker_batches_depend_on_the_worker_count_as_torchs_do() -> None:
    plan = _builder(global_rngs="per_worker").compile()
    assert not _same(_epochs(plan, 0), _epochs(plan, 2))
    assert "changes with num_workers" in plan.explain()


def test_the_draws_differ_between_samples_and_epochs() -> None:
    (first, second) = _epochs(_builder().compile(), 0)
    values = [v for batch in first for v in batch["t"][:, 0].tolist()]
    assert len(set(values)) == N  # every sample its own draw
    assert not _same([first], [second])  # and every epoch


def test_the_main_process_keeps_its_own_global_rng_state() -> None:
    plan = _builder().compile()
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    with plan.build() as loader:
        for _ in loader:
            pass
    got = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    assert torch.equal(got[0], expected[0])
    assert np.array_equal(got[1], expected[1])
    assert got[2] == expected[2]


def _by_index(batches: list[dict[str, Any]], key: str) -> dict[int, list[float]]:
    return {
        i: torch.as_tensor(v).flatten().tolist()
        for batch in batches
        for i, v in zip(batch["idx"].tolist(), batch[key], strict=True)
    }


def test_a_cached_sample_is_transformed_as_an_uncached_one() -> None:
    """The transform is seeded apart from ``__getitem__``: a cache hit transforms the same."""
    plain = _epochs(_builder().compile(), 0)
    cached = _epochs(_builder().with_cache("memory").compile(), 0)
    assert _same(plain[:1], cached[:1])  # epoch 0: every sample read, then stored
    # epoch 1: the samples come from the cache as epoch 0 read them; the transform draws anew
    assert _by_index(cached[1], "t") == _by_index(cached[0], "t")
    assert _by_index(cached[1], "j") == _by_index(plain[1], "j")


def test_per_sample_draws_do_not_depend_on_the_world_size() -> None:
    """Per sample: world size 1 and the two ranks of world size 2 give each sample the same."""
    plan = _builder().with_collator("default").compile()

    def draws(world: int) -> dict[int, float]:
        out: dict[int, float] = {}
        for rank in range(world):
            ranked = plan.to_builder().with_distributed(world_size=world, rank=rank).compile()
            with ranked.build() as loader:
                for batch in loader:
                    out.update(zip(batch["idx"].tolist(), batch["j"].tolist(), strict=True))
        return out

    assert draws(1) == draws(2)


def test_nothing_of_the_users_runs_nothing_is_seeded() -> None:
    plan = DataLoaderBuilder().with_dataset({"x": torch.arange(8)}).with_batch_size(2).compile()
    assert "global rngs" not in plan.explain()
    assert plan.build()._fetcher.seeding is None
    tensors = torch.utils.data.TensorDataset(torch.arange(8))  # torch's own: draws nothing
    plan = DataLoaderBuilder().with_dataset(tensors).with_batch_size(2).compile()
    assert plan.build()._fetcher.seeding is None

    class Tensors(torch.utils.data.TensorDataset):  # a subclass may override __getitem__
        pass

    plan = DataLoaderBuilder().with_dataset(Tensors(torch.arange(8))).with_batch_size(2).compile()
    assert plan.build()._fetcher.seeding is not None
    seeded = _builder().compile().explain()
    assert "around your __getitem__, transform, collator" in seeded


def test_the_mode_round_trips_through_a_plan_file_and_changes_the_fingerprint() -> None:
    default = _builder().compile()
    torchs = _builder(global_rngs="per_worker").compile()
    assert "global_rngs" not in default.to_dict()  # plans made before keep their fingerprint
    assert torchs.to_dict()["global_rngs"] == "per_worker"
    again = LoaderPlan.from_dict(torchs.to_dict(), bindings=torchs.bindings)
    assert again.global_rngs == "per_worker"
    assert again.fingerprint == torchs.fingerprint != default.fingerprint
    assert ".with_global_rngs('per_worker')" in repr(torchs.to_builder())


def test_a_wrong_mode_and_per_worker_streams_are_refused() -> None:
    with pytest.raises(PlanError, match="did you mean 'per_sample'"):
        DataLoaderBuilder().with_global_rngs("per_smaple")  # type: ignore[arg-type]

    class Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            return iter(range(4))

    builder = DataLoaderBuilder().with_dataset(Stream()).with_batch_size(2)
    with pytest.raises(PlanError, match="a stream is always seeded per element"):
        builder.with_global_rngs("per_worker").compile()
    assert builder.compile().global_rngs == "per_sample"


# -- torchvision's random transforms (they draw from torch's global RNG) ----------------------


class _Images(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Small uint8 CHW images, each a pure function of its index."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(i)
        return {"image": torch.randint(0, 256, (3, 24, 32), generator=g, dtype=torch.uint8), "i": i}


def _augment() -> Any:
    v2 = pytest.importorskip("torchvision.transforms.v2")
    return v2.Compose(
        [
            v2.RandomResizedCrop(16, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ColorJitter(brightness=0.4, hue=0.1),
        ]
    )


class Augment:
    """A torchvision v2 pipeline on a sample's image (a picklable callable)."""

    def __init__(self) -> None:
        self.pipeline = _augment()

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        return {**sample, "image": self.pipeline(sample["image"])}


def _vision_plan(mode: str = "per_sample") -> LoaderPlan:
    builder = (
        DataLoaderBuilder()
        .with_dataset(_Images())
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(3)
        .with_transform(Augment())
    )
    return builder.with_global_rngs(mode).compile()  # type: ignore[arg-type]


def test_torchvision_v2_random_transforms_are_worker_invariant_and_resume() -> None:
    plan = _vision_plan()
    assert_worker_invariant(plan, workers=(0, 2))
    assert_resumable(plan, at=[0, 1, 2, 4])
    (epoch,) = _epochs(plan, 0, epochs=1)
    plain = [_Images()[i]["image"] for batch in epoch for i in batch["i"].tolist()]
    images = [image for batch in epoch for image in batch["image"]]
    assert any(not torch.equal(a[:, :16, :16], b) for a, b in zip(plain, images, strict=True))


def test_torchvision_v2_random_transforms_per_worker_depend_on_the_workers() -> None:
    plan = _vision_plan("per_worker")
    assert not _same(_epochs(plan, 0), _epochs(plan, 2))


def test_seeding_random_is_random_seed_gauss_included() -> None:
    """``seed_all`` seeds ``random`` as ``random.seed`` does, the cached gauss value too."""
    from loaderkit.runtime.fetch.global_rngs import seed_all

    for value in (0, 5, 2**63 + 7, 123456789012345):
        random.seed(value)
        expected = [random.random(), random.gauss(0, 1), random.gauss(0, 1), random.random()]
        random.gauss(0, 1)  # leaves the second value of a pair cached
        seed_all(value)
        got = [random.random(), random.gauss(0, 1), random.gauss(0, 1), random.random()]
        assert got == expected
