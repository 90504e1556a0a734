"""``"per_sample"`` seeds only the global RNGs the user's code is seen drawing from.

The oracle is the loader seeding all three before everything (``SampleSeeding(watch=False)``,
what every batch was before): the watched loader must give the same batches bit for bit,
for code that draws from any mix of the RNGs, only for some samples, only in its transform or
collator, in a way that depends on an earlier draw, or that fails after drawing; with 0 and 2
workers; and leave the main process's own states (gaussian caches included) as they were.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan
from loaderkit.runtime.fetch import rng_states
from loaderkit.runtime.fetch.global_rngs import SampleSeeding
from loaderkit.runtime.fetch.rng_states import RNGS, RngStates
from loaderkit.testing import assert_worker_invariant

pytestmark = pytest.mark.timeout(240)

N = 40

Draw = str
"""``"torch"``, ``"numpy"``, ``"random"``, or a gaussian that may come from a cache:
``"numpy-gauss"`` (``np.random.standard_normal()``), ``"random-gauss"`` (``random.gauss``)."""
DRAWS = ("torch", "numpy", "random", "numpy-gauss", "random-gauss")


def draw(kind: Draw) -> float:
    if kind == "torch":
        return float(torch.rand(()))
    if kind == "numpy":
        return float(np.random.rand())
    if kind == "numpy-gauss":
        return float(np.random.standard_normal())
    if kind == "random-gauss":
        return random.gauss(0.0, 1.0)
    return random.random()


class Sometimes(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Sample ``i`` draws what ``pattern[i]`` says (nothing for most samples)."""

    def __init__(self, pattern: dict[int, tuple[Draw, ...]], n: int = N) -> None:
        self.pattern = pattern
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        drawn = [draw(kind) for kind in self.pattern.get(i, ())]
        return {"idx": i, "x": torch.full((3,), float(i)), "d": sum(drawn)}


class Dependent(Sometimes):
    """A draw from ``random`` only when torch's draw says so (seen only once torch is seeded)."""

    def __getitem__(self, i: int) -> dict[str, Any]:
        sample = super().__getitem__(i)
        if i % 7 == 3 and torch.rand(()) < 0.5:
            sample["d"] += random.random()
        return sample


class FailsAfterDrawing(Sometimes):
    """Sample 9 fails when its torch draw is small: the failure is a function of the seed."""

    def __getitem__(self, i: int) -> dict[str, Any]:
        if i == 9 and torch.rand(()) < 0.5:
            raise ValueError("sample 9: an unlucky draw")
        return super().__getitem__(i)


def builder(dataset: Any, **options: Any) -> DataLoaderBuilder:
    b = DataLoaderBuilder().with_dataset(dataset).with_batch_size(4).with_shuffle().with_seed(3)
    if "transform" in options:
        b = b.with_transform(options["transform"])
    if "collator" in options:
        b = b.with_collator(options["collator"])
    if options.get("skip"):
        b = b.with_error_policy("skip")
    return b


def eager(seeding: SampleSeeding | None) -> None:
    """Seed all three before everything: what every batch was before the watching."""
    assert seeding is not None
    seeding.watch = False
    seeding.seeded = RNGS
    seeding._quiet = ()


def run(
    plan: LoaderPlan, *, workers: int = 0, epochs: int = 2, all_seeded: bool = False
) -> list[list[Any]]:
    with plan.to_builder().with_workers(workers).compile().build() as loader:
        if all_seeded:
            eager(loader._fetcher.seeding)
        out = []
        for _ in range(epochs):
            epoch = []
            try:
                for batch in loader:
                    epoch.append(batch)
            except DataError as exc:
                epoch.append(("error", exc.sample_index, str(exc).split("\n")[0]))
            out.append(epoch)
        out.append([("skipped", [s.sample_index for s in loader.skipped])])
        return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


def assert_as_if_all_seeded(plan: LoaderPlan, workers: int = 0) -> None:
    watched = run(plan, workers=workers)
    seeded = run(plan, workers=workers, all_seeded=True)
    assert same(watched, seeded), "the watched seeding gave other batches than seeding all"


