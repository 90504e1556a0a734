"""The loader: permutation epochs, determinism, worker invariance, resume, errors."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from lk_testdata import FailingDataset, IndexDataset, global_draws, noisy

import loaderkit as lk
from loaderkit import DataLoaderBuilder, PlanError
from loaderkit.testing import (
    assert_batches_equal,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    collect,
)

pytestmark = pytest.mark.timeout(120)


def _ids(batches):
    return [int(i) for b in batches for i in b["index"]]


@given(
    n=st.integers(1, 300),
    batch=st.integers(1, 40),
    shuffle=st.booleans(),
    seed=st.integers(0, 2**40),
    epoch=st.integers(0, 5),
)
def test_every_epoch_is_a_permutation(n, batch, shuffle, seed, epoch):
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(n))
        .with_batch_size(batch)
        .with_shuffle(shuffle)
        .with_seed(seed)
        .compile()
    )
    loader = plan.build()
    loader.set_epoch(epoch)
    batches = collect(loader)
    assert len(batches) == len(loader) == -(-n // batch)
    ids = _ids(batches)
    assert sorted(ids) == list(range(n))
    if not shuffle:
        assert ids == list(range(n))
    assert all(len(b["index"]) == batch for b in batches[:-1])


@given(n=st.integers(1, 200), batch=st.integers(1, 30))
def test_drop_last_drops_only_the_tail(n, batch):
    plan = DataLoaderBuilder().with_dataset(list(range(n))).with_batch_size(batch, drop_last=True)
    try:
        loader = plan.with_shuffle().compile().build()
    except lk.PlanError:
        assert n < batch
        return
    out = collect(loader)
    assert len(out) == n // batch
    flat = torch.cat(out).tolist() if out else []
    assert len(set(flat)) == len(flat) == (n // batch) * batch


def test_same_plan_same_batches_epochs_and_seeds_differ():
    plan = DataLoaderBuilder().with_dataset(IndexDataset(97)).with_batch_size(8).with_shuffle()
    assert_reproducible(plan.compile(), epochs=3)
    one, two = plan.compile().build(), plan.compile().build()
    e0, e1 = _ids(collect(one)), _ids(collect(one))
    assert e0 != e1
    assert _ids(collect(two)) == e0
    other = plan.with_seed(1).compile().build()
    assert _ids(collect(other)) != e0


def test_iterating_again_continues_with_the_next_epoch():
    loader = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(20))
        .with_batch_size(6)
        .with_shuffle()
        .compile()
        .build()
    )
    first = _ids(collect(loader))
    assert (loader.epoch, loader.batches_delivered) == (0, 4)  # the last pass, complete
    second = _ids(collect(loader))
    assert loader.epoch == 1
    assert first != second
    loader.set_epoch(0)
    assert _ids(collect(loader)) == first


def test_a_broken_off_epoch_continues_where_it_stopped():
    loader = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(20))
        .with_batch_size(6)
        .with_shuffle()
        .compile()
        .build()
    )
    reference = _ids(collect(loader))
    loader.set_epoch(0)
    it = iter(loader)
    head = _ids([next(it), next(it)])
    tail = _ids(list(it))  # the kept iterator continues its pass
    assert head + tail == reference
    # a new iter() after a break is a new pass (torch's habit): the next epoch, whole
    loader.set_epoch(0)
    broken = _ids(collect(loader, 2))
    assert broken == reference[:12]
    after = _ids(collect(loader))
    assert sorted(after) == list(range(20))
    assert after != reference


def test_a_superseded_iterator_refuses_to_continue():
    loader = DataLoaderBuilder().with_dataset(IndexDataset(20)).with_batch_size(2).compile().build()
    it = iter(loader)
    next(it)
    loader.set_epoch(3)
    with pytest.raises(RuntimeError, match="superseded"):
        next(it)


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_worker_invariance_with_a_random_transform(start_method):
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(41))
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(5)
        .with_transform(noisy)
        .with_workers(2, start_method=start_method)
        .compile()
    )
    assert_worker_invariant(plan, workers=(0, 1, 2), epochs=2)


def test_persistent_and_non_persistent_workers_agree():
    base = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(30))
        .with_batch_size(4)
        .with_shuffle()
        .with_transform(noisy)
    )
    runs = []
    for persistent in (True, False):
        with base.with_workers(2, persistent=persistent, prefetch_factor=3).compile().build() as ld:
            runs.append([collect(ld) for _ in range(2)])
    for e in range(2):
        assert_batches_equal(runs[0][e], runs[1][e], label=f"epoch {e}")


def test_worker_global_rngs_are_distinct_per_worker_and_reproducible():
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(16))
        .with_batch_size(2)
        .with_transform(global_draws)
        .with_workers(2, persistent=False)
        .compile()
    )
    runs = []
    for _ in range(2):
        with plan.build() as loader:
            runs.append(collect(loader))
    by_pid: dict[int, list[float]] = {}
    for batch in runs[0]:
        by_pid.setdefault(int(batch["pid"][0]), []).append(float(batch["np"][0]))
    assert len(by_pid) == 2
    first_draws = [draws[0] for draws in by_pid.values()]
    assert first_draws[0] != first_draws[1]  # the classic "every worker draws the same" bug
    for a, b in zip(runs[0], runs[1], strict=True):
        assert torch.equal(a["np"], b["np"])
        assert torch.equal(a["torch"], b["torch"])


def test_the_main_process_global_rng_is_left_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(8))
        .with_batch_size(2)
        .with_shuffle()
        .with_workers(2)
        .compile()
    )
    with plan.build() as loader:
        collect(loader)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("drop_last", [False, True])
def test_resume_at_every_batch(drop_last):
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(23))
        .with_batch_size(5, drop_last=drop_last)
        .with_shuffle()
        .with_seed(11)
        .with_transform(noisy)
        .compile()
    )
    assert_resumable(plan)
    assert_resumable(plan, epoch=3, at=[0, 2, 4])


def test_resume_with_workers():
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(23))
        .with_batch_size(5)
        .with_shuffle()
        .with_workers(2)
        .compile()
    )
    assert_resumable(plan, at=[0, 3, 5])


def test_state_after_the_last_batch_resumes_at_the_next_epoch():
    plan = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(10))
        .with_batch_size(5)
        .with_shuffle()
        .compile()
    )
    loader = plan.build()
    it = iter(loader)
    next(it)
    next(it)  # the last batch, StopIteration not reached yet
    state = loader.state_dict()
    assert (state["epoch"], state["batches_delivered"]) == (0, 2)  # epoch 0 complete
    fresh = plan.build()
    fresh.set_epoch(1)
    resumed = plan.build()
    resumed.load_state_dict(state)
    assert collect(resumed) == []  # the rest of epoch 0 (StatefulDataLoader's habit)
    assert_batches_equal(collect(fresh), collect(resumed))  # then epoch 1


def test_state_is_small_json_and_a_copy():
    loader = DataLoaderBuilder().with_dataset(IndexDataset(10)).with_batch_size(3).compile().build()
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    snapshot = json.loads(json.dumps(state))
    next(it)
    assert state == snapshot
    assert len(json.dumps(state)) < 2048
    assert state["batches_delivered"] == 1
    assert loader.state_dict()["batches_delivered"] == 2


def test_a_state_from_another_plan_is_refused_with_the_diff():
    a = DataLoaderBuilder().with_dataset(IndexDataset(10)).with_batch_size(3).compile().build()
    b = DataLoaderBuilder().with_dataset(IndexDataset(10)).with_batch_size(4).compile().build()
    with pytest.raises(lk.ResumeError) as err:
        b.load_state_dict(a.state_dict())
    assert "batch.batch_size: 3 -> 4" in str(err.value)
    b.load_state_dict(a.state_dict(), strict=False)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda s: s.pop("epoch"), "missing epoch"),
        (lambda s: s.update(epoch=-1), "must be an int >= 0"),
        (lambda s: s.update(batches_delivered=99), "has 4"),
        (
            lambda s: s.update(
                rank=1, world_size=2, global_batch_size=6, global_fingerprint="0" * 64
            ),
            "saved at 2 rank",
        ),
        (lambda s: s.update(loaderkit_state=99), "state format"),
    ],
)
def test_bad_states_are_refused(mutate, match):
    loader = DataLoaderBuilder().with_dataset(IndexDataset(10)).with_batch_size(3).compile().build()
    state = loader.state_dict()
    mutate(state)
    with pytest.raises(lk.ResumeError, match=match):
        loader.load_state_dict(state)


def test_equal_fingerprints_give_equal_streams_across_execution_settings():
    base = (
        DataLoaderBuilder()
        .with_dataset(IndexDataset(37))
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(9)
        .with_transform(noisy)
    )
    variants = [
        base,
        base.with_workers(2, prefetch_factor=4, persistent=False),
        base.with_workers(1, timeout=60),
        base.with_workers(0, pin_memory=True),
        base.with_device("auto"),
    ]
    plans = [v.compile() for v in variants]
    assert len({p.fingerprint for p in plans}) == 1
    reference = None
    for plan in plans:
        with plan.build() as loader:
            out = collect(loader)
        if reference is None:
            reference = out
        else:
            assert_batches_equal(reference, out, label=repr(plan))


@pytest.mark.parametrize("workers", [0, 2])
def test_errors_name_the_sample_and_the_worker(workers):
    plan = (
        DataLoaderBuilder()
        .with_dataset(FailingDataset(20, bad=13))
        .with_batch_size(4)
        .with_workers(workers)
        .compile()
    )
    with plan.build() as loader, pytest.raises(lk.DataError) as err:
        collect(loader)
    assert err.value.sample_index == 13
    assert "sample 13" in str(err.value) and "corrupt record 13" in str(err.value)
    if workers:
        assert err.value.worker_id in (0, 1)
        assert f"in worker {err.value.worker_id}" in str(err.value)
        assert "Traceback" in str(err.value)
    else:
        assert err.value.worker_id is None
        assert isinstance(err.value.__cause__, ValueError)


def test_collate_errors_name_the_batch_and_collator():
    data = [torch.zeros(2), torch.zeros(3)]
    loader = DataLoaderBuilder().with_dataset(data).with_batch_size(2).compile().build()
    with pytest.raises(lk.DataError) as err:
        collect(loader)
    assert err.value.batch_index == 0
    assert "could not be collated by 'default'" in str(err.value)


def test_transform_errors_name_the_sample():
    def bad(sample):
        if int(sample) == 3:
            raise KeyError("label")
        return sample

    loader = (
        DataLoaderBuilder()
        .with_dataset(list(range(6)))
        .with_transform(bad)
        .with_batch_size(2)
        .compile()
        .build()
    )
    with pytest.raises(lk.DataError, match=r"sample 3 .* failed in the transform") as err:
        collect(loader)
    assert err.value.sample_index == 3


def test_unbound_plans_do_not_build():
    plan = DataLoaderBuilder().with_dataset(list(range(5)), name="t").compile()
    unbound = lk.LoaderPlan.from_dict(plan.to_dict(), require_bindings=False)
    with pytest.raises(lk.PlanError, match="bindings"):
        unbound.build()


def test_len_and_batch_indices():
    loader = (
        DataLoaderBuilder()
        .with_dataset(list(range(10)))
        .with_batch_size(4)
        .with_shuffle()
        .compile()
        .build()
    )
    assert len(loader) == 3
    batches = collect(loader)
    assert [b.tolist() for b in batches] == [loader.batch_indices(0, i) for i in range(3)]
    assert "Loader(" in repr(loader) and "<pre" in loader._repr_html_()


def test_numpy_columns_and_lists_of_samples():
    cols = {"x": np.arange(12, dtype=np.float32).reshape(6, 2), "y": np.arange(6)}
    loader = DataLoaderBuilder().with_dataset(cols).with_batch_size(4).compile().build()
    first = next(iter(loader))
    assert first["x"].dtype == torch.float32 and first["x"].shape == (4, 2)
    assert first["y"].tolist() == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory for plans whose relative paths (a disk cache) resolve in it."""
    return tmp_path_factory.mktemp("fingerprint-streams")


