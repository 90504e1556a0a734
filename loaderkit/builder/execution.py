"""The builder's calls that say how batches are loaded, checked and delivered.

:class:`ExecutionCalls`: ``with_checks``, ``with_error_policy``, ``with_cache``,
``with_workers``, ``with_device`` and ``with_distributed``, methods of
:class:`~loaderkit.DataLoaderBuilder`. None of them changes a batch's content, except the
error policy's ``"skip"`` (a counted, reported drop).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

from loaderkit.builder.keywords import keywords_checked
from loaderkit.builder.state import BuilderState
from loaderkit.plan.sections.cache import CacheStage, CacheStorage, cache_spec
from loaderkit.plan.sections.checks import checks_spec
from loaderkit.plan.sections.device import Device, device_spec
from loaderkit.plan.sections.distributed import distributed_spec
from loaderkit.plan.sections.error_policy import (
    BudgetScope,
    ErrorPolicy,
    error_policy_spec,
)
from loaderkit.plan.sections.workers import StartMethod, workers_spec

__all__ = ["ExecutionCalls"]


class ExecutionCalls(BuilderState):
    """The execution ``with_*`` methods of :class:`~loaderkit.DataLoaderBuilder`."""

    __slots__ = ()

    @keywords_checked
    def with_checks(
        self,
        *,
        keys: Sequence[str] | None = None,
        dtypes: Mapping[str, str] | None = None,
        shapes: Mapping[str, Sequence[int | str]] | None = None,
        finite: Sequence[str] | None = None,
        ranges: Mapping[str, Sequence[float | None]] | None = None,
        label_pad: bool | Mapping[str, Any] | None = None,
        classes: Mapping[str, int | Mapping[str, int]] | None = None,
        every: int | None = None,
    ) -> Self:
        """Return a new builder that checks batches against a contract while loading.

        Keys are key paths of the batch: ``"input_ids"``, ``"a.b"`` in nested dicts, ``"0"``
        for a tuple's first item. ``keys``: keys that must be present. ``dtypes``: ``{key:
        "int64"}`` (torch dtype names). ``shapes``: ``{key: ["B", "T"]}``, each dim an int,
        a name (the same name is the same size across keys of one batch), ``"*"`` (any) or
        ``"..."`` (any number of dims). ``finite``: keys without NaN/Inf. ``ranges``: ``{key:
        [low, high]}``, inclusive, ``None`` for an open end. ``label_pad``: ``True`` or
        ``{"labels", "mask", "ignore_index", "mode"}``: labels are -100 exactly where
        ``attention_mask`` is 0 (``mode="only_pad"``: at least there). ``classes``: ``{key:
        n}`` (ids in [0, n), ``{"n": n, "ignore_index": -100}`` to allow one more value) or
        ``{key: {"one_hot": n}}``. Checked in the main process on the batch the loader
        delivers: the first batch of each iteration, and with ``every=N`` also every batch
        whose index in its epoch is a multiple of N. A violation raises
        :class:`~loaderkit.DataError` naming the key, the check, the epoch and batch, and the
        positions and samples. Checks never change batches nor the fingerprint.
        ``plan.check()`` runs them on the first batch. Replaces any earlier checks.
        """
        spec = checks_spec(
            keys=keys,
            dtypes=dtypes,
            shapes=shapes,
            finite=finite,
            ranges=ranges,
            label_pad=label_pad,
            classes=classes,
            every=every,
        )
        return self._with(checks=spec)

    @keywords_checked
    def with_error_policy(
        self,
        policy: ErrorPolicy = "raise",
        *,
        max_errors: int | None = None,
        max_error_rate: float | None = None,
        per: BudgetScope = "epoch",
    ) -> Self:
        """Return a new builder handling samples that fail to load or transform by ``policy``.

        ``"raise"`` (the default): the first failure stops the loader with a
        :class:`~loaderkit.DataError` naming the sample, the worker and the original traceback
        (it is also an instance of the original exception's type).
        ``"skip"``: the sample is dropped from its batch (which is then smaller), counted and
        recorded in ``loader.skipped`` (index, epoch, batch, exception type and message; the
        last ``SKIPPED_RECORDS_KEPT`` = 1,000 of them, with exact totals in
        ``loader.skip_counts``) and logged; once more than ``max_errors`` samples, or more
        than a ``max_error_rate`` share of the samples read (checked from 100 samples on),
        were dropped, the loader raises a ``DataError`` with the summary. Nothing is skipped
        silently.

        ``per`` is what the budget counts: ``"epoch"`` (the default) the samples of the
        current epoch, from 0 again at each new epoch, so ``max_errors=2`` means "this
        dataset may hold 2 bad samples" for any number of epochs; ``"run"`` every sample read
        since the first epoch. Either way the counts travel in ``state_dict()``: a resumed
        run raises exactly where the uninterrupted one would. Replaces any earlier policy.
        """
        spec = error_policy_spec(
            policy, max_errors=max_errors, max_error_rate=max_error_rate, per=per
        )
        return self._with(error_policy=spec)

    @keywords_checked
    def with_cache(
        self,
        storage: CacheStorage = "memory",
        *,
        stage: CacheStage = "fetched",
        path: str | os.PathLike[str] | None = None,
        max_bytes: int | None = None,
        shared: bool = False,
    ) -> Self:
        """Return a new builder keeping loaded samples in a cache, so later epochs skip loading.

        ``storage``: ``"memory"`` (a cache in each process that fetches: the main process with
        ``num_workers=0``, else each persistent worker) or ``"disk"`` (the folder ``path``,
        created if missing and shared by workers, ranks on the node and later runs; it records
        which dataset and stage it holds and refuses another). ``stage``: ``"fetched"`` keeps
        what the dataset returns, before the transform (which still runs every epoch);
        ``"transformed"`` keeps the transform's output (only for a transform without ``rng``:
        its output must be a pure function of the sample). ``max_bytes`` caps the cache
        (memory: new samples stop being stored; disk: the oldest are evicted). Samples that
        fail are never cached. A cache never changes a batch (not in the fingerprint).
        ``loader.cache_stats`` counts hits and misses. Replaces any earlier cache.

        A disk folder must be private (owned by you, and no other user can change it or a
        folder on the way to it): ``build()`` refuses one that is not. ``shared=True`` accepts
        such a folder and signs every entry with your own key (kept outside the folder, in
        ``~/.config/loaderkit/cache.key``), so entries that others write are never served.
        """
        spec = cache_spec(storage, stage=stage, path=path, max_bytes=max_bytes, shared=shared)
        return self._with(cache=spec)

    @keywords_checked
    def with_workers(
        self,
        num_workers: int | Literal["auto"],
        *,
        prefetch_factor: int | None = None,
        persistent: bool | None = None,
        pin_memory: bool | None = None,
        start_method: StartMethod | None = None,
        timeout: float | None = None,
    ) -> Self:
        """Return a new builder loading with ``num_workers`` worker processes (0: in-process).

        ``"auto"`` is kept in the plan and resolved by ``build()`` on the machine that builds:
        the CPUs this process may use, shared by the ranks on the node, minus one for the main
        process, at most 8 (``loaderkit.plan.workers``; ``explain()`` shows the numbers). It is
        refused for iterable (streamed) sources, whose order depends on ``num_workers``.
        ``None`` means automatic: pin memory only when delivering to an available CUDA device;
        persistent workers and a prefetch factor of 2 when ``num_workers > 0`` (with
        ``"auto"``: a prefetch factor keeping at least 4 batches in flight).
        ``start_method`` is ``"fork"``, ``"spawn"`` or ``"forkserver"``; ``timeout`` is the
        seconds to wait for one batch. These settings change speed, never the batches.
        Replaces any earlier worker settings.
        """
        return self._with(
            workers=workers_spec(
                num_workers,
                prefetch_factor=prefetch_factor,
                persistent=persistent,
                pin_memory=pin_memory,
                start_method=start_method,
                timeout=timeout,
            ),
        )

    @keywords_checked
    def with_device(self, device: Device) -> Self:
        """Return a new builder delivering batches to ``device``.

        ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, ``"mps"`` or ``"auto"`` (CUDA when
        available, else CPU). A plan naming ``"cuda"`` compiles anywhere; building it where
        CUDA is absent fails clearly. Replaces any earlier device.
        """
        return self._with(device=device_spec(device))

    @keywords_checked
    def with_distributed(
        self,
        *,
        world_size: int | None = None,
        rank: int | None = None,
        even_batches: bool = True,
        enabled: bool = True,
    ) -> Self:
        """Return a new builder that shards each epoch across ranks.

        Without arguments, rank and world size are detected when the plan is built (an
        initialized ``torch.distributed`` group, else the ``RANK`` / ``WORLD_SIZE`` variables
        torchrun sets, else a single process); give both to fix them. ``even_batches`` makes
        every rank yield the same number of batches so collectives never hang.
        ``enabled=False`` switches sharding off again (the default: a plan that does not
        shard is refused by ``build()`` on one of several ranks, so that no rank silently
        reads the whole dataset; to read it all on every rank on purpose, fix
        ``world_size=1, rank=0``). Replaces any earlier distributed settings.
        """
        return self._with(
            distributed=distributed_spec(
                world_size=world_size, rank=rank, even_batches=even_batches, enabled=enabled
            ),
        )
