"""Plans as data: ``to_dict`` / ``from_dict`` and ``.json`` / ``.toml`` files.

The format is documented in ``docs/plan-format.md``. Reading re-runs every check the builder
runs, refuses unknown keys with a "did you mean", and reports all problems at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from loaderkit._checks import (
    LIMITS,
    check_bool,
    check_int,
    check_plain_tree,
    check_str,
    did_you_mean,
    freeze_value,
    unknown_keys,
)
from loaderkit.datasets import (
    DatasetSource,
    absolute_path,
    confined,
    make_source,
    rebuild,
    relative_path,
    source_problems,
)
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.fields import (
    batch_schedule_spec,
    batch_size_value,
    binding_name,
    bucketing_spec,
    cache_spec,
    checks_spec,
    collator_spec,
    combined_dataset,
    curriculum_spec,
    dataset_spec,
    device_spec,
    distributed_spec,
    error_policy_spec,
    max_length_spec,
    mixture_options,
    order_spec,
    resolve_auto,
    split_spec,
    transform_spec,
    weights_spec,
    workers_spec,
)
from loaderkit.plan.plan import SCHEMA_VERSION, LoaderPlan
from loaderkit.plan.preset import PresetSpec, preset_spec
from loaderkit.plan.sections import FILE_KEYS
from loaderkit.plan.sections import SECTIONS as PLAN_FILE_SECTIONS
from loaderkit.plan.sections.dataset import source_table
from loaderkit.plan.sections.error_policy import ERROR_POLICY_KEYS
from loaderkit.plan.specs import (
    CHECK_KINDS,
    DATASET_KINDS,
    DEFAULT_COLLATOR,
    BatchSpec,
    BucketingSpec,
    CacheSpec,
    CallableSpec,
    ChecksSpec,
    CurriculumSpec,
    DatasetSpec,
    DistributedSpec,
    ErrorPolicySpec,
    LengthSource,
    MaxLengthSpec,
    MixtureSpec,
    OrderSpec,
    SplitSpec,
    WeightsSpec,
    WorkersSpec,
)
from loaderkit.registry import (
    PluginNotImportedError,
    UnknownNameError,
    no_plugin_imports,
    resolve_ref,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["load_plan", "plan_from_dict", "plan_to_dict", "read_plan_file", "save_plan"]

SECTIONS = FILE_KEYS
"""The top-level keys of a plan file (``schema_version`` and each section's)."""


def plan_to_dict(plan: LoaderPlan) -> dict[str, Any]:
    """Plain data for ``plan``: each section's table when written (see ``plan.sections``)."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for section in PLAN_FILE_SECTIONS:
        value = getattr(plan, section.name)
        if section.written(value):
            out[section.key] = section.to_dict(value)
    return out


class _Reader:
    """Collects problems while reading sections, so one load reports everything."""

    def __init__(
        self,
        bindings: Mapping[str, object] | None,
        allow_imports: bool,
        require_bindings: bool,
        base_dir: Path | None = None,
        confine: Path | None = None,
    ) -> None:
        self.problems: list[Problem] = []
        self.given = dict(bindings or {})
        self.used: dict[str, object] = {}
        self.unbound: list[str] = []
        self.wanted: list[str] = []
        self.allow_imports = allow_imports
        self.require_bindings = require_bindings
        self.base_dir = base_dir
        self.confine = confine
        self.call_factories = True
        """False once the data is known to be refused: no dataset factory is called then."""

    def attempt(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except PlanError as exc:
            self.problems.extend(exc.problems)
            return None

    def section(self, data: Mapping[str, Any], name: str, known: tuple[str, ...]) -> dict[str, Any]:
        value = data.get(name, {})
        if not isinstance(value, Mapping):
            self.problems.append(
                Problem(name, f"must be a table/object (got {type(value).__name__} {value!r})")
            )
            return {}
        self.problems.extend(unknown_keys(name, value, known))
        return {k: v for k, v in value.items() if k in known}

    def bind(self, path: str, name: str) -> object | None:
        self.wanted.append(name)
        if name in self.given:
            self.used[name] = self.given[name]
            return self.given[name]
        if self.require_bindings:
            self.problems.append(
                Problem(
                    path,
                    f"the plan refers to a live object bound as {name!r} and none was given; "
                    f"pass bindings={{{name!r}: ...}} (or require_bindings=False to inspect "
                    f"the plan without building it)",
                )
            )
        else:
            self.unbound.append(name)
        return None

    # -- sections ---------------------------------------------------------------------------

    def dataset(self, data: Mapping[str, Any], path: str = "dataset") -> DatasetSpec | None:
        sec = self.section(
            data,
            path,
            ("binding", "kind", "type", "length", "identity", "columns", "features", "source"),
        )
        if path not in data:
            self.problems.append(Problem(path, "missing; a plan needs a [dataset] table"))
            return None
        if "binding" not in sec:
            self.problems.append(
                Problem(f"{path}.binding", "missing; name the dataset binding, e.g. 'train'")
            )
            return None
        try:
            binding = binding_name(f"{path}.binding", sec.get("binding"))
            kind = check_str(f"{path}.kind", sec.get("kind"))
            if kind not in DATASET_KINDS:
                raise PlanError.single(
                    f"{path}.kind",
                    f"unknown kind {kind!r}{did_you_mean(kind, DATASET_KINDS)}",
                )
            type_name = check_str(f"{path}.type", sec.get("type"))
            length = sec.get("length")
            if length is not None:
                length = check_int(
                    f"{path}.length", length, minimum=0, maximum=LIMITS.dataset_length
                )
            identity = sec.get("identity")
            if identity is not None:
                identity = check_str(f"{path}.identity", identity)
            columns = sec.get("columns", [])
            if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
                raise PlanTypeError.single(
                    f"{path}.columns", f"must be a list of strings (got {columns!r})"
                )
        except PlanError as exc:
            self.problems.extend(exc.problems)
            return None
        features = sec.get("features", [])
        if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
            self.problems.append(
                Problem(f"{path}.features", f"must be a list of strings (got {features!r})")
            )
            return None
        source = None
        if "source" in sec:
            source = self.dataset_source(sec["source"], path)
            if source is None:
                return None
        recorded = DatasetSpec(
            binding, kind, type_name, length, identity, tuple(columns), tuple(features), source
        )
        if kind == "mixture":
            if path != "dataset":
                self.problems.append(Problem(path, "a mixture cannot be a source of a mixture"))
                return None
            if source is not None:
                self.problems.append(
                    Problem(f"{path}.source", "a mixture is made from its sources; drop it")
                )
            return recorded  # its sources are bound by the [mixture] table
        if source is not None and binding not in self.given:
            return self.rebuilt(path, recorded, source)
        obj = self.bind(path, binding)
        if obj is None:
            return recorded
        live = self.attempt(lambda: dataset_spec(obj, binding))
        if live is None:
            return recorded
        live = attrs.evolve(live, source=source)  # a bound object wins over the source
        if live != recorded:
            self.problems.append(
                Problem(
                    path,
                    f"the object bound to {binding!r} is not the dataset the plan was made "
                    f"for: {_describe(live)} given, {_describe(recorded)} expected; bind the "
                    f"same dataset or compile a new plan",
                )
            )
        return recorded

    def dataset_source(self, table: object, dataset_path: str) -> DatasetSource | None:
        """Read the ``source`` table of ``[dataset]``: ``name`` or ``ref``, and ``options``.

        A name must be registered and the options must fit its factory's signature; a ``ref``
        is only checked for its form here (it resolves, under the trust rules, when called).
        """
        path = f"{dataset_path}.source"
        if not isinstance(table, Mapping):
            self.problems.append(
                Problem(path, f"must be a table with 'name' or 'ref' (got {type(table).__name__})")
            )
            return None
        self.problems.extend(unknown_keys(path, table, ("name", "ref", "options")))
        given = [k for k in ("name", "ref") if k in table]
        if len(given) != 1:
            self.problems.append(
                Problem(
                    path,
                    f"needs exactly one of 'name' (a registered dataset factory) or 'ref' "
                    f"('module:qualname') (got {', '.join(given) or 'none'})",
                )
            )
            return None
        key = given[0]
        options = table.get("options", {})
        try:
            name = check_str(f"{path}.{key}", table[key])
            if (key == "ref") != (":" in name):
                raise PlanError.single(
                    f"{path}.{key}",
                    f"{name!r} is not a 'module:qualname' reference; write it as name = {name!r}"
                    if key == "ref"
                    else f"{name!r} is a 'module:qualname' reference; write it as ref = {name!r}",
                )
            if not isinstance(options, Mapping):
                raise PlanTypeError.single(
                    f"{path}.options", f"must be a table (got {type(options).__name__})"
                )
            source = make_source(name, options, self.base_dir, confine=self.confine)
        except UnknownNameError as exc:
            self.problems.append(Problem(f"{path}.name", str(exc)))
            return None
        except PlanError as exc:
            self.problems.extend(_repath(exc.problems, dataset_path))
            return None
        problems = source_problems(source, load_plugins=self.require_bindings)
        if problems:
            self.problems.extend(_repath(problems, dataset_path))
            return None
        return source

    def rebuilt(self, path: str, recorded: DatasetSpec, source: DatasetSource) -> DatasetSpec:
        """Make the dataset again from its source and check it is the one recorded."""
        binding = recorded.binding
        self.wanted.append(binding)
        if source.is_ref:  # a file makes datasets only with registered factories
            self.problems.append(
                Problem(
                    f"{path}.source.ref",
                    f"a plan file names its dataset factory by its registered name, never by "
                    f"an import path (got {source.name!r}); register the factory with "
                    f"loaderkit.register_dataset('name') (or the 'loaderkit.datasets' entry "
                    f"point of your package) and save the plan again, or pass the dataset in "
                    f"bindings={{{binding!r}: ...}}",
                )
            )
            return recorded
        if not self.require_bindings:  # inspecting: no factory is called, no module imported
            self.unbound.append(binding)
            return recorded
        if not self.call_factories:  # the plan is refused for its values (reported below)
            return recorded
        try:
            obj = rebuild(source)  # a registered factory
        except UnknownNameError as exc:  # a plugin that is gone or fails to import
            self.problems.append(Problem(f"{path}.source.name", str(exc)))
            return recorded
        except PlanError as exc:
            self.problems.extend(_repath(exc.problems, path))
            return recorded
        live = self.attempt(lambda: dataset_spec(obj, binding))
        if live is None:
            return recorded
        if live != recorded:
            self.problems.append(
                Problem(
                    path,
                    f"the dataset made by {source.describe()} is not the one the plan was made "
                    f"for: {_describe(live)} made, {_describe(recorded)} expected; its data "
                    f"changed: compile a new plan, or bind the original dataset "
                    f"(bindings={{{binding!r}: ...}})",
                )
            )
            return recorded
        self.used[binding] = obj
        return recorded

    def _callable(
        self,
        data: Mapping[str, Any],
        path: str,
        kind_fn: Callable[..., tuple[CallableSpec, object | None]],
    ) -> CallableSpec | None:
        extra = ("options",) if path == "collator" else ("accepts_rng",)
        sec = self.section(data, path, ("name", "ref", "binding", "label", "reason", *extra))
        sources = [k for k in ("name", "ref", "binding") if k in sec]
        if len(sources) != 1:
            self.problems.append(
                Problem(
                    path,
                    f"needs exactly one of 'name', 'ref' or 'binding' (got "
                    f"{', '.join(sources) or 'none'})",
                )
            )
            return None
        source = sources[0]
        try:
            value = check_str(f"{path}.{source}", sec[source])
            label = check_str(f"{path}.label", sec.get("label", ""), nonempty=False)
            accepts_rng = check_bool(f"{path}.accepts_rng", sec.get("accepts_rng", False))
        except PlanError as exc:
            self.problems.extend(exc.problems)
            return None
        options = sec.get("options", {})
        if not isinstance(options, Mapping):
            self.problems.append(
                Problem(f"{path}.options", f"must be a table (got {type(options).__name__})")
            )
            return None
        if options and source != "name":
            self.problems.append(
                Problem(
                    f"{path}.options",
                    f"options are only taken with registry names (got {sorted(options)} with "
                    f"{source} {value!r}); drop them",
                )
            )
            return None
        if source == "name" and ":" in value:  # a registry name never holds a colon
            self.problems.append(
                Problem(
                    f"{path}.name",
                    f"{_short(value)} is a 'module:qualname' reference, not a registry name; "
                    f"write it as ref = {_short(value)} (resolved only under the trust rules)",
                )
            )
            return None
        if source == "name":
            args: tuple[Any, ...] = (value, options) if path == "collator" else (value,)
            try:
                result = self.attempt(lambda: kind_fn(*args))
            except PluginNotImportedError:  # inspecting: a plugin's name is checked to build
                frozen = self.attempt(lambda: freeze_value(f"{path}.options", dict(options)))
                if frozen is None:
                    return None
                result = (CallableSpec("registry", value, frozen, accepts_rng=accepts_rng),)
            reason = sec.get("reason", "")
            if not isinstance(reason, str):
                self.problems.append(
                    Problem(f"{path}.reason", f"must be a string (got {type(reason).__name__})")
                )
                return None
            if result is None:
                return None
            named: CallableSpec = result[0]
            return attrs.evolve(named, reason=reason)
        recorded = CallableSpec(source, value, accepts_rng=accepts_rng, label=label)
        if source == "ref" and value not in self.given:
            self.wanted.append(value)
            try:
                obj: object | None = resolve_ref(value, allow_imports=self.allow_imports)
            except (PermissionError, LookupError) as exc:
                if not self.require_bindings and isinstance(exc, PermissionError):
                    self.unbound.append(value)
                    return recorded
                self.problems.append(Problem(f"{path}.ref", str(exc)))
                return None
            self.used[value] = obj
        else:
            obj = self.bind(path, value)
            if obj is None:
                return recorded
        result = self.attempt(lambda: kind_fn(*((obj, {}) if path == "collator" else (obj,))))
        if result is None:
            return None
        live: CallableSpec = result[0]
        return attrs.evolve(recorded, accepts_rng=live.accepts_rng)

    def collator(self, data: Mapping[str, Any]) -> CallableSpec | None:
        if "collator" not in data:
            return DEFAULT_COLLATOR
        return self._callable(data, "collator", collator_spec)

    def transform(self, data: Mapping[str, Any]) -> CallableSpec | None:
        if "transform" not in data:
            return None
        return self._callable(data, "transform", transform_spec)

    def values_source(
        self, table: object, path: str, make: Callable[[object], LengthSource]
    ) -> LengthSource | None:
        """Read a per-sample value source: ``column``, ``array`` + ``digest``, ``ref``, ``binding``.

        ``make(value)`` checks a column name or bound values the way the builder does.
        """
        if not isinstance(table, Mapping):
            self.problems.append(
                Problem(
                    path,
                    f"must be a table with 'column', 'array', 'ref' or 'binding' (got "
                    f"{type(table).__name__})",
                )
            )
            return None
        if "column" in table:
            self.problems.extend(unknown_keys(path, table, ("column",)))
            column: LengthSource | None = self.attempt(lambda: make(table["column"]))
            return column
        if "array" in table:
            self.problems.extend(unknown_keys(path, table, ("array", "digest")))
            name = table["array"]
            values = self.bind(path, name) if isinstance(name, str) else None
            if values is None:
                digest = table.get("digest")
                if isinstance(name, str) and isinstance(digest, str) and not self.require_bindings:
                    return LengthSource("array", name, digest=digest)  # unbound: data only
                return None
            source: LengthSource | None = self.attempt(lambda: make(values))
            if source is None:
                return None
            if table.get("digest") not in (None, source.digest):
                self.problems.append(
                    Problem(
                        path,
                        f"the values bound to {name!r} are not the ones the plan was made for "
                        f"(digest {source.digest[:12]}, plan {str(table['digest'])[:12]}); bind "
                        f"the same values or compile a new plan",
                    )
                )
            return attrs.evolve(source, name=name)
        fn = self._callable({path: table}, path, _value_fn)
        return None if fn is None else LengthSource("callable", fn=fn)

    def bucketing(self, data: Mapping[str, Any]) -> BucketingSpec | None:
        if "bucketing" not in data:
            return None
        sec = self.section(
            data, "bucketing", ("length", "num_buckets", "max_tokens", "max_batch_size", "cost")
        )
        options = {
            k: sec[k] for k in ("num_buckets", "max_tokens", "max_batch_size", "cost") if k in sec
        }
        base = self.attempt(lambda: bucketing_spec("placeholder", **options))
        source = self.values_source(
            sec.get("length"), "bucketing.length", lambda v: bucketing_spec(v)[0].length
        )
        if base is None or source is None:
            return None
        chosen: BucketingSpec = attrs.evolve(base[0], length=source)
        return chosen

    def curriculum(self, data: Mapping[str, Any]) -> CurriculumSpec | None:
        if "curriculum" not in data:
            return None
        names = ("difficulty", "schedule", "by", "horizon", "start", "degree", "steps")
        sec = self.section(data, "curriculum", names)
        options = {k: sec[k] for k in ("by", "horizon", "start", "degree", "steps") if k in sec}
        schedule = sec.get("schedule", "linear")
        fn: CallableSpec | None = None
        if isinstance(schedule, Mapping):
            fn = self._callable({"curriculum.schedule": schedule}, "curriculum.schedule", _value_fn)
            if fn is None:
                return None
            schedule = _full_competence  # stands in while the other options are checked
        base = self.attempt(lambda: curriculum_spec("placeholder", schedule, **options))
        source = self.values_source(
            sec.get("difficulty"),
            "curriculum.difficulty",
            lambda v: curriculum_spec(v, "discrete", steps=[(1, 1.0)])[0].difficulty,
        )
        if base is None or source is None:
            return None
        chosen: CurriculumSpec = attrs.evolve(base[0], difficulty=source)
        if fn is not None:
            chosen = attrs.evolve(chosen, fn=fn, schedule="callable")
        return chosen

    def sampling_weights(self, data: Mapping[str, Any]) -> WeightsSpec | None:
        if "sampling_weights" not in data:
            return None
        sec = self.section(data, "sampling_weights", ("weights", "replacement", "num_samples"))
        options = {k: sec[k] for k in ("replacement", "num_samples") if k in sec}
        base = self.attempt(lambda: weights_spec("placeholder", **options))
        source = self.values_source(
            sec.get("weights"), "sampling_weights.weights", lambda v: weights_spec(v)[0].source
        )
        if base is None or source is None:
            return None
        chosen: WeightsSpec = attrs.evolve(base[0], source=source)
        return chosen

    def checks(self, data: Mapping[str, Any]) -> ChecksSpec | None:
        if "checks" not in data:
            return None
        sec = self.section(data, "checks", (*CHECK_KINDS, "every"))
        if not isinstance(data["checks"], Mapping):
            return None
        spec: ChecksSpec | None = self.attempt(lambda: checks_spec(**sec))
        return spec

    def max_length(self, data: Mapping[str, Any]) -> MaxLengthSpec | None:
        if "max_length" not in data:
            return None
        sec = self.section(data, "max_length", ("value", "schedule", "fn", "by"))
        given = [k for k in ("value", "schedule", "fn") if k in sec]
        if len(given) != 1:
            self.problems.append(
                Problem(
                    "max_length",
                    f"needs exactly one of value, schedule or fn (got "
                    f"{', '.join(given) or 'none'})",
                )
            )
            return None
        by = sec.get("by", "epoch")
        if "fn" in sec:
            fn = self._callable({"max_length": sec["fn"]}, "max_length", _value_fn)
            base = self.attempt(lambda: max_length_spec(1, by))
            if fn is None or base is None:
                return None
            timed: MaxLengthSpec = attrs.evolve(base[0], value=None, fn=fn)
            return timed
        result = self.attempt(lambda: max_length_spec(sec[given[0]], by))
        if result is None:
            return None
        chosen: MaxLengthSpec = result[0]
        return chosen

    def batch(self, data: Mapping[str, Any]) -> BatchSpec | None:
        sec = self.section(data, "batch", ("batch_size", "drop_last", "schedule", "size_fn", "by"))
        if not sec:
            return None
        drop = sec.get("drop_last", False)
        if "schedule" in sec and "size_fn" in sec:
            self.problems.append(Problem("batch", "give schedule or size_fn, not both"))
            return None
        if "size_fn" in sec:
            fn = self._callable({"batch.batch_size": sec["size_fn"]}, "batch.batch_size", _value_fn)
            if fn is None:
                return None
            size = self.attempt(lambda: batch_size_value(sec.get("batch_size", 1)))
            base = self.attempt(lambda: batch_schedule_spec([(1, 1)], drop, sec.get("by", "epoch")))
            if size is None or base is None:
                return None
            timed: BatchSpec = attrs.evolve(base[0], batch_size=size, schedule=(), fn=fn)
            return timed
        if "schedule" in sec:
            spec = self.attempt(
                lambda: batch_schedule_spec(sec["schedule"], drop, sec.get("by", "epoch"))
            )
            if spec is None:
                return None
            if "batch_size" in sec and sec["batch_size"] != spec[0].batch_size:
                self.problems.append(
                    Problem(
                        "batch.batch_size",
                        f"is {sec['batch_size']!r} but the schedule starts at "
                        f"{spec[0].batch_size}; drop batch_size or make them agree",
                    )
                )
            chosen: BatchSpec = spec[0]
            return chosen
        plain: BatchSpec | None = self.attempt(
            lambda: batch_schedule_spec(sec.get("batch_size", 1), drop, sec.get("by", "epoch"))[0]
        )
        return plain

    def mixture(self, data: Mapping[str, Any], dataset: DatasetSpec | None) -> MixtureSpec | None:
        if "mixture" not in data:
            return None
        names = (
            "sources",
            "mode",
            "weights",
            "schedule",
            "weights_fn",
            "by",
            "stratified",
            "num_samples",
            "source_key",
        )
        sec = self.section(data, "mixture", names)
        tables = sec.get("sources")
        if not isinstance(tables, list) or not tables:
            self.problems.append(
                Problem("mixture.sources", f"must be a non-empty list of tables (got {tables!r})")
            )
            return None
        sources = []
        for i, table in enumerate(tables):
            spec = self.dataset({f"mixture.sources[{i}]": table}, f"mixture.sources[{i}]")
            if spec is None:
                return None
            sources.append(spec)
        weights: object = None
        given = [k for k in ("weights", "schedule", "weights_fn") if k in sec]
        if len(given) > 1:
            self.problems.append(
                Problem("mixture", f"give one of weights, schedule, weights_fn (got {given})")
            )
            return None
        fn: CallableSpec | None = None
        if "weights" in sec:
            weights = sec["weights"]
        elif "schedule" in sec:
            weights = sec["schedule"]
            if not isinstance(weights, list) or not weights:
                self.problems.append(
                    Problem(
                        "mixture.schedule",
                        f"must be a list of [until, weights] pairs (got {weights!r})",
                    )
                )
                return None
        elif "weights_fn" in sec:
            fn = self._callable(
                {"mixture.weights": sec["weights_fn"]}, "mixture.weights", _value_fn
            )
            if fn is None:
                return None
            weights = _equal_weights  # stands in while the other options are checked
        options = {
            k: sec[k] for k in ("mode", "by", "stratified", "num_samples", "source_key") if k in sec
        }
        result = self.attempt(lambda: mixture_options(sources, weights=weights, **options))
        if result is None:
            return None
        chosen: MixtureSpec = result[0]
        if fn is not None:
            chosen = attrs.evolve(chosen, fn=fn)
        if dataset is not None and dataset.kind == "mixture":
            expected = combined_dataset(chosen)
            if expected != dataset:
                self.problems.append(
                    Problem(
                        "dataset",
                        f"does not match the mixture's sources: {_describe(dataset)} recorded, "
                        f"{_describe(expected)} from the sources; compile the plan again",
                    )
                )
        return chosen


def _equal_weights(t: float) -> float:
    """A weight-schedule stand-in used while a file's mixture options are checked."""
    return 1.0


def _full_competence(t: float) -> float:
    """A schedule stand-in used while a file's curriculum options are checked."""
    return 1.0


def _value_fn(fn: object) -> tuple[CallableSpec, object | None]:
    """Check a per-sample function read from a file: it must be callable."""
    if not callable(fn):
        raise PlanTypeError.single(
            "plan", f"a per-sample function must be callable (got {type(fn).__name__})"
        )
    return CallableSpec("binding", "value"), fn


def _repath(problems: Sequence[Problem], path: str) -> list[Problem]:
    """Problems reported at ``dataset...`` moved to ``path`` (a mixture source's table)."""
    return [
        Problem(path + p.path.removeprefix("dataset"), p.message)
        if p.path.startswith("dataset")
        else p
        for p in problems
    ]


def _short(value: str) -> str:
    """``value`` quoted for a message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(spec: DatasetSpec) -> str:
    size = "?" if spec.length is None else str(spec.length)
    ident = f", identity {spec.identity}" if spec.identity else ""
    return f"{spec.kind} {spec.type_name.rsplit('.', 1)[-1]} of {size} samples{ident}"


def plan_from_dict(
    data: Mapping[str, Any],
    *,
    bindings: Mapping[str, object] | None = None,
    allow_imports: bool = False,
    require_bindings: bool = True,
    base_dir: str | os.PathLike[str] | None = None,
    allow_external_paths: bool = False,
) -> LoaderPlan:
    """Read plan data written by :func:`plan_to_dict` (or by hand); see ``LoaderPlan.from_dict``.

    Relative paths (dataset source files, the disk cache's folder) resolve against
    ``base_dir`` (default: the working directory; :func:`load_plan` passes the file's folder).
    With ``base_dir`` given, a path that leaves it is refused unless ``allow_external_paths``.
    The data is first checked against :data:`~loaderkit._checks.LIMITS` as a whole (depth,
    size, integers, strings), so nothing below reads a value it cannot handle. Inspecting
    (``require_bindings=False``) imports no entry-point plugin: a plugin's collator or
    transform name is checked when the plan is loaded to build.
    """
    with contextlib.nullcontext() if require_bindings else no_plugin_imports():
        return _plan_from_dict(
            data,
            bindings=bindings,
            allow_imports=allow_imports,
            require_bindings=require_bindings,
            base_dir=base_dir,
            allow_external_paths=allow_external_paths,
        )


def _plan_from_dict(
    data: Mapping[str, Any],
    *,
    bindings: Mapping[str, object] | None,
    allow_imports: bool,
    require_bindings: bool,
    base_dir: str | os.PathLike[str] | None,
    allow_external_paths: bool,
) -> LoaderPlan:
    if not isinstance(data, Mapping):
        raise PlanTypeError.single(
            "plan",
            f"must be a mapping of sections (got {type(data).__name__}); pass what "
            f"LoaderPlan.to_dict() returns",
        )
    value_problems = check_plain_tree(data)  # shape problems raise here, value ones wait
    folder = None if base_dir is None else Path(os.path.abspath(base_dir))
    confine = None if allow_external_paths else folder
    reader = _Reader(bindings, allow_imports, require_bindings, folder, confine)
    reader.call_factories = not value_problems  # a factory never sees an out-of-bound value
    reader.problems.extend(unknown_keys("", data, SECTIONS))
    version = data.get("schema_version")
    if version is None:
        reader.problems.append(
            Problem("schema_version", f"missing; add schema_version = {SCHEMA_VERSION}")
        )
    elif isinstance(version, bool) or not isinstance(version, int) or version < 1:
        reader.problems.append(
            Problem("schema_version", f"must be a positive int (got {version!r})")
        )
    elif version > SCHEMA_VERSION:
        reader.problems.append(
            Problem(
                "schema_version",
                f"the plan was written by a newer loaderkit (schema {version}; this one reads "
                f"up to {SCHEMA_VERSION}); upgrade loaderkit",
            )
        )

    dataset = reader.dataset(data)

    batch = reader.batch(data) or BatchSpec()

    order = OrderSpec()
    sec_o = reader.section(data, "order", ("shuffle", "seed", "buffer_size"))
    order = (
        reader.attempt(
            lambda: order_spec(
                sec_o.get("shuffle", order.shuffle),
                sec_o.get("seed", order.seed),
                sec_o.get("buffer_size"),
            )
        )
        or order
    )

    collator = reader.collator(data)
    transform = reader.transform(data)
    bucketing = reader.bucketing(data)
    sampling_weights = reader.sampling_weights(data)
    curriculum = reader.curriculum(data)
    mixture = reader.mixture(data, dataset)
    max_length = reader.max_length(data)
    split: SplitSpec | None = None
    if "split" in data:
        sec_s = reader.section(data, "split", ("val", "test", "seed", "stratify_by"))
        split = reader.attempt(
            lambda: split_spec(
                sec_s.get("val", 0.1),
                sec_s.get("test", 0),
                sec_s.get("seed"),
                sec_s.get("stratify_by"),
            )
        )
    checks = reader.checks(data)
    cache: CacheSpec | None = None
    if "cache" in data:
        sec_c = reader.section(data, "cache", ("storage", "stage", "path", "max_bytes"))
        cache = reader.attempt(
            lambda: cache_spec(
                sec_c.get("storage", "memory"),
                stage=sec_c.get("stage", "fetched"),
                path=sec_c.get("path"),
                max_bytes=sec_c.get("max_bytes"),
            )
        )
        if cache is not None and cache.path is not None and folder is not None:
            chosen_cache = cache
            cache = reader.attempt(
                lambda: attrs.evolve(
                    chosen_cache,
                    path=confined(
                        "cache.path", absolute_path(chosen_cache.path or "", folder), confine
                    ),
                )
            )
    preset: PresetSpec | None = None
    if "preset" in data:
        sec_p = reader.section(data, "preset", ("name", "options"))
        preset = reader.attempt(lambda: preset_spec(sec_p.get("name"), sec_p.get("options")))
    error_policy = ErrorPolicySpec()
    sec_e = reader.section(data, "error_policy", ERROR_POLICY_KEYS)
    if sec_e:
        error_policy = reader.attempt(lambda: error_policy_spec(**sec_e)) or error_policy

    workers = WorkersSpec()
    sec_w = reader.section(
        data,
        "workers",
        ("num_workers", "prefetch_factor", "persistent", "pin_memory", "start_method", "timeout"),
    )
    if sec_w:
        workers = (
            reader.attempt(
                lambda: workers_spec(
                    sec_w.get("num_workers", 0),
                    prefetch_factor=sec_w.get("prefetch_factor"),
                    persistent=sec_w.get("persistent"),
                    pin_memory=sec_w.get("pin_memory"),
                    start_method=sec_w.get("start_method"),
                    timeout=sec_w.get("timeout"),
                )
            )
            or workers
        )

    device = reader.attempt(lambda: device_spec(data.get("device", "cpu"))) or "cpu"

    distributed = DistributedSpec()
    sec_d = reader.section(data, "distributed", ("enabled", "world_size", "rank", "even_batches"))
    if "distributed" in data:  # a [distributed] table shards unless it says enabled = false
        distributed = (
            reader.attempt(
                lambda: distributed_spec(
                    world_size=sec_d.get("world_size"),
                    rank=sec_d.get("rank"),
                    even_batches=sec_d.get("even_batches", True),
                    enabled=sec_d.get("enabled", True),
                )
            )
            or distributed
        )

    for name in reader.given:
        if name not in reader.used:
            known = sorted(set(reader.wanted))
            reader.problems.append(
                Problem(
                    "bindings",
                    f"{name!r} is not used by this plan{did_you_mean(name, known)}; the plan "
                    f"binds: {', '.join(repr(k) for k in known) or 'nothing'}",
                )
            )

    if collator is not None and dataset is not None:
        chosen = collator
        try:
            collator = reader.attempt(lambda: resolve_auto(chosen, dataset))
        except PluginNotImportedError as exc:  # inspecting: 'auto' would import plugins
            reader.problems.append(
                Problem(
                    "collator",
                    f"'auto' cannot be resolved without importing plugins ({exc}); name the "
                    f"collator, or load the plan to build",
                )
            )

    reported = {p.path for p in reader.problems}
    reader.problems.extend(p for p in value_problems if p.path not in reported)
    if reader.problems or dataset is None or collator is None:
        raise PlanError(reader.problems or [Problem("plan", "the plan could not be read")])
    try:
        return LoaderPlan(
            dataset=dataset,
            batch=batch,
            order=order,
            collator=collator,
            transform=transform,
            workers=workers,
            device=device,
            distributed=distributed,
            bucketing=bucketing,
            sampling_weights=sampling_weights,
            curriculum=curriculum,
            mixture=mixture,
            max_length=max_length,
            split=split,
            checks=checks,
            error_policy=error_policy,
            cache=cache,
            preset=preset,
            bindings=None if reader.unbound else reader.used,
        )
    except PlanError as exc:
        raise PlanError(exc.problems) from None


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise PlanError.single(
            "file", f"{path.name!r}: plan files end in .json or .toml (got {suffix or 'none'!r})"
        )
    return suffix


def save_plan(plan: LoaderPlan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as JSON or TOML, chosen by the file's suffix.

    Paths in dataset sources that lie inside the file's folder are written relative to it.
    """
    target = Path(path)
    data = plan.to_dict()
    folder = target.parent.resolve()
    if plan.dataset.source is not None:
        data["dataset"]["source"] = source_table(plan.dataset.source, folder)
    if plan.mixture is not None:
        for table, spec in zip(data["mixture"]["sources"], plan.mixture.sources, strict=True):
            if spec.source is not None:
                table["source"] = source_table(spec.source, folder)
    if plan.cache is not None and plan.cache.path is not None:  # relative to the file
        data["cache"]["path"] = relative_path(absolute_path(plan.cache.path, None), folder)
    if _suffix(target) == ".json":
        target.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    else:
        import tomli_w

        target.write_text(tomli_w.dumps(data), encoding="utf-8")


_TOML_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"[^"\\\n]*"|'[^'\n]*')"""
_DEEP_TOML_KEY = re.compile(
    rf"(?<![A-Za-z0-9_.\-\"'])(?:{_TOML_KEY_PART})(?:\.{_TOML_KEY_PART}){{{LIMITS.depth}}}"
)
"""A dotted key of more than ``LIMITS.depth`` parts, in TOML text without spaces and tabs.

Python's TOML reader takes time quadratic in the parts of one key (100,000 parts: minutes),
so such a key is refused before parsing. Linear: a match starts only at the first part of a
chain. A string value of that many dotted parts is refused too (no plan holds one).
"""


def read_plan_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The data of a plan file, parsed, and nothing else: no check, no import, no write.

    Refuses (``PlanError`` at ``file``) a file over ``LIMITS.file_bytes``, one that is not
    UTF-8, not valid JSON/TOML, or nested too deeply or holding integers too long for the
    parser; :func:`plan_from_dict` checks the rest.
    """
    source = Path(path)
    suffix = _suffix(source)
    limit = LIMITS.file_bytes
    try:  # non-blocking: opening a FIFO must not wait for a writer
        with os.fdopen(os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PlanError.single(
                    "file",
                    f"{str(source)!r} is not a regular file (a pipe, a device, a socket?); "
                    f"pass the path of a .json or .toml plan file",
                )
            raw = handle.read(limit + 1)
    except PlanError:
        raise
    except OSError as exc:
        raise PlanError.single("file", f"cannot read {str(source)!r}: {exc.strerror}") from None
    except ValueError as exc:  # a path the OS cannot take (a NUL byte)
        raise PlanError.single("file", f"cannot read {str(source)!r}: {exc}") from None
    if len(raw) > limit:
        raise PlanError.single(
            "file",
            f"{source.name!r} is larger than {limit:,} bytes, the bound on a plan file; a plan "
            f"holds settings, not data: pass large arrays in bindings",
        )
    kind = suffix[1:].upper()
    try:
        text = raw.decode("utf-8")
        if text.count(",") + text.count("\n") > 4 * LIMITS.values:  # before a long parse
            raise PlanError.single(
                "file",
                f"{source.name!r} holds more than {LIMITS.values:,} values (by its commas and "
                f"lines); a plan file is settings, not data: pass large arrays in bindings",
            )
        if suffix == ".toml" and _DEEP_TOML_KEY.search(text.replace(" ", "").replace("\t", "")):
            raise PlanError.single(
                "file",
                f"{source.name!r} holds a dotted key (or a string) of more than {LIMITS.depth} "
                f"parts; a plan nests at most {LIMITS.depth} levels (and TOML reads such keys "
                f"in quadratic time): shorten it",
            )
        data = json.loads(text) if suffix == ".json" else tomllib.loads(text)
    except PlanError:
        raise
    except UnicodeDecodeError as exc:
        raise PlanError.single("file", f"{source.name!r} is not UTF-8 text: {exc}") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError.single("file", f"{source.name!r} is not valid {kind}: {exc}") from None
    except RecursionError:
        raise PlanError.single(
            "file",
            f"{source.name!r} nests arrays or tables too deeply to read (a plan allows "
            f"{LIMITS.depth} levels)",
        ) from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise PlanError.single(
            "file", f"{source.name!r} holds a value this reader refuses: {exc}"
        ) from None
    if not isinstance(data, dict):
        raise PlanTypeError.single(
            "file", f"{source.name!r} must hold a table of sections (got {type(data).__name__})"
        )
    return data


def load_plan(
    path: str | os.PathLike[str],
    *,
    bindings: Mapping[str, object] | None = None,
    allow_imports: bool = False,
    require_bindings: bool = True,
    allow_external_paths: bool = False,
) -> LoaderPlan:
    """Read a plan file (``.json`` or ``.toml``); syntax errors name the file and line.

    Relative paths resolve against the file's folder; paths leaving it are refused unless
    ``allow_external_paths`` (``docs/security.md``).
    """
    source = Path(path)
    return plan_from_dict(
        read_plan_file(source),
        bindings=bindings,
        allow_imports=allow_imports,
        require_bindings=require_bindings,
        base_dir=source.parent,
        allow_external_paths=allow_external_paths,
    )
