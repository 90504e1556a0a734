"""The ``[dataset]`` section: the dataset a plan reads (and each source of a mixture)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._frozen import thaw_value
from loaderkit._limits import LIMITS
from loaderkit._validate import check_choice, check_int, check_str, did_you_mean, unknown_keys
from loaderkit.datasets.provenance import (
    DatasetSource,
    freeze_source,
    plain_type_name,
    rebuild,
    relative_to,
    source_of,
    source_problems,
)
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.fields import RESERVED_BINDINGS, binding_name
from loaderkit.plan.sections.base import ExplainRows, FingerprintRow, RuleContext, Section
from loaderkit.plan.specs import (
    DATASET_KINDS,
    STORAGES,
    DatasetSpec,
    Storage,
    dataset_summary,
    describe_dataset,
)
from loaderkit.registry import UnknownNameError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "SECTION",
    "dataset_arg",
    "dataset_calls",
    "dataset_spec",
    "dataset_to_dict",
    "describe_recorded",
    "described",
    "read_dataset",
    "read_source",
    "shown_object",
    "source_table",
    "storage_spec",
]


def dataset_spec(dataset: object, name: object = None) -> DatasetSpec:
    """The spec of a live dataset bound under ``name`` (default ``"dataset"``)."""
    binding = "dataset" if name is None else binding_name("dataset.name", name)
    if binding in RESERVED_BINDINGS:
        raise PlanError.single(
            "dataset.name",
            f"{binding!r} is reserved for an object the builder binds itself (collator, "
            f"transform, length or weight functions, precomputed lengths or weights); name the "
            f"dataset something else",
        )
    if dataset is None:
        raise PlanTypeError.single("dataset", "got None; pass a dataset object")
    return described(dataset, binding)


def storage_spec(spec: DatasetSpec, storage: object, path: str = "dataset.storage") -> DatasetSpec:
    """``spec`` holding its samples as ``storage`` says (``with_dataset(..., storage=...)``).

    Only a list or tuple of samples, and a dict of columns (its Python list columns), has a
    storage to choose: another dataset refuses anything but ``"auto"``.
    """
    chosen: Storage = check_choice(path, storage, STORAGES)  # type: ignore[assignment]
    if chosen != "auto" and spec.kind not in ("samples", "columns"):
        raise PlanError.single(
            path,
            f"storage={chosen!r} applies to a list or tuple of samples or a dict of columns, "
            f"and dataset "
            f"{spec.binding!r} is a {DATASET_KINDS.get(spec.kind, spec.kind)} "
            f"({spec.type_name}); drop storage, or hold your samples flat inside your own "
            f"Dataset with loaderkit.datasets.flat(samples)",
        )
    return attrs.evolve(spec, storage=chosen)


def described(dataset: object, binding: str) -> DatasetSpec:
    """``describe_dataset``, with the source a ``loaderkit.datasets.load`` result remembers."""
    spec = describe_dataset(dataset, binding)
    type_name = plain_type_name(dataset) or spec.type_name
    return attrs.evolve(spec, source=source_of(dataset), type_name=type_name)


def dataset_to_dict(ds: DatasetSpec) -> dict[str, Any]:
    """The ``[dataset]`` table of a plan file (and of each ``[[mixture.sources]]``)."""
    out: dict[str, Any] = {"binding": ds.binding, "kind": ds.kind, "type": ds.type_name}
    if ds.length is not None:
        out["length"] = ds.length
    if ds.identity is not None:
        out["identity"] = ds.identity
    if ds.columns:
        out["columns"] = list(ds.columns)
    if ds.features:
        out["features"] = list(ds.features)
    if ds.source is not None:
        out["source"] = source_table(ds.source)
    if ds.storage != "auto":  # the default is not written: older files read the same
        out["storage"] = ds.storage
    if ds.shards is not None:  # only a sharded dataset's: older files read the same
        out["shards"] = ds.shards
    return out


def source_table(source: DatasetSource, folder: Path | None = None) -> dict[str, Any]:
    """The ``[dataset.source]`` table: ``name`` or ``ref``, and ``options``.

    With ``folder`` (the folder of the file being written), path options that lie inside it
    are written relative to it.
    """
    if folder is not None:
        source = relative_to(source, folder)
    key = "ref" if source.is_ref else "name"
    return {key: source.name, "options": thaw_value(source.options)}


def _stream(plan: LoaderPlan) -> dict[str, Any]:
    ds = plan.dataset
    data: dict[str, Any] = {
        "binding": ds.binding,
        "kind": ds.kind,
        "type": ds.type_name,
        "length": ds.length,
        "identity": ds.identity,
        "columns": list(ds.columns),
    }
    if ds.source is not None:  # absent otherwise: older fingerprints are unchanged
        data["source"] = ds.source.without_paths()  # where the files are is not what they hold
    if ds.shards is not None:  # absent otherwise: older fingerprints are unchanged
        data["shards"] = ds.shards
    return {"dataset": data}


def read_dataset(
    reader: Reader, data: Mapping[str, Any], path: str = "dataset"
) -> DatasetSpec | None:
    """Read the ``[dataset]`` table, or a mixture source's at ``path``.

    The object bound to it, or the one its source makes, must be the dataset recorded.
    """
    sec = reader.section(
        data,
        path,
        (
            "binding",
            "kind",
            "type",
            "length",
            "identity",
            "columns",
            "features",
            "source",
            "storage",
            "shards",
        ),
    )
    if path not in data:
        reader.problems.append(Problem(path, "missing; a plan needs a [dataset] table"))
        return None
    if "binding" not in sec:
        reader.problems.append(
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
            length = check_int(f"{path}.length", length, minimum=0, maximum=LIMITS.dataset_length)
        identity = sec.get("identity")
        if identity is not None:
            identity = check_str(f"{path}.identity", identity)
        columns = sec.get("columns", [])
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise PlanTypeError.single(
                f"{path}.columns", f"must be a list of strings (got {columns!r})"
            )
    except PlanError as exc:
        reader.problems.extend(exc.problems)
        return None
    features = sec.get("features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        reader.problems.append(
            Problem(f"{path}.features", f"must be a list of strings (got {features!r})")
        )
        return None
    source = None
    if "source" in sec:
        source = read_source(reader, sec["source"], path)
        if source is None:
            return None
    spec = DatasetSpec(
        binding, kind, type_name, length, identity, tuple(columns), tuple(features), source
    )
    recorded: DatasetSpec | None = reader.attempt(lambda: _with_options(spec, sec, path))
    if recorded is None:
        return None
    if kind == "mixture":
        if path != "dataset":
            reader.problems.append(Problem(path, "a mixture cannot be a source of a mixture"))
            return None
        if source is not None:
            reader.problems.append(
                Problem(f"{path}.source", "a mixture is made from its sources; drop it")
            )
        return recorded  # its sources are bound by the [mixture] table
    if source is not None and binding not in reader.given:
        return _rebuilt(reader, path, recorded, source)
    return _checked_binding(reader, path, recorded)


def _with_options(spec: DatasetSpec, sec: Mapping[str, Any], path: str) -> DatasetSpec:
    """``spec`` with the table's ``storage`` and ``shards``, when written (checked)."""
    if "storage" in sec:
        spec = storage_spec(spec, sec["storage"], f"{path}.storage")
    if "shards" in sec:
        shards = check_int(
            f"{path}.shards",
            sec["shards"],
            minimum=0,
            maximum=LIMITS.dataset_length,
            fix="the number of shards of a sharded dataset, as the plan recorded it",
        )
        spec = attrs.evolve(spec, shards=shards)
    return spec


