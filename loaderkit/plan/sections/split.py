"""The ``[split]`` section: train / val / test parts of the dataset."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import check_int, check_str, did_you_mean
from loaderkit.errors import PlanError, Problem
from loaderkit.order.split import decimal_ratio, split_sizes
from loaderkit.plan.fields import MAX_SEED
from loaderkit.plan.sections.base import RuleContext, Section, explain_row, fields_table
from loaderkit.plan.sections.distributed import uneven_reason
from loaderkit.plan.specs import DatasetSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.batch import BatchSpec
    from loaderkit.plan.sections.distributed import DistributedSpec
    from loaderkit.plan.sections.mixture import MixtureSpec

__all__ = [
    "SECTION",
    "SplitSpec",
    "read_split",
    "split_calls",
    "split_line",
    "split_problems",
    "split_spec",
    "split_to_dict",
]


@attrs.frozen
class SplitSpec:
    """A seeded train / val / test split of the dataset (see ``with_split``).

    ``val`` and ``test`` are fractions in (0, 1) (floats), sample counts (ints >= 1) or 0 (no
    such part); train is the rest. ``seed`` ``None`` means the plan's seed. ``stratify_by`` is
    a column or sample key holding class labels (each part keeps the class proportions).
    """

    val: float = 0.1
    test: float = 0
    seed: int | None = None
    stratify_by: str | None = None


split_to_dict = fields_table(("val", "test"), ("seed", "stratify_by"))
"""The ``[split]`` table of a plan file (also what the fingerprint hashes). Sizes keep their
type: a float is a fraction, an int a number of samples."""


def read_split(reader: Reader, data: Mapping[str, Any]) -> SplitSpec | None:
    """Read the ``[split]`` table."""
    if "split" not in data:
        return None
    sec = reader.section(data, "split", ("val", "test", "seed", "stratify_by"))
    spec: SplitSpec | None = reader.attempt(
        lambda: split_spec(
            sec.get("val", 0.1), sec.get("test", 0), sec.get("seed"), sec.get("stratify_by")
        )
    )
    return spec


def _split_part(path: str, value: object) -> float:
    """A part's size: a fraction in (0, 1), a count (an int >= 1), or 0 for no such part."""
    fix = "a fraction in (0, 1) as a float, a number of samples as an int, or 0 for none"
    if isinstance(value, float) and not isinstance(value, bool):
        if value == 0:
            return 0
        if not 0 < value < 1:  # NaN fails too
            raise PlanError.single(path, f"must be in (0, 1) as a fraction (got {value!r}); {fix}")
        return float(value)
    return check_int(path, value, minimum=0, fix=fix)


def split_spec(
    val: object = 0.1, test: object = 0, seed: object = None, stratify_by: object = None
) -> SplitSpec:
    """The split of ``with_split``: part sizes, seed and the label key to stratify by."""
    parts = _split_part("split.val", val), _split_part("split.test", test)
    if not any(parts):
        raise PlanError.single(
            "split", "val and test are both 0: nothing to split off; give either a size"
        )
    if all(isinstance(p, float) for p in parts):
        (a, b), (c, d) = decimal_ratio(parts[0]), decimal_ratio(parts[1])
        if a * d + c * b >= b * d:  # exactly: val + test >= 1
            raise PlanError.single(
                "split",
                f"val={parts[0]!r} and test={parts[1]!r} add up to {parts[0] + parts[1]:g} "
                f"and leave nothing for train; make them add up to less than 1",
            )
    key = None
    if seed is not None:
        key = check_int(
            "split.seed", seed, minimum=0, maximum=MAX_SEED, fix="seeds are ints in [0, 2**63)"
        )
    label = None if stratify_by is None else check_str("split.stratify_by", stratify_by)
    return SplitSpec(parts[0], parts[1], key, label)


