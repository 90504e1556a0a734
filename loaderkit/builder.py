"""``DataLoaderBuilder``: the immutable chain that compiles into a ``LoaderPlan``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import attrs
import numpy as np
import numpy.typing as npt

from loaderkit._checks import Bindings
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.display import builder_html
from loaderkit.plan.plan import PLAN_SECTIONS, LoaderPlan, Setting, settings_named
from loaderkit.plan.sections import bound_names, section_calls
from loaderkit.plan.sections.batch import BatchSpec, batch_schedule_spec
from loaderkit.plan.sections.bucketing import BucketCost, BucketingSpec, bucketing_spec
from loaderkit.plan.sections.cache import CacheSpec, CacheStage, CacheStorage, cache_spec
from loaderkit.plan.sections.checks import ChecksSpec, checks_spec
from loaderkit.plan.sections.collator import (
    DEFAULT_COLLATOR,
    Modality,
    collator_for_modality,
    collator_spec,
    resolve_auto,
)
from loaderkit.plan.sections.curriculum import CurriculumSchedule, CurriculumSpec, curriculum_spec
from loaderkit.plan.sections.dataset import dataset_spec
from loaderkit.plan.sections.device import Device, device_spec
from loaderkit.plan.sections.distributed import DistributedSpec, distributed_spec
from loaderkit.plan.sections.error_policy import (
    BudgetScope,
    ErrorPolicy,
    ErrorPolicySpec,
    error_policy_spec,
)
from loaderkit.plan.sections.max_length import MaxLengthSpec, max_length_spec
from loaderkit.plan.sections.mixture import MixtureMode, MixtureSpec, mixture_spec
from loaderkit.plan.sections.order import OrderSpec, order_spec
from loaderkit.plan.sections.preset import PresetSpec, preset_chain, preset_notes, with_notes
from loaderkit.plan.sections.sampling_weights import WeightsSpec, weights_spec
from loaderkit.plan.sections.split import SplitSpec, split_spec
from loaderkit.plan.sections.transform import transform_spec
from loaderkit.plan.sections.workers import StartMethod, WorkersSpec, workers_spec
from loaderkit.plan.specs import CallableSpec, DatasetSpec, ScheduleUnit

if TYPE_CHECKING:
    from loaderkit.order.split import SplitName
    from loaderkit.runtime.loader import Loader

__all__ = ["DataLoaderBuilder", "MixtureWeights", "PerSample"]

PerSample: TypeAlias = str | Sequence[float] | npt.NDArray[np.number[Any]] | Callable[[Any], float]
"""One number per sample (lengths, weights, difficulties): a column or sample key, a
sequence or array of precomputed values, or a function of a sample."""

MixtureWeights: TypeAlias = (
    Mapping[str, float]
    | Sequence[float]
    | Sequence[tuple[float, Mapping[str, float]]]
    | Callable[[int], Mapping[str, float] | Sequence[float]]
)
"""``with_mixture(weights=...)``: per source, a schedule of them, or a function of t."""


def _bindings(value: Mapping[str, object]) -> Mapping[str, object]:
    return Bindings(value)


class _Refers(Protocol):
    def bound_names(self) -> tuple[str, ...]: ...


def _live(spec: _Refers, obj: object | None) -> list[tuple[str, object]]:
    """``obj`` bound under the name ``spec`` refers to (``spec.bound_names()``; none: None)."""
    return [(name, obj) for name in spec.bound_names()[:1] if obj is not None]


@attrs.frozen(repr=False)
class DataLoaderBuilder:
    """An immutable, chainable description of a loader.

    Every ``with_*`` method checks its own arguments, raising :class:`~loaderkit.PlanError`
    (path and fix in the message) at once, and returns a **new** builder; the builder it was
    called on never changes. Calling the same ``with_*`` twice replaces the earlier setting.
    :meth:`compile` applies the rules that involve several settings and returns a frozen
    :class:`~loaderkit.LoaderPlan`, reporting every problem at once.

    Examples:
        >>> plan = (DataLoaderBuilder().with_dataset(list(range(10))).with_batch_size(4)
        ...         .with_shuffle().compile())
        >>> plan.batch.batch_size
        4

    """

    _dataset: DatasetSpec | None = None
    _batch: BatchSpec = BatchSpec()
    _order: OrderSpec = OrderSpec()
    _collator: CallableSpec = DEFAULT_COLLATOR
    _transform: CallableSpec | None = None
    _workers: WorkersSpec = WorkersSpec()
    _device: str = "cpu"
    _distributed: DistributedSpec = DistributedSpec()
    _bucketing: BucketingSpec | None = None
    _sampling_weights: WeightsSpec | None = None
    _curriculum: CurriculumSpec | None = None
    _mixture: MixtureSpec | None = None
    _max_length: MaxLengthSpec | None = None
    _split: SplitSpec | None = None
    _checks: ChecksSpec | None = None
    _error_policy: ErrorPolicySpec = ErrorPolicySpec()
    _cache: CacheSpec | None = None
    _preset: PresetSpec | None = attrs.field(default=None, eq=False)
    _bound: Mapping[str, object] = attrs.field(
        factory=Bindings, eq=False, hash=False, converter=_bindings
    )

    # -- helpers ----------------------------------------------------------------------------

    def _with(
        self, live: Iterable[tuple[str, object]] = (), /, **sections: Any
    ) -> DataLoaderBuilder:
        """A new builder with ``sections`` set and the ``live`` ``(name, object)`` pairs bound.

        An object no section refers to any more (``Section.bindings``) is unbound: a replaced
        dataset or function is neither kept alive nor saved with the plan.
        """
        new = attrs.evolve(self, **sections)
        used = bound_names(new._value)
        added = dict(live)
        bound = {k: v for k, v in self._bound.items() if k in used and k not in added}
        bound.update(added)
        return attrs.evolve(new, bound=bound)

    def _value(self, section: str) -> object:
        """The builder's value of plan section ``section``."""
        return getattr(self, f"_{section}")

    # -- the chain --------------------------------------------------------------------------

    def with_dataset(self, dataset: object, *, name: str | None = None) -> DataLoaderBuilder:
        """Return a new builder reading samples from ``dataset``, bound under ``name``.

        Accepts a map-style torch ``Dataset`` (anything with ``__getitem__`` and ``__len__``),
        an HF ``datasets.Dataset``, a ``list`` of samples, a ``tuple`` of equal-length
        tensors/arrays (columns, like ``TensorDataset``), a ``dict`` of equal-length columns,
        or a torch / HF iterable dataset. ``name`` (default ``"dataset"``) is how plan files
        refer to it: pass ``bindings={name: dataset}`` when loading the plan. Replaces any
        earlier dataset.
        """
        spec = dataset_spec(dataset, name)
        return self._with([(spec.binding, dataset)], dataset=spec, mixture=None)

    def with_mixture(
        self,
        sources: Mapping[str, object],
        *,
        weights: MixtureWeights | None = None,
        mode: MixtureMode = "weighted",
        stratified: bool = False,
        by: ScheduleUnit = "epoch",
        num_samples: int | None = None,
        source_key: str | None = None,
    ) -> DataLoaderBuilder:
        """Return a new builder reading from several datasets, ``sources = {name: dataset}``.

        Each source is bound under its name (plan files refer to it as such). ``mode``:

        - ``"weighted"`` (default): each position of an epoch draws its source by weight;
          ``num_samples`` positions per epoch (default: all sources' sizes summed). A source's
          samples come in a shuffled order that starts again, reshuffled, when used up.
          ``stratified=True`` gives every batch the weights' proportions exactly (each count
          the floor or ceiling of ``batch_size x weight``).
        - ``"sequential"``: each source in turn, batches never mixing sources.
        - ``"round_robin"``: one sample from each source in turn, every sample once per epoch.
        - ``"max_size_cycle"``: round robin until the largest source is used up (smaller ones
          start again).
        - ``"min_size"``: round robin until the smallest source is used up.

        ``weights``: ``{name: weight}`` or one number per source (default: proportional to the
        sources' sizes); a schedule ``[(until, {name: weight}), ...]`` (the weights of the
        first entry with ``t < until``, the last entry's after it); or a function of the epoch
        or step (``by``) returning the weights, so mixtures can follow a curriculum.
        ``source_key="source"`` adds the source id of every sample (its position in
        ``sources``) to dict batches as an int64 tensor. Replaces any earlier dataset or
        mixture.
        """
        spec, combined, live = mixture_spec(
            sources,
            weights=weights,
            mode=mode,
            stratified=stratified,
            by=by,
            num_samples=num_samples,
            source_key=source_key,
        )
        return self._with(live, dataset=combined, mixture=spec)

    def with_batch_size(
        self,
        batch_size: int | Sequence[tuple[float, int]] | Callable[[int], int] | None,
        *,
        drop_last: bool = False,
        by: ScheduleUnit = "epoch",
    ) -> DataLoaderBuilder:
        """Return a new builder with ``batch_size`` samples per batch on each rank.

        ``None`` sets no fixed batch size: the default again (one sample per batch, or under a
        token budget, ``with_bucketing(..., max_tokens=...)``, as many as the budget holds);
        ``drop_last`` applies as given (``with_batch_size(None, drop_last=True)`` keeps it).
        ``drop_last=True`` drops the final partial batch of an epoch (torch semantics);
        otherwise it is delivered smaller. A progressive batch size is a schedule of the epoch
        (``by="epoch"``) or of the step (``by="step"``: batches delivered since the start of
        training): a list ``[(until, size), ...]`` (the size of the first entry with ``t <
        until``, the last entry's size after it) or a function of ``t`` returning the size.
        Replaces any earlier batch size.
        """
        spec, live = batch_schedule_spec(batch_size, drop_last, by)
        return self._with(_live(spec, live), batch=spec)

    def with_shuffle(
        self, enabled: bool = True, *, buffer_size: int | None = None
    ) -> DataLoaderBuilder:
        """Return a new builder that shuffles every epoch (or, with ``False``, reads in order).

        The order of epoch ``e`` is a keyed permutation of (seed, e): the same seed and epoch
        always give the same order, and each epoch differs. Replaces any earlier setting.
        An iterable (streamed) dataset has no random access: it is shuffled through a buffer
        of ``buffer_size`` samples (required for it; see docs/streaming.md).
        """
        order = order_spec(enabled, self._order.seed, buffer_size)
        return attrs.evolve(self, order=order)

    def with_seed(self, seed: int) -> DataLoaderBuilder:
        """Return a new builder whose random streams all derive from ``seed`` (in [0, 2**63)).

        Without it the seed is ``loaderkit.DEFAULT_SEED`` (0), so unseeded plans are
        reproducible too. Replaces any earlier seed.
        """
        order = order_spec(self._order.shuffle, seed, self._order.buffer_size)
        return attrs.evolve(self, order=order)

    def with_collator(
        self, collator: str | Callable[..., Any], **options: Any
    ) -> DataLoaderBuilder:
        """Return a new builder that makes batches with ``collator``.

        ``collator`` is a registry name (``"default"``, ``"text"``, ...; see
        ``loaderkit.collators``) with its keyword ``options`` as plain data, ``"auto"`` (chosen
        at ``compile()`` from the dataset's columns: ``input_ids`` -> text, an ``Image``
        feature or ``pixel_values`` -> vision, an ``Audio`` feature -> audio), a
        ``"module:qualname"`` string, or a callable taking the list of samples. Replaces any
        earlier collator.
        """
        spec, live = collator_spec(collator, options)
        return self._with(_live(spec, live), collator=spec)

    def with_task(self, modality: Modality, **options: Any) -> DataLoaderBuilder:
        """Return a new builder collating for ``modality``, with the collator's ``options``.

        ``modality`` is ``"text"``, ``"vision"``, ``"audio"``, ``"multimodal"`` or
        ``"tabular"``: the built-in collator of that name (``"default"`` for tabular data), or
        else the first collator registered with that modality. ``explain()`` says what was
        chosen. Same as naming that collator in ``with_collator``, which it replaces.
        """
        name = collator_for_modality(modality)
        spec, _ = collator_spec(name, options)
        spec = attrs.evolve(spec, reason=f"with_task(modality={modality!r})")
        return self._with(collator=spec)

    def with_transform(self, fn: str | Callable[..., Any]) -> DataLoaderBuilder:
        """Return a new builder applying ``fn`` to each sample where samples are fetched.

        ``fn`` is a callable, a ``"module:qualname"`` string or a registered transform name.
        If it accepts an ``rng`` keyword it receives a ``numpy.random.Generator`` derived from
        (seed, epoch, sample index), identical for any number of workers. Replaces any earlier
        transform.
        """
        spec, live = transform_spec(fn)
        return self._with(_live(spec, live), transform=spec)

    def with_bucketing(
        self,
        length: PerSample,
        *,
        num_buckets: int | None = None,
        max_tokens: int | None = None,
        max_batch_size: int | None = None,
        cost: BucketCost = "linear",
    ) -> DataLoaderBuilder:
        """Return a new builder whose batches hold samples of similar length.

        ``length`` says how long a sample is: a column or sample key holding a sequence or the
        length as an int (HF columns are measured in Arrow, without reading the data), a
        function of a sample
        (called once per sample at build, then cached), or a sequence of precomputed lengths.
        Each epoch, samples are shuffled within ``num_buckets`` buckets of similar length
        (default: about four batches per bucket), cut into batches, and the batch order is
        shuffled. With ``max_tokens``, batch sizes vary so that the *padded* batch the
        collator makes stays within it: ``rows x padded width <= max_tokens`` (``cost=
        "quadratic"``: ``rows x width**2``), the width as the collator pads (its
        ``padded_length()``: ``max_length``, ``pad_to_multiple_of``, packed rows), at most
        ``max_batch_size`` samples. ``explain()`` says which limit binds and estimates the
        padding. Replaces any earlier bucketing.
        """
        spec, live = bucketing_spec(
            length,
            num_buckets=num_buckets,
            max_tokens=max_tokens,
            max_batch_size=max_batch_size,
            cost=cost,
        )
        return self._with(_live(spec, live), bucketing=spec)

    def with_sampling_weights(
        self,
        weights: PerSample,
        *,
        replacement: bool = True,
        num_samples: int | None = None,
    ) -> DataLoaderBuilder:
        """Return a new builder drawing each epoch's samples by weight.

        ``weights`` gives one number >= 0 per sample: a column or sample key, a function of a
        sample (called once per sample at build, then cached), or a sequence of precomputed
        weights. With ``replacement`` (the default) an epoch is ``num_samples`` (default: the
        dataset's size) independent draws with probability proportional to the weight; without,
        a weighted random order of ``num_samples`` distinct samples (default: every sample of
        positive weight). The draws are a pure function of (seed, epoch): identical for any
        number of workers and after a resume. Replaces any earlier weights.
        """
        spec, live = weights_spec(weights, replacement=replacement, num_samples=num_samples)
        return self._with(_live(spec, live), sampling_weights=spec)

    def with_curriculum(
        self,
        difficulty: PerSample,
        schedule: CurriculumSchedule | Callable[[int], float] | str = "linear",
        *,
        by: ScheduleUnit = "epoch",
        horizon: float | None = None,
        start: float = 0.1,
        degree: float = 2.0,
        steps: Sequence[tuple[float, float]] = (),
    ) -> DataLoaderBuilder:
        """Return a new builder that serves the easiest samples first and widens over time.

        ``difficulty`` gives one number per sample (a column, a function of a sample, or
        precomputed values; lower is easier). At competence ``c`` only the easiest
        ``ceil(c * n)`` samples (by difficulty, ties by index) are eligible. ``schedule`` maps
        the epoch (``by="epoch"``: each epoch visits the eligible set once, shuffled) or the
        global step (``by="step"``: every batch draws distinct eligible samples) to ``c``:
        ``"linear"`` grows from ``start`` to 1 over ``horizon``; ``"root"`` follows
        Platanios et al. (2019) with ``degree``; ``"discrete"`` takes ``steps=[(until, c),
        ...]``; or a function of the epoch/step returning ``c`` in (0, 1]. Replaces any
        earlier curriculum.
        """
        spec, bound = curriculum_spec(
            difficulty,
            schedule,
            by=by,
            horizon=horizon,
            start=start,
            degree=degree,
            steps=steps,
        )
        return self._with(bound, curriculum=spec)

    def with_max_length(
        self,
        max_length: int | Sequence[tuple[float, int]] | Callable[[int], int],
        *,
        by: ScheduleUnit = "epoch",
    ) -> DataLoaderBuilder:
        """Return a new builder whose collator cuts sequences to ``max_length`` tokens.

        ``max_length`` is an int, or a sequence-length curriculum over the epoch
        (``by="epoch"``) or the step (``by="step"``): a list ``[(until, length), ...]`` (the
        length of the first entry with ``t < until``, the last entry's after it) or a function
        of ``t``. Each batch is collated by a copy of the collator with that ``max_length``
        (the collator's own ``max_length``, if smaller, still applies), so the collator must
        have one: ``text``, ``causal_lm``, ``masked_lm``, ``seq2seq`` (inputs) and ``packed``
        (row length) do. Replaces any earlier setting.
        """
        spec, live = max_length_spec(max_length, by)
        return self._with(_live(spec, live), max_length=spec)

    def with_split(
        self,
        val: float = 0.1,
        test: float = 0.0,
        *,
        seed: int | None = None,
        stratify_by: str | None = None,
    ) -> DataLoaderBuilder:
        """Return a new builder whose dataset is split into train, val and test parts.

        ``val`` and ``test`` are fractions in (0, 1) (rounded up: ``ceil(fraction x n)``, as
        HF ``train_test_split`` rounds ``test_size``), numbers of samples (ints >= 1), or 0
        for no such part; train is the rest. The split is a pure function of (seed, dataset
        length, sizes, labels): a keyed permutation of the indices (``seed``, default the
        plan's seed), test taken first, then val. ``stratify_by`` names a column or sample key
        of class labels: each part then keeps the class proportions (largest remainder per
        class). ``plan.build()`` loads the train part, ``plan.build(split="val")`` /
        ``"test"`` the others; see ``docs/splits.md``. Replaces any earlier split.
        """
        return attrs.evolve(self, split=split_spec(val, test, seed, stratify_by))

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
    ) -> DataLoaderBuilder:
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
        return attrs.evolve(self, checks=spec)

    def with_error_policy(
        self,
        policy: ErrorPolicy = "raise",
        *,
        max_errors: int | None = None,
        max_error_rate: float | None = None,
        per: BudgetScope = "epoch",
    ) -> DataLoaderBuilder:
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
        return attrs.evolve(self, error_policy=spec)

    def with_cache(
        self,
        storage: CacheStorage = "memory",
        *,
        stage: CacheStage = "fetched",
        path: str | os.PathLike[str] | None = None,
        max_bytes: int | None = None,
    ) -> DataLoaderBuilder:
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
        """
        spec = cache_spec(storage, stage=stage, path=path, max_bytes=max_bytes)
        return attrs.evolve(self, cache=spec)

    def with_workers(
        self,
        num_workers: int | Literal["auto"],
        *,
        prefetch_factor: int | None = None,
        persistent: bool | None = None,
        pin_memory: bool | None = None,
        start_method: StartMethod | None = None,
        timeout: float | None = None,
    ) -> DataLoaderBuilder:
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
        return attrs.evolve(
            self,
            workers=workers_spec(
                num_workers,
                prefetch_factor=prefetch_factor,
                persistent=persistent,
                pin_memory=pin_memory,
                start_method=start_method,
                timeout=timeout,
            ),
        )

    def with_device(self, device: Device) -> DataLoaderBuilder:
        """Return a new builder delivering batches to ``device``.

        ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, ``"mps"`` or ``"auto"`` (CUDA when
        available, else CPU). A plan naming ``"cuda"`` compiles anywhere; building it where
        CUDA is absent fails clearly. Replaces any earlier device.
        """
        return attrs.evolve(self, device=device_spec(device))

    def with_distributed(
        self,
        *,
        world_size: int | None = None,
        rank: int | None = None,
        even_batches: bool = True,
        enabled: bool = True,
    ) -> DataLoaderBuilder:
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
        return attrs.evolve(
            self,
            distributed=distributed_spec(
                world_size=world_size, rank=rank, even_batches=even_batches, enabled=enabled
            ),
        )

    def without(self, *settings: Setting) -> DataLoaderBuilder:
        """Return a new builder with the named settings put back to their defaults.

        ``settings`` are plan sections (``loaderkit.SETTINGS``): ``"batch"``, ``"order"``
        (shuffle and seed), ``"collator"``, ``"transform"``, ``"workers"``, ``"device"``,
        ``"distributed"``, ``"bucketing"``, ``"sampling_weights"``, ``"curriculum"``,
        ``"max_length"``, ``"split"``, ``"checks"``, ``"error_policy"``, ``"cache"``: the
        same as never having called the ``with_*`` method that set it, so the setting
        disappears from ``repr(builder)``, and objects only it used are unbound. It is how a
        chain (or a preset's builder) drops a call: ``presets.image_classification(ds)
        .without("checks")``. The dataset is not a setting: replace it with ``with_dataset``.
        """
        defaults = attrs.fields_dict(DataLoaderBuilder)
        return self._with(
            **{name: defaults[f"_{name}"].default for name in settings_named(settings)}
        )

    def compile(self) -> LoaderPlan:
        """Return the frozen, validated :class:`~loaderkit.LoaderPlan`.

        Every cross-field rule runs and *all* problems are raised together in one
        :class:`~loaderkit.PlanError`. ``with_collator("auto")`` is resolved here. Nothing is
        spawned and no data is loaded.
        """
        problems: list[Problem] = []
        dataset, bound = self._dataset, dict(self._bound)
        if dataset is None:
            problems.append(
                Problem("dataset", "no dataset; call .with_dataset(ds) before .compile()")
            )
            # check everything else against a stand-in, and keep only those problems
            dataset = DatasetSpec("dataset", "samples", "builtins.list", None)
            bound["dataset"] = []
        collator = self._collator
        try:
            collator = resolve_auto(collator, self._dataset)
        except PlanError as exc:
            if self._dataset is not None:
                problems.extend(exc.problems)
            collator = DEFAULT_COLLATOR
        try:
            sections = {name: getattr(self, f"_{name}") for name in PLAN_SECTIONS}
            sections.update(dataset=dataset, collator=collator)
            plan = LoaderPlan(**sections, bindings=bound)
        except PlanError as exc:
            problems.extend(
                p for p in exc.problems if self._dataset is not None or p.path != "dataset"
            )
        if problems:
            raise PlanError([self._noted(p) for p in problems])
        return plan

    def _preset_notes(self) -> dict[str, str]:
        """For each section a preset set (and nothing changed since): who set it, and how.

        Empty for a builder no preset made, or one from a plan file (its record keeps no
        calls). See :meth:`PresetSpec.note`.
        """
        return preset_notes(self._preset, self._section_calls())

    def _noted(self, problem: Problem) -> Problem:
        """``problem`` saying which preset set the sections it involves (its own, related)."""
        return with_notes(problem, self._preset_notes())

    def build(self, split: SplitName = "train") -> Loader:
        """Compile and build in one call: ``compile().build(split)`` (for notebooks).

        The plan is compiled (all problems raised together, as :meth:`compile` does) and its
        loader returned; keep ``compile()`` when the plan is saved, shared or reused.
        """
        return self.compile().build(split)

    @classmethod
    def _from_plan(cls, plan: LoaderPlan) -> DataLoaderBuilder:
        return cls(
            **{name: getattr(plan, name) for name in PLAN_SECTIONS},
            bound=plan.bindings or {},
        )

    # -- display ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        return "".join(self._chain())

    def _chain(self) -> list[str]:
        """The repr call by call: ``DataLoaderBuilder()`` (or the preset call), then ``with_*``.

        The notebook view shows one call per line.
        """
        calls = self._section_calls()
        if self._preset is not None:  # made by loaderkit.presets: the preset call, then changes
            shown = preset_chain(self._preset, calls)
            if shown is not None:
                return shown
        return ["DataLoaderBuilder()", *(call for _, call in calls)]

    def _repr_calls(self) -> list[str]:
        """The ``with_*`` calls that rebuild this builder from ``DataLoaderBuilder()``."""
        return [call for _, call in self._section_calls()]

    def _section_calls(self) -> list[tuple[str, str]]:
        """:meth:`_repr_calls` with the plan section each call sets (``dataset`` for a mixture).

        A section at its default has no call; ``order`` may have two (shuffle, seed).
        """
        return section_calls(self._value, self._bound)

    def _repr_html_(self) -> str:
        return builder_html(self)
