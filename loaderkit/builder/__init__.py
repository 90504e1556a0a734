"""``DataLoaderBuilder``: the immutable chain that compiles into a ``LoaderPlan``.

The class is written in three modules: this one (the source, the batch, the collator and the
transform, ``without``, ``compile`` and the display), :mod:`~loaderkit.builder.sampling` and
:mod:`~loaderkit.builder.execution` (mixins holding the other ``with_*`` methods), on the
state of :mod:`~loaderkit.builder.state`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit.builder.execution import ExecutionCalls
from loaderkit.builder.keywords import keywords_checked
from loaderkit.builder.sampling import SamplingCalls
from loaderkit.builder.state import SECTION_DEFAULTS, MixtureWeights, PerSample, bind_one
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.display import builder_html
from loaderkit.plan.plan import LoaderPlan, Setting, settings_named
from loaderkit.plan.rules import NO_DATASET
from loaderkit.plan.sections import section_calls
from loaderkit.plan.sections.batch import batch_schedule_spec, budget_batch
from loaderkit.plan.sections.collator import (
    DEFAULT_COLLATOR,
    Modality,
    collator_for_modality,
    collator_spec,
    resolve_auto,
)
from loaderkit.plan.sections.dataset import dataset_spec, storage_spec
from loaderkit.plan.sections.global_rngs import GlobalRngs, global_rngs_spec
from loaderkit.plan.sections.mixture import MixtureMode, mixture_spec
from loaderkit.plan.sections.order import OrderSpec, order_spec
from loaderkit.plan.sections.preset import preset_chain, preset_notes, with_notes
from loaderkit.plan.sections.transform import transform_spec
from loaderkit.plan.specs import CallableSpec, DatasetSpec, ScheduleUnit, Storage

if TYPE_CHECKING:
    from loaderkit.order.split import SplitName
    from loaderkit.runtime.loader import Loader


__all__ = ["DataLoaderBuilder", "MixtureWeights", "PerSample"]


@attrs.frozen(repr=False)
class DataLoaderBuilder(SamplingCalls, ExecutionCalls):
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

    # -- the chain --------------------------------------------------------------------------

    @keywords_checked
    def with_dataset(
        self, dataset: object, *, name: str | None = None, storage: Storage = "auto"
    ) -> DataLoaderBuilder:
        """Return a new builder reading samples from ``dataset``, bound under ``name``.

        Accepts a map-style torch ``Dataset`` (anything with ``__getitem__`` and ``__len__``),
        an HF ``datasets.Dataset``, a ``list`` of samples, a ``tuple`` of equal-length
        tensors/arrays (columns, like ``TensorDataset``), a ``dict`` of equal-length columns,
        or a torch / HF iterable dataset. ``name`` (default ``"dataset"``) is how plan files
        refer to it: pass ``bindings={name: dataset}`` when loading the plan. Replaces any
        earlier dataset.

        ``storage`` (a list or tuple of samples, or a dict of columns for its Python list
        columns) is how the samples reach the workers: ``"flat"`` serializes them at
        ``build()`` into one buffer plus offsets, so reading a sample in a worker copies no
        page of the list (``loaderkit.datasets.flat``);
        ``"objects"`` reads the list itself; ``"auto"`` (default) is ``"flat"`` when the
        loader has workers and the list holds at least 10,000 samples that all pickle, else
        ``"objects"``. Batches, states and fingerprints are the same either way;
        ``loader.explain()`` says which was used and what it cost.
        """
        spec = storage_spec(dataset_spec(dataset, name), storage)
        return self._with([(spec.binding, dataset)], dataset=spec, mixture=None)

    @keywords_checked
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

    @keywords_checked
    def with_batch_size(
        self,
        batch_size: int | Sequence[tuple[float, int]] | Callable[[int], int] | None,
        *,
        drop_last: bool = False,
        by: ScheduleUnit = "epoch",
    ) -> DataLoaderBuilder:
        """Return a new builder with ``batch_size`` samples per batch on each rank.

        Without this call a batch holds one sample, as torch's default ``batch_size=1``.
        ``None`` sets no batch size, with torch's meaning: automatic batching is off, each
        sample is delivered on its own, converted by ``torch.utils.data.default_convert``,
        without a batch dimension (no collator applies; ``drop_last`` is refused). Under a
        token budget, ``with_bucketing(..., max_tokens=...)``, ``None`` lets the budget size
        the batches (as many samples as it holds), ``drop_last`` applying as given.
        ``drop_last=True`` drops the final partial batch of an epoch (torch semantics);
        otherwise it is delivered smaller. A progressive batch size is a schedule of the epoch
        (``by="epoch"``) or of the step (``by="step"``: batches delivered since the start of
        training): a list ``[(until, size), ...]`` (the size of the first entry with ``t <
        until``, the last entry's size after it) or a function of ``t`` returning the size.
        Replaces any earlier batch size.
        """
        spec, live = batch_schedule_spec(batch_size, drop_last, by)
        return self._with(bind_one(spec, live), batch=spec)

    @keywords_checked
    def with_shuffle(
        self,
        enabled: bool = True,
        *,
        buffer_size: int | None = None,
        window_shards: int | None = None,
    ) -> DataLoaderBuilder:
        """Return a new builder that shuffles every epoch (or, with ``False``, reads in order).

        The order of epoch ``e`` is a keyed permutation of (seed, e): the same seed and epoch
        always give the same order, and each epoch differs. Replaces any earlier setting.
        An iterable (streamed) dataset has no random access: it is shuffled through a buffer
        of ``buffer_size`` samples (required for it; see docs/streaming.md). A sharded dataset
        is shuffled shard-aware: its shards shuffled, then samples within windows of
        ``window_shards`` consecutive shards (default 16; see docs/sampling.md, "Shard-aware
        shuffle"), so that an epoch reads a few shards at a time, never all of them at random.
        """
        seed = self._order().seed
        return self._with(order=order_spec(enabled, seed, buffer_size, window_shards))

    @keywords_checked
    def with_seed(self, seed: int) -> DataLoaderBuilder:
        """Return a new builder whose random streams all derive from ``seed`` (in [0, 2**63)).

        Without it the seed is ``loaderkit.DEFAULT_SEED`` (0), so unseeded plans are
        reproducible too. Replaces any earlier seed.
        """
        current = self._order()
        return self._with(
            order=order_spec(current.shuffle, seed, current.buffer_size, current.window_shards)
        )

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
        return self._with(bind_one(spec, live), collator=spec)

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

    @keywords_checked
    def with_transform(self, fn: str | Callable[..., Any]) -> DataLoaderBuilder:
        """Return a new builder applying ``fn`` to each sample where samples are fetched.

        ``fn`` is a callable, a ``"module:qualname"`` string or a registered transform name.
        If it accepts an ``rng`` keyword it receives a ``numpy.random.Generator`` derived from
        (seed, epoch, sample index), identical for any number of workers. Replaces any earlier
        transform.
        """
        spec, live = transform_spec(fn)
        return self._with(bind_one(spec, live), transform=spec)

    @keywords_checked
    def with_global_rngs(self, mode: GlobalRngs) -> DataLoaderBuilder:
        """Return a new builder seeding the global RNGs (torch, numpy, ``random``) by ``mode``.

        ``"per_sample"`` (the default): seeded from (seed, epoch, sample index) before your
        dataset's ``__getitem__`` and before the transform of each sample (from the batch's
        index before a collator of your own), and put back afterwards in the main process;
        torchvision's random transforms and datasets that draw from the global RNGs then
        give the same batches for any number of workers and after a resume. Only the RNGs
        your code is seen drawing from are seeded (each batch is checked; the batch that
        first draws from one is made again with it seeded), so code drawing nothing pays
        nothing. ``"per_worker"``: torch's habit, seeded once per worker and epoch; it
        saves the seeding of code that draws on every sample, but the batches depend on
        ``num_workers``. Replaces any earlier mode.
        """
        return self._with(global_rngs=global_rngs_spec(mode))

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
        return self._with(**{name: SECTION_DEFAULTS[name] for name in settings_named(settings)})

    def compile(self) -> LoaderPlan:
        """Return the frozen, validated :class:`~loaderkit.LoaderPlan`.

        Every cross-field rule runs and *all* problems are raised together in one
        :class:`~loaderkit.PlanError`. ``with_collator("auto")`` is resolved here. Nothing is
        spawned and no data is loaded.
        """
        problems: list[Problem] = []
        given = self._value("dataset")
        assert given is None or isinstance(given, DatasetSpec)
        dataset, bound = given, dict(self._bound)
        if dataset is None:
            problems.append(Problem("dataset", NO_DATASET))
            # check everything else against a stand-in, and keep only those problems
            dataset = DatasetSpec("dataset", "samples", "builtins.list", None)
            bound["dataset"] = []
        collator = self._value("collator")
        assert isinstance(collator, CallableSpec)
        try:
            collator = resolve_auto(collator, given)
        except PlanError as exc:
            if given is not None:
                problems.extend(exc.problems)
            collator = DEFAULT_COLLATOR
        try:
            sections: dict[str, Any] = {name: self._value(name) for name in SECTION_DEFAULTS}
            batch = budget_batch(sections["batch"], sections["bucketing"])
            sections.update(dataset=dataset, collator=collator, batch=batch)
            plan = LoaderPlan(**sections, preset=self._preset, bindings=bound)
        except PlanError as exc:
            problems.extend(p for p in exc.problems if given is not None or p.path != "dataset")
        if problems:
            raise PlanError([self._noted(p) for p in problems])
        return plan

    def _order(self) -> OrderSpec:
        """The order section (shuffle and seed), which ``with_shuffle`` and ``with_seed`` share."""
        order = self._value("order")
        assert isinstance(order, OrderSpec)
        return order

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
        values = {name: getattr(plan, name) for name in SECTION_DEFAULTS}
        return cls(sections=values, preset=plan.preset, bound=plan.bindings or {})

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
