"""The global RNGs (torch's CPU generator, numpy's legacy one, ``random``): seeding them.

Code of the user's that draws from the global RNGs (a dataset's ``__getitem__``, a transform
such as torchvision's ``RandomResizedCrop``, a collator that masks with ``torch.bernoulli``)
gives the same batches whatever the number of workers only if the RNGs are in a known state
each time it runs. :func:`seed_globals` puts them in the state a key names; a stream seeds them
by element position (:mod:`loaderkit.runtime.stream_read`), a map-style plan with
``with_global_rngs("per_sample")`` (the default) by sample index (:class:`SampleSeeding`), and
every worker once per epoch (``WorkerSeeder`` in :mod:`loaderkit.runtime.fetch`). In the main
process, :func:`user_rngs` and :func:`restore_rngs` put the user's own states back afterwards.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from loaderkit.order.keys import derive_key

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "SampleSeeding",
    "restore_rngs",
    "sample_seeding",
    "seed_all",
    "seed_globals",
    "user_rngs",
]


_PY_RANDOM: Any = getattr(random, "_inst", None)
"""The instance behind ``random``'s module functions (CPython's ``random._inst``)."""
_MT_SEED = random.Random.__mro__[1].seed  # type: ignore[attr-defined]
"""The Mersenne Twister's own ``seed`` (``_random.Random.seed``), under ``random.seed``."""
_DIRECT = type(_PY_RANDOM) is random.Random
"""Whether ``random`` is CPython's (its state and ``gauss_next`` are seeded directly)."""


def seed_all(value: int) -> None:
    """Seed the three global RNGs with ``value`` (in ``[0, 2**64)``).

    ``random`` is seeded as ``random.seed(value)`` does (the generator's state and the
    ``gauss`` value it keeps), without the checks of its Python wrapper (a few microseconds
    a sample under ``with_global_rngs("per_sample")``).
    """
    torch.default_generator.manual_seed(value)
    np.random.seed(value % 2**32)
    if _DIRECT:
        _MT_SEED(_PY_RANDOM, value)
        _PY_RANDOM.gauss_next = None
    else:  # another Python: its own way
        random.seed(value)


def seed_globals(seed: int, *components: str | int) -> None:
    """Seed the global RNGs (torch's CPU generator, numpy's legacy one, ``random``).

    The key is ``derive_key(seed, *components)``: a stream seeds them before reading each
    element (by its position), before each transform and each collate, in a worker or in the
    main process alike, so what a source draws from them does not depend on ``num_workers``.
    """
    seed_all(derive_key(seed, *components))


def user_rngs() -> tuple[Any, Any, torch.Tensor]:
    """The main process's global RNG states, to put back once a batch was made there."""
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def restore_rngs(states: tuple[Any, Any, torch.Tensor]) -> None:
    """Put back the global RNG states :func:`user_rngs` took."""
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


_MASK = 2**64 - 1


def _splitmix64(key: int, index: int) -> int:
    """``index``-th output of SplitMix64 from state ``key``: a bijection of ``index`` per key."""
    z = (key + (index + 1) * 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class SampleSeeding:
    """``with_global_rngs("per_sample")`` for a map-style plan: where the RNGs are seeded.

    Before the user's ``__getitem__`` of sample ``i`` (``getitem``), before the transform of
    sample ``i`` (``transform``) and before the user's collator makes batch ``b``
    (``collator``), from (seed, epoch, ``i`` or ``b``), each under its own name so that a
    cached sample's transform draws what it draws uncached. A dataset with ``__getitems__``
    (read a batch at a time) is seeded once per call, from its first sample.

    The value for sample ``i`` is ``splitmix64(derive_key(seed, "global-rngs", part, epoch),
    i)``: the keyed hash once per part and epoch, then a few integer operations per sample.
    """

    def __init__(self, seed: int, *, getitem: bool, transform: bool, collator: bool) -> None:
        self.seed = seed
        self.getitem = getitem
        self.transform = transform
        self.collator = collator
        self._keys: dict[tuple[str, int], int] = {}

    def _seed(self, part: str, epoch: int, index: int) -> None:
        key = self._keys.get((part, epoch))
        if key is None:
            if len(self._keys) > 64:  # epochs long gone
                self._keys.clear()
            key = self._keys[part, epoch] = derive_key(self.seed, "global-rngs", part, epoch)
        seed_all(_splitmix64(key, index))

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


def sample_seeding(plan: LoaderPlan) -> SampleSeeding | None:
    """The per-sample seeding of a map-style ``plan``, or ``None`` where there is none.

    ``None`` for ``"per_worker"``, and where none of the user's code runs (see
    :func:`~loaderkit.plan.sections.global_rngs.seeded_parts`).
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
    )
