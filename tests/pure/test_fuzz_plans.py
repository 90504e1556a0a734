"""Fuzzing plans (issue 13): whatever a plan holds, loaderkit raises only its own errors.

Three sources of input: (a) random JSON-like trees given to ``LoaderPlan.from_dict``;
(b) valid plans, one per feature of the builder, with one part mutated (a subtree replaced,
a key deleted or added, a type changed); (c) random arguments to random ``with_*`` methods,
then ``compile()``. The property: the only exceptions are :class:`loaderkit.LoaderkitError`
subclasses (never ``TypeError``, ``KeyError``, ``RecursionError``, ``OverflowError``, ...),
and a plan that loads can be inspected and read back: ``explain()``, ``to_dict()``,
``fingerprint`` and ``from_dict(plan.to_dict(), ...)`` with the same arguments succeed.

Examples follow the hypothesis profile (``tests/conftest.py``); the ``slow`` variants draw
twenty times as many.
"""

from __future__ import annotations

import inspect
import math
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, LoaderkitError, LoaderPlan
from loaderkit import presets as lk_presets
from loaderkit.plan.sections import FILE_KEYS as SECTIONS

pytestmark = pytest.mark.timeout(300)

FOLDER = Path(tempfile.mkdtemp(prefix="lk-fuzz-plans-"))
"""``base_dir`` of every read: empty, and left empty (no path a plan names is read or made)."""


def _examples(factor: int) -> settings:
    """The profile's settings with ``factor`` times its examples (fast tests draw more)."""
    return settings(
        max_examples=settings.default.max_examples * factor,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        deadline=None,
    )


# -- values ---------------------------------------------------------------------------------------

FIELD_NAMES = sorted(
    {
        *SECTIONS,
        "binding", "kind", "type", "length", "identity", "columns", "features", "source",
        "name", "ref", "options", "batch_size", "drop_last", "schedule", "size_fn", "by",
        "shuffle", "seed", "buffer_size", "label", "reason", "accepts_rng", "num_workers",
        "prefetch_factor", "persistent", "pin_memory", "start_method", "timeout", "enabled",
        "world_size", "rank", "even_batches", "column", "array", "digest", "num_buckets",
        "max_tokens", "max_batch_size", "cost", "weights", "replacement", "num_samples",
        "difficulty", "horizon", "start", "degree", "steps", "sources", "mode", "weights_fn",
        "stratified", "source_key", "value", "fn", "keys", "dtypes", "shapes", "finite",
        "ranges", "label_pad", "classes", "every", "policy", "max_errors", "max_error_rate", "per",
        "val", "test", "stratify_by", "storage", "stage", "path", "max_bytes", "n",
        "data_files", "format", "split", "collators", "pad_token_id", "max_length", "low",
        "high", "one_hot", "ignore_index", "mask", "labels",
    }
)  # fmt: skip
"""Every key a plan file knows (a mutation or a random tree uses them as often as junk)."""

STRINGS = [
    "", "default", "text", "tokens", "hf_files", "train", "dataset", "mixture", "torch_map",
    "hf", "samples", "builtins.list", "auto", "cpu", "cuda", "cuda:0", "cuda:99999999999",
    "mps", "fork", "spawn", "epoch", "step", "linear", "root", "discrete", "quadratic",
    "weighted", "sequential", "round_robin", "memory", "disk", "fetched", "transformed",
    "raise", "skip", "int64", "float32", "input_ids", "B", "T", "*", "...", "../x", "/",
    "~", "os:system", "loaderkit.plan.workers:os.system", "a:b:c", ":", "x" * 5000,
    "lk_fuzz_nowhere:f", "loaderkit.datasets:tokens", "\x00", "\udcff", "é", "1e999",
]  # fmt: skip

HUGE = [2**31, 2**48 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**100, 10**4000]

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-3, 70),
    st.sampled_from(HUGE),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 0.5, 1e308, 5e-324]),
    st.text(max_size=12),
    st.sampled_from(STRINGS),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8))
odd_keys = st.one_of(keys, st.integers(), st.none(), st.booleans(), st.tuples(st.integers()))


def trees(
    leaf: st.SearchStrategy[Any] = leaves, key: st.SearchStrategy[Any] = keys
) -> st.SearchStrategy[Any]:
    """JSON-like trees: leaves, lists (and tuples) and dicts with plan-like keys."""
    return st.recursive(
        leaf,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(key, children, max_size=6),
        ),
        max_leaves=30,
    )


