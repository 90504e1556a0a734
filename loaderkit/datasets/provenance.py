"""Where a dataset comes from: a :class:`DatasetSource` (factory + options); load, remember it.

:func:`load` freezes the options (:func:`freeze_source`), checks them against the factory's
signature (:func:`source_problems`), calls it (:func:`rebuild`) and tags the dataset with its
source, which :func:`source_of` reads back while the dataset is unchanged. A plan file's source
is rebuilt the same way; :func:`relative_to` stores its path options relative to the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from loaderkit._frozen import FrozenMap, freeze_value, thaw_value
from loaderkit.datasets.paths import map_paths, path_mapper, relative_path, shown_path
from loaderkit.datasets.registry import factories, path_options
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.registry import UnknownNameError, resolve_ref

__all__ = [
    "DatasetSource",
    "factory_of",
    "freeze_source",
    "load",
    "plain_type_name",
    "rebuild",
    "relative_to",
    "source_of",
    "source_problems",
]

_TAG = "__loaderkit_source__"


@attrs.frozen
class DatasetSource:
    """Where a dataset comes from: a factory (registry name or ``module:qualname``) + options.

    Plain data: ``options`` is a :class:`~loaderkit._frozen.FrozenMap` of plain values (lists
    as tuples). Path options hold absolute paths in memory (see :func:`register`).
    """

    name: str
    options: FrozenMap = attrs.field(factory=FrozenMap)

    @property
    def is_ref(self) -> bool:
        """True when ``name`` is a ``module:qualname`` reference, not a registry name."""
        return ":" in self.name

    @property
    def path_options(self) -> tuple[str, ...]:
        """The options holding file paths (declared with ``register(..., paths=...)``)."""
        return () if self.is_ref else path_options(self.name)

    def describe(self) -> str:
        """``tokens(n=100, seed=3)``; paths under the working directory are shown relative."""
        shown = []
        for key, value in self.options.items():
            if key in self.path_options:
                value = map_paths(value, shown_path)
            shown.append(f"{key}={thaw_value(value)!r}")
        return f"{self.name}({', '.join(shown)})"

    def without_paths(self) -> dict[str, Any]:
        """Plain data for the stream fingerprint: name and options, path options left out.

        Where the files are does not change the samples; what they hold is the dataset's
        identity (``hf_files`` hashes the files' bytes), which the fingerprint covers.
        """
        options = {k: v for k, v in self.options.items() if k not in self.path_options}
        return {"name": self.name, "options": thaw_value(FrozenMap(options))}


@attrs.frozen
class _Tag:
    """What a dataset returned by :func:`load` carries: its source and what it was then."""

    source: DatasetSource
    object_id: int
    fingerprint: object
    length: int | None


def load(name: str, /, **options: Any) -> Any:
    """Call the factory ``name`` with ``options``; the dataset remembers this source.

    ``name`` is a registered name or a ``"module:qualname"`` reference (imported as written:
    this is your own code). Relative path options are made absolute against the working
    directory. Raises :class:`~loaderkit.registry.UnknownNameError` for an unknown name and
    :class:`~loaderkit.PlanError` for options the factory does not take or refuses.
    """
    if not isinstance(name, str) or not name:
        raise PlanTypeError.single(
            "dataset.source.name",
            f"must be a registered factory name or a 'module:qualname' string (got {name!r})",
        )
    source = freeze_source(name, options)
    problems = source_problems(source)
    if problems:
        raise PlanError(problems)
    return rebuild(source, allow_imports=True)


def freeze_source(
    name: str,
    options: Mapping[str, object],
    base_dir: Path | None = None,
    *,
    confine: Path | None = None,
) -> DatasetSource:
    """Freeze ``options`` into a :class:`DatasetSource`, resolving relative path options.

    Relative paths resolve against ``base_dir`` (``None``: the working directory). With
    ``confine`` (a plan file's folder), a path option that resolves outside that folder
    (absolute elsewhere, ``..``, ``~``) is refused. Raises :class:`~loaderkit.PlanError` (path
    ``dataset.source.options.<key>``) for values that are not plain data or leave the folder,
    and :class:`~loaderkit.registry.UnknownNameError` for an unknown name.
    """
    if ":" not in name and name not in factories:
        raise UnknownNameError(factories.unknown_message(name))
    paths = DatasetSource(name).path_options
    frozen: dict[str, object] = {}
    problems: list[Problem] = []
    for key, value in options.items():
        path = f"dataset.source.options.{key}"
        try:
            value = freeze_value(path, value)
            if key in paths:
                value = map_paths(value, path_mapper(path, base_dir, confine), path)
        except PlanError as exc:
            problems.extend(exc.problems)
            continue
        frozen[key] = value
    if problems:
        raise PlanError(problems)
    return DatasetSource(name, FrozenMap(frozen))


def source_problems(source: DatasetSource, *, load_plugins: bool = True) -> list[Problem]:
    """Options the registered factory's signature does not take or needs (registry names only).

    Reference sources are checked when they are resolved. Problems are at
    ``dataset.source.options.<key>``. With ``load_plugins=False`` (inspecting a plan file) a
    factory that an entry point provides and nothing has imported yet is not imported: its
    options are checked when the plan is loaded to build.
    """
    if source.is_ref:
        return []
    if not load_plugins and factories.loaded(source.name) is None:
        return (
            []
            if source.name in factories
            else [Problem("dataset.source.name", factories.unknown_message(source.name))]
        )
    try:
        entry = factories.get(source.name)
    except UnknownNameError as exc:
        return [Problem("dataset.source.name", str(exc))]
    return [
        Problem(f"dataset.source.options.{o}" if o else "dataset.source.options", m)
        for o, m in entry.signature_problems(dict(source.options))
    ]


def factory_of(source: DatasetSource, *, allow_imports: bool = False) -> Callable[..., Any]:
    """The factory a source names: a registry entry, or a ``module:qualname`` it may resolve.

    A reference resolves only under :func:`~loaderkit.registry.resolve_ref`'s trust rules
    (``PermissionError`` otherwise, ``LookupError`` when it does not resolve).
    """
    if not source.is_ref:
        return factories.get(source.name).factory
    target = resolve_ref(source.name, allow_imports=allow_imports)
    if not callable(target):
        raise LookupError(f"{source.name!r} is not callable (got {type(target).__name__})")
    return target


def rebuild(source: DatasetSource, *, allow_imports: bool = False) -> Any:
    """Call the factory of ``source`` with its options; return the dataset, tagged with it.

    A factory that raises gives a :class:`~loaderkit.PlanError` at ``dataset.source`` naming
    the source and the cause (chained); a ``PlanError`` of its own passes through.
    """
    factory = factory_of(source, allow_imports=allow_imports)
    options = {k: thaw_value(v) for k, v in source.options.items()}
    try:
        dataset = factory(**options)
    except PlanError:
        raise
    except Exception as exc:  # any failure: reported at dataset.source, the cause chained
        raise PlanError.single(
            "dataset.source",
            f"{source.describe()} failed: {type(exc).__name__}: {exc}; fix the options or the "
            f"files, or pass the dataset in bindings",
        ) from exc
    if dataset is None:
        raise PlanTypeError.single(
            "dataset.source", f"{source.describe()} returned None; a factory returns a dataset"
        )
    return _remember(dataset, source)


def source_of(dataset: object) -> DatasetSource | None:
    """The source ``dataset`` was loaded from with :func:`load`, while it is unchanged."""
    tag = getattr(dataset, _TAG, None)
    if not isinstance(tag, _Tag) or tag.object_id != id(dataset):
        return None
    if getattr(dataset, "_fingerprint", None) != tag.fingerprint or _length(dataset) != tag.length:
        return None
    return tag.source


def relative_to(source: DatasetSource, folder: Path) -> DatasetSource:
    """``source`` with its path options relative to ``folder`` where they lie inside it."""
    if not source.path_options:
        return source
    options = dict(source.options)
    for key in source.path_options:
        if key in options:
            options[key] = map_paths(options[key], lambda p: relative_path(p, folder))
    return DatasetSource(source.name, FrozenMap(options))


# -- remembering the source ---------------------------------------------------------------------


class _SourcedList(list):  # type: ignore[type-arg]
    """A list returned by a factory: a list that can hold its source."""


class _SourcedDict(dict):  # type: ignore[type-arg]
    """A dict of columns returned by a factory: a dict that can hold its source."""


class _SourcedTuple(tuple):  # type: ignore[type-arg]
    """A tuple of columns returned by a factory: a tuple that can hold its source."""


_WRAPPERS: tuple[tuple[type, type], ...] = (
    (list, _SourcedList),
    (dict, _SourcedDict),
    (tuple, _SourcedTuple),
)


def plain_type_name(dataset: object) -> str | None:
    """``"builtins.list"`` (dict, tuple) for a container :func:`load` wrapped, else ``None``.

    Plans record the plain type, so a plain list bound in place of a loaded one is the same.
    """
    for plain, wrapper in _WRAPPERS:
        if type(dataset) is wrapper:
            return f"builtins.{plain.__name__}"
    return None


def _length(dataset: object) -> int | None:
    try:
        return len(dataset)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # none, negative, over 2**63: no length
        return None


def _remember(dataset: Any, source: DatasetSource) -> Any:
    try:
        object.__getattribute__(dataset, "__dict__")
    except AttributeError:
        for plain, wrapper in _WRAPPERS:
            if type(dataset) is plain:
                dataset = wrapper(dataset)
                break
        else:
            raise PlanTypeError.single(
                "dataset.source",
                f"{source.describe()} returned a {type(dataset).__name__}, which cannot hold "
                f"its source; return a torch or HF dataset, a list, a dict or a tuple",
            ) from None
    tag = _Tag(source, id(dataset), getattr(dataset, "_fingerprint", None), _length(dataset))
    object.__setattr__(dataset, _TAG, tag)
    return dataset