def split_problems(
    split: SplitSpec,
    dataset: DatasetSpec,
    batch: BatchSpec,
    distributed: DistributedSpec,
    mixture: MixtureSpec | None,
    uneven: Callable[[DatasetSpec], str],
) -> list[Problem]:
    """What keeps ``with_split`` from splitting this dataset into non-empty parts."""
    if dataset.iterable:
        return [
            Problem(
                "split",
                f"needs random access to pick each part's samples, and {dataset.binding!r} is "
                f"an iterable dataset; pass a map-style dataset, or split the data before "
                f"streaming it (e.g. HF Dataset.train_test_split)",
            )
        ]
    if mixture is not None:
        return [
            Problem(
                "split",
                "cannot be combined with with_mixture yet (splitting every source is not "
                "implemented); split each source first and mix the parts, or use one dataset",
            )
        ]
    problems: list[Problem] = []
    key = split.stratify_by
    if key is not None and dataset.kind == "tensors":
        problems.append(
            Problem(
                "split.stratify_by",
                f"names a column or sample key ({key!r}), and a tuple of tensors has no named "
                f"columns; pass the columns as a dict ({{'x': ..., {key!r}: labels}})",
            )
        )
    elif key is not None and dataset.columns and key not in dataset.columns:
        problems.append(
            Problem(
                "split.stratify_by",
                f"{key!r} is not a column of {dataset.binding!r} (columns: "
                f"{', '.join(dataset.columns)}){did_you_mean(key, dataset.columns)}",
            )
        )
    n = dataset.length
    if n is None or n == 0:
        return problems
    train, val, test = split_sizes(n, split.val, split.test)
    if train < 1:
        problems.append(
            Problem(
                "split",
                f"of {n} samples, val takes {val} and test {test}, leaving {max(train, 0)} for "
                f"train; give val and test smaller sizes",
            )
        )
        return problems
    world = distributed.world_size if distributed.enabled and distributed.world_size else 1
    if batch.drop_last and n // world >= batch.batch_size > train // world:
        problems.append(
            Problem(
                "batch.drop_last",
                f"with batch_size {batch.batch_size} and the train part's {train // world} "
                f"samples per rank, drop_last=True leaves 0 batches per epoch; lower "
                f"batch_size or keep the partial batch: .with_batch_size({batch.batch_size})",
            )
        )
    if distributed.enabled and not distributed.even_batches and not uneven(dataset):
        for name, size in (("train", train), ("val", val), ("test", test)):
            reason = uneven(attrs.evolve(dataset, length=size)) if size else ""
            if reason:
                problems.append(
                    Problem(
                        "distributed.even_batches",
                        f"False is allowed only where every rank gets the same number of "
                        f"batches, and in the {name} part of the split {reason}; keep "
                        f"even_batches=True or set drop_last=True",
                    )
                )
                break
    return problems


def split_line(plan: LoaderPlan) -> str:
    """The ``split`` line of ``explain()``: the parts' sizes and the seed."""
    spec = plan.split
    assert spec is not None
    seed = plan.order.seed if spec.seed is None else spec.seed
    how = f" (stratified by {spec.stratify_by!r})" if spec.stratify_by else ""
    n = plan.dataset.length
    if n is None:
        return f"val {spec.val!r}, test {spec.test!r}{how}, seed {seed}"
    train, val, test = split_sizes(n, spec.val, spec.test)
    return f"train {train:,}, val {val:,}, test {test:,} samples{how}, seed {seed}"


def split_calls(s: SplitSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_split`` call."""
    args = [f"val={s.val!r}", f"test={s.test!r}", *ctx.set_args(s, ("seed", "stratify_by"))]
    return (f".with_split({', '.join(args)})",)


def _rules(ctx: RuleContext) -> list[Problem]:
    """The split's problems (none without a dataset to split)."""
    s = ctx.sections
    dataset: DatasetSpec | None = s["dataset"]
    if dataset is None:
        return []

    def uneven(part: DatasetSpec) -> str:
        return uneven_reason(s, part)

    return split_problems(
        s["split"], dataset, s["batch"], s["distributed"], s.get("mixture"), uneven
    )


SECTION: Section[SplitSpec] = Section(
    rules={"split": _rules},
    name="split",
    explain=explain_row("split", split_line, of="split"),
    builder_calls=split_calls,
    read=read_split,
    to_dict=split_to_dict,
    fingerprint="stream",
    why=(
        "`val`, `test`, `seed`, `stratify_by`: which samples each part holds (the part a "
        'loader reads is in its state: `"split"`)'
    ),
)