def plan_like() -> st.SearchStrategy[dict[str, Any]]:
    """Dicts of sections holding random trees, mostly with a good schema_version."""
    values = st.one_of(trees(), trees(key=odd_keys))
    sections = st.dictionaries(st.sampled_from(SECTIONS), values, max_size=8)
    version = st.one_of(st.just(1), leaves)
    return st.tuples(sections, version, st.booleans()).map(
        lambda t: {**t[0], "schema_version": t[1]} if t[2] else t[0]
    )


# -- the property ---------------------------------------------------------------------------------


def _read(data: object, bindings: Mapping[str, object] | None, inspect_only: bool) -> LoaderPlan:
    return LoaderPlan.from_dict(
        data,  # type: ignore[arg-type]
        bindings=bindings,
        require_bindings=not inspect_only,
        base_dir=FOLDER,
    )


def assert_only_loaderkit_errors(
    data: object, bindings: Mapping[str, object] | None, inspect_only: bool
) -> LoaderPlan | None:
    """Read ``data``: a LoaderkitError, or a plan that inspects and reads back the same."""
    try:
        plan = _read(data, bindings, inspect_only)
    except LoaderkitError as exc:
        str(exc)  # the message renders
        return None
    assert_inspectable(plan, bindings, inspect_only)
    return plan


def assert_inspectable(
    plan: LoaderPlan, bindings: Mapping[str, object] | None, inspect_only: bool
) -> None:
    assert isinstance(plan.explain(), str)
    assert len(plan.fingerprint) == 64
    assert plan.diff(plan) == []
    again = _read(plan.to_dict(), bindings, inspect_only)
    assert again == plan
    assert again.fingerprint == plan.fingerprint


@pytest.fixture(autouse=True, scope="module")
def _empty_folder() -> Any:
    yield
    FOLDER.rmdir()  # still empty: nothing was written into it


# -- (a) random trees ----------------------------------------------------------------------------


@_examples(5)
@given(data=st.one_of(plan_like(), trees()), inspect_only=st.booleans())
def test_random_trees_raise_only_loaderkit_errors(data: Any, inspect_only: bool):
    assert_only_loaderkit_errors(data, None, inspect_only)


@pytest.mark.slow
@_examples(100)
@given(data=plan_like(), inspect_only=st.booleans())
def test_random_trees_raise_only_loaderkit_errors_many(data: Any, inspect_only: bool):
    assert_only_loaderkit_errors(data, None, inspect_only)


# -- (b) mutations of valid plans -----------------------------------------------------------------


def sample_length(sample: Any) -> int:
    """A per-sample length (bound as a function)."""
    return len(sample["input_ids"])


def sample_weight(sample: Any) -> float:
    """A per-sample weight (bound as a function)."""
    return 1.0 + len(sample["input_ids"]) % 3


def by_epoch(t: float) -> int:
    """A schedule of the epoch: batch size, max length."""
    return 4 if t < 2 else 8


def competence(t: float) -> float:
    """A curriculum schedule."""
    return min(1.0, 0.2 + 0.1 * t)


def mixture_weights(t: float) -> dict[str, float]:
    """Mixture weights by epoch."""
    return {"a": 1.0, "b": 1.0 + t}


def add_label(sample: Any) -> Any:
    """A transform."""
    return {**sample, "label": len(sample["input_ids"]) % 2}


