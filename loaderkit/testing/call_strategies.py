"""Hypothesis strategies of one call of each chain method of the builder.

One strategy maker per method (``dataset_calls`` for ``with_dataset``, ..., ``without_calls``):
``maker(n, junk)`` is a strategy of :data:`BuilderCall` tuples ``(method, args, kwargs)``,
with valid arguments for a chain over datasets of ``n`` samples (options present or absent,
schedules as tables or functions, per-sample values as columns, functions or ``n`` values);
``junk=True`` mixes in values of any type and range. ``BUILDER_CALLS`` in
:mod:`loaderkit.testing.strategies` maps each method to its maker, and the chain strategies
there draw from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loaderkit.testing._args import st

__all__ = [
    "CACHE_FOLDER",
    "COLUMNS",
    "DATASET_SHAPES",
    "SOURCE_NAMES",
    "BuilderCall",
    "batch_size_calls",
    "bucketing_calls",
    "cache_calls",
    "checks_calls",
    "collator_calls",
    "curriculum_calls",
    "dataset_calls",
    "device_calls",
    "distributed_calls",
    "error_policy_calls",
    "global_rngs_calls",
    "max_length_calls",
    "mixture_calls",
    "sampling_weights_calls",
    "seed_calls",
    "shuffle_calls",
    "split_calls",
    "task_calls",
    "transform_calls",
    "without_calls",
    "workers_calls",
]

BuilderCall = tuple[str, tuple[Any, ...], dict[str, Any]]
"""``(method name, positional args, keyword args)`` of one ``with_*`` call."""


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


_REF = "loaderkit.testing._functions:"
"""How a ``"module:qualname"`` string names the functions of :mod:`loaderkit.testing._functions`."""

SOURCE_NAMES = ("wiki", "code", "books")
"""The source names of drawn mixtures (``mixture_weights_schedule`` weighs the first two)."""

COLUMNS = ("input_ids", "label", "x", "y")
"""The columns of drawn datasets, which column sources and checks name."""


def _call(
    name: str,
    args: st.SearchStrategy[tuple[Any, ...]],
    kwargs: st.SearchStrategy[dict[str, Any]] | None = None,
) -> st.SearchStrategy[BuilderCall]:
    return st.tuples(st.just(name), args, st.just({}) if kwargs is None else kwargs)


def _optional(junk: bool, **options: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments, each present or absent (mixed with junk values under ``junk``)."""
    return st.fixed_dictionaries({}, optional={k: _maybe_junk(v, junk) for k, v in options.items()})


def _dataset(kind: str, n: int) -> Any:
    """A deterministic dataset of ``n`` samples, of one of the kinds ``with_dataset`` takes."""
    if kind == "ints":
        return list(range(n))
    if kind == "columns":
        return {"x": [float(i) for i in range(n)], "y": [i % 3 for i in range(n)]}
    if kind == "tokens":
        return [{"input_ids": list(range(1 + i % 6)), "label": i % 3} for i in range(n)]
    if kind == "arrays":
        import numpy as np

        return (np.arange(n, dtype=np.int64), np.arange(n, dtype=np.float64) / 2)
    from loaderkit.datasets import load

    return load("tokens", n=n, vocab_size=32, min_length=1, max_length=8, seed=n)


DATASET_SHAPES = ("ints", "columns", "tokens", "arrays", "source")
"""What drawn datasets hold: ints, a dict of columns, token samples, a tuple of numpy columns,
or synthetic tokens from ``loaderkit.datasets.load`` (a source a plan file can rebuild)."""


def _datasets(n: int) -> st.SearchStrategy[Any]:
    return st.sampled_from(DATASET_SHAPES).map(lambda kind: _dataset(kind, n))


def _until_tables(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[float, Any]]]:
    """Schedule tables ``[(until, value), ...]`` with increasing ``until``."""
    untils = st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True).map(sorted)
    return untils.flatmap(
        lambda us: st.lists(values, min_size=len(us), max_size=len(us)).map(
            lambda vs: list(zip(us, vs, strict=True))
        )
    )


def _fns(name: str, fn: Callable[..., Any]) -> st.SearchStrategy[Any]:
    """A module-level function, as the object or as its ``"module:qualname"`` string."""
    return st.sampled_from([fn, _REF + name])