def _pass_outcome(loader: Any) -> tuple[list[Any], str | None]:
    """The batches of one pass, and the error that ended it (``None``: it ran through)."""
    batches: list[Any] = []
    try:
        for batch in loader:
            batches.append(batch)
    except lk.DataError as exc:  # a drawn collator may not fit the drawn samples
        return batches, f"{type(exc).__name__}: {exc}"
    return batches, None


@given(
    plan=__import__("loaderkit.testing", fromlist=["plans"]).plans(max_length=40),
    pin=st.booleans(),
    auto=st.booleans(),
)
def test_plans_equal_in_fingerprint_give_equal_streams(plan, pin, auto, scratch_dir):
    plan = plan.to_builder().with_workers(0).with_device("cpu").compile()
    variant = plan.to_builder().with_workers(0, pin_memory=pin)
    if auto:
        variant = variant.with_device("auto")
    if not plan.distributed.enabled:
        variant = variant.with_distributed(world_size=1, rank=0)
    other = variant.compile()
    assert other.fingerprint == plan.fingerprint
    with contextlib.chdir(scratch_dir), contextlib.ExitStack() as stack:
        built: list[Any] = []
        for p in (plan, other):
            try:  # compiled plans may still not fit their data: build() reads it
                built.append(stack.enter_context(p.build()))
            except (lk.PlanError, lk.DataError) as exc:
                built.append(f"{type(exc).__name__}: {exc}")
        a, b = built
        if isinstance(a, str) or isinstance(b, str):
            assert a == b  # both refused, the same way
            return
        for epoch in range(2):
            (got_a, error_a), (got_b, error_b) = _pass_outcome(a), _pass_outcome(b)
            assert_batches_equal(got_a, got_b, label=f"epoch {epoch}")
            assert error_a == error_b  # equal streams fail at the same batch, the same way


