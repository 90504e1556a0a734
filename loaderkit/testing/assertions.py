"""``assert_*`` helpers: properties every loaderkit plan should have, checked on yours.

Each helper builds the plan (more than once where needed), runs it, and raises an
``AssertionError`` that says which property failed, the first differing batch, the key path
inside it and the position, both values shown briefly, and where such a difference usually
comes from, e.g.::

    assert_reproducible: two loaders built from the same plan delivered different batches
      epoch 0, batch 3 differs at ['input_ids'][1, 2]: 5 vs 7
        row [1]: [3, 4, 5, 0] vs [3, 4, 7, 0]
      hint: ...

They need torch (they build loaders) but not hypothesis.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.loader import Loader

__all__ = [
    "assert_batches_equal",
    "assert_elastic",
    "assert_reproducible",
    "assert_resumable",
    "assert_worker_invariant",
    "batches_differ",
    "collect",
    "global_batches",
]

_SHOWN = 8
"""Elements of a row shown around a difference (the rest elided)."""
_WIDTH = 60
"""Characters of a value's repr shown (the rest elided)."""
_SHUFFLE_CHECK = 10
"""From this many samples on, two epochs of a shuffled plan in one order is a bug, not luck."""

_HINT_SAME_PLAN = (
    "a batch must be a function of (seed, epoch, position) alone: look for a dataset, "
    "transform or collator that reads global state, a counter, the clock, or an RNG not keyed "
    "by loaderkit (use a transform's rng= argument or the collator's BatchContext)"
)
_HINT_WORKERS = (
    "the batches depend on the number of workers: look for randomness or state kept per "
    "process (a global RNG under with_global_rngs('per_worker'), an RNG of your own, "
    "torch.utils.data.get_worker_info(), a cache filled as samples are read); key it by "
    "sample with a transform's rng= argument, or keep with_global_rngs('per_sample')"
)
_HINT_RESUME = (
    "the resumed loader continued differently: look for state that a fresh loader does not "
    "restore (a counter in the dataset, a collator or transform that remembers earlier "
    "batches) or randomness not keyed by (seed, epoch, sample)"
)


