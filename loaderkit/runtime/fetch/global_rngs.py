"""The global RNGs (torch's CPU generator, numpy's legacy one, ``random``): seeding them.

Code of the user's that draws from the global RNGs (a dataset's ``__getitem__``, a transform
such as torchvision's ``RandomResizedCrop``, a collator that masks with ``torch.bernoulli``)
gives the same batches whatever the number of workers only if the RNGs are in a known state
each time it runs. :func:`seed_globals` puts them in the state a key names; a stream seeds them
by element position (:mod:`loaderkit.runtime.stream.read`), a map-style plan with
``with_global_rngs("per_sample")`` (the default) by sample index (:class:`SampleSeeding`), and
every worker once per epoch (:class:`WorkerSeeder`). In the main process,
:func:`~loaderkit.runtime.fetch.rng_states.user_rngs` and ``restore_rngs`` put the user's own
states back afterwards.

Seeding costs ~12 us a sample (three generators); most datasets draw from none of them. So
:class:`SampleSeeding` seeds only the RNGs the user's code was *seen* drawing from: each batch
is made between two looks at the generators (their *marks*, :func:`marks`: the position, a
few words and the cached normals, read from the bytes behind each generator; in the main
process a whole :class:`RngStates` first, to put the user's states back), and a batch after
which an RNG not yet seeded moved is made again, with that RNG seeded per sample from then
on. The batches are the ones seeding every RNG before every sample gives: where the user's
code draws nothing from an RNG, seeding it changes nothing. The states and their marks are
read in :mod:`loaderkit.runtime.fetch.rng_states`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from loaderkit.order.keys import derive_key, worker_seed
from loaderkit.runtime.fetch.rng_states import (
    CPYTHON_RANDOM,
    PY_RANDOM,
    RNGS,
    Rng,
    RngStates,
    marks,
)

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "DrawLog",
    "SampleSeeding",
    "WorkerSeeder",
    "sample_seeding",
    "seed_all",
    "seed_globals",
    "seed_rngs",
    "seen_line",
]

_T = TypeVar("_T")

_MT_SEED = random.Random.__mro__[1].seed  # type: ignore[attr-defined]
"""The Mersenne Twister's own ``seed`` (``_random.Random.seed``), under ``random.seed``."""


def seed_rngs(value: int, rngs: Iterable[Rng]) -> None:
    """Seed the global RNGs named by ``rngs`` with ``value`` (in ``[0, 2**64)``).

    ``random`` is seeded as ``random.seed(value)`` does (the generator's state and the
    ``gauss`` value it keeps), without the checks of its Python wrapper.
    """
    for rng in rngs:
        if rng == "torch":
            torch.default_generator.manual_seed(value)
        elif rng == "numpy":
            np.random.seed(value % 2**32)
        elif CPYTHON_RANDOM:
            _MT_SEED(PY_RANDOM, value)
            PY_RANDOM.gauss_next = None
        else:  # another Python: its own way
            random.seed(value)


def seed_all(value: int) -> None:
    """Seed the three global RNGs with ``value`` (in ``[0, 2**64)``)."""
    seed_rngs(value, RNGS)


def seed_globals(seed: int, *components: str | int) -> None:
    """Seed the global RNGs (torch's CPU generator, numpy's legacy one, ``random``).

    The key is ``derive_key(seed, *components)``: a stream seeds them before reading each
    element (by its position), before each transform and each collate, in a worker or in the
    main process alike, so what a source draws from them does not depend on ``num_workers``.
    """
    seed_all(derive_key(seed, *components))


class WorkerSeeder:
    """Seeds a worker's global RNGs (torch, numpy, random) from (seed, epoch, rank, worker).

    Called once per epoch a worker serves, so persistent workers reseed when the epoch changes
    and every (rank, worker) pair draws different, reproducible numbers.
    """

    def __init__(self, seed: int, rank: int) -> None:
        self.seed = seed
        self.rank = rank
        self.epoch: int | None = None

    def __call__(self, epoch: int) -> None:
        """Reseed if this worker has not seen ``epoch`` yet."""
        if epoch == self.epoch:
            return
        self.epoch = epoch
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else int(info.id)
        seed_all(worker_seed(self.seed, epoch, self.rank, worker))


_MASK = 2**64 - 1