@pytest.mark.parametrize(("workers", "persistent"), [(0, None), (2, True), (2, False)])
def test_datasets_with_set_epoch_hear_every_epoch_even_in_persistent_workers(workers, persistent):
    from lk_testdata import EpochAwareDataset

    plan = (
        DataLoaderBuilder()
        .with_dataset(EpochAwareDataset(12))
        .with_batch_size(4)
        .with_shuffle()
        .with_workers(workers, persistent=persistent)
        .compile()
    )
    with plan.build() as loader:
        for epoch in (0, 1, 5):
            loader.set_epoch(epoch)
            seen = {int(e) for batch in loader for e in batch["epoch"]}
            assert seen == {epoch}
        loader.set_epoch(2)
        it = iter(loader)
        next(it)
        state = loader.state_dict()
    with plan.build() as resumed:
        resumed.load_state_dict(state)
        assert {int(e) for batch in resumed for e in batch["epoch"]} == {2}


def test_the_builder_builds_in_one_call_what_compile_then_build_gives():
    builder = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(3).with_shuffle()
    loader = builder.build()
    assert loader.plan == builder.compile()
    assert [b.tolist() for b in loader] == [b.tolist() for b in builder.compile().build()]
    with pytest.raises(PlanError, match="dataset"):  # every problem raised, as compile() does
        DataLoaderBuilder().with_batch_size(3).build()