def _per_sample(n: int, values: st.SearchStrategy[Any], fn_name: str) -> st.SearchStrategy[Any]:
    """A per-sample value source: a column, a function, or ``n`` precomputed values."""
    from loaderkit.testing import _functions

    fn = getattr(_functions, fn_name)
    listed = st.lists(values, min_size=n, max_size=n)
    return st.one_of(
        st.sampled_from(COLUMNS),
        _fns(fn_name, fn),
        listed,
        listed.map(_as_array),
    )


def _as_array(values: list[Any]) -> Any:
    import numpy as np

    return np.asarray(values)


def dataset_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_dataset(dataset, name=...)``: ``n`` samples of one of :data:`DATASET_SHAPES`."""
    names = st.sampled_from(["dataset", "train", "val"])
    return _call("with_dataset", st.tuples(_datasets(n)), _optional(junk, name=names))


def mixture_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_mixture(sources, ...)``: 1 to 3 sources (:data:`SOURCE_NAMES`), ``n`` samples."""
    from loaderkit.plan.sections.mixture import MIXTURE_MODES
    from loaderkit.testing._functions import mixture_weights_schedule

    def j(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return _maybe_junk(valid, junk)

    @st.composite
    def call(draw: st.DrawFn) -> BuilderCall:
        k = draw(st.integers(1, min(3, n)))
        cuts = draw(st.sets(st.integers(1, max(1, n - 1)), min_size=k - 1, max_size=k - 1))
        bounds = [0, *sorted(cuts), n]
        kind = draw(st.sampled_from(["ints", "tokens"]))
        names = SOURCE_NAMES[:k]
        sources = {name: _dataset(kind, bounds[i + 1] - bounds[i]) for i, name in enumerate(names)}
        mode = draw(st.sampled_from(MIXTURE_MODES))
        kwargs: dict[str, Any] = {}
        if mode != "weighted" or draw(st.booleans()):
            kwargs["mode"] = draw(j(st.just(mode)))
        weight = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])
        as_dict = st.fixed_dictionaries(dict.fromkeys(names, weight)).filter(
            lambda w: any(w.values())
        )
        if mode == "weighted":
            weights = [
                st.none(),
                as_dict,
                as_dict.map(lambda w: [w[name] for name in names]),
                _until_tables(as_dict),
            ]
            if k == 2:
                weights.append(_fns("mixture_weights_schedule", mixture_weights_schedule))
            kwargs.update(
                draw(
                    _optional(
                        junk,
                        weights=st.one_of(weights),
                        stratified=st.booleans(),
                        num_samples=st.integers(1, 2 * n),
                    )
                )
            )
        kwargs.update(
            draw(
                _optional(junk, by=st.sampled_from(["epoch", "step"]), source_key=st.just("source"))
            )
        )
        return "with_mixture", (sources,), kwargs

    return call()


def batch_size_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_batch_size``: a fixed size (or ``None``), or a schedule as a table or a function."""
    from loaderkit.testing._functions import batch_size_schedule

    sizes = st.integers(1, 16)
    fixed = _call(
        "with_batch_size",
        st.tuples(_maybe_junk(st.none() | sizes, junk)),
        _optional(junk, drop_last=st.booleans()),
    )
    scheduled = _call(
        "with_batch_size",
        st.tuples(
            _maybe_junk(
                _until_tables(sizes) | _fns("batch_size_schedule", batch_size_schedule), junk
            )
        ),
        _optional(junk, drop_last=st.booleans(), by=st.sampled_from(["epoch", "step"])),
    )
    return fixed | scheduled


def shuffle_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_shuffle(on)``, now and then with a ``buffer_size`` (for streams only)."""
    # a shuffle buffer is for streams only (compile refuses it for a map-style dataset): rare
    buffer = st.one_of(
        st.just({}), st.just({}), st.just({}), _optional(junk, buffer_size=st.integers(1, 64))
    )
    return _call("with_shuffle", st.tuples(_maybe_junk(st.booleans(), junk)), buffer)


