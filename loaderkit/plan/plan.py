"""``LoaderPlan``: the frozen, validated, serializable description of a loader."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._frozen import Bindings
from loaderkit._validate import did_you_mean
from loaderkit.errors import PlanError, PlanTypeError
from loaderkit.plan.sections import SECTIONS
from loaderkit.plan.sections.batch import BatchSpec
from loaderkit.plan.sections.bucketing import BucketingSpec
from loaderkit.plan.sections.cache import CacheSpec
from loaderkit.plan.sections.checks import ChecksSpec
from loaderkit.plan.sections.collator import DEFAULT_COLLATOR
from loaderkit.plan.sections.curriculum import CurriculumSpec
from loaderkit.plan.sections.distributed import DistributedSpec
from loaderkit.plan.sections.error_policy import ErrorPolicySpec
from loaderkit.plan.sections.global_rngs import DEFAULT_GLOBAL_RNGS, GlobalRngs
from loaderkit.plan.sections.max_length import MaxLengthSpec
from loaderkit.plan.sections.mixture import MixtureSpec
from loaderkit.plan.sections.order import OrderSpec
from loaderkit.plan.sections.preset import PresetSpec
from loaderkit.plan.sections.sampling_weights import WeightsSpec
from loaderkit.plan.sections.split import SplitSpec
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec

if TYPE_CHECKING:
    from loaderkit.builder import DataLoaderBuilder
    from loaderkit.order.split import SplitName
    from loaderkit.runtime.autotune import AutotuneResult
    from loaderkit.runtime.loader import CheckReport, Loader

__all__ = [
    "PLAN_SECTIONS",
    "SCHEMA_VERSION",
    "SETTINGS",
    "LoaderPlan",
    "Setting",
    "settings_named",
]

SCHEMA_VERSION = 1
"""The version of the plan file format this loaderkit writes and reads."""


def _freeze_bindings(value: Mapping[str, object] | None) -> Mapping[str, object] | None:
    return None if value is None else Bindings(value)


@attrs.frozen(repr=False, cache_hash=True)
class LoaderPlan:
    """A frozen, validated description of a loader: pure data plus named bindings.

    Made by ``DataLoaderBuilder.compile()`` or ``LoaderPlan.load()``; never half-valid: creating
    one runs every rule and raises :class:`~loaderkit.PlanError` listing all problems. Plans
    compare and hash by their data; live objects (datasets, callables) are kept in
    ``bindings`` under the names the data refers to and take part through their identity
    (binding name, type, length, HF fingerprint).

    A plan loaded with ``require_bindings=False`` and missing objects is *unbound*: it explains,
    diffs, fingerprints and saves, but does not build.
    """

    dataset: DatasetSpec
    batch: BatchSpec = BatchSpec()
    order: OrderSpec = OrderSpec()
    collator: CallableSpec = DEFAULT_COLLATOR
    transform: CallableSpec | None = None
    global_rngs: GlobalRngs = DEFAULT_GLOBAL_RNGS
    workers: WorkersSpec = WorkersSpec()
    device: str = "cpu"
    distributed: DistributedSpec = DistributedSpec()
    bucketing: BucketingSpec | None = None
    sampling_weights: WeightsSpec | None = None
    curriculum: CurriculumSpec | None = None
    mixture: MixtureSpec | None = None
    max_length: MaxLengthSpec | None = None
    split: SplitSpec | None = None
    checks: ChecksSpec | None = None
    error_policy: ErrorPolicySpec = ErrorPolicySpec()
    cache: CacheSpec | None = None
    preset: PresetSpec | None = attrs.field(default=None, eq=False, hash=False)
    """The preset the plan was made from (``loaderkit.presets``): information only, neither
    compared nor fingerprinted."""
    bindings: Mapping[str, object] | None = attrs.field(
        factory=Bindings, eq=False, hash=False, converter=_freeze_bindings
    )

    def __attrs_post_init__(self) -> None:
        from loaderkit.plan.rules import plan_problems

        sections = {name: getattr(self, name) for name in PLAN_SECTIONS}
        problems = plan_problems(sections, self.bindings)
        if problems:
            raise PlanError(problems)

    # -- identity ---------------------------------------------------------------------------

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 (hex) over the fields that can change a batch; see ``docs/plan-format.md``."""
        from loaderkit.plan.fingerprint import compute_fingerprint

        return compute_fingerprint(self)

    @property
    def bound(self) -> bool:
        """True when every live object the plan names is bound (the plan can build)."""
        return self.bindings is not None

    # -- serialization ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain data (JSON/TOML-ready): what ``from_dict`` reads back."""
        from loaderkit.plan.serde import plan_to_dict

        return plan_to_dict(self)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        bindings: Mapping[str, object] | None = None,
        allow_imports: bool = False,
        require_bindings: bool = True,
        base_dir: str | os.PathLike[str] | None = None,
        allow_external_paths: bool = False,
    ) -> LoaderPlan:
        """Rebuild a plan from :meth:`to_dict` data, re-checking every field and rule.

        ``bindings`` maps binding names (``with_dataset(ds, name="train")`` → ``"train"``) to
        the live objects. ``module:qualname`` references resolve only for trusted modules
        (``loaderkit.trust_modules``) unless ``allow_imports=True``; a dataset source must be
        a registered factory. With ``require_bindings=False`` the plan is only *inspected*:
        no factory is called, no untrusted module imported, missing objects give an unbound
        plan instead of an error. ``base_dir`` is the folder relative paths resolve against
        (default: the working directory); given, paths leaving it are refused unless
        ``allow_external_paths=True``. See ``docs/security.md``.
        """
        from loaderkit.plan.serde import ReadOptions, plan_from_dict

        options = ReadOptions(
            bindings, allow_imports, require_bindings, base_dir, allow_external_paths
        )
        return plan_from_dict(data, options)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the plan to a ``.json`` or ``.toml`` file."""
        from loaderkit.plan.serde import save_plan

        save_plan(self, path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        bindings: Mapping[str, object] | None = None,
        allow_imports: bool = False,
        require_bindings: bool = True,
        allow_external_paths: bool = False,
        max_file_bytes: int | None = None,
    ) -> LoaderPlan:
        """Read a ``.json`` or ``.toml`` plan file; see :meth:`from_dict` for the options.

        A plan file is untrusted input (``docs/security.md``): relative paths resolve
        against the file's folder and paths leaving it are refused unless
        ``allow_external_paths=True``; ``require_bindings=False`` inspects the file without
        calling, importing, reading or writing anything else. A file larger than
        ``max_file_bytes`` is refused before it is parsed (default: the environment variable
        ``LOADERKIT_MAX_PLAN_BYTES``, else 1 MiB).
        """
        from loaderkit.plan.serde import ReadOptions, load_plan

        options = ReadOptions(bindings, allow_imports, require_bindings, None, allow_external_paths)
        return load_plan(path, options, max_file_bytes)

    # -- display ----------------------------------------------------------------------------

    def explain(self) -> str:
        """A short report of what this plan loads and how.

        Source and size, order, batches per epoch per rank, samples dropped or repeated,
        collator, transform, workers, device, distribution and fingerprint.
        """
        from loaderkit.plan.display import explain_plan

        return explain_plan(self)

    def diff(self, other: LoaderPlan) -> list[str]:
        """Flattened ``path: old -> new`` lines for every field that differs from ``other``."""
        from loaderkit.plan.diff import diff_dicts

        return diff_dicts(self.to_dict(), other.to_dict())

    def __repr__(self) -> str:
        return f"LoaderPlan(<{self.dataset.binding!r}>, fingerprint={self.fingerprint[:12]})"

    def _repr_html_(self) -> str:
        from loaderkit.plan.display import plan_html

        return plan_html(self)

    # -- conversion -------------------------------------------------------------------------

    def to_builder(self) -> DataLoaderBuilder:
        """A builder holding this plan's settings and bindings, to chain edits on."""
        from loaderkit.builder import DataLoaderBuilder

        return DataLoaderBuilder._from_plan(self)

    def check(self) -> CheckReport:
        """Build the loader, check its first batch against ``with_checks``, stop its workers.

        Returns a report of what was checked and passed, with the batch's keys, dtypes and
        shapes (only those when the plan has no checks); a violation raises
        :class:`~loaderkit.DataError`. Nothing else is loaded. Imports torch.
        """
        with self.build() as loader:
            return loader.check()

    def build(self, split: SplitName = "train") -> Loader:
        """Make the loader this plan describes (imports torch).

        With a split (``with_split``), ``split`` is the part to read: ``"train"`` (the
        default), ``"val"`` or ``"test"``; the loader's state records it.
        """
        from loaderkit.runtime.build import build_loader

        return build_loader(self, split=split)

    def autotune(
        self,
        budget_s: float = 30.0,
        *,
        num_workers: Sequence[int] | None = None,
        prefetch_factors: Sequence[int] = (2, 4),
        warmup_batches: int = 2,
        batches: int = 20,
        tolerance: float = 0.05,
    ) -> AutotuneResult:
        """Measure worker settings on this machine; return ``(tuned plan, report)``.

        Tries the plan's own settings, then ``num_workers`` values (default: 0, 1, 2, 4, 8,
        16 up to this process's CPUs, and what ``"auto"`` picks) and, at the best count, the
        ``prefetch_factors``; each setting reads ``warmup_batches`` batches, then times
        ``batches`` batches and keeps the median samples/s of 5 rounds. Stops when
        ``budget_s`` seconds are spent. Only execution fields change: the tuned plan has this
        plan's fingerprint and gives the same batches. Settings within ``tolerance`` of the
        fastest are ties, won by fewer workers. Returns an ``AutotuneResult(plan, report)``;
        ``print(report)`` shows every setting tried and why the search stopped. Imports
        torch and builds loaders (see ``docs/autotune.md``).
        """
        from loaderkit.runtime.autotune import autotune

        return autotune(
            self,
            budget_s,
            num_workers=num_workers,
            prefetch_factors=prefetch_factors,
            warmup_batches=warmup_batches,
            batches=batches,
            tolerance=tolerance,
        )

    def for_eval(
        self,
        *,
        batch_size: int | None = None,
        keep_transform: bool = False,
        keep_bucketing: bool = False,
    ) -> LoaderPlan:
        """The same plan, made to read every sample exactly once, in a fixed order.

        Changes: shuffle off; drop_last off; a progressive batch size becomes fixed at
        ``batch_size`` (default: the plan's size at step 0; a plan without batching,
        ``with_batch_size(None)``, stays so); sampling weights and the
        curriculum are removed; bucketing is removed unless ``keep_bucketing``; a mixture reads
        its sources one after the other (``mode="sequential"``; ``"round_robin"`` with
        bucketing kept), every sample once; a transform taking ``rng`` (random) is removed
        unless ``keep_transform``; a ``with_max_length`` table becomes its last length, a
        function is removed (the collator's own ``max_length`` applies); sharded plans get
        ``even_batches=True``. The rest is kept: dataset, seed and split (so
        ``build(split="val")`` reads the same val part), collator, deterministic transforms,
        workers, device, distribution. Returns a new plan; this one is unchanged.
        """
        from loaderkit.plan.evaluation import eval_plan

        return eval_plan(
            self,
            batch_size=batch_size,
            keep_transform=keep_transform,
            keep_bucketing=keep_bucketing,
        )