patterns = st.dictionaries(
    st.integers(0, N - 1), st.lists(st.sampled_from(DRAWS), min_size=1, max_size=3).map(tuple)
)


@settings(max_examples=12, deadline=None)
@given(pattern=patterns, transform_draws=patterns, collator_draws=st.booleans())
def test_the_batches_are_those_of_seeding_everything(
    pattern: dict[int, tuple[Draw, ...]],
    transform_draws: dict[int, tuple[Draw, ...]],
    collator_draws: bool,
) -> None:
    def transform(sample: dict[str, Any]) -> dict[str, Any]:
        extra = [draw(kind) for kind in transform_draws.get(sample["idx"], ())]
        return {**sample, "t": sum(extra)}

    def collate(samples: list[dict[str, Any]]) -> Any:
        batch = torch.utils.data.default_collate(samples)
        if collator_draws and 17 in batch["idx"].tolist():
            batch["m"] = torch.bernoulli(torch.full((len(samples),), 0.5))
        return batch

    plan = builder(Sometimes(pattern), transform=transform, collator=collate).compile()
    assert_as_if_all_seeded(plan)


@pytest.mark.parametrize(
    "dataset",
    [
        Sometimes({}),
        Sometimes({13: ("numpy-gauss",)}),
        Sometimes({5: ("torch",), 22: ("random-gauss", "numpy")}),
        Dependent({}),
    ],
    ids=["draws-nothing", "one-numpy-gauss", "some-samples", "depends-on-a-draw"],
)
@pytest.mark.parametrize("workers", [0, 2])
def test_datasets_that_draw_sometimes(dataset: Sometimes, workers: int) -> None:
    assert_as_if_all_seeded(builder(dataset).compile(), workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_sample_that_fails_after_drawing_fails_as_if_seeded(workers: int) -> None:
    for skip in (False, True):
        assert_as_if_all_seeded(builder(FailsAfterDrawing({}), skip=skip).compile(), workers)


def test_worker_invariance_holds_and_the_testing_kit_catches_per_worker() -> None:
    dataset = Sometimes({3: ("torch",), 30: ("numpy", "random")})
    assert_worker_invariant(builder(dataset).compile(), workers=(0, 2))
    with pytest.raises(AssertionError, match="depend on the number of workers"):
        assert_worker_invariant(
            builder(dataset).with_global_rngs("per_worker").compile(), workers=(0, 2)
        )


def users_draws() -> tuple[Any, ...]:
    return (torch.rand(2), np.random.standard_normal(3), random.gauss(0, 1), random.random())


def leave_caches_full() -> None:
    """The user's own states with a gaussian cached in numpy and in ``random``."""
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    np.random.standard_normal()  # one of a pair: the other is cached
    random.gauss(0, 1)  # likewise (gauss_next)


@pytest.mark.usefixtures("readers")
@pytest.mark.parametrize(
    "pattern",
    [{}, {11: ("numpy-gauss",)}, {11: ("random-gauss",)}, {2: ("torch", "numpy", "random")}],
    ids=["nothing", "numpy-gauss", "random-gauss", "all"],
)
def test_the_main_process_keeps_its_states_gaussian_caches_included(
    pattern: dict[int, tuple[Draw, ...]],
) -> None:
    plan = builder(Sometimes(pattern)).compile()
    leave_caches_full()
    expected = users_draws()
    leave_caches_full()
    with plan.build() as loader:
        for _ in loader:
            pass
    got = users_draws()
    assert same(list(got), list(expected))


@pytest.mark.usefixtures("readers")
def test_a_cached_gaussian_is_not_handed_to_a_sample() -> None:
    """The sample's one draw would be the user's cached normal if it went unseen."""
    plan = builder(Sometimes({11: ("numpy-gauss",), 12: ("random-gauss",)})).compile()
    leave_caches_full()
    watched = run(plan, epochs=1)
    np.random.seed(99)
    random.seed(99)  # no gaussian cached
    seeded = run(plan, epochs=1, all_seeded=True)
    assert same(watched, seeded)


def test_explain_says_what_was_seen_and_where() -> None:
    plan = builder(Sometimes({7: ("random",)})).compile()
    line = next(x for x in plan.explain().splitlines() if "global rngs" in x)
    assert "once your code is seen drawing from it" in line
    with plan.build() as loader:
        assert "not seen drawing from torch, numpy or random so far" in loader.explain()
        for _ in loader:
            pass
        assert loader._fetcher.seeding is not None
        assert loader._fetcher.seeding.seeded == ("random",)
        text = loader.explain()
    assert "seen drawing from random (first in batch" in text
    assert "in the main process): seeded per sample since" in text
    assert "torch and numpy: not seen drawing, not seeded" in text
    spawned = plan.to_builder().with_workers(2, start_method="spawn").compile()
    with spawned.build() as loader:
        for _ in loader:
            pass
        assert "seen drawing from random (first in batch" in loader.explain()
        assert ", in worker " in loader.explain()


def test_a_dataset_that_draws_nothing_is_never_seeded() -> None:
    plan = builder(Sometimes({})).compile()
    with plan.build() as loader:
        for _ in range(2):
            for _ in loader:
                pass
        seeding = loader._fetcher.seeding
        assert seeding is not None and seeding.seeded == ()


def test_with_a_cache_all_three_are_seeded_always() -> None:
    plan = builder(Sometimes({4: ("torch",)})).with_cache("memory").compile()
    with plan.build() as loader:
        seeding = loader._fetcher.seeding
        assert seeding is not None and not seeding.watch and seeding.seeded == RNGS
    assert "with a cache all three are seeded always" in plan.explain()


@pytest.fixture(params=["bytes", "official"])
def readers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The states read as bytes (the layouts found at import) or by the official getters (the
    fallback where a layout check fails)."""
    if request.param == "official":
        monkeypatch.setattr(
            rng_states,
            "_READERS",
            {
                "torch": rng_states._Official(rng_states._read_torch),
                "numpy": rng_states._Official(rng_states._read_numpy_official),
                "random": rng_states._Official(rng_states._read_random_official),
            },
        )
        monkeypatch.setattr(rng_states, "_READER_TUPLES", {})
    else:  # this interpreter's layouts were found and checked
        assert rng_states._PY_OFFSET is not None and rng_states._NP_LAYOUT is not None
        assert rng_states._TORCH_LAYOUT is not None
    return str(request.param)


@pytest.mark.usefixtures("readers")
@pytest.mark.parametrize("rng", RNGS)
def test_states_see_every_kind_of_draw_and_put_back_exactly(rng: str) -> None:
    draws: dict[str, list[Callable[[], Any]]] = {
        "torch": [lambda: torch.rand(1), lambda: torch.randn(1), lambda: torch.randint(9, (1,))],
        "numpy": [np.random.rand, np.random.standard_normal, lambda: np.random.seed(1)],
        "random": [random.random, lambda: random.gauss(0, 1), lambda: random.seed(1)],
    }
    for act in draws[rng]:
        leave_caches_full()
        states = RngStates()
        assert states.moved() == ()
        expected = users_draws()
        states.restore()
        act()
        assert states.moved() == (rng,)
        states.restore()
        assert states.moved() == ()
        assert same(list(users_draws()), list(expected))


@pytest.mark.usefixtures("readers")
@pytest.mark.parametrize(
    ("rng", "whole_turn"),
    [
        ("random", lambda: [random.getrandbits(32) for _ in range(624)]),
        ("numpy", lambda: np.random.bytes(624 * 4)),
        ("torch", lambda: torch.randint(0, 2**31, (312,), dtype=torch.int64)),
    ],
    ids=["random", "numpy", "torch"],
)
def test_a_draw_of_exactly_624_words_is_seen(rng: str, whole_turn: Callable[[], Any]) -> None:
    """The Mersenne Twister's position comes back where it was; its words do not."""
    states = RngStates((rng,))  # type: ignore[arg-type]
    whole_turn()
    assert rng_states.marks((rng,)) != states.marks()  # type: ignore[arg-type]
    assert states.moved() == (rng,)