def seed_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_seed(seed)``: any 63-bit seed."""
    return _call("with_seed", st.tuples(_maybe_junk(st.integers(0, 2**63 - 1), junk)))


def _collators(junk: bool) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """``(collator, options)`` pairs ``with_collator`` takes."""
    from loaderkit.testing._functions import sample_collate

    def named(name: str, **options: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.tuples(st.just(name), _optional(junk, **options))

    def needs(name: str, required: dict[str, st.SearchStrategy[Any]], **options: Any) -> Any:
        return st.tuples(
            st.just(name),
            st.tuples(st.fixed_dictionaries(required), _optional(junk, **options)).map(
                lambda t: {**t[0], **t[1]}
            ),
        )

    padding = {
        "pad_token_id": st.integers(0, 5),
        "max_length": st.integers(1, 64),
        "padding_side": st.sampled_from(["left", "right"]),
        "truncation_side": st.sampled_from(["left", "right"]),
        "pad_to_multiple_of": st.integers(1, 8),
        "return_attention_mask": st.booleans(),
    }
    return st.one_of(
        st.sampled_from([("default", {}), ("torch_default", {}), ("auto", {})]),
        st.sampled_from([(sample_collate, {}), (_REF + "sample_collate", {})]),
        named("text", **padding, token_labels=st.booleans()),
        named("causal_lm", **padding, shift=st.booleans()),
        needs(
            "masked_lm",
            {"mask_token_id": st.integers(1, 3), "vocab_size": st.integers(32, 100)},
            mlm_probability=st.sampled_from([0.1, 0.15, 0.3]),
            special_token_ids=st.lists(st.integers(0, 3), max_size=2),
        ),
        needs("seq2seq", {"decoder_start_token_id": st.integers(0, 3)}, **padding),
        needs(
            "packed",
            {"max_length": st.integers(4, 64)},
            overflow=st.sampled_from(["error", "truncate"]),
            shift_labels=st.booleans(),
            attention_mask=st.sampled_from(["none", "padding"]),
        ),
        named(
            "vision",
            normalize=st.sampled_from(["imagenet", "cifar10", None]),
            to_rgb=st.booleans(),
            layout=st.sampled_from(["auto", "chw", "hwc"]),
        ),
        st.just(
            (
                "multimodal",
                {"collators": {"input_ids": {"name": "text"}, "pixel_values": {"name": "vision"}}},
            )
        ),
    )


def collator_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_collator(name_or_fn, **options)``: every built-in collator, and functions."""
    return _collators(junk).map(lambda c: ("with_collator", (c[0],), c[1]))


def task_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_task(task, ...)``: the tasks with a built-in collator (text, vision, tabular)."""
    # text, vision and tabular have a built-in collator; audio and multimodal need options or a
    # registered collator (with_task refuses them otherwise)
    text = _call(
        "with_task",
        st.tuples(st.just("text")),
        _optional(junk, pad_token_id=st.integers(0, 5), max_length=st.integers(1, 64)),
    )
    others = _call(
        "with_task", st.tuples(_maybe_junk(st.sampled_from(["vision", "tabular"]), junk))
    )
    return text | others


def transform_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_transform(fn)``: module-level functions, as objects or ``"module:qualname"``."""
    from loaderkit.testing._functions import sample_transform_rng
    from loaderkit.testing.strategies import sample_transform  # defined there: plans name it so

    fns = st.sampled_from(
        [
            sample_transform,
            sample_transform_rng,
            "loaderkit.testing.strategies:sample_transform",
            _REF + "sample_transform_rng",
        ]
    )
    return _call("with_transform", st.tuples(_maybe_junk(fns, junk)))


def bucketing_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_bucketing(lengths, ...)``: per-sample lengths, buckets or a token budget."""
    lengths = _per_sample(n, st.integers(0, 40), "sample_length")
    return _call(
        "with_bucketing",
        st.tuples(_maybe_junk(lengths, junk)),
        _optional(
            junk,
            num_buckets=st.integers(1, max(1, n // 2)),
            max_tokens=st.integers(16, 256),
            max_batch_size=st.integers(1, 16),
            cost=st.sampled_from(["linear", "quadratic"]),
        ),
    )


def sampling_weights_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_sampling_weights(weights, ...)``: per-sample weights, not all zero."""
    weights = _per_sample(n, st.sampled_from([0.0, 0.5, 1.0, 2.0]), "sample_weight").filter(
        lambda w: isinstance(w, str) or callable(w) or any(v > 0 for v in w)
    )
    return _call(
        "with_sampling_weights",
        st.tuples(_maybe_junk(weights, junk)),
        _optional(junk, replacement=st.booleans(), num_samples=st.integers(1, n)),
    )