PLAN_SECTIONS: tuple[str, ...] = tuple(
    f.name for f in attrs.fields(LoaderPlan) if f.name != "bindings"
)
"""The data sections of a plan, in order (the builder starts each from its default here)."""

Setting = Literal[
    "batch",
    "order",
    "collator",
    "transform",
    "global_rngs",
    "workers",
    "device",
    "distributed",
    "bucketing",
    "sampling_weights",
    "curriculum",
    "max_length",
    "split",
    "checks",
    "error_policy",
    "cache",
]
"""A section ``DataLoaderBuilder.without`` puts back to its default: every data section but
the source (``dataset``, ``mixture``: replace it with ``with_dataset``) and the ``preset``
record (not a setting)."""

SETTINGS: tuple[Setting, ...] = get_args(Setting)
"""The names :data:`Setting` accepts, at run time (read from the type, so they cannot drift)."""


def settings_named(names: Sequence[object]) -> tuple[Setting, ...]:
    """The settings ``DataLoaderBuilder.without(*names)`` resets, checked.

    At least one, each a :data:`Setting`: else a :class:`~loaderkit.PlanError` naming the fix.
    """
    listed = ", ".join(repr(n) for n in SETTINGS)
    if not names:
        raise PlanTypeError.single(
            "without", f"name at least one setting to reset: one of {listed}"
        )
    for name in names:
        if not isinstance(name, str):
            raise PlanTypeError.single(
                "without",
                f"takes setting names as strings (got {type(name).__name__} {name!r}); one of "
                f"{listed}",
            )
        if name in ("dataset", "mixture"):
            raise PlanError.single(
                name,
                f"the source cannot be reset by without({name!r}): a plan reads a dataset; "
                f"replace it with .with_dataset(ds) or .with_mixture({{...}})",
            )
        if name not in SETTINGS:  # the path is the call: the name is no section's (maybe "")
            raise PlanError.single(
                "without",
                f"is not a setting without() resets (got {name!r}){did_you_mean(name, SETTINGS)}; "
                f"it takes {listed}",
            )
    return tuple(names)  # type: ignore[arg-type]  # each checked to be a Setting above


_SOURCES = ("dataset", "mixture", "preset")
if {section.name for section in SECTIONS} != set(PLAN_SECTIONS):
    raise AssertionError(  # pragma: no cover - a section added to LoaderPlan but not declared
        "loaderkit.plan.sections.SECTIONS must declare every section of LoaderPlan: "
        f"{sorted(set(PLAN_SECTIONS) ^ {section.name for section in SECTIONS})} differ"
    )
if set(SETTINGS) | set(_SOURCES) != set(PLAN_SECTIONS) or set(SETTINGS) & set(_SOURCES):
    raise AssertionError(  # pragma: no cover - a section added to LoaderPlan but not here
        f"Setting must name every section of LoaderPlan but {_SOURCES}: "
        f"{sorted(set(PLAN_SECTIONS) - set(_SOURCES) - set(SETTINGS))} missing"
    )
