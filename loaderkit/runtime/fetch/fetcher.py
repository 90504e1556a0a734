"""Turning one batch request into one batch, identically in the main process or any worker.

A :class:`BatchRequest` carries everything a batch depends on (epoch, batch index, sample
indices), so a batch is a pure function of its request: which worker makes it does not matter.
Per-sample randomness (transforms taking ``rng``) is keyed by (seed, epoch, sample index), and
so are the global RNGs around the user's code under ``with_global_rngs("per_sample")``.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from loaderkit._text import sample_list
from loaderkit.collators.base import BatchContext
from loaderkit.errors import DataError, data_error, portable_exception, portable_type
from loaderkit.runtime.cache.samples import Cache, CachedSource, CacheUnusableError
from loaderkit.runtime.fetch.global_rngs import SampleSeeding, sample_seeding
from loaderkit.runtime.fetch.sample_step import (
    SampleStep,
    skipped_or_raised,
    unsendable_batch,
    unsendable_sample,
)
from loaderkit.runtime.records import BatchRequest, Failure, Fetched, Skipped
from loaderkit.runtime.sources.access import MixtureSource, Source, dataset_source
from loaderkit.runtime.workers.crossing import unsendable_message
from loaderkit.runtime.workers.storage import StorageReport, stored

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import DatasetSpec

__all__ = [
    "BatchFetcher",
    "failure_from",
    "plan_fetcher",
    "prepared",
]


_TRANSFORM_FAILED = "failed in the transform"


def _worker_id() -> int | None:
    info = torch.utils.data.get_worker_info()
    return None if info is None else int(info.id)


def _where(worker: int | None) -> str:
    return "in the main process" if worker is None else f"in worker {worker}"


class BatchFetcher:
    """Fetch, transform and collate the samples of one request.

    ``default_collator`` says ``collate`` is the built-in ``default`` collator, whose result
    sources can compute column-wise (``Source.default_batch``) when there is no transform.
    ``batched=False`` (``with_batch_size(None)``): each request holds one sample, which
    ``collate`` converts without a batch dimension (a mixture's source id too).
    """

    def __init__(
        self,
        source: Source,
        *,
        collate: Callable[..., Any],
        collator_name: str,
        default_collator: bool,
        transform: Callable[..., Any] | None,
        transform_rng: bool,
        seed: int,
        source_key: str | None = None,
        skip: bool = False,
        cache: Cache | None = None,
        batched: bool = True,
        seeding: SampleSeeding | None = None,
        storage: tuple[StorageReport, ...] = (),
    ) -> None:
        self.source = source
        self.storage = storage
        """How each list dataset behind the source is held (``explain()`` reports it)."""
        self.seeding = seeding
        """Where the global RNGs are seeded around the user's code (``"per_sample"``)."""
        self.batched_reads = (
            seeding is not None
            and not isinstance(source, MixtureSource)
            and callable(getattr(source.data, "__getitems__", None))
        )
        self.batched = batched
        self.skip = skip
        self.cache = cache
        """The ``"transformed"`` stage of ``with_cache`` (the ``"fetched"`` stage is a
        :class:`~loaderkit.runtime.cache.samples.CachedSource`)."""
        self.collate = collate
        self.uses_context = bool(getattr(collate, "uses_context", False))
        self.collator_name = collator_name
        self.fast = default_collator and transform is None and batched
        self.step = (
            None
            if transform is None
            else SampleStep(
                transform,
                rng=transform_rng,
                seed=seed,
                before=seeding.before_transform
                if seeding is not None and seeding.transform
                else None,
            )
        )
        """The transform of each sample (keyed rng, seeding, policies), if there is one."""
        self.seed = seed
        self.epoch_hooks = source.epoch_hooks()
        self.seen_epoch: int | None = None
        self.source_key = source_key
        self._variants: dict[int, Callable[..., Any]] = {}

    @property
    def transform(self) -> Callable[..., Any] | None:
        """The user's per-sample transform, if any (held by :attr:`step`)."""
        return None if self.step is None else self.step.transform

    def gathers(self) -> bool:
        """Whether every batch is one vectorized gather running none of the user's code.

        The ``default`` collator without a transform (:attr:`fast`), no cache, no
        ``set_epoch`` hook, no mixture, over a source whose batches are gathered
        (:meth:`Source.gathers`: tensors, arrays, columns of them, an HF dataset read by the
        Arrow path).
        """
        return (
            self.fast
            and self.cache is None
            and not self.epoch_hooks
            and self.source_key is None
            and not isinstance(self.source, MixtureSource | CachedSource)
            and self.source.gathers()
        )

    def __call__(self, request: BatchRequest) -> Any:
        """The batch for ``request``; raises :class:`DataError` naming the sample.

        A dataset defining ``set_epoch(epoch)`` hears of each new epoch before its first
        sample is fetched, in whichever process fetches it (persistent workers included).
        Under ``with_global_rngs("per_sample")`` the batch is made by
        :meth:`SampleSeeding.around` (made again if the user's code drew from an RNG not
        seeded yet).
        """
        if self.epoch_hooks and request.epoch != self.seen_epoch:
            for hook in self.epoch_hooks:
                hook(request.epoch)
            self.seen_epoch = request.epoch
        if self.seeding is not None:  # seeds the RNGs the user's code draws from
            fetch = functools.partial(self._fetch, request)
            return self.seeding.around(fetch, request.epoch, request.batch_index, _worker_id())
        return self._fetch(request)

    def _fetch(self, request: BatchRequest) -> Any:
        if self.cache is not None:
            return self._cached(request)
        if self.skip:
            return self._skipping(request)
        batch = self._batch(request)
        if self.source_key is not None:
            return self._with_sources(request, batch)
        return batch

    def _skipping(self, request: BatchRequest) -> Fetched:
        """The batch without the samples that fail to load or transform (the skip policy).

        The collator sees only the good samples (so the batch is smaller), with their own
        indices in its context; a batch the collator cannot build still raises.
        """
        if self.fast:
            try:
                batch = self.source.default_batch(request.indices)
            except Exception:  # noqa: BLE001 - find the bad samples one by one below
                batch = None
            if batch is not None:
                return Fetched(self._finish(request, batch), (), len(request.indices))
        everything = self._all_or_none(request)
        if everything is not None and self.step is None:  # nothing failed
            batch = self._collate(request, everything)
            return Fetched(self._finish(request, batch), (), len(request.indices))
        kept, samples, skipped = self._load_skipping(request, everything)
        if not samples:
            return Fetched(None, tuple(skipped), len(request.indices))
        narrowed = (
            request if not skipped else request._replace(indices=np.asarray(kept, dtype=np.int64))
        )
        batch = self._collate(narrowed, samples)
        return Fetched(self._finish(narrowed, batch), tuple(skipped), len(request.indices))

    def _all_or_none(self, request: BatchRequest) -> list[Any] | None:
        """The samples of ``request`` read in one go, or ``None`` if any of them fails."""
        try:
            return self._read(request)
        except Exception:  # noqa: BLE001 - the caller reads them one by one to drop the bad ones
            return None

    def _load_skipping(
        self, request: BatchRequest, everything: list[Any] | None
    ) -> tuple[list[int], list[Any], list[Skipped]]:
        """The samples of ``request`` that load and transform, their indices, and the others.

        ``everything`` is the whole request already loaded, or ``None`` to load it one by one.
        """
        kept: list[int] = []
        samples: list[Any] = []
        skipped: list[Skipped] = []
        if everything is not None:
            kept, samples = request.indices.tolist(), everything
        else:
            for index in request.indices.tolist():
                try:
                    samples.append(self._read_one(request, index))
                    kept.append(index)
                except CacheUnusableError:  # the cache folder, not the sample: never skipped
                    raise
                except Exception as exc:  # noqa: BLE001 - recorded, or raised by skipped_or_raised
                    failed = functools.partial(self._failed, request, "could not be loaded")
                    recorded = functools.partial(self._skipped, request, "could not be loaded")
                    skipped.append(skipped_or_raised(index, exc, failed, recorded))
        if self.step is not None:
            failed = functools.partial(self._failed, request, _TRANSFORM_FAILED)
            recorded = functools.partial(self._skipped, request, _TRANSFORM_FAILED)
            kept, samples, dropped = self.step.skipping(
                request.epoch, kept, samples, failed, recorded
            )
            skipped += dropped
        return kept, samples, skipped

    def unsendable(self, request: BatchRequest, result: Any, exc: BaseException) -> DataError:
        """The :class:`DataError` for ``result``, the batch of ``request``, that does not pickle.

        Names the first sample of the request that does not pickle (read again: a batch is
        a function of its request) and the part of it that cannot be sent; if every sample
        pickles, the collator's output is named instead.
        """
        worker = _worker_id()
        culprit = unsendable_sample(self._read_again(request))
        if culprit is not None:
            index, found = culprit
            what = (
                f"sample {index}{self.source.locate(index)} (batch {request.batch_index} of "
                f"epoch {request.epoch})"
            )
            return data_error(
                unsendable_message(what, "sample", found, exc, worker),
                exc,
                sample_index=index,
                worker_id=worker,
                collator=self.collator_name,
                batch_index=request.batch_index,
            )
        batch = result.batch if isinstance(result, Fetched) else result
        found = unsendable_batch(batch)
        what = (
            f"batch {request.batch_index} of epoch {request.epoch} (samples "
            f"{sample_list(request.indices)}), as collator {self.collator_name!r} made it,"
        )
        return data_error(
            unsendable_message(what, "batch", found, exc, worker),
            exc,
            worker_id=worker,
            collator=self.collator_name,
            batch_index=request.batch_index,
        )

    def _read_again(self, request: BatchRequest) -> Iterator[tuple[int, Any]]:
        """The samples of ``request`` that read (and transform) again, with their indices."""
        for index in request.indices.tolist():
            try:
                sample = self._read_one(request, index)
                if self.step is not None:
                    sample = self.step(request.epoch, index, sample)
            except Exception:  # noqa: BLE001 - read again only to find the culprit
                continue
            yield index, sample

    def _cached(self, request: BatchRequest) -> Any:
        """The batch from transformed samples kept in the cache (the ``"transformed"`` stage).

        Only the samples missing from the cache are loaded and transformed (then stored); a
        sample that fails is never stored. Under the ``skip`` policy the result is a
        :class:`Fetched`, as from :meth:`_skipping`.
        """
        cache = self.cache
        assert cache is not None
        wanted = request.indices.tolist()
        found, missing = cache.lookup(wanted)
        skipped: list[Skipped] = []
        loaded: list[tuple[int, Any]] = []
        if missing:
            sub = request._replace(indices=np.asarray(missing, dtype=np.int64))
            if self.skip:
                kept, samples, skipped = self._load_skipping(sub, self._all_or_none(sub))
            else:
                kept, samples = missing, self._samples(sub)
                if self.step is not None:
                    samples = self._transformed(sub, samples)
            loaded = list(zip(kept, samples, strict=True))
            found.update(loaded)
        cache.store_many(loaded, len(wanted) - len(missing))
        order = [i for i in wanted if i in found]
        narrowed = (
            request
            if len(order) == len(wanted)
            else request._replace(indices=np.asarray(order, dtype=np.int64))
        )
        if not order:
            return Fetched(None, tuple(skipped), len(wanted))
        batch = self._finish(narrowed, self._collate(narrowed, [found[i] for i in order]))
        if self.skip:
            return Fetched(batch, tuple(skipped), len(wanted))
        return batch

    def _finish(self, request: BatchRequest, batch: Any) -> Any:
        if self.source_key is not None:
            return self._with_sources(request, batch)
        return batch

    def _skipped(self, request: BatchRequest, what: str, index: int, exc: Exception) -> Skipped:
        where = self.source.locate(index)
        return Skipped(
            index,
            request.epoch,
            request.batch_index,
            _worker_id(),
            type(exc).__name__,
            f"sample {index}{where} {what}: {type(exc).__name__}: {exc}",
        )

    def _with_sources(self, request: BatchRequest, batch: Any) -> Any:
        """Add the source id of every sample under ``source_key`` (mixtures)."""
        source = self.source
        if isinstance(source, CachedSource):
            source = source.inner
        assert isinstance(source, MixtureSource)
        assert self.source_key is not None
        if not isinstance(batch, MutableMapping):
            raise DataError(
                f"mixture.source_key={self.source_key!r} adds the source ids to dict batches, "
                f"but collator {self.collator_name!r} made a {type(batch).__name__}; use a "
                f"collator that returns a dict, or drop source_key",
                collator=self.collator_name,
                batch_index=request.batch_index,
            )
        ids = torch.from_numpy(source.source_ids(request.indices))
        batch[self.source_key] = ids if self.batched else ids[0]
        return batch

    def _batch(self, request: BatchRequest) -> Any:
        if self.fast:
            try:
                batch = self.source.default_batch(request.indices)
            except Exception as exc:
                self._samples(request)  # raises a DataError naming the bad sample
                raise self._batch_error(request, exc, "could not be gathered") from exc
            if batch is not None:
                return batch
        samples = self._samples(request)
        if self.step is not None:
            samples = self._transformed(request, samples)
        return self._collate(request, samples)

    def _collate(self, request: BatchRequest, samples: list[Any]) -> Any:
        collate = self.collate
        if request.max_length is not None:
            collate = self._limited(request.max_length)
        if self.seeding is not None and self.seeding.collator:
            self.seeding.before_collate(request.epoch, request.batch_index)
        try:
            if self.uses_context:
                context = BatchContext(
                    self.seed, request.epoch, request.batch_index, request.indices
                )
                return collate(samples, context=context)
            batch = collate(samples)
            if self.fast and isinstance(batch, dict):  # what default_batch would have given
                for key, dtype in self.source.list_dtypes().items():
                    value = batch.get(key)
                    if isinstance(value, torch.Tensor) and value.ndim >= 2:
                        batch[key] = value.to(dtype)
            return batch
        except DataError as exc:
            if exc.batch_index is None:  # keep what the collator knew (e.g. sample_index)
                raise self._batch_error(
                    request, exc, f"could not be collated by {self.collator_name!r}", raw=True
                ) from exc
            raise
        except Exception as exc:
            raise self._batch_error(
                request, exc, f"could not be collated by {self.collator_name!r}"
            ) from exc

    def _limited(self, max_length: int) -> Callable[..., Any]:
        """The collator cutting sequences to ``max_length`` (one copy per length, cached)."""
        found = self._variants.get(max_length)
        if found is None:
            found = self._variants[max_length] = self.collate.with_max_length(max_length)  # type: ignore[attr-defined]
        return found

    def _batch_error(
        self, request: BatchRequest, exc: BaseException, what: str, *, raw: bool = False
    ) -> DataError:
        worker = _worker_id()
        detail = str(exc) if raw else f"{type(exc).__name__}: {exc}"
        return data_error(
            f"batch {request.batch_index} of epoch {request.epoch} (samples "
            f"{sample_list(request.indices)}) {what} {_where(worker)}: {detail}",
            exc,
            sample_index=exc.sample_index if isinstance(exc, DataError) else None,
            worker_id=worker,
            collator=self.collator_name,
            batch_index=request.batch_index,
        )

    def _failed(
        self, request: BatchRequest, what: str, index: int, exc: BaseException, why: str
    ) -> DataError:
        """The error of sample ``index``, which ``what`` (``why`` it was not skipped)."""
        return self._sample_error(request, index, exc, f"{what} ({why})" if why else what)

    def _sample_error(
        self, request: BatchRequest, index: int, exc: BaseException, what: str
    ) -> DataError:
        worker = _worker_id()
        return data_error(
            f"sample {index}{self.source.locate(index)} (batch {request.batch_index} of epoch "
            f"{request.epoch}) {what} "
            f"{_where(worker)}: {type(exc).__name__}: {exc}",
            exc,
            sample_index=index,
            worker_id=worker,
            collator=self.collator_name,
            batch_index=request.batch_index,
        )

    def _read(self, request: BatchRequest) -> list[Any]:
        """The samples of ``request`` (the global RNGs seeded per sample, if the plan says)."""
        seeding = self.seeding
        if seeding is None or not seeding.reads_seeded:
            return self.source.samples(request.indices)
        if self.batched_reads:  # the dataset's __getitems__: one call, seeded once
            if len(request.indices):
                seeding.before_samples(request.epoch, int(request.indices[0]))
            return self.source.samples(request.indices)
        return [self._read_one(request, index) for index in request.indices.tolist()]

    def _read_one(self, request: BatchRequest, index: int) -> Any:
        """Sample ``index`` (the global RNGs seeded for it, if the plan says)."""
        if self.seeding is not None and self.seeding.getitem:
            self.seeding.before_sample(request.epoch, index)
        return self.source.sample(index)

    def _samples(self, request: BatchRequest) -> list[Any]:
        try:
            return self._read(request)
        except Exception as batch_exc:
            for index in request.indices.tolist():
                try:
                    self._read_one(request, index)
                except Exception as exc:
                    raise self._sample_error(request, index, exc, "could not be loaded") from exc
            raise self._batch_error(request, batch_exc, "could not be loaded") from batch_exc

    def _transformed(self, request: BatchRequest, samples: list[Any]) -> list[Any]:
        """``samples`` transformed (the ``"raise"`` policy: a failure names its sample)."""
        assert self.step is not None
        failed = functools.partial(self._failed, request, _TRANSFORM_FAILED)
        return self.step.all(request.epoch, request.indices.tolist(), samples, failed)


def failure_from(error: DataError, request: BatchRequest) -> Failure:
    """Pack a worker's error as data (the traceback as text) for the main process.

    The original exception and its type go along only if they pickle (checked here, so a
    user exception that cannot be unpickled never breaks the worker's result queue).
    """
    original = error.__cause__ or error
    return Failure(
        message=error.message,
        sample_index=error.sample_index,
        worker_id=error.worker_id,
        collator=error.collator,
        batch_index=request.batch_index,
        exc_type=type(original).__name__,
        traceback="".join(traceback.format_exception(original)).rstrip(),
        original_type=portable_type(error.original_type),
        cause=None if original is error else portable_exception(original),
    )


def prepared(dataset: Any, transform: Callable[..., Any] | None) -> Any:
    """``dataset.loaderkit_prepare(transform)`` where the dataset has it, else the dataset.

    The image sources (``loaderkit.datasets.images``) choose their decode path here: a reduced
    scale when the transform's first step shrinks the image, and the faster JPEG decoder.
    """
    prepare = getattr(dataset, "loaderkit_prepare", None)
    return dataset if not callable(prepare) else prepare(transform)


def plan_fetcher(
    plan: LoaderPlan,
    collate: Callable[..., Any],
    transform: Callable[..., Any] | None,
    cache: Cache | None,
    num_workers: int = 0,
) -> BatchFetcher:
    """The fetcher of a map-style ``plan``: its source, collator, transform and cache.

    A mixture's sources are read as one; the cache (``with_cache``) wraps the source at the
    ``"fetched"`` stage, or is consulted by the fetcher at the ``"transformed"`` stage. A list
    of samples is stored as its ``storage`` says for ``num_workers`` workers (see
    :mod:`loaderkit.runtime.workers.storage`); :attr:`BatchFetcher.storage` reports it.
    """
    assert plan.bindings is not None
    mixture = plan.mixture
    reports: list[StorageReport] = []

    def source_for(spec: DatasetSpec) -> Source:
        assert plan.bindings is not None
        data, report = stored(
            prepared(plan.bindings[spec.binding], transform),
            spec,
            num_workers,
            choosable=mixture is None,
        )
        if report is not None:
            reports.append(report)
        return dataset_source(data, spec)

    source: Source
    if mixture is None:
        source = source_for(plan.dataset)
    else:
        parts = [source_for(s) for s in mixture.sources]
        source = MixtureSource(parts, mixture.names, mixture.sizes)
    if cache is not None and plan.cache is not None and plan.cache.stage == "fetched":
        source = CachedSource(source, cache)
    return BatchFetcher(
        source,
        collate=collate,
        collator_name=plan.collator.describe(),
        default_collator=plan.collator.source == "registry" and plan.collator.name == "default",
        transform=transform,
        transform_rng=plan.transform is not None and plan.transform.accepts_rng,
        seed=plan.order.seed,
        source_key=mixture.source_key if mixture is not None else None,
        skip=plan.error_policy.policy == "skip",
        cache=cache if plan.cache is not None and plan.cache.stage == "transformed" else None,
        batched=plan.batch.batched,
        seeding=sample_seeding(plan, num_workers),
        storage=tuple(reports),
    )
