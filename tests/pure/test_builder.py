"""The builder: immutability, equality, repr, compile."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.plan.display import MONOSPACE
from loaderkit.plan.sections import SECTIONS, bound_names
from loaderkit.testing.strategies import (
    BUILDER_CALLS,
    apply_calls,
    builder_calls,
    sample_transform,
    section_calls,
)


def _snapshot(builder: DataLoaderBuilder) -> tuple[object, ...]:
    return (attrs.astuple(builder, recurse=False), dict(builder._bound), repr(builder))


def test_the_strategies_draw_every_chain_method_of_the_builder():
    # a new with_* without a strategy in BUILDER_CALLS fails here
    methods = {m for m in dir(DataLoaderBuilder) if m.startswith("with_")}
    assert set(BUILDER_CALLS) == methods | {"without"}
    assert all(callable(getattr(DataLoaderBuilder, m)) for m in BUILDER_CALLS)


@pytest.mark.parametrize("method", sorted(BUILDER_CALLS))
@given(data=st.data(), length=st.integers(1, 40))
def test_the_drawn_arguments_of_every_method_are_accepted(method, data, length):
    """Valid arguments (``junk=False``): the call succeeds; compile may still refuse."""
    name, args, kwargs = data.draw(section_calls(length=length)[method])
    assert name == method
    start = DataLoaderBuilder().with_dataset(list(range(length)))
    builder = getattr(start, method)(*args, **kwargs)
    assert isinstance(builder, DataLoaderBuilder)
    assert repr(builder).startswith("DataLoaderBuilder()")


@given(builder_calls())
def test_every_call_leaves_its_builder_unchanged(calls):
    builders = [DataLoaderBuilder()]
    snapshots = [_snapshot(builders[0])]
    for name, args, kwargs in calls:
        nxt = getattr(builders[-1], name)(*args, **kwargs)
        assert nxt is not builders[-1]
        builders.append(nxt)
        snapshots.append(_snapshot(nxt))
    for builder, snap in zip(builders, snapshots, strict=True):
        assert _snapshot(builder) == snap


@given(builder_calls())
def test_equal_call_sequences_give_equal_builders_and_plans(calls):
    a, b = apply_calls(calls), apply_calls(calls)
    assert a == b
    assert hash(a) == hash(b)
    assert repr(a) == repr(b)
    try:
        pa = a.compile()
    except lk.PlanError as exc:
        try:
            b.compile()
        except lk.PlanError as exc_b:
            assert exc.problems == exc_b.problems
        else:  # pragma: no cover - would be a bug
            raise AssertionError("same calls compiled once and failed once") from None
        return
    pb = b.compile()
    assert pa == pb
    assert hash(pa) == hash(pb)
    assert pa.fingerprint == pb.fingerprint


@given(builder_calls(junk=True))
def test_any_call_sequence_compiles_or_raises_plan_error(calls):
    builder = DataLoaderBuilder()
    for name, args, kwargs in calls:
        try:
            builder = getattr(builder, name)(*args, **kwargs)
        except lk.PlanError as exc:
            assert exc.problems
            assert all(p.path and p.message for p in exc.problems)
    try:
        plan = builder.compile()
    except lk.PlanError as exc:
        assert exc.problems
    else:
        assert isinstance(plan, LoaderPlan)
        assert plan.explain()


def test_same_method_twice_replaces_the_earlier_setting():
    b = DataLoaderBuilder().with_dataset([1, 2, 3]).with_batch_size(2).with_batch_size(3)
    assert b.compile().batch.batch_size == 3
    b = b.with_dataset([1, 2], name="a").with_dataset([1, 2, 3, 4], name="b")
    plan = b.compile()
    assert plan.dataset.binding == "b"
    assert set(plan.bindings) == {"b"}


@given(builder_calls())
def test_a_builder_binds_exactly_the_objects_its_sections_refer_to(calls):
    """Each Section's ``bindings`` declaration decides what stays bound: after any chain, no
    object is kept that no section refers to, and every function or array a section refers
    to is bound (a registry name or a ``module:qualname`` string binds nothing)."""
    builder = DataLoaderBuilder()
    for name, args, kwargs in calls:
        builder = getattr(builder, name)(*args, **kwargs)
        used = bound_names(builder._value)
        assert set(builder._bound) <= used
        for section in SECTIONS:
            value = builder._value(section.name)
            if section.bindings is None or value is None or section.name == "dataset":
                continue
            refs = set(section.bindings(value))
            strings = {n for n in refs if ":" in n}  # module refs, resolved when loaded
            assert refs - strings <= set(builder._bound), section.name


def test_replacing_a_callable_drops_its_old_binding():
    b = DataLoaderBuilder().with_dataset([1, 2]).with_collator(lambda s: s)
    assert set(b._bound) == {"dataset", "collator"}
    b = b.with_collator("default")
    assert set(b._bound) == {"dataset"}


def test_repr_is_the_chain_with_defaults_omitted():
    assert repr(DataLoaderBuilder()) == "DataLoaderBuilder()"
    b = (
        DataLoaderBuilder()
        .with_dataset(list(range(10)), name="train")
        .with_batch_size(4, drop_last=True)
        .with_shuffle()
        .with_seed(7)
        .with_workers(2, prefetch_factor=4)
        .with_device("auto")
        .with_distributed(world_size=2, rank=1)
    )
    assert repr(b) == (
        "DataLoaderBuilder().with_dataset(<list: 10 samples>, name='train')"
        ".with_batch_size(4, drop_last=True).with_shuffle().with_seed(7)"
        ".with_workers(2, prefetch_factor=4).with_device('auto')"
        ".with_distributed(world_size=2, rank=1)"
    )
    assert repr(DataLoaderBuilder().with_batch_size(1).with_seed(0)) == "DataLoaderBuilder()"
    assert (
        '<pre class="loaderkit-chain" style="white-space:pre-wrap;overflow-wrap:anywhere;'
        f'{MONOSPACE}">'
        "DataLoaderBuilder()\n    .with_dataset(&lt;list: 10 samples&gt;, name=&#x27;train&#x27;)\n"
        "    .with_batch_size(4, drop_last=True)\n"
    ) in b._repr_html_()


def test_repr_shows_registry_collators_with_options_and_callables_by_name():
    b = DataLoaderBuilder().with_collator("default").with_transform(sample_transform)
    assert repr(b) == "DataLoaderBuilder().with_transform(<function sample_transform>)"


def test_repr_shows_mapping_options_as_the_dicts_a_user_writes():
    samples = [{"input_ids": [1, 2]}]
    b = DataLoaderBuilder().with_dataset(samples).with_collator("text", pad_values={"input_ids": 0})
    shown = repr(b)
    assert "FrozenMap" not in shown
    assert ".with_collator('text', pad_values={'input_ids': 0})" in shown
    written = shown.replace("<list: 1 sample>", "samples")
    assert eval(written, {"DataLoaderBuilder": DataLoaderBuilder, "samples": samples}) == b


def test_repr_counts_one_sample_in_the_singular():
    assert repr(DataLoaderBuilder().with_dataset([0])) == (
        "DataLoaderBuilder().with_dataset(<list: 1 sample>)"
    )
    mixed = DataLoaderBuilder().with_mixture({"a": [0], "b": [0, 1]})
    assert repr(mixed) == (
        "DataLoaderBuilder().with_mixture({'a': <list: 1 sample>, 'b': <list: 2 samples>})"
    )


def test_to_builder_round_trips():
    plan = DataLoaderBuilder().with_dataset([1, 2, 3]).with_batch_size(2).with_shuffle().compile()
    again = plan.to_builder().compile()
    assert again == plan
    assert plan.to_builder().with_batch_size(3).compile().batch.batch_size == 3


@given(st.integers(0, 2**63 - 1))
def test_large_seeds_are_kept_exactly(seed):
    plan = DataLoaderBuilder().with_dataset([0]).with_seed(seed).compile()
    assert plan.order.seed == seed
    assert LoaderPlan.from_dict(plan.to_dict(), bindings=plan.bindings).order.seed == seed


def test_plans_are_hashable_and_usable_as_dict_keys():
    data = list(range(5))
    p1 = DataLoaderBuilder().with_dataset(data).compile()
    p2 = DataLoaderBuilder().with_dataset(data).compile()
    assert {p1: 1}[p2] == 1


def test_explain_reports_the_shape_of_an_epoch():
    plan = (
        DataLoaderBuilder()
        .with_dataset(list(range(100)), name="train")
        .with_batch_size(32)
        .with_shuffle()
        .compile()
    )
    text = plan.explain()
    assert "'train'" in text and "100 samples" in text
    assert "4 batches per epoch per rank (last has 4)" in text
    assert "shuffled" in text and plan.fingerprint in text
    dropped = plan.to_builder().with_batch_size(32, drop_last=True).compile().explain()
    assert "3 batches per epoch per rank" in dropped and "4 samples dropped" in dropped
    dist = plan.to_builder().with_distributed(world_size=3, rank=0).compile().explain()
    assert "rank 0 of 3" in dist
    assert "2 batches per epoch per rank" in dist and "92 samples repeated" in dist
    auto = plan.to_builder().with_distributed().compile().explain()
    assert "detected at build time" in auto


def test_explain_says_a_plan_without_batching_delivers_samples_one_by_one():
    plan = DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(None).compile()
    rows = {line.split()[0]: line for line in plan.explain().splitlines()[1:]}
    assert "none (batch_size=None)" in rows["batches"]
    assert "no batch dimension -> 10 samples per epoch per rank" in rows["batches"]
    assert "no batches to collate" in rows["collator"]
    two = plan.to_builder().with_distributed(world_size=2, rank=1).compile().explain()
    assert "-> 5 samples per epoch per rank" in two


@pytest.mark.parametrize(
    ("change", "path", "fix"),
    [
        (lambda b: b.with_batch_size(None, drop_last=True), "batch.drop_last", "set a batch size"),
        (lambda b: b.with_collator("text"), "collator", ".without('collator')"),
        (lambda b: b.with_task("text"), "collator", "with_transform"),
    ],
)
def test_a_plan_without_batching_refuses_what_needs_batches(change, path, fix):
    rows = [{"input_ids": [1, 2], "label": 0}] * 4
    unbatched = DataLoaderBuilder().with_dataset(rows).with_batch_size(None)
    with pytest.raises(lk.PlanError) as err:
        change(unbatched).compile()
    assert err.value.paths == (path,)
    assert fix in str(err.value)
    change(unbatched).with_batch_size(2).compile()  # batching on: the same call is fine


def test_build_is_reachable_from_the_plan():
    plan = DataLoaderBuilder().with_dataset([1, 2, 3]).compile()
    assert callable(plan.build)


def test_module_refs_given_to_the_builder_compile_and_bind():
    from loaderkit.collators import default_collate

    plan = (
        DataLoaderBuilder()
        .with_dataset([1, 2])
        .with_collator("loaderkit.collators:default_collate")
        .compile()
    )
    assert plan.collator.source == "ref"
    # stored under the function's own path, so both spellings fingerprint alike
    assert plan.collator.name == "loaderkit.collators.default:default_collate"
    assert plan.bindings is not None
    assert plan.bindings[plan.collator.name] is default_collate
    direct = DataLoaderBuilder().with_dataset([1, 2]).with_collator(default_collate).compile()
    assert direct.fingerprint == plan.fingerprint


def test_distributed_can_be_switched_off_again():
    b = DataLoaderBuilder().with_dataset([1, 2]).with_distributed(world_size=2, rank=0)
    assert not b.with_distributed(enabled=False).compile().distributed.enabled


def test_datasets_cannot_take_the_callables_binding_names():
    for name in ("collator", "transform"):
        with pytest.raises(lk.PlanError) as err:
            DataLoaderBuilder().with_dataset([1], name=name)
        assert err.value.paths == ("dataset.name",)


def test_plans_and_builders_pickle_with_their_bindings():
    import pickle

    data = list(range(5))
    builder = DataLoaderBuilder().with_dataset(data, name="d").with_batch_size(2)
    plan = builder.compile()
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan
    assert again.bindings is not None
    assert again.bindings["d"] == data
    assert pickle.loads(pickle.dumps(builder)) == builder


def test_loader_is_exported_lazily():
    import subprocess
    import sys

    code = "import sys, loaderkit; assert 'torch' not in sys.modules; print(loaderkit.Loader)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "loaderkit.runtime.loader.Loader" in out.stdout
