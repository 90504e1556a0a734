"""Fingerprint membership: stream fields change it, execution fields do not."""

from __future__ import annotations

import pytest
from hypothesis import given

from loaderkit import DataLoaderBuilder, register_collator
from loaderkit.collators import collators
from loaderkit.plan.fingerprint import compute_elastic_fingerprint


def _first(samples):
    return samples[0]


def _second(samples):
    return samples[-1]


def _t1(sample):
    return sample


def _t2(sample):
    return sample


@pytest.fixture(scope="module", autouse=True)
def _option_collator():
    @register_collator("fp-test", description="test collator with options")
    def factory(*, pad: int = 0, side: str = "right"):
        return _first

    yield
    collators.unregister("fp-test")


DATA = list(range(100))
BASE = DataLoaderBuilder().with_dataset(DATA, name="train").with_batch_size(8)

STREAM_VARIANTS = {
    "dataset name": BASE.with_dataset(DATA, name="other"),
    "dataset length": BASE.with_dataset(list(range(99)), name="train"),
    "dataset kind": BASE.with_dataset({"x": DATA}, name="train"),
    "dataset columns": BASE.with_dataset({"y": DATA}, name="train"),
    "batch size": BASE.with_batch_size(9),
    "drop_last": BASE.with_batch_size(8, drop_last=True),
    "no batching": BASE.with_batch_size(None),
    "shuffle": BASE.with_shuffle(),
    "seed": BASE.with_seed(1),
    "collator": BASE.with_collator(_first),
    "collator ref": BASE.with_collator(_second),
    "transform": BASE.with_transform(_t1),
    "transform ref": BASE.with_transform(_t2),
    "world size": BASE.with_distributed(world_size=2, rank=0),
    "rank": BASE.with_distributed(world_size=2, rank=1),
    "auto distributed": BASE.with_distributed(),
}

EXECUTION_VARIANTS = {
    "num_workers (map-style)": BASE.with_workers(3),
    "prefetch": BASE.with_workers(2, prefetch_factor=8),
    "persistent": BASE.with_workers(2, persistent=False),
    "pin memory": BASE.with_workers(0, pin_memory=True),
    "start method": BASE.with_workers(2, start_method="spawn"),
    "timeout": BASE.with_workers(2, timeout=30),
    "device": BASE.with_device("cuda"),
    "distributed 1 of 1": BASE.with_distributed(world_size=1, rank=0),
    "memory cache": BASE.with_cache(),
    "disk cache": BASE.with_cache("disk", path="cache", max_bytes=10**9),
}


@pytest.mark.parametrize("name", sorted(STREAM_VARIANTS))
def test_stream_fields_change_the_fingerprint(name):
    assert STREAM_VARIANTS[name].compile().fingerprint != BASE.compile().fingerprint


@pytest.mark.parametrize("name", sorted(EXECUTION_VARIANTS))
def test_execution_fields_keep_the_fingerprint(name):
    assert EXECUTION_VARIANTS[name].compile().fingerprint == BASE.compile().fingerprint


def test_all_variants_differ_from_each_other():
    prints = [b.compile().fingerprint for b in STREAM_VARIANTS.values()]
    assert len(set(prints)) == len(prints)


def test_collator_options_are_stream_fields():
    a = BASE.with_collator("fp-test", pad=0).compile().fingerprint
    b = BASE.with_collator("fp-test", pad=1).compile().fingerprint
    c = BASE.with_collator("fp-test", pad=0, side="left").compile().fingerprint
    assert len({a, b, c, BASE.compile().fingerprint}) == 4


def test_no_batching_is_not_batches_of_one():
    # with_batch_size(None) delivers the same samples in the same order as batch_size=1, but
    # without the batch dimension: a different stream, in both fingerprints
    one, none = BASE.with_batch_size(1).compile(), BASE.with_batch_size(None).compile()
    assert one.fingerprint != none.fingerprint
    for world in (1, 2):
        assert compute_elastic_fingerprint(one, world) != compute_elastic_fingerprint(none, world)


def test_even_batches_matters_only_when_sharded():
    # 100 samples in global batches of 18 leave 10: both ranks get a last batch (1 and 9
    # samples uneven, 9 and 9 even), so even_batches=False is allowed and changes the stream
    nine = BASE.with_batch_size(9)
    two = nine.with_distributed(world_size=2, rank=0)
    uneven = nine.with_distributed(world_size=2, rank=0, even_batches=False)
    assert two.compile().fingerprint != uneven.compile().fingerprint


def test_num_workers_is_a_stream_field_for_iterable_sources():
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __iter__(self):
            return iter(range(10))

    base = DataLoaderBuilder().with_dataset(Stream())
    assert base.compile().fingerprint != base.with_workers(2).compile().fingerprint


def test_hf_datasets_contribute_their_own_fingerprint():
    datasets = pytest.importorskip("datasets")
    a = datasets.Dataset.from_dict({"x": list(range(10))})
    b = datasets.Dataset.from_dict({"x": list(range(10, 20))})
    fa = DataLoaderBuilder().with_dataset(a).compile().fingerprint
    fb = DataLoaderBuilder().with_dataset(b).compile().fingerprint
    assert fa != fb


@given(st_seed=__import__("hypothesis").strategies.integers(0, 2**40))
def test_fingerprint_is_a_pure_function_of_the_data(st_seed):
    a = BASE.with_seed(st_seed).compile()
    b = (
        DataLoaderBuilder()
        .with_dataset(list(DATA), name="train")
        .with_batch_size(8)
        .with_seed(st_seed)
        .compile()
    )
    assert a.fingerprint == b.fingerprint
    assert len(a.fingerprint) == 64 and int(a.fingerprint, 16) >= 0


def test_two_lambdas_do_not_share_a_fingerprint():
    a = BASE.with_collator(lambda s: s).compile()
    b = BASE.with_collator(lambda s: s[::-1]).compile()

    def named(s):
        return s

    c = BASE.with_collator(named).compile()
    assert a.fingerprint != c.fingerprint
    assert "<lambda>" in a.collator.label
    # two lambdas on one line of one function are the same code location: same label
    assert a.collator.label == b.collator.label
