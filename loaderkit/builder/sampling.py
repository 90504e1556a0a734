"""The builder's calls that choose which samples a batch holds, and how long they are.

:class:`SamplingCalls`: ``with_bucketing``, ``with_sampling_weights``, ``with_curriculum``,
``with_max_length`` and ``with_split``, methods of :class:`~loaderkit.DataLoaderBuilder`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Self

from loaderkit.builder.keywords import keywords_checked
from loaderkit.builder.state import BuilderState, PerSample, bind_one
from loaderkit.plan.sections.bucketing import BucketCost, bucketing_spec
from loaderkit.plan.sections.curriculum import CurriculumSchedule, curriculum_spec
from loaderkit.plan.sections.max_length import max_length_spec
from loaderkit.plan.sections.sampling_weights import weights_spec
from loaderkit.plan.sections.split import split_spec
from loaderkit.plan.specs import ScheduleUnit

__all__ = ["SamplingCalls"]


class SamplingCalls(BuilderState):
    """The sampling ``with_*`` methods of :class:`~loaderkit.DataLoaderBuilder`."""

    __slots__ = ()

    @keywords_checked
    def with_bucketing(
        self,
        length: PerSample,
        *,
        num_buckets: int | None = None,
        max_tokens: int | None = None,
        max_batch_size: int | None = None,
        cost: BucketCost = "linear",
    ) -> Self:
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
        return self._with(bind_one(spec, live), bucketing=spec)

    @keywords_checked
    def with_sampling_weights(
        self,
        weights: PerSample,
        *,
        replacement: bool = True,
        num_samples: int | None = None,
    ) -> Self:
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
        return self._with(bind_one(spec, live), sampling_weights=spec)

    @keywords_checked
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
    ) -> Self:
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

    @keywords_checked
    def with_max_length(
        self,
        max_length: int | Sequence[tuple[float, int]] | Callable[[int], int],
        *,
        by: ScheduleUnit = "epoch",
    ) -> Self:
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
        return self._with(bind_one(spec, live), max_length=spec)

    @keywords_checked
    def with_split(
        self,
        val: float = 0.1,
        test: float = 0.0,
        *,
        seed: int | None = None,
        stratify_by: str | None = None,
    ) -> Self:
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
        return self._with(split=split_spec(val, test, seed, stratify_by))
