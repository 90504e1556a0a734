"""Every bad input gets a PlanError whose problems name exactly the right paths."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from loaderkit import DataLoaderBuilder, PlanError, PlanTypeError

OK = DataLoaderBuilder().with_dataset(list(range(10)))


def _spawn_lambda_collator() -> DataLoaderBuilder:
    return OK.with_workers(2, start_method="spawn").with_collator(lambda samples: samples)


def _iterable() -> DataLoaderBuilder:
    torch = pytest.importorskip("torch")

    class Stream(torch.utils.data.IterableDataset):  # type: ignore[misc]
        def __iter__(self):
            return iter(range(3))

    return DataLoaderBuilder().with_dataset(Stream()).with_shuffle()


# (id, a function making the builder or raising, expected paths)
CASES: list[tuple[str, Callable[[], object], tuple[str, ...]]] = [
    ("batch size 0", lambda: OK.with_batch_size(0), ("batch.batch_size",)),
    ("batch size bool", lambda: OK.with_batch_size(True), ("batch.batch_size",)),
    ("batch size float", lambda: OK.with_batch_size(2.5), ("batch.batch_size",)),
    ("drop_last str", lambda: OK.with_batch_size(4, drop_last="yes"), ("batch.drop_last",)),
    ("seed negative", lambda: OK.with_seed(-1), ("order.seed",)),
    ("seed str", lambda: OK.with_seed("7"), ("order.seed",)),
    ("shuffle int", lambda: OK.with_shuffle(1), ("order.shuffle",)),
    ("workers negative", lambda: OK.with_workers(-1), ("workers.num_workers",)),
    ("workers bool", lambda: OK.with_workers(True), ("workers.num_workers",)),
    ("prefetch 0", lambda: OK.with_workers(2, prefetch_factor=0), ("workers.prefetch_factor",)),
    ("start method", lambda: OK.with_workers(2, start_method="thread"), ("workers.start_method",)),
    ("timeout negative", lambda: OK.with_workers(2, timeout=-1), ("workers.timeout",)),
    ("timeout nan", lambda: OK.with_workers(2, timeout=float("nan")), ("workers.timeout",)),
    ("persistent str", lambda: OK.with_workers(2, persistent="yes"), ("workers.persistent",)),
    ("pin memory int", lambda: OK.with_workers(2, pin_memory=1), ("workers.pin_memory",)),
    ("device gpu", lambda: OK.with_device("gpu"), ("device",)),
    ("device cuda:x", lambda: OK.with_device("cuda:x"), ("device",)),
    ("device cpu:0", lambda: OK.with_device("cpu:0"), ("device",)),
    (
        "world size 0",
        lambda: OK.with_distributed(world_size=0, rank=0),
        ("distributed.world_size",),
    ),
    ("rank negative", lambda: OK.with_distributed(world_size=2, rank=-1), ("distributed.rank",)),
    (
        "even_batches int",
        lambda: OK.with_distributed(even_batches=0),
        ("distributed.even_batches",),
    ),
    ("collator typo", lambda: OK.with_collator("defualt"), ("collator",)),
    ("collator int", lambda: OK.with_collator(42), ("collator",)),
    ("collator option", lambda: OK.with_collator("default", pad=0), ("collator.options.pad",)),
    ("options with callable", lambda: OK.with_collator(len, pad=0), ("collator.options",)),
    (
        "collator object option",
        lambda: OK.with_collator("default", pad=object()),
        ("collator.options.pad",),
    ),
    ("transform int", lambda: OK.with_transform(3), ("transform",)),
    ("transform arity", lambda: OK.with_transform(lambda: 1), ("transform",)),
    ("transform unknown", lambda: OK.with_transform("nope"), ("transform",)),
    ("dataset string", lambda: OK.with_dataset("train.csv"), ("dataset",)),
    ("dataset None", lambda: OK.with_dataset(None), ("dataset",)),
    ("dataset ragged columns", lambda: OK.with_dataset({"x": [1, 2], "y": [1]}), ("dataset",)),
    ("dataset object", lambda: OK.with_dataset(object()), ("dataset",)),
    ("dataset generator", lambda: OK.with_dataset(iter([1, 2])), ("dataset",)),
    ("dataset name", lambda: OK.with_dataset([1], name="1bad"), ("dataset.name",)),
    ("shuffle None", lambda: OK.with_shuffle(None), ("order.shuffle",)),
    ("seed None", lambda: OK.with_seed(None), ("order.seed",)),
    ("seed too large", lambda: OK.with_seed(2**63), ("order.seed",)),
    ("collator ref missing", lambda: OK.with_collator("loaderkit.collators:nope"), ("collator",)),
    ("collator ref module", lambda: OK.with_collator("no_such_module_xyz:f"), ("collator",)),
    (
        "transform ref not callable",
        lambda: OK.with_transform("loaderkit:__version__"),
        ("transform",),
    ),
    (
        "disabled with sizes",
        lambda: OK.with_distributed(world_size=2, enabled=False),
        ("distributed.enabled",),
    ),
    # cross-field rules, found by compile()
    ("no dataset", lambda: DataLoaderBuilder().compile(), ("dataset",)),
    ("empty dataset", lambda: DataLoaderBuilder().with_dataset([]).compile(), ("dataset",)),
    (
        "prefetch without workers",
        lambda: OK.with_workers(0, prefetch_factor=2).compile(),
        ("workers.prefetch_factor",),
    ),
    (
        "persistent without workers",
        lambda: OK.with_workers(0, persistent=True).compile(),
        ("workers.persistent",),
    ),
    (
        "start method without workers",
        lambda: OK.with_workers(0, start_method="spawn").compile(),
        ("workers.start_method",),
    ),
    (
        "timeout without workers",
        lambda: OK.with_workers(0, timeout=5).compile(),
        ("workers.timeout",),
    ),
    (
        "rank outside world",
        lambda: OK.with_distributed(world_size=2, rank=2).compile(),
        ("distributed.rank",),
    ),
    (
        "world size without rank",
        lambda: OK.with_distributed(world_size=2).compile(),
        ("distributed.rank",),
    ),
    (
        "rank without world size",
        lambda: OK.with_distributed(rank=1).compile(),
        ("distributed.world_size",),
    ),
    ("unpicklable collator under spawn", lambda: _spawn_lambda_collator().compile(), ("collator",)),
    (
        "unpicklable transform under spawn",
        lambda: OK.with_workers(1, start_method="forkserver").with_transform(lambda s: s).compile(),
        ("transform",),
    ),
    (
        "drop_last leaves nothing",
        lambda: OK.with_batch_size(11, drop_last=True).compile(),
        ("batch.drop_last",),
    ),
    (
        "drop_last per rank",
        lambda: (
            OK.with_batch_size(6, drop_last=True).with_distributed(world_size=2, rank=0).compile()
        ),
        ("batch.drop_last",),
    ),
    ("shuffle iterable", lambda: _iterable().compile(), ("order.shuffle",)),
    (
        "reserved dataset name",
        lambda: DataLoaderBuilder().with_dataset([1], name="collator"),
        ("dataset.name",),
    ),
    (
        "several at once",
        lambda: (
            DataLoaderBuilder()
            .with_workers(0, prefetch_factor=2)
            .with_distributed(world_size=2, rank=5)
            .compile()
        ),
        ("dataset", "workers.prefetch_factor", "distributed.rank"),
    ),
]


@pytest.mark.parametrize(("make", "paths"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_its_paths(make, paths):
    with pytest.raises(PlanError) as err:
        make()
    assert err.value.paths == paths
    assert isinstance(err.value, ValueError)
    for problem in err.value.problems:
        assert problem.message  # what, the value received and the fix
        assert str(problem).startswith(problem.path + ": ")


def test_there_are_at_least_25_cases():
    assert len(CASES) >= 25


def test_type_problems_are_also_type_errors():
    with pytest.raises(TypeError):
        OK.with_batch_size("4")
    with pytest.raises(PlanTypeError):
        OK.with_workers(1.0)


def test_messages_name_the_value_and_the_fix():
    with pytest.raises(PlanError) as err:
        OK.with_workers(0, prefetch_factor=2).compile()
    assert str(err.value) == (
        "workers.prefetch_factor: must be unset when num_workers == 0 (got 2); set "
        "num_workers >= 1, or drop it: .with_workers(0)"
    )
    with pytest.raises(PlanError, match=r"did you mean 'default'\?"):
        OK.with_collator("defualt")
    with pytest.raises(PlanError, match=r"got bool True"):
        OK.with_batch_size(True)
    with pytest.raises(PlanError, match=r"cannot be pickled.*'spawn'.*module level"):
        _spawn_lambda_collator().compile()


def test_a_cuda_device_compiles_anywhere():
    assert OK.with_device("cuda:1").compile().device == "cuda:1"


def test_plan_errors_pickle_with_their_problems():
    with pytest.raises(PlanError) as err:
        DataLoaderBuilder().compile()
    again = pickle.loads(pickle.dumps(err.value))
    assert again.problems == err.value.problems


def test_all_option_problems_are_reported_at_once():
    from loaderkit import register_collator
    from loaderkit.collators import collators

    @register_collator("two-opts")
    def factory(*, pad: int = 0, side: str = "right"):
        return list

    try:
        with pytest.raises(PlanError) as err:
            OK.with_collator("two-opts", padd=1, sid="x")
        assert err.value.paths == ("collator.options.padd", "collator.options.sid")
        assert "did you mean 'pad'" in str(err.value)
    finally:
        collators.unregister("two-opts")


def test_unknown_registry_names_are_loaderkit_errors():
    from loaderkit import LoaderkitError
    from loaderkit.collators import collators

    with pytest.raises(LoaderkitError, match="did you mean 'default'"):
        collators.get("defualt")