def _valid_plans() -> dict[str, tuple[DataLoaderBuilder, dict[str, object]]]:
    """A builder per feature, using every ``with_*`` method (their bindings alongside)."""
    tokens = lkd.load("tokens", n=24, max_length=12, seed=1)
    other = lkd.load("tokens", n=10, max_length=12, seed=2)
    rows = {"x": [float(i) for i in range(12)], "y": [i % 3 for i in range(12)]}
    base = DataLoaderBuilder().with_dataset(tokens, name="train").with_collator("text")
    lengths = [len(tokens[i]["input_ids"]) for i in range(len(tokens))]
    builders: dict[str, DataLoaderBuilder] = {
        "plain": DataLoaderBuilder().with_dataset(rows, name="rows").with_batch_size(4),
        "order": base.with_batch_size(4, drop_last=True).with_shuffle().with_seed(7),
        "collator options": base.with_collator("text", pad_token_id=0, max_length=8),
        "multimodal": base.with_collator(
            "multimodal", collators={"input_ids": {"name": "text", "options": {}}}
        ),
        "task": base.with_task("text", pad_token_id=1),
        "transform": base.with_transform(add_label),
        "workers": base.with_workers(2, prefetch_factor=3, persistent=True, timeout=5.0),
        "auto workers": base.with_workers("auto", start_method="spawn"),
        "device": base.with_device("cuda:1"),
        "distributed": base.with_distributed(world_size=2, rank=1, even_batches=False),
        "bucketing column": base.with_bucketing("input_ids", num_buckets=3),
        "bucketing tokens": base.with_bucketing(
            sample_length, max_tokens=64, max_batch_size=8, cost="quadratic"
        ),
        "bucketing array": base.with_bucketing(lengths),
        "weights": base.with_sampling_weights(sample_weight, replacement=False, num_samples=8),
        "weights array": base.with_sampling_weights([1.0] * 24),
        "curriculum": base.with_curriculum(sample_length, "linear", horizon=3, start=0.2),
        "curriculum steps": base.with_curriculum(
            lengths, "discrete", steps=[(1, 0.5), (2, 1.0)], by="step"
        ),
        "curriculum fn": base.with_curriculum("input_ids", competence, by="epoch"),
        "mixture": DataLoaderBuilder()
        .with_mixture({"a": tokens, "b": other}, weights={"a": 2.0, "b": 1.0}, source_key="src")
        .with_collator("text"),
        "mixture fn": DataLoaderBuilder()
        .with_mixture({"a": tokens, "b": other}, weights=mixture_weights, stratified=False)
        .with_collator("text"),
        "mixture schedule": DataLoaderBuilder()
        .with_mixture(
            {"a": tokens, "b": other},
            weights=[(1, {"a": 1.0, "b": 0.0}), (2, {"a": 1.0, "b": 1.0})],
            num_samples=20,
        )
        .with_collator("text"),
        "mixture round robin": DataLoaderBuilder()
        .with_mixture({"a": tokens, "b": other}, mode="round_robin")
        .with_collator("text"),
        "max length": base.with_max_length(16),
        "max length schedule": base.with_max_length([(1, 8), (3, 16)], by="step"),
        "max length fn": base.with_max_length(by_epoch),
        "split": DataLoaderBuilder().with_dataset(rows, name="rows").with_split(0.25, 2, seed=3),
        "split stratified": DataLoaderBuilder()
        .with_dataset(rows, name="rows")
        .with_split(0.25, stratify_by="y"),
        "checks": base.with_checks(
            keys=["input_ids"],
            dtypes={"input_ids": "int64"},
            shapes={"input_ids": ["B", "T"]},
            finite=["input_ids"],
            ranges={"input_ids": [0, None]},
            label_pad=True,
            classes={"input_ids": {"n": 1000, "ignore_index": -100}},
            every=3,
        ),
        "error policy": base.with_error_policy("skip", max_errors=3, max_error_rate=0.5),
        "error policy per run": base.with_error_policy("skip", max_errors=3, per="run"),
        "global rngs per worker": base.with_transform(add_label).with_global_rngs("per_worker"),
        "memory cache": base.with_cache("memory", max_bytes=2**20),
        "disk cache": base.with_transform(add_label).with_cache(
            "disk", stage="transformed", path=str(FOLDER / "cache")
        ),
        "batch schedule": base.with_batch_size([(1, 2), (3, 4)], by="step"),
        "batch fn": base.with_batch_size(by_epoch, drop_last=True),
        "preset": lk_presets.get("causal_lm_pretraining")(tokens, max_length=16),
        "preset tabular": lk_presets.get("tabular")(rows),
    }
    return {name: (b, dict(b.compile().bindings or {})) for name, b in builders.items()}


BUILDER_METHODS = sorted(m for m in dir(DataLoaderBuilder) if m.startswith("with_"))


def test_the_valid_plans_use_every_with_method():
    source = Path(__file__).read_text()
    unused = [m for m in BUILDER_METHODS if f".{m}(" not in source]
    assert unused == []


VALID = _valid_plans()


def test_the_valid_plans_load_and_round_trip():
    for name, (builder, bindings) in VALID.items():
        plan = builder.compile()
        data = plan.to_dict()
        for inspect_only in (False, True):
            again = _read(data, bindings, inspect_only)
            assert again == plan, name
            assert_inspectable(again, bindings, inspect_only)


Path_ = tuple[Any, ...]