def _checked_binding(reader: Reader, path: str, recorded: DatasetSpec) -> DatasetSpec:
    """``recorded``, after checking that the object bound to its name is that dataset."""
    binding, source = recorded.binding, recorded.source
    obj = reader.bind(path, binding)
    if obj is None:
        return recorded
    live = reader.attempt(lambda: dataset_spec(obj, binding))
    if live is None:
        return recorded
    live = attrs.evolve(live, source=source)  # a bound object wins over the source
    if not recorded.same_data(live):
        reader.problems.append(
            Problem(
                path,
                f"the object bound to {binding!r} is not the dataset the plan was made "
                f"for: {describe_recorded(live, recorded)} given, "
                f"{describe_recorded(recorded, live)} "
                f"expected; bind the same dataset or compile a new plan",
            )
        )
    return recorded


def read_source(reader: Reader, table: object, dataset_path: str) -> DatasetSource | None:
    """Read the ``source`` table of ``[dataset]``: ``name`` or ``ref``, and ``options``.

    A name must be registered and the options must fit its factory's signature; a ``ref``
    is only checked for its form here (it resolves, under the trust rules, when called).
    """
    path = f"{dataset_path}.source"
    if not isinstance(table, Mapping):
        reader.problems.append(
            Problem(path, f"must be a table with 'name' or 'ref' (got {type(table).__name__})")
        )
        return None
    reader.problems.extend(unknown_keys(path, table, ("name", "ref", "options")))
    given = [k for k in ("name", "ref") if k in table]
    if len(given) != 1:
        reader.problems.append(
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
        source = freeze_source(name, options, reader.base_dir, confine=reader.confine)
    except UnknownNameError as exc:
        reader.problems.append(Problem(f"{path}.name", str(exc)))
        return None
    except PlanError as exc:
        reader.problems.extend(_repath(exc.problems, dataset_path))
        return None
    problems = source_problems(source, load_plugins=reader.require_bindings)
    if problems:
        reader.problems.extend(_repath(problems, dataset_path))
        return None
    return source


def _rebuilt(
    reader: Reader, path: str, recorded: DatasetSpec, source: DatasetSource
) -> DatasetSpec:
    """Make the dataset again from its source and check it is the one recorded."""
    binding = recorded.binding
    reader.wanted.append(binding)
    if source.is_ref:  # a file makes datasets only with registered factories
        reader.problems.append(
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
    if not reader.require_bindings:  # inspecting: no factory is called, no module imported
        reader.unbound.append(binding)
        return recorded
    if not reader.call_factories:  # the plan is refused for its values (reported below)
        return recorded
    try:
        obj = rebuild(source)  # a registered factory
    except UnknownNameError as exc:  # a plugin that is gone or fails to import
        reader.problems.append(Problem(f"{path}.source.name", str(exc)))
        return recorded
    except PlanError as exc:
        reader.problems.extend(_repath(exc.problems, path))
        return recorded
    live = reader.attempt(lambda: dataset_spec(obj, binding))
    if live is None:
        return recorded
    if not recorded.same_data(live):
        reader.problems.append(
            Problem(
                path,
                f"the dataset made by {source.describe()} is not the one the plan was made "
                f"for: {describe_recorded(live, recorded)} made, "
                f"{describe_recorded(recorded, live)} expected; "
                f"its data changed: compile a new plan, or bind the original dataset "
                f"(bindings={{{binding!r}: ...}})",
            )
        )
        return recorded
    reader.used[binding] = obj
    return recorded


def _repath(problems: Sequence[Problem], path: str) -> list[Problem]:
    """Problems reported at ``dataset...`` moved to ``path`` (a mixture source's table)."""
    return [
        Problem(path + p.path.removeprefix("dataset"), p.message)
        if p.path.startswith("dataset")
        else p
        for p in problems
    ]


def describe_recorded(spec: DatasetSpec, against: DatasetSpec | None = None) -> str:
    """``"map list of 10 samples"``: a dataset as a message names it.

    With ``against`` (the other side of a mismatch), every field in which the two differ is
    shown, so that the two descriptions never read alike: the type in full
    (``module.qualname``) where the types differ, the identity (``none`` where one side has
    none), the columns, the HF features and the source that makes the dataset again.
    """
    size = "?" if spec.length is None else str(spec.length)
    differs = against is not None and against.type_name != spec.type_name
    type_name = spec.type_name if differs else spec.type_name.rsplit(".", 1)[-1]
    text = f"{spec.kind} {type_name} of {size} samples"
    if spec.identity:
        text += f", identity {spec.identity}"
    elif against is not None and against.identity:
        text += ", no identity"
    if against is None:
        return text
    if spec.columns != against.columns:
        text += f", columns {list(spec.columns)}"
    if spec.features != against.features:
        text += f", features {list(spec.features)}"
    if spec.shards != against.shards:
        text += ", not sharded" if spec.shards is None else f", {spec.shards} shards"
    if spec.source != against.source:
        made = "no source" if spec.source is None else f"made by {spec.source.describe()}"
        text += f", {made}"
    return text


def dataset_calls(spec: DatasetSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_dataset`` call (a mixture's combined dataset: its own call)."""
    if spec.kind == "mixture":
        return ()
    arg = dataset_arg(spec)
    if spec.binding != "dataset":
        arg += f", name={spec.binding!r}"
    if spec.storage != "auto":
        arg += f", storage={spec.storage!r}"
    return (f".with_dataset({arg})",)


def dataset_arg(spec: DatasetSpec) -> str:
    """The dataset as a builder repr shows it: ``<list: 100 samples>``, or the ``load`` call."""
    if spec.source is not None:  # the call that makes the dataset again
        opts = spec.source.options.items()
        options = "".join(f", {k}={thaw_value(v)!r}" for k, v in opts)
        return f"loaderkit.datasets.load({spec.source.name!r}{options})"
    return shown_object(spec.type_name, spec.length)


def shown_object(type_name: str, length: int | None) -> str:
    """A dataset the repr cannot write out: ``<list: 100 samples>``, ``<list: 1 sample>``."""
    size = "streamed" if length is None else f"{length} sample{'' if length == 1 else 's'}"
    return f"<{type_name.rsplit('.', 1)[-1]}: {size}>"


def _explain_dataset(plan: LoaderPlan) -> ExplainRows:
    """The ``source`` row, and a ``decode`` row for each bound source that decodes (images).

    A source says how it decodes with a ``loaderkit_plan_explain(transform)`` method (the
    image sources do), cheaply: no file is read. What the loader measures at build (the
    faster JPEG decoder) is ``loader.explain()``'s ``images`` row.
    """
    rows: list[tuple[str, str]] = [("source", dataset_summary(plan.dataset))]
    if plan.bindings is None:
        return tuple(rows)
    names = (
        [plan.dataset.binding]
        if plan.mixture is None
        else [source.binding for source in plan.mixture.sources]
    )
    describers = [
        (name, describe)
        for name in names
        if callable(describe := getattr(plan.bindings.get(name), "loaderkit_plan_explain", None))
    ]
    if describers:
        spec = plan.transform
        transform = None if spec is None else resolve_callable(plan, spec, "transform")
        rows.extend(("decode", f"{name!r}: {describe(transform)}") for name, describe in describers)
    return tuple(rows)


def _rules(ctx: RuleContext) -> list[Problem]:
    """The dataset's own problems: a mixture without its section, an unbound name, no samples.

    (Its length bound, which also holds each mixture source, is a rule of the whole plan.)
    """
    dataset: DatasetSpec = ctx.sections["dataset"]
    problems: list[Problem] = []
    if dataset.kind == "mixture" and ctx.sections.get("mixture") is None:
        problems.append(
            Problem(
                "dataset",
                "is a mixture but the plan has no mixture section; build it with "
                "with_mixture({...})",
            )
        )
    bindings = ctx.bindings
    if dataset.kind != "mixture" and bindings is not None and dataset.binding not in bindings:
        problems.append(
            Problem(
                "dataset",
                f"no object bound to {dataset.binding!r}; give the dataset to the builder, "
                f"or pass bindings={{{dataset.binding!r}: your_dataset}} when loading",
            )
        )
    if dataset.length == 0:
        problems.append(
            Problem(
                "dataset",
                f"{dataset.binding!r} has 0 samples; every epoch would be "
                f"empty; pass a non-empty dataset",
            )
        )
    return problems


SECTION: Section[DatasetSpec] = Section(
    rules={"dataset": _rules},
    name="dataset",
    explain=_explain_dataset,
    builder_calls=dataset_calls,
    read=read_dataset,
    to_dict=dataset_to_dict,
    bindings=DatasetSpec.bound_names,
    fingerprint="stream",
    stream=_stream,
    execution_only=("features", "storage"),
    rows=(
        FingerprintRow(
            "dataset identity",
            "stream",
            "binding name, kind, type, length, columns; HF datasets' own fingerprint",
        ),
        FingerprintRow(
            "dataset source",
            "stream",
            "(only when set) the factory's name and options, path options left out (see "
            "[dataset sources](#dataset-sources))",
        ),
        FingerprintRow(
            "`dataset.shards`",
            "stream",
            "(only when set) the number of shards of a sharded dataset: its order reads them "
            "in windows (see `order.window_shards`)",
        ),
        FingerprintRow(
            "`dataset.storage`",
            "exec",
            "how a list of samples is held for the workers (storage=): the samples read are "
            "the same",
        ),
    ),
)
