"""The ``global_rngs`` key: how the global RNGs (torch, numpy, ``random``) are seeded.

Code that draws from the global RNGs (torchvision's random transforms, a dataset whose
``__getitem__`` calls ``torch.rand`` or ``random.random``, a collator that masks with
``torch.bernoulli``) gives reproducible batches only if those RNGs are in a known state when
it runs. Two modes:

- ``"per_sample"`` (the default): before a sample is read from a dataset of your own
  (``__getitem__``), before the transform of each sample, and before a collator of your own
  makes a batch, the global RNGs your code draws from are seeded from (seed, epoch, sample
  index) (the batch's index for the collator); in the main process (no workers) they are put
  back afterwards, so your own draws go on as if loaderkit had not touched them. The batches
  are then the same for any number of workers, after a resume at any point, and (per
  sample) across world sizes. Which RNGs your code draws from is seen, not guessed: every
  batch is made between two looks at the three generators (a few us), and the batch after
  which one not yet seeded moved is made again with it seeded, from then on (in each
  process), so the batches are those seeding all three before everything would give, and
  code that draws from none pays nothing for the seeding (10-15 us a sample for all
  three). With a cache (``with_cache``) all three are seeded always: a sample is stored as
  soon as it is made.
  Sources that cannot draw (tensors, arrays, HF datasets, columns) and loaderkit's own
  collators are not watched: they cost nothing.
- ``"per_worker"``: torch's habit. Each worker seeds them once per epoch from (seed, epoch,
  rank, worker); in the main process they are left alone. It saves the seeding of code that
  draws on every sample, but what is drawn depends on which worker reads a sample: the
  batches change with ``num_workers`` and after a resume.

A streamed dataset is always seeded per element (its exact resume replays elements by
position): ``"per_worker"`` is refused for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

from loaderkit._validate import check_choice
from loaderkit.errors import Problem
from loaderkit.plan.sections.base import ExplainRows, RuleContext, Section

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "DEFAULT_GLOBAL_RNGS",
    "GLOBAL_RNGS",
    "SECTION",
    "GlobalRngs",
    "global_rngs_calls",
    "global_rngs_line",
    "global_rngs_spec",
    "read_global_rngs",
    "seeded_parts",
]

GlobalRngs = Literal["per_sample", "per_worker"]
"""How ``with_global_rngs`` seeds the global RNGs (see the module docstring)."""
GLOBAL_RNGS: tuple[GlobalRngs, ...] = get_args(GlobalRngs)
DEFAULT_GLOBAL_RNGS: GlobalRngs = "per_sample"
"""Reproducible whatever the worker count: loaderkit's promise, kept for code it cannot see
into. ``"per_worker"`` is the opt-out for speed."""


def global_rngs_spec(mode: object) -> GlobalRngs:
    """``"per_sample"`` or ``"per_worker"``, checked."""
    return cast("GlobalRngs", check_choice("global_rngs", mode, GLOBAL_RNGS))


def _written(mode: GlobalRngs | None) -> bool:
    """Written (and hashed) unless the default: plans made before keep their fingerprints."""
    return mode is not None and mode != DEFAULT_GLOBAL_RNGS


def read_global_rngs(reader: Reader, data: Mapping[str, Any]) -> GlobalRngs | None:
    """Read the ``global_rngs`` value (absent: the default)."""
    if "global_rngs" not in data:
        return None
    mode: GlobalRngs | None = reader.attempt(lambda: global_rngs_spec(data["global_rngs"]))
    return mode


def global_rngs_calls(mode: GlobalRngs, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_global_rngs`` call (none at the default)."""
    return () if mode == DEFAULT_GLOBAL_RNGS else (f".with_global_rngs({mode!r})",)


SeededPart = Literal["__getitem__", "transform", "collator"]
"""Code of the user's that ``"per_sample"`` seeds the global RNGs around."""


_PURE_DATASETS = frozenset({"torch.utils.data.dataset.TensorDataset"})
"""torch's map-style dataset classes whose ``__getitem__`` draws nothing (exactly these
types: a subclass may override ``__getitem__``)."""


def _draws_nothing(type_name: str) -> bool:
    """Whether a map-style dataset of this class runs none of the user's code."""
    return type_name.startswith("loaderkit.") or type_name in _PURE_DATASETS


def seeded_parts(plan: LoaderPlan) -> tuple[SeededPart, ...]:
    """What of ``plan`` runs the user's code, which ``"per_sample"`` seeds the RNGs around.

    A map-style dataset of the user's own class (``__getitem__``; a mixture with one), the
    transform, and a collator that is not one of loaderkit's (a function or a reference):
    tensors, arrays, columns, lists, HF datasets, torch's ``TensorDataset`` and loaderkit's
    own datasets (``tokens``, the demo corpus, images) draw nothing, nor do the registered
    collators (their randomness comes from the batch's own ``rng``).
    """
    parts: list[SeededPart] = []
    specs = plan.mixture.sources if plan.mixture is not None else (plan.dataset,)
    if any(s.kind == "torch_map" and not _draws_nothing(s.type_name) for s in specs):
        parts.append("__getitem__")
    if plan.transform is not None:
        parts.append("transform")
    if plan.collator.source != "registry":
        parts.append("collator")
    return tuple(parts)


def global_rngs_line(plan: LoaderPlan) -> str:
    """The ``global rngs`` line of ``explain()``: what is seeded, and what it costs."""
    if plan.global_rngs == "per_worker":
        return (
            "seeded once per worker and epoch (torch's habit): what your code draws from "
            "them changes with num_workers and after a resume"
        )
    listed = ", ".join(seeded_parts(plan))
    if plan.cache is not None:
        return (
            f"torch, numpy and random seeded per sample from (seed, epoch, index) around "
            f"your {listed} (10-15 us a sample: with a cache all three are seeded always, "
            f"since a sample is stored as it is made): the same batches for any num_workers"
        )
    return (
        f"seeded per sample from (seed, epoch, index) around your {listed}, each of torch, "
        f"numpy and random once your code is seen drawing from it (each batch is checked, "
        f"a few us; the batch that first draws from one is made again with it seeded): the "
        f"same batches for any num_workers, and nothing to pay for the RNGs it leaves alone"
    )


def _explain(plan: LoaderPlan) -> ExplainRows:
    """The row, where there is something to say.

    None for a stream (always seeded per element, see ``docs/streaming.md``), nor where none
    of the user's code runs.
    """
    if plan.dataset.iterable or (plan.global_rngs == "per_sample" and not seeded_parts(plan)):
        return ()
    return (("global rngs", global_rngs_line(plan)),)


def _rules(ctx: RuleContext) -> list[Problem]:
    sections = ctx.sections
    if sections["global_rngs"] == "per_worker" and sections["dataset"].iterable:
        return [
            Problem(
                "global_rngs",
                "'per_worker' applies to map-style datasets; a stream is always seeded per "
                "element (its exact resume replays elements by position); drop "
                "with_global_rngs('per_worker')",
            )
        ]
    return []


SECTION: Section[GlobalRngs] = Section(
    name="global_rngs",
    explain=_explain,
    builder_calls=global_rngs_calls,
    read=read_global_rngs,
    to_dict=lambda mode: mode,
    written=_written,
    rules={"global_rngs": _rules},
    fingerprint="stream",
    why=(
        '(only `"per_worker"`) what code drawing from the global RNGs gets; the default '
        '`"per_sample"` is not written, so plans made before keep their fingerprints'
    ),
)
"""The ``global_rngs`` key of a plan file: ``"per_worker"``, or absent for the default."""