def _paths(value: object, prefix: Path_ = ()) -> list[Path_]:
    """Every path of a tree (dict keys, list indices), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_paths(item, (*prefix, i)))
    return out


def _get(tree: Any, path: Path_) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _retyped(value: object) -> list[object]:
    """Values of another type standing for ``value``."""
    if isinstance(value, bool):
        return [int(value), str(value).lower(), None]
    if isinstance(value, int):
        return [float(value), str(value), bool(value), [value], -value, value * 2**40]
    if isinstance(value, float):
        return [int(value) if math.isfinite(value) else 0, str(value), math.nan, -value]
    if isinstance(value, str):
        return [[value], {value: value}, 1, value + ":x", value * 3, ""]
    if isinstance(value, list):
        return [tuple(value), {"0": value}, value[:1], value * 2, []]
    if isinstance(value, dict):
        return [list(value.values()), list(value), {}]
    return [0, "", [], {}]


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, object], str]:
    """A valid plan's data with one change, its bindings, and the change described."""
    name = draw(st.sampled_from(sorted(VALID)))
    builder, bindings = VALID[name]
    data = _copy(builder.compile().to_dict())
    path = draw(st.sampled_from(_paths(data)[1:]))
    parent, key = _get(data, path[:-1]), path[-1]
    kind = draw(st.sampled_from(["replace", "delete", "add key", "retype", "replace leaf"]))
    if kind == "replace":
        parent[key] = draw(trees())
    elif kind == "replace leaf":
        parent[key] = draw(leaves)
    elif kind == "delete":
        del parent[key]
    elif kind == "retype":
        parent[key] = draw(st.sampled_from(_retyped(parent[key])))
    else:
        target = parent[key] if isinstance(parent[key], dict | list) else parent
        if isinstance(target, dict):
            target[draw(keys)] = draw(leaves)
        else:
            target.append(draw(leaves))
    return name, data, bindings, f"{kind} at {path}"


@_examples(5)
@given(mutation=mutations(), inspect_only=st.booleans(), bound=st.booleans())
def test_mutated_plans_raise_only_loaderkit_errors(
    mutation: tuple[str, dict[str, Any], dict[str, object], str], inspect_only: bool, bound: bool
):
    _, data, bindings, _ = mutation
    assert_only_loaderkit_errors(data, bindings if bound else None, inspect_only)


@pytest.mark.slow
@_examples(100)
@given(mutation=mutations(), inspect_only=st.booleans(), bound=st.booleans())
def test_mutated_plans_raise_only_loaderkit_errors_many(
    mutation: tuple[str, dict[str, Any], dict[str, object], str], inspect_only: bool, bound: bool
):
    _, data, bindings, _ = mutation
    assert_only_loaderkit_errors(data, bindings if bound else None, inspect_only)


# -- (c) builder chains -------------------------------------------------------------------------


class _Opaque:
    """An object no builder argument expects."""


class _Sized:
    """A map-style dataset whose ``__len__`` returns ``n`` (any int) or raises ``n``."""

    def __init__(self, n: int | Exception) -> None:
        self.n = n

    def __len__(self) -> int:
        if isinstance(self.n, Exception):
            raise self.n
        return self.n

    def __getitem__(self, index: int) -> int:
        return index

    def __repr__(self) -> str:
        return f"_Sized({self.n!r})"


HOSTILE_SIZES: list[object] = [
    _Sized(2**70),  # len() raises OverflowError
    _Sized(-1),  # len() raises ValueError
    _Sized(RuntimeError("boom")),
    _Sized(2**50),  # over LIMITS.dataset_length
    _Sized(2**47),  # within it, but no memory holds that many values
    {"x": _Sized(2**70)},
]


OBJECTS: list[object] = [
    add_label,
    sample_length,
    by_epoch,
    lambda *a, **k: None,
    len,
    print,
    _Opaque(),
    _Opaque,
    [{"input_ids": [1, 2]}, {"input_ids": [3]}],
    {"x": [1.0, 2.0], "y": [0, 1]},
    ([1.0, 2.0], [0, 1]),
    range(5),
    b"bytes",
    Path("x"),
    iter([1, 2]),
    {1, 2},
    frozenset({"a"}),
    object,
    math.nan,
    complex(1, 2),
    *HOSTILE_SIZES,
]


def _args(method: str) -> tuple[list[str], list[str]]:
    """The positional and keyword parameter names of a builder method."""
    params = list(inspect.signature(getattr(DataLoaderBuilder, method)).parameters.values())[1:]
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return positional, keyword