def curriculum_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_curriculum(difficulty, schedule, ...)``: each schedule with what it needs."""
    from loaderkit.testing._functions import competence_schedule

    def j(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return _maybe_junk(valid, junk)

    difficulty = _per_sample(n, st.floats(0, 10, allow_nan=False), "sample_difficulty")
    horizon = st.sampled_from([1, 2.5, 4, 100])

    @st.composite
    def call(draw: st.DrawFn) -> BuilderCall:
        schedule = draw(st.sampled_from(["linear", "root", "discrete", "function"]))
        args: list[Any] = [draw(j(difficulty))]
        kwargs = draw(
            _optional(
                junk,
                by=st.sampled_from(["epoch", "step"]),
                start=st.sampled_from([0.1, 0.3, 1.0]),
            )
        )
        if schedule == "function":
            args.append(draw(j(_fns("competence_schedule", competence_schedule))))
            kwargs.update(draw(_optional(junk, horizon=horizon)))
        elif schedule == "discrete":
            args.append(draw(j(st.just("discrete"))))
            kwargs["steps"] = draw(j(_until_tables(st.sampled_from([0.25, 0.5, 1.0]))))
        else:  # "linear" (the default: maybe not passed) or "root": both need a horizon
            if schedule == "root" or draw(st.booleans()):
                args.append(draw(j(st.just(schedule))))
            kwargs["horizon"] = draw(j(horizon))
            if schedule == "root":
                kwargs.update(draw(_optional(junk, degree=st.sampled_from([1.0, 2.0, 3.5]))))
        return "with_curriculum", tuple(args), kwargs

    return call()


def max_length_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_max_length``: a fixed length, or a schedule as a table or a function."""
    from loaderkit.testing._functions import max_length_schedule

    lengths = st.integers(1, 64)
    fixed = _call("with_max_length", st.tuples(_maybe_junk(lengths, junk)))
    scheduled = _call(
        "with_max_length",
        st.tuples(
            _maybe_junk(
                _until_tables(lengths) | _fns("max_length_schedule", max_length_schedule), junk
            )
        ),
        _optional(junk, by=st.sampled_from(["epoch", "step"])),
    )
    return fixed | scheduled


def split_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_split(...)``: 0 to 2 parts (fractions or counts), maybe seeded or stratified."""
    part = st.sampled_from([0.1, 0.25, 0.4]) | st.integers(1, 3)
    parts = st.one_of(
        st.tuples(),
        st.tuples(part),
        st.tuples(part, part | st.just(0)),
        st.tuples(st.just(0), part),
    )
    return _call(
        "with_split",
        parts.map(lambda p: tuple(p)),
        _optional(
            junk, seed=st.integers(0, 2**63 - 1), stratify_by=st.sampled_from(["label", "y"])
        ),
    )


def checks_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_checks(...)``: at least one check (or none, under ``junk``), maybe ``every``."""
    # one entry per check kind (loaderkit.plan.sections.checks.CHECK_KINDS), at least one given
    label_pad = st.one_of(
        st.just(True),
        _optional(
            False,
            labels=st.just("labels"),
            mask=st.just("attention_mask"),
            ignore_index=st.sampled_from([-100, -1]),
            mode=st.sampled_from(["strict", "only_pad"]),
        ),
    )
    classes = st.sampled_from(
        [{"label": 3}, {"label": {"n": 3, "ignore_index": -100}}, {"label": {"one_hot": 3}}]
    )
    checks = _optional(
        junk,
        keys=st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2, unique=True),
        dtypes=st.sampled_from([{"input_ids": "int64"}, {"x": "float32", "y": "int64"}]),
        shapes=st.sampled_from(
            [{"input_ids": ["B", "T"]}, {"x": ["B"], "y": ["B", "..."]}, {"0": [2, "*"]}]
        ),
        finite=st.lists(st.sampled_from(["x", "y"]), min_size=1, max_size=2, unique=True),
        ranges=st.sampled_from([{"y": [0, None]}, {"x": [None, 100.0], "label": [0, 2]}]),
        label_pad=label_pad,
        classes=classes,
    )
    every = _optional(junk, every=st.integers(1, 5))
    given = checks.filter(bool) if not junk else checks
    return st.tuples(
        st.just("with_checks"), st.just(()), st.tuples(given, every).map(lambda t: {**t[0], **t[1]})
    )