def _short(value: object, width: int = _WIDTH) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _row(values: list[Any], at: int) -> str:
    """``values`` as a list, at most ``_SHOWN`` elements around index ``at``."""
    if len(values) <= _SHOWN:
        return _short(values, 200)
    start = max(0, min(at - _SHOWN // 2, len(values) - _SHOWN))
    shown = ", ".join(_short(v, 20) for v in values[start : start + _SHOWN])
    head = "..., " if start else ""
    tail = ", ..." if start + _SHOWN < len(values) else ""
    return f"[{head}{shown}{tail}]"


def _as_array(value: Any) -> Any:
    """A numpy array for a tensor or array (bfloat16 read as float32), else ``None``."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    try:
        import torch
    except ImportError:  # pragma: no cover - loaderkit depends on torch
        return None
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.float()
        try:
            return t.numpy()
        except TypeError:  # dtypes numpy lacks (uint16/32/64 in older torch): compare widened
            return (t.double() if t.is_floating_point() else t.long()).numpy()
    return None


def _dtype(value: Any) -> str:
    return str(getattr(value, "dtype", type(value).__name__)).removeprefix("torch.")


def _arrays_differ(a: Any, b: Any, x: Any, y: Any, where: str) -> str | None:
    """How ``a`` and ``b`` (of one type; ``x``, ``y`` as numpy arrays) differ, or ``None``."""
    import numpy as np

    if _dtype(a) != _dtype(b):
        return f"at {where}: dtype {_dtype(a)} vs {_dtype(b)} (shape {tuple(x.shape)})"
    if x.shape != y.shape:
        return f"at {where}: shape {tuple(x.shape)} vs {tuple(y.shape)} ({_dtype(a)})"
    same = x == y
    if x.dtype.kind in "fc":
        same |= np.isnan(x) & np.isnan(y)
    if bool(np.all(same)):
        return None
    pos = tuple(int(i) for i in np.argwhere(~same)[0])
    count = int((~same).sum())
    more = f"; {count} of {same.size} elements differ" if count > 1 else ""
    index = str(list(pos)) if pos else ""
    found = f"at {where}{index}: {x[pos].item()!r} vs {y[pos].item()!r}{more}"
    if x.ndim >= 1 and x.shape[-1] > 1:
        lead, last = pos[:-1], pos[-1]
        label = f"row {list(lead)}" if lead else "values"
        found += f"\n    {label}: {_row(x[lead].tolist(), last)} vs {_row(y[lead].tolist(), last)}"
    return found


def batches_differ(a: Any, b: Any, where: str = "") -> str | None:
    """Where and how two nested batches differ, or ``None`` when they are identical.

    Tensors and numpy arrays must match in type, dtype, shape and every value (NaNs in the same
    places count as equal); the message gives the key path and the first differing position,
    both values, the number of differing elements and the row around it. Mappings must have
    the same keys in the same order, sequences the same length, dataclasses equal fields, and
    anything else compare equal (floats: NaN equals NaN).
    """
    here = where or "batch"
    if type(a) is not type(b):
        return f"at {here}: {type(a).__name__} vs {type(b).__name__} ({_short(a)} vs {_short(b)})"
    x = _as_array(a)
    if x is not None:  # a tensor or an array, and so is b: converted once
        return _arrays_differ(a, b, x, _as_array(b), here)
    if isinstance(a, Mapping):
        if list(a) != list(b):
            only_a = [k for k in a if k not in b]
            only_b = [k for k in b if k not in a]
            if not only_a and not only_b:
                return f"at {here}: the same keys in another order: {list(a)} vs {list(b)}"
            return f"at {here}: keys only in the first: {only_a}, only in the second: {only_b}"
        for key in a:
            found = batches_differ(a[key], b[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            found = batches_differ(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
            if found:
                return found
        return None
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return f"at {here}: length {len(a)} vs {len(b)} ({_short(a)} vs {_short(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = batches_differ(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    return None if a == b else f"at {here}: {_short(a)} vs {_short(b)}"


def _header(title: str, found: str, hint: str) -> str:
    return f"{title}\n  {found}\n  hint: {hint}"


def assert_batches_equal(
    expected: Sequence[Any], actual: Sequence[Any], *, label: str = "", first_batch: int = 0
) -> None:
    """Assert two sequences of batches are identical, naming the first difference.

    The message reads ``"{label}: batch {k} differs at ['key'][i, j]: x vs y"`` (with the row
    around the position), or says how many batches each side has.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    prefix = f"{label}: " if label else ""
    for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
        found = batches_differ(a, b)
        if found:
            raise AssertionError(f"{prefix}batch {first_batch + i} differs {found}")
    if len(expected) != len(actual):
        raise AssertionError(
            f"{prefix}{len(expected)} batches expected, {len(actual)} delivered "
            f"(batches {first_batch}..{first_batch + min(len(expected), len(actual)) - 1} agree)"
        )


def _explain(title: str, hint: str, check: Any, *args: Any, **kwargs: Any) -> None:
    """Run ``check``; re-raise its ``AssertionError`` under ``title`` with ``hint``."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    try:
        check(*args, **kwargs)
    except AssertionError as exc:
        raise AssertionError(_header(title, str(exc), hint)) from None


def collect(loader: Loader | Iterable[Any], limit: int | None = None) -> list[Any]:
    """The batches of one pass over ``loader`` (at most ``limit``).

    Each call is a new ``iter()``: a new pass of a loader (the next epoch, unless
    ``set_epoch`` or ``load_state_dict`` was called before).
    """
    return list(itertools.islice(iter(loader), limit))


def assert_reproducible(plan: LoaderPlan, *, epochs: int = 2) -> None:
    """Assert two loaders built from ``plan`` give identical batches for ``epochs`` epochs.

    Also asserts that epochs 0 and 1 of a shuffled plan of at least 10 samples read the samples
    in different orders (compared by index, so datasets of equal samples pass).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    runs = []
    for _ in range(2):
        with plan.build() as loader:
            runs.append([collect(loader) for _ in range(epochs)])
    title = "assert_reproducible: two loaders built from the same plan delivered different batches"
    for e in range(epochs):
        _explain(
            title,
            _HINT_SAME_PLAN,
            assert_batches_equal,
            runs[0][e],
            runs[1][e],
            label=f"epoch {e} (first loader vs second)",
        )
    length = plan.dataset.length or 0
    if plan.order.shuffle and epochs > 1 and length >= _SHUFFLE_CHECK and not plan.dataset.iterable:
        orders = []
        with plan.build() as loader:
            for e in (0, 1):
                loader.set_epoch(e)  # the number of batches may follow the epoch
                orders.append([i for s in range(len(loader)) for i in loader.batch_indices(e, s)])
        if orders[0] == orders[1]:
            raise AssertionError(
                f"assert_reproducible: the plan shuffles but epochs 0 and 1 read the samples in "
                f"the same order ({_row(orders[0], 0)}); each epoch's order must depend on the "
                f"epoch"
            )


def assert_resumable(plan: LoaderPlan, *, at: Iterable[int] | None = None, epoch: int = 0) -> None:
    """Assert a resume after ``k`` batches continues exactly like an uninterrupted run.

    For every ``k`` in ``at`` (default: every batch of the epoch, and its end). The state is
    taken with the pass's iterator still open after ``k`` batches; the resumed loader's first
    pass must be the rest of the epoch (empty for ``k = len(loader)``) and its second pass
    the next epoch. Then once more with the state taken after the epoch's loop ended (its
    iterator raised ``StopIteration``, the checkpoint most training loops save): the resumed
    loader's first pass must be the next epoch, whole.

    Also checks that the state survives JSON, that loading then saving gives it back, and that
    a state already taken is not changed by further iteration.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    with plan.build() as reference:
        reference.set_epoch(epoch)
        first = collect(reference)
        n = len(first)  # this epoch's batches (len(reference) is the next one's by now)
        full = first + collect(reference)  # this epoch and the next
    points = list(range(n + 1) if at is None else at)
    for k in points:  # all checked before the first resume is run
        if not 0 <= k <= n:
            raise ValueError(f"at: resume points must be in [0, {n}] for this plan (got {k})")
    title = "assert_resumable: a loader resumed from state_dict() did not continue the stream"
    for k in points:
        with plan.build() as loader:
            loader.set_epoch(epoch)
            iterator = iter(loader)
            taken = list(itertools.islice(iterator, k))
            state = loader.state_dict()
            frozen = json.loads(json.dumps(state))
            list(itertools.islice(iterator, 1))  # the same pass goes on
            if state != frozen:
                keys = sorted(key for key in state if state.get(key) != frozen.get(key))
                raise AssertionError(
                    f"assert_resumable: at k={k} the state changed after it was taken, or does "
                    f"not survive JSON (keys {keys}); state_dict() must return a fresh copy "
                    f"of plain JSON data"
                )
        with plan.build() as resumed:
            resumed.load_state_dict(frozen)
            again = resumed.state_dict()
            if again != frozen:
                changed = ", ".join(
                    f"{key}: {_short(frozen.get(key))} -> {_short(again.get(key))}"
                    for key in sorted(frozen)
                    if again.get(key) != frozen.get(key)
                )
                raise AssertionError(
                    f"assert_resumable: at k={k}, load_state_dict(s) then state_dict() != s; "
                    f"differing keys: {changed}"
                )
            rest = collect(resumed) + collect(resumed)  # the rest of the epoch, the next
        _explain(
            title,
            _HINT_SAME_PLAN,
            assert_batches_equal,
            full[:k],
            taken,
            label=f"before the resume at {k} (uninterrupted vs this run)",
        )
        _explain(
            title,
            _HINT_RESUME,
            assert_batches_equal,
            full[k:],
            rest,
            label=f"resumed after {k} of {n} batches of epoch {epoch} (uninterrupted vs resumed)",
            first_batch=k,
        )
    with plan.build() as loader:  # the state saved after the epoch's loop
        loader.set_epoch(epoch)
        collect(loader)
        ended = json.loads(json.dumps(loader.state_dict()))
    with plan.build() as resumed:
        resumed.load_state_dict(ended)
        following = collect(resumed)
    _explain(
        title,
        _HINT_RESUME,
        assert_batches_equal,
        full[n:],
        following,
        label=f"resumed from a state taken after epoch {epoch}'s loop (the next epoch, whole)",
    )


def assert_worker_invariant(
    plan: LoaderPlan, *, workers: Sequence[int] = (0, 2), epochs: int = 2
) -> None:
    """Assert every worker count in ``workers`` gives identical batches for ``epochs`` epochs."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    runs = {}
    for count in workers:
        variant = plan.to_builder().with_workers(count).compile()
        with variant.build() as loader:
            runs[count] = [collect(loader) for _ in range(epochs)]
    first = workers[0]
    title = "assert_worker_invariant: the batches depend on the number of workers"
    for count in workers[1:]:
        for e in range(epochs):
            _explain(
                title,
                _HINT_WORKERS,
                assert_batches_equal,
                runs[first][e],
                runs[count][e],
                label=f"num_workers {first} vs {count}, epoch {e}",
            )


def global_batches(plan: LoaderPlan, world_size: int, *, epoch: int = 0) -> list[list[int]]:
    """The sample indices of every global batch of ``epoch`` at ``world_size`` ranks.

    ``plan``'s batch size is the per-rank size; every rank is built in this process
    (``with_distributed(world_size=..., rank=r)``) and global batch ``s`` is the ranks'
    ``s``-th batches in rank order. Nothing is fetched: the order is read from the loaders.
    """
    loaders = [
        plan.to_builder().with_distributed(world_size=world_size, rank=r).compile().build()
        for r in range(world_size)
    ]
    counts = [len(loader) for loader in loaders]
    steps = max(counts)
    out = []
    for s in range(steps):
        batch: list[int] = []
        for loader, count in zip(loaders, counts, strict=True):
            if s < count:
                batch.extend(loader.batch_indices(epoch, s))
        out.append(batch)
    return out


def _first_difference(want: list[int], have: list[int]) -> str:
    pos = next(
        (i for i, (x, y) in enumerate(zip(want, have, strict=False)) if x != y),
        min(len(want), len(have)),
    )
    w = want[pos] if pos < len(want) else "(end)"
    h = have[pos] if pos < len(have) else "(end)"
    return (
        f"first difference at position {pos}: sample {w} vs {h}\n"
        f"    single process: {_row(want, pos)}\n    ranks together: {_row(have, pos)}"
    )


def assert_elastic(
    plan: LoaderPlan, *, world_sizes: Sequence[int] = (1, 2, 4), epochs: int = 1
) -> None:
    """Assert the global batches do not depend on the world size (at a fixed global batch).

    ``plan``'s batch size is the **global** batch size; for every world size ``W`` in
    ``world_sizes`` that divides it, the plan is rebuilt with ``batch_size // W`` per rank on
    ``W`` simulated ranks. Every rank must have the same number of batches, and the global
    batches must equal the single-process ones, except that a partial last global batch is
    completed on several ranks (by wrapping around, ``even_batches``): it must start with the
    single-process tail.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this frame
    size = plan.batch.batch_size
    if plan.batch.scheduled or not plan.batch.batched:
        raise ValueError(
            "assert_elastic needs a fixed batch size (the global batch); got "
            + ("a schedule" if plan.batch.scheduled else "none (with_batch_size(None))")
        )
    title = "assert_elastic: the global batches depend on the world size"
    for epoch in range(epochs):
        reference = global_batches(plan, 1, epoch=epoch)  # a single process
        for world in world_sizes:
            if size % world:
                continue
            per_rank = plan.to_builder().with_batch_size(
                size // world, drop_last=plan.batch.drop_last
            )
            variant = per_rank.compile()
            loaders = [
                variant.to_builder().with_distributed(world_size=world, rank=r).compile().build()
                for r in range(world)
            ]
            counts = [len(loader) for loader in loaders]
            if len(set(counts)) != 1:
                raise AssertionError(
                    f"{title}\n  world {world}, epoch {epoch}: the ranks have {counts} batches; "
                    f"every rank must have as many (even_batches) or collectives hang"
                )
            got = global_batches(variant, world, epoch=epoch)
            if len(got) != len(reference):
                raise AssertionError(
                    f"{title}\n  world {world}, epoch {epoch}: {len(got)} global batches, the "
                    f"single process has {len(reference)}"
                )
            for s, (want, have) in enumerate(zip(reference, got, strict=True)):
                ok = have == want if len(want) == size else have[: len(want)] == want
                if not ok:
                    raise AssertionError(
                        f"{title}\n  world {world} x {size // world} per rank, epoch {epoch}, "
                        f"global batch {s} differs from the single process's; "
                        f"{_first_difference(want, have)}"
                    )
