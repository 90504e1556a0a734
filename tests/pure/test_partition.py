"""How an epoch is split across ranks (``ShardLayout``): counts, coverage, repeats, elasticity.

Pure index math, no processes: every rank's batches are computed in one process for world
sizes 1..4 and checked against the documented rules.
"""

from __future__ import annotations

from collections import Counter
from itertools import product

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit.order import EpochOrder, ShardLayout

SIZES = (0, 1, 2, 3, 7, 20, 21, 22, 24, 25, 31, 100)
GRID = list(product(SIZES, range(1, 5), range(1, 6), (False, True), (False, True)))


def ranks(n: int, world: int, batch: int, drop_last: bool, even: bool) -> list[list[list[int]]]:
    """Every rank's batches of a shuffled epoch, as lists of sample indices."""
    order = EpochOrder(n, 3, 1, True)
    out = []
    for rank in range(world):
        layout = ShardLayout(n, batch, world, rank, drop_last, even)
        out.append([layout.indices(order, b).tolist() for b in range(len(layout))])
    return out


def check(n: int, world: int, batch: int, drop_last: bool, even: bool) -> None:
    per_rank = ranks(n, world, batch, drop_last, even)
    layout = ShardLayout(n, batch, world, 0, drop_last, even)
    counts = [len(batches) for batches in per_rank]
    ids = [i for batches in per_rank for b in batches for i in b]
    counted = Counter(ids)
    if drop_last or even or world == 1:
        assert len(set(counts)) == 1, counts  # every rank the same number of batches
    else:
        assert max(counts) - min(counts) <= 1
    if drop_last:
        assert max(counted.values(), default=1) == 1  # nothing repeated
        assert len(ids) == n - layout.dropped
        assert layout.dropped == n % (batch * world)
    else:
        assert set(ids) == set(range(n))  # the whole epoch
        repeats = len(ids) - n
        assert repeats == layout.repeated  # only the documented wrap-around
        assert 0 <= repeats < batch * world
        if world == 1 or not even:
            assert repeats == 0
    for rank_batches in per_rank:
        for b in rank_batches[:-1]:
            assert len(b) == batch  # only a rank's last batch can be short
        if rank_batches and (drop_last or (even and world > 1)):
            assert len(rank_batches[-1]) == batch


@pytest.mark.parametrize(("n", "world", "batch", "drop_last", "even"), GRID)
def test_partition_rules(n, world, batch, drop_last, even):
    check(n, world, batch, drop_last, even)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 3000),
    world=st.integers(1, 8),
    batch=st.integers(1, 64),
    drop_last=st.booleans(),
    even=st.booleans(),
)
def test_partition_rules_hold_for_any_size(n, world, batch, drop_last, even):
    check(n, world, batch, drop_last, even)


def global_batches(n: int, world: int, per_rank: int, drop_last: bool) -> list[list[int]]:
    """The concatenation of the ranks' s-th batches in rank order, for every step s."""
    batches = ranks(n, world, per_rank, drop_last, True)
    return [[i for r in range(world) for i in batches[r][s]] for s in range(len(batches[0]))]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2000),
    global_batch=st.sampled_from([8, 12, 24]),
    drop_last=st.booleans(),
)
def test_global_batches_do_not_depend_on_the_world_size(n, global_batch, drop_last):
    worlds = [w for w in (1, 2, 3, 4, 6, 8) if global_batch % w == 0]
    reference = global_batches(n, 1, global_batch, drop_last)
    for world in worlds[1:]:
        got = global_batches(n, world, global_batch // world, drop_last)
        if drop_last or n % global_batch == 0:
            assert got == reference
        else:  # the tail: one rank delivers it smaller, several complete it by wrapping
            assert got[:-1] == reference[:-1]
            assert got[-1][: len(reference[-1])] == reference[-1]
            assert len(got[-1]) == global_batch


# -- even_batches=False: allowed only where no rank can run out ------------------------------


@pytest.mark.parametrize(("n", "world", "batch", "drop_last", "even"), GRID)
def test_compile_allows_uneven_batches_exactly_when_counts_are_equal(
    n, world, batch, drop_last, even
):
    from loaderkit import DataLoaderBuilder, PlanError

    if n == 0 or even:
        return
    builder = (
        DataLoaderBuilder()
        .with_dataset(list(range(n)))
        .with_batch_size(batch, drop_last=drop_last)
        .with_distributed(world_size=world, rank=0, even_batches=False)
    )
    counts = {len(ShardLayout(n, batch, world, r, drop_last, False)) for r in range(world)}
    try:
        builder.compile()
        allowed = True
    except PlanError as error:
        allowed = not any(p.path == "distributed.even_batches" for p in error.problems)
    assert allowed == (len(counts) == 1), (counts, allowed)


def test_uneven_batches_need_a_known_world_size():
    from loaderkit import DataLoaderBuilder, PlanError

    builder = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(3)
    with pytest.raises(PlanError, match="the world size is detected when the plan is built"):
        builder.with_distributed(even_batches=False).compile()
    builder.with_batch_size(3, drop_last=True).with_distributed(even_batches=False).compile()