def error_policy_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_error_policy``: ``"raise"`` (or no argument), or ``"skip"`` with its limits."""
    skip = _call(
        "with_error_policy",
        st.tuples(st.just("skip")),
        _optional(
            junk,
            max_errors=st.integers(0, 10),
            max_error_rate=st.sampled_from([0.01, 0.5, 1.0]),
            per=st.sampled_from(["epoch", "run"]),
        ),
    )
    raising = _call("with_error_policy", st.sampled_from([(), ("raise",)]))
    return skip | raising


CACHE_FOLDER = "loaderkit-cache"
"""The folder of drawn disk caches: relative, so a plan names no folder of this machine."""


def cache_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_cache``: in memory, or on disk in :data:`CACHE_FOLDER`."""
    common = {
        "stage": st.sampled_from(["fetched", "transformed"]),
        "max_bytes": st.sampled_from([1, 2**20, 2**30]),
    }
    memory = _call("with_cache", st.sampled_from([(), ("memory",)]), _optional(junk, **common))
    disk = _call(
        "with_cache",
        st.tuples(st.just("disk")),
        st.tuples(
            st.fixed_dictionaries({"path": _maybe_junk(st.just(CACHE_FOLDER), junk)}),
            _optional(junk, **common, shared=st.booleans()),
        ).map(lambda t: {**t[0], **t[1]}),
    )
    return memory | disk


def workers_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_workers(n or "auto", ...)`` with the options of the worker processes."""
    return _call(
        "with_workers",
        st.tuples(_maybe_junk(st.integers(0, 3) | st.just("auto"), junk)),
        _optional(
            junk,
            prefetch_factor=st.none() | st.integers(1, 4),
            persistent=st.none() | st.booleans(),
            pin_memory=st.none() | st.booleans(),
            start_method=st.none() | st.sampled_from(["fork", "spawn", "forkserver"]),
            timeout=st.none() | st.floats(0, 30),
        ),
    )


def global_rngs_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_global_rngs(mode)``: ``"per_sample"`` or ``"per_worker"``."""
    modes = st.sampled_from(["per_sample", "per_worker"])
    return _call("with_global_rngs", st.tuples(_maybe_junk(modes, junk)))


def device_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_device(device)``: ``cpu``, ``cuda``, ``cuda:N``, ``mps`` or ``auto``."""
    devices = st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:1", "auto", "mps"])
    return _call("with_device", st.tuples(_maybe_junk(devices, junk)))


def distributed_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``with_distributed(...)``: a world size and rank, or ``enabled=False``."""
    enabled = _call(
        "with_distributed",
        st.just(()),
        _optional(
            junk,
            world_size=st.integers(1, 4),
            rank=st.integers(0, 3),
            even_batches=st.booleans(),
        ),
    )
    disabled = _call("with_distributed", st.just(()), st.just({"enabled": False}))
    return enabled | disabled


def without_calls(n: int, junk: bool) -> st.SearchStrategy[BuilderCall]:
    """``without(*settings)``: 1 to 3 setting names (under ``junk``, wrong names and values)."""
    from loaderkit.plan.plan import SETTINGS

    names: st.SearchStrategy[Any] = st.sampled_from(SETTINGS)
    if junk:
        # not "": without("") raises a problem with an empty path, a known bug (see
        # test_without_an_empty_name_gives_a_problem_with_a_path in tests/pure/test_without.py)
        others = _junk().filter(lambda v: v != "")
        names = names | st.sampled_from(["dataset", "mixture", "preset", "chekcs"]) | others
    return _call("without", st.lists(names, min_size=1, max_size=3).map(tuple))
