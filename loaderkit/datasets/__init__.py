"""Dataset sources: registered factories a plan file calls to make its dataset again.

A plan records a dataset by *binding* (the caller passes the object again when loading) and,
when the dataset came from :func:`load`, by its *source*: a factory name and its options, plain
data. ``LoaderPlan.load(path)`` then calls the factory again and needs no bindings::

    import loaderkit.datasets as lkd

    ds = lkd.load("tokens", n=1000, seed=3)           # any registered factory, by name
    ds = lkd.from_files("data/train.jsonl")           # local json/jsonl/csv/parquet/text files
    plan = DataLoaderBuilder().with_dataset(ds, name="train").with_batch_size(8).compile()
    plan.save("plans/train.toml")                     # [dataset.source] name + options
    again = LoaderPlan.load("plans/train.toml")       # calls the factory; no bindings needed

The API:

- ``register(name, factory=None, *, description="", paths=(), replace=False)``: register a
  factory ``(**options) -> dataset`` (as a call or a decorator). ``paths`` names the options
  that hold file paths (a string or a list of strings): :func:`load` makes relative ones
  absolute, ``plan.save(file)`` stores them relative to the file's folder when they lie inside
  it, and ``LoaderPlan.load(file)`` resolves relative ones against that folder.
- ``load(name, /, **options)``: call the factory and return its dataset, remembering the
  source. ``name`` is a registered name or a ``"module:qualname"`` reference to a factory.
  Options must be plain data (str, int, float, bool, None, lists and dicts of them); the
  factory receives them as given (lists stay lists).
- ``from_files(path_or_paths, format=None, *, split="train", cache_dir=None)``:
  ``load("hf_files", ...)`` with
  the format guessed from the suffix (``.json``/``.jsonl`` json, ``.csv``, ``.parquet``,
  ``.txt`` text; ``.gz``/``.bz2``/``.xz``/``.zst`` compression is looked through).
- ``source_of(dataset)``: the :class:`DatasetSource` the dataset remembers, or ``None``.
- ``flat(samples)``: a list's samples stored flat (one byte buffer plus offsets, a
  :class:`FlatSamples`), for a ``Dataset`` class of your own to hold so that its workers
  read it without copying it (:mod:`loaderkit.datasets.serialized`; a list given to
  ``with_dataset`` is stored so by itself, see ``storage=``).
- ``factories``: the :class:`~loaderkit.registry.Registry` (``names()``, ``describe()``,
  ``get()``); installed packages add factories through the entry-point group
  ``loaderkit.datasets``.

Built-in factories:

- ``hf_files(data_files, format=None, split="train", cache_dir=None)``: HF
  ``datasets.load_dataset(format, data_files=..., split=..., cache_dir=...)`` of local files
  (glob patterns allowed; each must be a regular file: devices, FIFOs, sockets, directories
  and ``/proc`` or ``/sys`` entries, or links to them, are refused). The dataset's identity is
  a sha256 of the files' bytes (with format and split), so moving or copying the files keeps
  it, and a changed file is noticed when a plan is loaded (each call reads the files once more
  to hash them, about a second per GB). HF writes an Arrow copy of the data (and lock files)
  into ``cache_dir``, or its own cache (``HF_DATASETS_CACHE``) when unset; ``cache_dir`` is a
  path option, not part of the stream fingerprint.
- ``image_folder(root, mode="RGB", allow_empty=False, follow_external_links=False,
  hash_contents=False, decode_scale="auto", decoder="auto")``: images in class folders
  (torchvision's ``ImageFolder`` layout), samples ``(uint8 CHW tensor, class index)``; and
  ``image_files(files, labels=None, ...)``: image files or glob patterns. Decoded lazily in the
  workers; identity is the file list with sizes and times (or content hashes). See
  :mod:`loaderkit.datasets.images` and ``docs/vision.md``.
- ``tokens(n=1000, vocab_size=1000, min_length=8, max_length=64, seed=0)``: ``n`` samples
  ``{"input_ids": [...]}`` of random lengths in ``[min_length, max_length]``, each a pure
  function of ``(seed, index)``: a small map-style dataset for examples and tests.

What a dataset remembers: the object :func:`load` returned, as long as it is unchanged. A
dataset derived from it (``ds.map(...)``, ``ds.with_format(...)``, a copy, a wrapper) is a new
object without a source: pass it by binding, or register a factory that makes it. A factory
returning a ``list``, ``dict`` or ``tuple`` gets it back as a subclass of that type that can
hold the source. HF datasets changed in place (``set_format``) lose their source as well.

Security (``docs/security.md``): loading a plan file only calls *registered* factories. A
``"module:qualname"`` source is your own code in :func:`load`, but a plan file naming one is
refused (register the factory under a name instead, or pass the dataset in bindings), whatever
the trust settings; inspecting a plan (``require_bindings=False``) calls no factory at all.

The plan layer imports this module; it never imports torch or ``datasets`` itself: factories
import what they need inside their bodies.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import attrs

from loaderkit._checks import LIMITS, FrozenMap, freeze_value, thaw_value
from loaderkit.datasets import images as _images
from loaderkit.datasets.files import FORMATS, hf_files, path_list
from loaderkit.datasets.serialized import FlatSamples, flat
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.registry import Registry, UnknownNameError, resolve_ref

__all__ = [
    "FORMATS",
    "DatasetSource",
    "FlatSamples",
    "SyntheticTokens",
    "factories",
    "flat",
    "from_files",
    "image_files",
    "image_folder",
    "load",
    "register",
    "source_of",
]

F = TypeVar("F", bound=Callable[..., Any])

factories: Registry[Callable[..., Any]] = Registry(
    "dataset", entry_point_group="loaderkit.datasets"
)
"""The registry of dataset factories, by name."""

_PATH_OPTIONS: dict[str, tuple[str, ...]] = {}
"""Registered name -> the options of its factory that hold file paths."""

_TAG = "__loaderkit_source__"


@attrs.frozen
class DatasetSource:
    """Where a dataset comes from: a factory (registry name or ``module:qualname``) + options.

    Plain data: ``options`` is a :class:`~loaderkit._checks.FrozenMap` of plain values (lists
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
        return () if self.is_ref else _PATH_OPTIONS.get(self.name, ())

    def describe(self) -> str:
        """``tokens(n=100, seed=3)``; paths under the working directory are shown relative."""
        shown = []
        for key, value in self.options.items():
            if key in self.path_options:
                value = _map_paths(value, _shown_path)
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


# -- registering --------------------------------------------------------------------------------


@overload
def register(
    name: str,
    factory: None = None,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> Callable[[F], F]: ...


@overload
def register(
    name: str,
    factory: F,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> F: ...


def register(
    name: str,
    factory: F | None = None,
    *,
    description: str = "",
    paths: Sequence[str] = (),
    replace: bool = False,
) -> F | Callable[[F], F]:
    """Register a dataset factory ``(**options) -> dataset`` under ``name``.

    Works as a call or as a decorator: ``@loaderkit.datasets.register("wiki")``. ``paths``
    names the options holding file paths (a string or a list of strings). The description
    defaults to the first line of the factory's docstring. A taken name raises ``ValueError``
    unless ``replace=True``.
    """
    if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
        raise TypeError(f"paths must be a sequence of option names (got {paths!r})")

    def decorate(fn: F) -> F:
        factories.register(name, fn, description=description, replace=replace)
        _PATH_OPTIONS[name] = tuple(paths)
        return fn

    if factory is None:
        return decorate
    return decorate(factory)


# -- loading ------------------------------------------------------------------------------------


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
    source = make_source(name, options)
    problems = source_problems(source)
    if problems:
        raise PlanError(problems)
    return rebuild(source, allow_imports=True)


def make_source(
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
                value = _map_paths(value, _path_mapper(path, base_dir, confine), path)
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


# -- relative paths in plan files ---------------------------------------------------------------


def relative_to(source: DatasetSource, folder: Path) -> DatasetSource:
    """``source`` with its path options relative to ``folder`` where they lie inside it."""
    if not source.path_options:
        return source
    options = dict(source.options)
    for key in source.path_options:
        if key in options:
            options[key] = _map_paths(options[key], lambda p: relative_path(p, folder))
    return DatasetSource(source.name, FrozenMap(options))


def absolute_path(path: str, base_dir: Path | None) -> str:
    """``path`` made absolute against ``base_dir`` (``None``: the working directory), normalised.

    ``~`` is expanded; nothing on disk is read.
    """
    expanded = Path(os.path.expanduser(path))
    if not expanded.is_absolute():
        expanded = (base_dir if base_dir is not None else Path.cwd()) / expanded
    return os.path.normpath(expanded)


def _path_mapper(where: str, base_dir: Path | None, confine: Path | None) -> Callable[[str], str]:
    def mapped(path: str) -> str:
        return confined(where, absolute_path(path, base_dir), confine)

    return mapped


def confined(where: str, path: str, folder: Path | None) -> str:
    """``path`` (absolute, normalised) if it lies inside ``folder``; else a ``PlanError``.

    ``folder=None`` accepts any path. The test is on the path as written, normalised (no
    file is opened, no link followed): a plan file names data and folders below its own.
    """
    if folder is None:
        return path
    base = os.path.normpath(folder)
    if path == base or path.startswith(base.rstrip(os.sep) + os.sep):
        return path
    raise PlanError.single(
        where,
        f"{path!r} lies outside the plan file's folder {base!r}; a plan file may only name "
        f"paths inside its folder: move the data (or the plan file), or pass "
        f"allow_external_paths=True (`--allow-external-paths` on the command line) if you "
        f"trust this file",
    )


def relative_path(path: str, folder: Path) -> str:
    """``path`` relative to ``folder`` (POSIX form) when it lies inside it, else unchanged."""
    real = Path(os.path.realpath(os.path.dirname(path))) / os.path.basename(path)
    for candidate, base in ((Path(path), folder), (real, folder.resolve())):
        try:
            return candidate.relative_to(base).as_posix()
        except ValueError:
            continue
    return path


def _shown_path(path: str) -> str:
    return relative_path(path, Path.cwd())


def _map_paths(value: object, fn: Callable[[str], str], where: str = "") -> object:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return tuple(fn(v) for v in value)
    raise PlanTypeError.single(
        where or "dataset.source.options",
        f"must be a path or a list of paths (got {type(value).__name__} {value!r})",
    )


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


# -- local files (the hf_files factory is in loaderkit.datasets.files) --------------------------


def from_files(
    path_or_paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    format: str | None = None,
    *,
    split: str = "train",
    cache_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """Local files as an HF dataset that remembers them: ``load("hf_files", ...)``.

    ``format`` defaults to the one the suffix says (see :data:`FORMATS`). Relative paths are
    made absolute against the working directory; a plan file stores them relative to its own
    folder when they lie inside it. ``cache_dir`` is the folder HF ``datasets`` writes its
    Arrow copy of the files to (``None``: HF's cache, ``HF_DATASETS_CACHE``).
    """
    paths = path_list("dataset.source.options.data_files", path_or_paths)
    files: str | list[str] = paths[0] if len(paths) == 1 else paths
    options: dict[str, Any] = {"data_files": files, "split": split}
    if format is not None:
        options["format"] = format
    if cache_dir is not None:
        options["cache_dir"] = os.fspath(cache_dir)
    return load("hf_files", **options)


# -- images (the factories are in loaderkit.datasets.images) -----------------------------------


def image_folder(root: str | os.PathLike[str], **options: Any) -> _images.ImageDataset:
    """Images in class folders (torchvision's ``ImageFolder`` layout): ``load("image_folder")``.

    Samples are ``(image, class_index)``, the image a ``uint8`` ``(C, H, W)`` tensor decoded
    in the worker. ``options`` are :func:`loaderkit.datasets.images.image_folder`'s:
    ``mode`` (``"RGB"``, ``"L"``, ``"RGBA"``), ``allow_empty``, ``follow_external_links``,
    ``hash_contents``, ``decode_scale`` (``"auto"``, ``"full"``) and ``decoder`` (``"auto"``,
    ``"pil"``, ``"torchvision"``). A plan file stores ``root`` relative to its own folder.
    """
    dataset: _images.ImageDataset = load("image_folder", root=os.fspath(root), **options)
    return dataset


def image_files(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], **options: Any
) -> _images.ImageDataset:
    """Image files or glob patterns: ``load("image_files", ...)``.

    Samples are ``(image, label)`` with ``labels=[...]`` (one per file, ints or class names),
    else bare images. ``options`` are :func:`loaderkit.datasets.images.image_files`'s.
    """
    paths = path_list("dataset.source.options.files", files)
    dataset: _images.ImageDataset = load(
        "image_files", files=paths[0] if len(paths) == 1 else paths, **options
    )
    return dataset


# -- tokens -------------------------------------------------------------------------------------


class SyntheticTokens:
    """``n`` samples ``{"input_ids": [...]}``, each a pure function of ``(seed, index)``."""

    def __init__(
        self, n: int, vocab_size: int, min_length: int, max_length: int, seed: int
    ) -> None:
        self.n = n
        self.vocab_size = vocab_size
        self.min_length = min_length
        self.max_length = max_length
        self.seed = seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        import numpy as np

        if not -self.n <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} samples")
        rng = np.random.default_rng([self.seed, index % self.n])
        length = int(rng.integers(self.min_length, self.max_length + 1))
        return {"input_ids": rng.integers(1, self.vocab_size, size=length).tolist()}

    def __repr__(self) -> str:
        return (
            f"SyntheticTokens(n={self.n}, vocab_size={self.vocab_size}, min_length="
            f"{self.min_length}, max_length={self.max_length}, seed={self.seed})"
        )


def tokens(
    n: int = 1000,
    vocab_size: int = 1000,
    min_length: int = 8,
    max_length: int = 64,
    seed: int = 0,
) -> SyntheticTokens:
    """Synthetic token sequences of random lengths, for examples and tests."""
    lowest = (
        ("n", n, 0),
        ("vocab_size", vocab_size, 2),
        ("min_length", min_length, 1),
        ("max_length", max_length, 1),
        ("seed", seed, 0),
    )
    for key, value, low in lowest:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PlanError.single(
                f"dataset.source.options.{key}", f"must be an int >= {low} (got {value!r})"
            )
    if n > LIMITS.dataset_length:
        raise PlanError.single(
            "dataset.source.options.n", f"must be <= {LIMITS.dataset_length:,} (got {n:,})"
        )
    if min_length > max_length:
        raise PlanError.single(
            "dataset.source.options.min_length",
            f"is {min_length} but max_length is {max_length}; make min_length <= max_length",
        )
    return SyntheticTokens(n, vocab_size, min_length, max_length, seed)


factories.register("hf_files", hf_files, origin="builtin")
_PATH_OPTIONS["hf_files"] = ("data_files", "cache_dir")
factories.register("tokens", tokens, origin="builtin")
factories.register("image_folder", _images.image_folder, origin="builtin")
_PATH_OPTIONS["image_folder"] = ("root",)
factories.register("image_files", _images.image_files, origin="builtin")
_PATH_OPTIONS["image_files"] = ("files",)
