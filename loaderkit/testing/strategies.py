"""Hypothesis strategies for builders and plans."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - exercised only without the test extra
    raise ImportError(
        "loaderkit.testing needs hypothesis; install it with: pip install 'loaderkit[test]'"
    ) from exc

from loaderkit.builder import DataLoaderBuilder
from loaderkit.errors import PlanError
from loaderkit.plan.plan import LoaderPlan

__all__ = ["BuilderCall", "builder_calls", "builders", "plans", "sample_transform"]

BuilderCall = tuple[str, tuple[Any, ...], dict[str, Any]]
"""``(method name, positional args, keyword args)`` of one ``with_*`` call."""


def sample_transform(sample: Any) -> Any:
    """A module-level (picklable) transform the strategies use: the identity."""
    return sample


def _junk() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-5, max_value=10**12),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
        st.lists(st.integers(), max_size=3),
    )


def _maybe_junk(valid: st.SearchStrategy[Any], junk: bool) -> st.SearchStrategy[Any]:
    return st.one_of(valid, _junk()) if junk else valid


def builder_calls(
    *, min_size: int = 1, max_length: int = 64, junk: bool = False
) -> st.SearchStrategy[list[BuilderCall]]:
    """Lists of ``with_*`` calls. ``junk=True`` mixes in values of any type and range."""

    def j(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return _maybe_junk(valid, junk)

    datasets = st.one_of(
        st.integers(1, max_length).map(lambda n: list(range(n))),
        st.integers(1, max_length).map(
            lambda n: {"x": [float(i) for i in range(n)], "y": list(range(n))}
        ),
    )
    names = st.sampled_from(["dataset", "train", "val"])
    calls: list[st.SearchStrategy[BuilderCall]] = [
        st.tuples(
            st.just("with_dataset"),
            st.tuples(datasets),
            st.fixed_dictionaries({}, optional={"name": j(names)}),
        ),
        st.tuples(
            st.just("with_batch_size"),
            st.tuples(j(st.integers(1, 16))),
            st.fixed_dictionaries({}, optional={"drop_last": j(st.booleans())}),
        ),
        st.tuples(st.just("with_shuffle"), st.tuples(j(st.booleans())), st.just({})),
        st.tuples(st.just("with_seed"), st.tuples(j(st.integers(0, 2**63 - 1))), st.just({})),
        st.tuples(st.just("with_collator"), st.tuples(j(st.just("default"))), st.just({})),
        st.tuples(st.just("with_transform"), st.tuples(j(st.just(sample_transform))), st.just({})),
        st.tuples(
            st.just("with_workers"),
            st.tuples(j(st.integers(0, 3))),
            st.fixed_dictionaries(
                {},
                optional={
                    "prefetch_factor": j(st.none() | st.integers(1, 4)),
                    "persistent": j(st.none() | st.booleans()),
                    "pin_memory": j(st.none() | st.booleans()),
                    "start_method": j(st.none() | st.sampled_from(["fork", "spawn", "forkserver"])),
                    "timeout": j(st.none() | st.floats(0, 30)),
                },
            ),
        ),
        st.tuples(
            st.just("with_device"),
            st.tuples(j(st.sampled_from(["cpu", "cuda", "cuda:1", "auto", "mps"]))),
            st.just({}),
        ),
        st.tuples(
            st.just("with_distributed"),
            st.just(()),
            st.fixed_dictionaries(
                {},
                optional={
                    "world_size": j(st.integers(1, 4)),
                    "rank": j(st.integers(0, 3)),
                    "even_batches": j(st.booleans()),
                },
            ),
        ),
    ]
    return st.lists(st.one_of(calls), min_size=min_size, max_size=12)


def apply_calls(
    calls: list[BuilderCall], start: DataLoaderBuilder | None = None
) -> DataLoaderBuilder:
    """Apply ``calls`` in order to ``start`` (a fresh builder by default)."""
    builder = start if start is not None else DataLoaderBuilder()
    for name, args, kwargs in calls:
        method: Callable[..., DataLoaderBuilder] = getattr(builder, name)
        builder = method(*args, **kwargs)
    return builder


def builders(*, max_length: int = 64) -> st.SearchStrategy[DataLoaderBuilder]:
    """Builders made of valid ``with_*`` calls, always with a dataset.

    They may still fail cross-field rules in ``compile()``; :func:`plans` gives ones that don't.
    """
    dataset_call = builder_calls(max_length=max_length).filter(
        lambda cs: any(c[0] == "with_dataset" for c in cs)
    )
    return dataset_call.map(apply_calls)


def _compiles(builder: DataLoaderBuilder) -> LoaderPlan | None:
    try:
        return builder.compile()
    except PlanError:
        return None


def plans(*, max_length: int = 64) -> st.SearchStrategy[LoaderPlan]:
    """Plans that compile, from :func:`builders`."""
    return builders(max_length=max_length).map(_compiles).filter(lambda p: p is not None)  # type: ignore[return-value]