def _splitmix64(key: int, index: int) -> int:
    """``index``-th output of SplitMix64 from state ``key``: a bijection of ``index`` per key."""
    z = (key + (index + 1) * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class DrawLog:
    """Where the user's code was first seen drawing from each global RNG (``explain()``).

    One row per RNG of :data:`RNGS`: ``(seen, epoch, batch, process)``, ``process`` 0 for
    the main process and ``w + 1`` for worker ``w``. Kept in shared memory when workers
    fetch (each worker finds out for itself; the main process reads what they found).
    """

    def __init__(self, shared: bool) -> None:
        table = torch.zeros((len(RNGS), 4), dtype=torch.int64)
        self.table = table.share_memory_() if shared else table  # type: ignore[no-untyped-call]

    def saw(self, rngs: Iterable[Rng], epoch: int, batch: int, worker: int | None) -> None:
        """Record that the user's code drew from ``rngs`` in that batch (the first time)."""
        for rng in rngs:
            row = self.table[RNGS.index(rng)]
            if not int(row[0]):
                row.copy_(torch.tensor([1, epoch, batch, 0 if worker is None else worker + 1]))

    def seen(self) -> dict[Rng, tuple[int, int, int | None]]:
        """``{rng: (epoch, batch, worker)}`` of the RNGs seen drawn from (``None``: main)."""
        out: dict[Rng, tuple[int, int, int | None]] = {}
        for rng, (seen, epoch, batch, process) in zip(RNGS, self.table.tolist(), strict=True):
            if seen:
                out[rng] = (epoch, batch, None if process == 0 else process - 1)
        return out


def seen_line(log: DrawLog) -> str:
    """``loader.explain()``'s words for what :class:`DrawLog` recorded."""
    seen = log.seen()
    if not seen:
        return (
            "your code was not seen drawing from torch, numpy or random so far: none is "
            "seeded (each batch is checked)"
        )
    found = ", ".join(
        f"{rng} (first in batch {batch} of epoch {epoch}, "
        f"{'in the main process' if worker is None else f'in worker {worker}'})"
        for rng, (epoch, batch, worker) in seen.items()
    )
    rest = [rng for rng in RNGS if rng not in seen]
    line = f"your code was seen drawing from {found}: seeded per sample since"
    if rest:
        line += f"; {' and '.join(rest)}: not seen drawing, not seeded"
    return line


def _moved(
    rngs: tuple[Rng, ...], before: tuple[Any, ...], now: tuple[Any, ...], among: tuple[Rng, ...]
) -> tuple[Rng, ...]:
    """Those of ``among`` whose mark in ``now`` differs from the one in ``before``."""
    return tuple(r for r, a, b in zip(rngs, before, now, strict=True) if a != b and r in among)


class SampleSeeding:
    """``with_global_rngs("per_sample")`` for a map-style plan: where the RNGs are seeded.

    Before the user's ``__getitem__`` of sample ``i`` (``getitem``), before the transform of
    sample ``i`` (``transform``) and before the user's collator makes batch ``b``
    (``collator``), from (seed, epoch, ``i`` or ``b``), each under its own name so that a
    cached sample's transform draws what it draws uncached. A dataset with ``__getitems__``
    (read a batch at a time) is seeded once per call, from its first sample.

    The value for sample ``i`` is ``splitmix64(derive_key(seed, "global-rngs", part, epoch),
    i)``: the keyed hash once per part and epoch, then a few integer operations per sample.

    Only the RNGs in :attr:`seeded` are seeded. With ``watch`` (the default), that starts
    empty: :meth:`around` makes each batch between two :class:`RngStates`, and when an RNG
    not yet seeded moved, it joins :attr:`seeded` and the batch is made again (so every batch
    is the one seeding all three would give). Without ``watch`` all three are always seeded
    (a cache stores a sample as soon as it is made: there is no making it again).
    """

    def __init__(
        self,
        seed: int,
        *,
        getitem: bool,
        transform: bool,
        collator: bool,
        watch: bool = True,
        log: DrawLog | None = None,
    ) -> None:
        self.seed = seed
        self.getitem = getitem
        self.transform = transform
        self.collator = collator
        self.watch = watch
        self.seeded: tuple[Rng, ...] = () if watch else RNGS
        """The RNGs seeded before the user's code: those it was seen drawing from."""
        self._quiet: tuple[Rng, ...] = RNGS if watch else ()
        """The RNGs watched (not seeded yet)."""
        self._last: tuple[int, tuple[Rng, ...], tuple[Any, ...]] | None = None
        """In a worker: the epoch, the RNGs watched and their marks after its last batch."""
        self.log = log if log is not None else DrawLog(shared=False)
        self._keys: dict[tuple[str, int], int] = {}

    def around(self, fetch: Callable[[], _T], epoch: int, batch: int, worker: int | None) -> _T:
        """``fetch()``, made again with the RNGs seeded that it was seen drawing from.

        In the main process (``worker`` ``None``) the user's own states of the RNGs seeded
        are put back afterwards, so the user's draws go on as if nothing had run. A first
        attempt that raised is made again too if it drew (its error may have been a draw's).
        In a worker, the states after a batch are those before the next one of the epoch
        (only the worker's seeding at a new epoch runs in between).
        """
        main = worker is None
        quiet = self._quiet
        if not quiet and not main:
            return fetch()
        taken = RNGS if main else quiet
        before = None
        if main:  # the user's states, whole, to put back
            before = RngStates(RNGS)
            first = before.marks()
        elif self._last is not None and self._last[0] == epoch and self._last[1] == quiet:
            first = self._last[2]
        else:
            first = marks(quiet)
        self._last = None
        try:
            while True:
                try:
                    result = fetch()
                except Exception:
                    drawn = _moved(taken, first, marks(taken), quiet)
                    if not drawn:
                        raise
                else:
                    now = marks(taken)
                    drawn = () if now == first else _moved(taken, first, now, quiet)
                    if not drawn:  # the usual case: nothing (or only what we seeded) moved
                        if not main:
                            self._last = (epoch, quiet, now)
                        return result
                # drew from an RNG not seeded: seed it from now on, and make the batch again
                self.log.saw(drawn, epoch, batch, worker)
                self.seeded = tuple(r for r in RNGS if r in self.seeded or r in drawn)
                quiet = self._quiet = tuple(r for r in quiet if r not in drawn)
                if not main:  # the others did not move: their marks are those from before
                    taken = quiet
                    first = marks(quiet)
                    if not quiet:
                        return fetch()
        finally:
            if before is not None and self.seeded:
                before.restore(self.seeded)

    def _seed(self, part: str, epoch: int, index: int) -> None:
        if not self.seeded:
            return
        key = self._keys.get((part, epoch))
        if key is None:
            if len(self._keys) > 64:  # epochs long gone
                self._keys.clear()
            key = self._keys[part, epoch] = derive_key(self.seed, "global-rngs", part, epoch)
        seed_rngs(_splitmix64(key, index), self.seeded)

    @property
    def reads_seeded(self) -> bool:
        """Whether reading samples seeds RNGs now (else the source reads them in one go)."""
        return self.getitem and bool(self.seeded)

    def before_sample(self, epoch: int, index: int) -> None:
        """Seed them for reading sample ``index`` of ``epoch``."""
        self._seed("sample", epoch, index)

    def before_samples(self, epoch: int, first: int) -> None:
        """Seed them for a batched read (``__getitems__``) starting at sample ``first``."""
        self._seed("samples", epoch, first)

    def before_transform(self, epoch: int, index: int) -> None:
        """Seed them for the transform of sample ``index`` of ``epoch``."""
        self._seed("transform", epoch, index)

    def before_collate(self, epoch: int, batch_index: int) -> None:
        """Seed them for collating batch ``batch_index`` of ``epoch``."""
        self._seed("collate", epoch, batch_index)


def sample_seeding(plan: LoaderPlan, num_workers: int = 0) -> SampleSeeding | None:
    """The per-sample seeding of a map-style ``plan``, or ``None`` where there is none.

    ``None`` for ``"per_worker"``, and where none of the user's code runs (see
    :func:`~loaderkit.plan.sections.global_rngs.seeded_parts`). With a cache (``with_cache``)
    every RNG is seeded (see :class:`SampleSeeding`).
    """
    from loaderkit.plan.sections.global_rngs import seeded_parts

    if plan.global_rngs != "per_sample":
        return None
    parts = seeded_parts(plan)
    if not parts:
        return None
    return SampleSeeding(
        plan.order.seed,
        getitem="__getitem__" in parts,
        transform="transform" in parts,
        collator="collator" in parts,
        watch=plan.cache is None,
        log=DrawLog(shared=num_workers > 0),
    )