arguments = st.one_of(trees(), st.sampled_from(OBJECTS), st.lists(st.sampled_from(OBJECTS)))


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    method = draw(st.sampled_from(BUILDER_METHODS))
    positional, keyword = _args(method)
    count = draw(st.integers(0, len(positional)))
    args = tuple(draw(arguments) for _ in positional[:count])
    chosen = draw(st.lists(st.sampled_from(keyword), unique=True)) if keyword else []
    kwargs = {k: draw(arguments) for k in chosen if k not in positional[:count]}
    return method, args, kwargs


@attrs.frozen
class _Chain:
    start: str
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]


def _start(name: str) -> DataLoaderBuilder:
    return VALID[name][0] if name in VALID else DataLoaderBuilder()


def assert_chain(chain: _Chain) -> None:
    builder = _start(chain.start)
    for method, args, kwargs in chain.calls:
        fn: Callable[..., DataLoaderBuilder] = getattr(builder, method)
        try:
            builder = fn(*args, **kwargs)
        except LoaderkitError:
            continue
        except TypeError as exc:  # a call the method's signature refuses (Python's own check)
            signature = inspect.signature(fn)
            with pytest.raises(TypeError):
                signature.bind(*args, **kwargs)
            del exc
    try:
        plan = builder.compile()
    except LoaderkitError:
        return
    bindings = dict(plan.bindings or {})
    for inspect_only in (False, True):
        assert_inspectable(plan, bindings, inspect_only)
    repr(builder)


chains = st.builds(
    _Chain, st.sampled_from(["", *sorted(VALID)]), st.lists(calls(), min_size=1, max_size=6)
)


@_examples(5)
@given(chain=chains)
def test_random_builder_chains_raise_only_loaderkit_errors(chain: _Chain):
    assert_chain(chain)


@pytest.mark.slow
@_examples(100)
@given(chain=chains)
def test_random_builder_chains_raise_only_loaderkit_errors_many(chain: _Chain):
    assert_chain(chain)


HOSTILE_CALLS: list[Callable[[object], DataLoaderBuilder]] = [
    lambda o: DataLoaderBuilder().with_dataset(o),
    lambda o: DataLoaderBuilder().with_mixture({"a": o, "b": [1, 2]}),
    lambda o: DataLoaderBuilder().with_dataset([1, 2, 3]).with_sampling_weights(o),
    lambda o: DataLoaderBuilder().with_dataset([1, 2, 3]).with_bucketing(o),
    lambda o: (
        DataLoaderBuilder().with_dataset([1, 2, 3]).with_curriculum(o, "discrete", steps=[(1, 1.0)])
    ),
]


@pytest.mark.parametrize("value", HOSTILE_SIZES, ids=repr)
@pytest.mark.parametrize("call", range(len(HOSTILE_CALLS)))
def test_objects_of_impossible_sizes_give_plan_errors(value: object, call: int):
    if call < 2 and isinstance(value, _Sized) and value.n == 2**47:
        plan = HOSTILE_CALLS[call](value).compile()  # a dataset that size is allowed
        assert plan.dataset.length is not None and plan.dataset.length >= 2**47
        return
    with pytest.raises(LoaderkitError):
        HOSTILE_CALLS[call](value).compile()


def test_a_factory_never_sees_a_value_over_the_bounds(monkeypatch: pytest.MonkeyPatch):
    """Found by the mutation fuzz: tokens(n=2**63) was called, then len() overflowed."""
    calls: list[dict[str, object]] = []

    def recorder(**options: object) -> list[int]:
        calls.append(options)
        return [1, 2, 3]

    monkeypatch.setattr(lkd.factories, "_entries", dict(lkd.factories._entries))
    monkeypatch.setattr(lkd.registry, "_PATH_OPTIONS", dict(lkd.registry._PATH_OPTIONS))
    lkd.register("lk-fuzz-recorder", recorder)
    data = VALID["plain"][0].compile().to_dict()
    data["dataset"] = {
        "binding": "rows",
        "kind": "samples",
        "type": "builtins.list",
        "length": 3,
        "source": {"name": "lk-fuzz-recorder", "options": {"n": 2**63}},
    }
    with pytest.raises(LoaderkitError) as err:
        LoaderPlan.from_dict(data)
    assert "dataset.source.options.n" in str(err.value) and calls == []
    data["dataset"]["source"]["options"]["n"] = 2**62  # within the bounds: the factory runs
    assert LoaderPlan.from_dict(data).bound and calls == [{"n": 2**62}]
    with pytest.raises(LoaderkitError, match="281,474,976,710,656"):
        lkd.load("tokens", n=2**62)
