"""The ``[cache]`` section: samples kept in memory or on disk to load them faster."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

from loaderkit._validate import check_bool, check_choice, check_int, check_str
from loaderkit.datasets.paths import absolute_path, confined
from loaderkit.errors import PlanError, Problem
from loaderkit.plan.sections.base import RuleContext, Section, explain_row, fields_table
from loaderkit.plan.specs import CallableSpec, DatasetSpec

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext
    from loaderkit.plan.sections.workers import WorkersSpec

__all__ = [
    "CACHE_STAGES",
    "CACHE_STORAGES",
    "SECTION",
    "CacheSpec",
    "CacheStage",
    "CacheStorage",
    "cache_calls",
    "cache_line",
    "cache_problems",
    "cache_spec",
    "cache_to_dict",
    "read_cache",
]

CacheStorage = Literal["memory", "disk"]
"""Where ``with_cache`` keeps samples."""
CACHE_STORAGES: tuple[CacheStorage, ...] = get_args(CacheStorage)

CacheStage = Literal["fetched", "transformed"]
"""Which samples ``with_cache`` keeps: before or after the transform."""
CACHE_STAGES: tuple[CacheStage, ...] = get_args(CacheStage)


@attrs.frozen
class CacheSpec:
    """A sample cache (see ``with_cache``): where samples are kept and at which stage.

    ``storage`` is ``"memory"`` (each fetching process) or ``"disk"`` (the folder ``path``,
    shared by every process); ``stage`` is ``"fetched"`` (before the transform) or
    ``"transformed"`` (after a transform without ``rng``); ``max_bytes`` caps the cache
    (``None``: no cap); ``shared`` accepts a disk folder that other users can change, and
    signs its entries with the caller's own key. Execution-only: a cache never changes a batch.
    """

    storage: str = "memory"
    stage: str = "fetched"
    path: str | None = None
    max_bytes: int | None = None
    shared: bool = False


_table = fields_table(("storage", "stage"), ("path", "max_bytes"))


def cache_to_dict(spec: CacheSpec) -> dict[str, Any]:
    """The ``[cache]`` table of a plan file (execution only: never fingerprinted)."""
    out = _table(spec)
    if spec.shared:
        out["shared"] = True
    return out


def read_cache(reader: Reader, data: Mapping[str, Any]) -> CacheSpec | None:
    """Read the ``[cache]`` table; a relative folder is the plan file's, and stays inside it."""
    if "cache" not in data:
        return None
    sec = reader.section(data, "cache", ("storage", "stage", "path", "max_bytes", "shared"))
    cache: CacheSpec | None = reader.attempt(
        lambda: cache_spec(
            sec.get("storage", "memory"),
            stage=sec.get("stage", "fetched"),
            path=sec.get("path"),
            max_bytes=sec.get("max_bytes"),
            shared=sec.get("shared", False),
        )
    )
    folder = reader.base_dir
    if cache is None or cache.path is None or folder is None:
        return cache
    chosen = cache
    placed: CacheSpec | None = reader.attempt(
        lambda: attrs.evolve(
            chosen,
            path=confined("cache.path", absolute_path(chosen.path or "", folder), reader.confine),
        )
    )
    return placed


def cache_spec(
    storage: object = "memory",
    *,
    stage: object = "fetched",
    path: object = None,
    max_bytes: object = None,
    shared: object = False,
) -> CacheSpec:
    """The sample cache of ``with_cache``."""
    chosen = check_choice("cache.storage", storage, CACHE_STORAGES)
    at = check_choice("cache.stage", stage, CACHE_STAGES)
    folder: str | None = None
    if path is not None:
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        folder = check_str("cache.path", path)
    if chosen == "disk" and folder is None:
        raise PlanError.single(
            "cache.path",
            "a disk cache needs a folder; pass with_cache('disk', path='...') (it is created "
            "if missing, and shared by workers, ranks and later runs)",
        )
    if chosen == "memory" and folder is not None:
        raise PlanError.single(
            "cache.path",
            f"a memory cache keeps no folder (got {folder!r}); drop path (.with_cache()), or use "
            f"with_cache('disk', path={folder!r})",
        )
    limit = None
    if max_bytes is not None:
        limit = check_int("cache.max_bytes", max_bytes, minimum=1, fix="bytes the cache may hold")
    others = check_bool("cache.shared", shared)
    if others and chosen != "disk":
        raise PlanError.single(
            "cache.shared",
            "only a disk cache has a folder to share; drop shared, or use "
            "with_cache('disk', path='...', shared=True)",
        )
    return CacheSpec(chosen, at, folder, limit, others)


