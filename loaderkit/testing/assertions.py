"""``assert_*`` helpers: properties every loaderkit plan should have, checked on yours.

Each helper builds the plan (more than once where needed), runs it, and raises an
``AssertionError`` that names the first differing batch, the key path inside it and the
position, e.g. ``epoch 0, batch 3, at [1]['input_ids'][2]: ...``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loaderkit.build.loader import Loader
    from loaderkit.plan.plan import LoaderPlan

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


def batches_differ(a: Any, b: Any, where: str = "") -> str | None:
    """Where and how two nested batches differ, or ``None`` when they are identical.

    Tensors must match in dtype, shape and every value (NaNs in the same places count as equal).
    """
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        here = where or "batch"
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            other = b if isinstance(a, torch.Tensor) else a
            return f"at {here}: tensor vs {type(other).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"at {here}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
        x, y = a.cpu(), b.cpu()
        same = x == y
        if x.is_floating_point():
            same |= x.isnan() & y.isnan()
        if bool(same.all()):
            return None
        pos = tuple(int(i) for i in (~same).nonzero()[0].tolist())
        return f"at {here}{list(pos)}: {x[pos].item()!r} vs {y[pos].item()!r}"
    if type(a) is not type(b):
        return f"at {where or 'batch'}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, Mapping):
        if list(a) != list(b):
            return f"at {where or 'batch'}: keys {list(a)} vs {list(b)}"
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
            return f"at {where or 'batch'}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = batches_differ(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"at {where or 'batch'}: {a!r} vs {b!r}"


def assert_batches_equal(
    expected: Sequence[Any], actual: Sequence[Any], *, label: str = "", first_batch: int = 0
) -> None:
    """Assert two sequences of batches are identical, naming the first difference."""
    prefix = f"{label}: " if label else ""
    for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
        found = batches_differ(a, b)
        if found:
            raise AssertionError(f"{prefix}batch {first_batch + i} differs {found}")
    if len(expected) != len(actual):
        raise AssertionError(f"{prefix}{len(expected)} batches expected, {len(actual)} delivered")


def collect(loader: Loader | Iterable[Any], limit: int | None = None) -> list[Any]:
    """The batches of one pass over ``loader`` (at most ``limit``)."""
    return list(itertools.islice(iter(loader), limit))


def assert_reproducible(plan: LoaderPlan, *, epochs: int = 2) -> None:
    """Assert two loaders built from ``plan`` give identical batches for ``epochs`` epochs.

    Also asserts that consecutive epochs of a shuffled plan differ.
    """
    runs = []
    for _ in range(2):
        with plan.build() as loader:
            runs.append([collect(loader) for _ in range(epochs)])
    for e in range(epochs):
        assert_batches_equal(runs[0][e], runs[1][e], label=f"epoch {e}")
    shuffled = plan.order.shuffle and epochs > 1 and (plan.dataset.length or 0) > 2
    if shuffled and all(
        batches_differ(a, b) is None for a, b in zip(runs[0][0], runs[0][1], strict=False)
    ):
        raise AssertionError("epochs 0 and 1 delivered the same order although shuffled")


def assert_resumable(plan: LoaderPlan, *, at: Iterable[int] | None = None, epoch: int = 0) -> None:
    """Assert a resume after ``k`` batches continues exactly like an uninterrupted run.

    For every ``k`` in ``at`` (default: every batch of the epoch, and its end).

    Also checks that the state survives JSON, that loading then saving gives it back, and that
    a state already taken is not changed by further iteration.
    """
    with plan.build() as reference:
        reference.set_epoch(epoch)
        full = collect(reference) + collect(reference)  # this epoch and the next
        n = len(reference)
    points = range(n + 1) if at is None else at
    for k in points:
        with plan.build() as loader:
            loader.set_epoch(epoch)
            taken = collect(loader, k)
            state = loader.state_dict()
            frozen = json.loads(json.dumps(state))
            collect(loader, 1)
            if state != frozen:
                raise AssertionError(
                    f"k={k}: the state changed after it was taken, or does not survive JSON"
                )
        with plan.build() as resumed:
            resumed.load_state_dict(frozen)
            if resumed.state_dict() != frozen:
                raise AssertionError(f"k={k}: load_state_dict(s) then state_dict() != s")
            rest = collect(resumed) + (collect(resumed) if k < n else [])
        assert_batches_equal(taken, full[:k], label=f"resume at {k} (before)")
        expected = full[k:] if k < n else full[n:]
        assert_batches_equal(expected, rest, label=f"resume at {k}", first_batch=k)


def assert_worker_invariant(
    plan: LoaderPlan, *, workers: Sequence[int] = (0, 2), epochs: int = 2
) -> None:
    """Assert every worker count in ``workers`` gives identical batches for ``epochs`` epochs."""
    runs = {}
    for count in workers:
        variant = plan.to_builder().with_workers(count).compile()
        with variant.build() as loader:
            runs[count] = [collect(loader) for _ in range(epochs)]
    first = workers[0]
    for count in workers[1:]:
        for e in range(epochs):
            assert_batches_equal(
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
    size = plan.batch.batch_size
    if plan.batch.scheduled:
        raise ValueError("assert_elastic needs a fixed batch size (the global batch)")
    single = plan.to_builder().with_distributed(enabled=False).compile()
    for epoch in range(epochs):
        reference = global_batches(single, 1, epoch=epoch)
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
            counts = {len(loader) for loader in loaders}
            assert len(counts) == 1, f"world {world}, epoch {epoch}: ranks have {counts} batches"
            got = global_batches(variant, world, epoch=epoch)
            assert len(got) == len(reference), (
                f"world {world}, epoch {epoch}: {len(got)} global batches, single process "
                f"{len(reference)}"
            )
            for s, (want, have) in enumerate(zip(reference, got, strict=True)):
                ok = have == want if len(want) == size else have[: len(want)] == want
                assert ok, (
                    f"world {world}, epoch {epoch}, global batch {s}: {have[:12]}... differs "
                    f"from the single process's {want[:12]}..."
                )