def cache_problems(
    cache: CacheSpec,
    dataset: DatasetSpec | None,
    transform: CallableSpec | None,
    workers: WorkersSpec,
) -> list[Problem]:
    """What keeps ``with_cache`` from caching this plan's samples."""
    problems: list[Problem] = []
    if dataset is not None and dataset.iterable:
        problems.append(
            Problem(
                "cache",
                f"dataset {dataset.binding!r} is an iterable (streamed) source, and the cache "
                f"keeps samples by index; drop it with .without('cache'), or pass a map-style "
                f"dataset",
            )
        )
    if cache.stage == "transformed":
        if transform is None:
            problems.append(
                Problem(
                    "cache.stage",
                    "is 'transformed' but the plan has no transform; use stage='fetched' "
                    "(the samples as the dataset returns them)",
                )
            )
        elif transform.accepts_rng:
            problems.append(
                Problem(
                    "cache.stage",
                    f"is 'transformed' but transform {transform.describe()} takes rng (a "
                    f"random transform: a cached output would repeat every epoch); use "
                    f"stage='fetched' so the transform runs anew, or drop its rng",
                )
            )
    if cache.storage == "memory" and workers.num_workers != 0 and workers.persistent is False:
        problems.append(
            Problem(
                "cache.storage",
                f"a memory cache lives in each worker, and with_workers({workers.num_workers!r}, "
                f"persistent=False) drops the workers (and their caches) after every epoch; "
                f"keep the workers persistent, or use with_cache('disk', path=...)",
            )
        )
    return problems


def cache_line(plan: LoaderPlan) -> str:
    """``"disk at 'cache/' (shared by every process), fetched samples (before the transform)"``."""
    spec = plan.cache
    assert spec is not None
    if spec.storage == "disk":
        where = f"disk at {spec.path!r} (shared by every process)"
    elif plan.workers.num_workers == "auto":
        where = "memory of each worker (of the main process if auto resolves to 0 workers)"
    elif plan.workers.num_workers > 0:
        where = f"memory of each of the {plan.workers.num_workers} workers"
    else:
        where = "memory of the main process"
    stage = (
        "fetched samples (before the transform)"
        if spec.stage == "fetched"
        else "transformed samples (the transform runs once per sample)"
    )
    limit = "" if spec.max_bytes is None else f", at most {spec.max_bytes:,} bytes"
    shared = ", shared folder (entries signed with your key)" if spec.shared else ""
    return f"{where}, {stage}{limit}{shared}"


def _rules(ctx: RuleContext) -> list[Problem]:
    sections = ctx.sections
    return cache_problems(
        sections["cache"], sections["dataset"], sections["transform"], sections["workers"]
    )


def cache_calls(c: CacheSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_cache`` call."""
    args = [repr(c.storage)]
    if c.stage != "fetched":
        args.append(f"stage={c.stage!r}")
    args.extend(ctx.set_args(c, ("path", "max_bytes")))
    if c.shared:
        args.append("shared=True")
    return (f".with_cache({', '.join(args)})",)


SECTION: Section[CacheSpec] = Section(
    name="cache",
    explain=explain_row("cache", cache_line, of="cache"),
    builder_calls=cache_calls,
    read=read_cache,
    to_dict=cache_to_dict,
    fingerprint="exec",
    rules={"cache": _rules},
    why=(
        "`with_cache` keeps samples to load them faster; a transformed cache needs a "
        "transform without `rng` (a pure function)"
    ),
)
