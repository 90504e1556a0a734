"""The frozen pieces several plan sections share: pure data, hashable, comparable by value.

A dataset (:class:`DatasetSpec`, and :func:`describe_dataset` that makes one), a callable
(:class:`CallableSpec`), a per-sample value source (:class:`LengthSource`: bucketing lengths,
sampling weights, curriculum difficulties) and the units of a schedule (:data:`ScheduleUnit`).
The spec of one section lives in its module under :mod:`loaderkit.plan.sections`.

Every spec is an attrs frozen class holding ints, strings, bools, tuples and
:class:`~loaderkit._frozen.FrozenMap` only. Live objects (a dataset, a lambda) never appear here:
a spec names them by *binding* and the plan keeps the objects beside the data.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

import attrs

from loaderkit._frozen import FrozenMap
from loaderkit._text import LISTED, inert, listed, shown
from loaderkit.datasets.provenance import DatasetSource
from loaderkit.errors import PlanError, PlanTypeError

__all__ = [
    "AUTO_FLAT_MIN_SAMPLES",
    "CURRICULUM_UNITS",
    "DATASET_KINDS",
    "STORAGES",
    "CallableSpec",
    "DatasetSpec",
    "LengthSource",
    "ScheduleUnit",
    "Storage",
    "column_rows",
    "describe_dataset",
    "is_sharded",
    "shard_count",
]

DATASET_KINDS = {
    "torch_map": "map-style dataset",
    "torch_iterable": "iterable dataset",
    "hf": "HF datasets.Dataset",
    "hf_iterable": "HF datasets.IterableDataset",
    "tensors": "tuple of tensors/arrays (columns)",
    "columns": "dict of columns",
    "samples": "list of samples",
    "mixture": "mixture of datasets",
}
"""Every kind of source ``with_dataset`` accepts, with how ``explain()`` names it."""

ITERABLE_KINDS = frozenset({"torch_iterable", "hf_iterable"})

Storage = Literal["auto", "flat", "objects"]
"""How a list of samples is held for the workers (``with_dataset(..., storage=...)``):
``"flat"`` serialized into one buffer, ``"objects"`` the list itself, ``"auto"`` flat when
workers read a list of at least :data:`AUTO_FLAT_MIN_SAMPLES` samples that all pickle."""

STORAGES: tuple[Storage, ...] = get_args(Storage)

AUTO_FLAT_MIN_SAMPLES = 10_000
"""The list size from which ``storage="auto"`` stores it flat for workers: below it, the
memory a worker can copy is small and the objects are kept as they are."""


@attrs.frozen
class DatasetSpec:
    """Where samples come from: a binding name plus the identity of the object bound to it.

    ``source`` is set for a dataset made by ``loaderkit.datasets.load``: loading a plan file
    calls that factory again when no object is bound.
    """

    binding: str
    kind: str
    type_name: str
    length: int | None = None
    identity: str | None = None
    columns: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    """HF feature types of ``columns`` (``"Image"``, ``"Sequence"``, ...), when known."""
    source: DatasetSource | None = None
    """The factory and options that make the dataset again (``loaderkit.datasets.load``)."""
    storage: Storage = "auto"
    """How a list of samples is held for the workers (:data:`Storage`); not the data itself,
    so two specs differing only here describe the same dataset (:meth:`same_data`)."""
    shards: int | None = None
    """The number of shards of a sharded dataset (one implementing
    :class:`~loaderkit.datasets.shards.layout.ShardLayout`), ``None`` for any other: over a
    sharded dataset, ``with_shuffle()`` shuffles shards, then samples within a window of
    them."""

    @property
    def sharded(self) -> bool:
        """Whether the dataset is made of shards (its order can be shard-aware)."""
        return self.shards is not None

    def same_data(self, other: DatasetSpec) -> bool:
        """Whether ``other`` describes the same data (its storage aside)."""
        return attrs.evolve(other, storage=self.storage) == self

    @property
    def iterable(self) -> bool:
        """True for sources that can only be iterated (no random access)."""
        return self.kind in ITERABLE_KINDS

    def bound_names(self) -> tuple[str, ...]:
        """The binding the dataset object lives under."""
        return (self.binding,)


@attrs.frozen
class CallableSpec:
    """A collator or transform, named the way a plan file can hold it.

    ``source`` is ``"registry"`` (``name`` is a registry name), ``"ref"`` (``name`` is
    ``"module:qualname"``) or ``"binding"`` (``name`` is a binding the caller supplies).
    ``options`` are the keyword options of a registry factory, plain data only.
    ``accepts_rng`` records whether a transform takes an ``rng`` keyword. ``label`` tells
    bound callables apart (``module.qualname`` of the object given to the builder), so
    functions defined in different places do not share a fingerprint. Objects with the same
    ``module.qualname`` (two lambdas in one function, ``functools.partial`` objects, instances of
    one class) cannot be told apart: give them an importable name, or register them.
    """

    source: Literal["registry", "ref", "binding"]
    name: str
    options: FrozenMap = attrs.field(factory=FrozenMap)
    accepts_rng: bool = False
    label: str = ""
    reason: str = attrs.field(default="", eq=False)
    """Why this collator was chosen (``with_collator("auto")``, ``with_task``); display only."""

    def describe(self) -> str:
        """How ``explain()`` and reprs show it: ``text(pad_token_id=0)``, ``<binding 'x'>``."""
        if self.source == "binding":  # reason is shown by explain(), not here
            return (
                f"<binding {shown(self.name)}: {inert(self.label)}>"
                if self.label
                else f"<binding {shown(self.name)}>"
            )
        opts = ", ".join(f"{inert(k)}={shown(v)}" for k, v in self.options.items())
        return f"{inert(self.name)}({opts})" if opts else inert(self.name)

    def bound_names(self) -> tuple[str, ...]:
        """The binding the object lives under (none for a registry name)."""
        return () if self.source == "registry" else (self.name,)


@attrs.frozen
class LengthSource:
    """Where bucketing reads sample lengths from.

    ``kind`` is ``"column"`` (``name`` is a column or sample key whose values are sequences),
    ``"callable"`` (``fn`` is called on every sample once, at build) or ``"array"`` (``name`` is
    the binding of a precomputed sequence of lengths; ``digest`` is a sha256 of its values).
    """

    kind: Literal["column", "callable", "array"]
    name: str = ""
    fn: CallableSpec | None = None
    digest: str = ""

    def describe(self) -> str:
        """``column 'input_ids'``, ``callable mymod:length`` or ``precomputed 'lengths'``."""
        if self.kind == "column":
            return f"column {self.name!r}"
        if self.kind == "array":
            return f"precomputed values {self.name!r}"
        assert self.fn is not None
        return f"callable {self.fn.describe()}"

    def bound_names(self) -> tuple[str, ...]:
        """The binding of the precomputed values or of the function (none for a column)."""
        if self.kind == "array":
            return (self.name,)
        return self.fn.bound_names() if self.fn is not None else ()


ScheduleUnit = Literal["epoch", "step"]
"""What a schedule's ``t`` counts (``by=`` of progressive settings): epochs or steps."""
CURRICULUM_UNITS: tuple[ScheduleUnit, ...] = get_args(ScheduleUnit)


def _feature_name(feature: object) -> str:
    return type(feature).__name__


def _type_name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def column_rows(column: object) -> int:
    """The rows of one column: the first dimension of an array or tensor, else ``len()``.

    Raises what ``len()`` raises (a 0-d array has no rows: ``TypeError``).
    """
    shape = getattr(column, "shape", None)
    if isinstance(shape, tuple) and shape:
        return int(shape[0])
    return len(column)  # type: ignore[arg-type]


def _length_of(path: str, column: object) -> int:
    if getattr(column, "shape", None) == ():
        raise PlanError.single(
            path, "is a 0-d array/tensor; columns need a first (sample) dimension"
        )
    try:
        return column_rows(column)
    except TypeError:
        raise PlanTypeError.single(
            path,
            f"must be a tensor, numpy array or sequence with one row per sample "
            f"(got {type(column).__name__})",
        ) from None
    except Exception as exc:  # __len__ of a user's object: too large, negative, or failing
        raise _len_failed(path, column, exc) from exc


def _len_failed(path: str, obj: object, exc: Exception) -> PlanError:
    """The error for a ``len()`` that failed other than by the object having no length."""
    return PlanError.single(
        path,
        f"len() of {type(obj).__name__} failed ({type(exc).__name__}: {exc}); its __len__ "
        f"must return the number of samples, an int >= 0",
    )


def _is_array(obj: object) -> bool:
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    return (torch is not None and isinstance(obj, torch.Tensor)) or (
        np is not None and isinstance(obj, np.ndarray)
    )


def _columns_length(columns: Mapping[str, object] | Sequence[object], labels: Sequence[str]) -> int:
    lengths = []
    for label, column in zip(
        labels, columns.values() if isinstance(columns, Mapping) else columns, strict=True
    ):
        lengths.append((label, _length_of(f"dataset[{label}]", column)))
    if not lengths:
        raise PlanError.single("dataset", "has no columns; pass at least one column")
    first_label, first = lengths[0]
    for label, length in lengths[1:]:
        if length != first:
            raise PlanError.single(
                "dataset",
                f"column {label} has {length} rows but column {first_label} has {first}; "
                f"all columns need one row per sample",
            )
    return first


def describe_dataset(obj: object, binding: str) -> DatasetSpec:
    """Classify a live dataset object and record its identity, without importing torch.

    Accepted: HF ``datasets.Dataset`` / ``IterableDataset``; torch map-style and iterable
    datasets (anything with ``__getitem__`` and ``__len__`` counts as map-style); a ``dict`` of
    equal-length columns (tensors, arrays or lists); a ``tuple`` of equal-length tensors/arrays
    (columns, like ``TensorDataset``); a ``list`` (or a tuple of non-arrays) of samples.

    The identity is HF's ``_fingerprint``, or the string ``_fingerprint`` a map-style dataset
    defines (``loaderkit.datasets.images.ImageDataset``: its file listing).
    """
    hf = sys.modules.get("datasets")
    torch = sys.modules.get("torch")
    if isinstance(obj, str | bytes):
        raise PlanTypeError.single(
            "dataset",
            f"got a string {obj!r}; pass the dataset object itself (a torch Dataset, an HF "
            f"Dataset, a dict of columns or a list of samples), or for files "
            f"loaderkit.datasets.from_files({obj!r})",
        )
    if hf is not None and isinstance(obj, hf.Dataset):
        return DatasetSpec(
            binding,
            "hf",
            _type_name(obj),
            len(obj),
            str(obj._fingerprint),
            tuple(obj.column_names),
            tuple(_feature_name(obj.features[c]) for c in obj.column_names),
        )
    if hf is not None and isinstance(obj, hf.IterableDataset):
        names = obj.column_names
        return DatasetSpec(binding, "hf_iterable", _type_name(obj), None, None, tuple(names or ()))
    if torch is not None and isinstance(obj, torch.utils.data.IterableDataset):
        return DatasetSpec(binding, "torch_iterable", _type_name(obj))
    if isinstance(obj, Mapping):
        keys = list(obj)
        for key in keys:
            if not isinstance(key, str):
                raise PlanTypeError.single(
                    "dataset", f"dict columns need string names (got {key!r})"
                )
        length = _columns_length(obj, [repr(k) for k in keys])
        return DatasetSpec(binding, "columns", _type_name(obj), length, None, tuple(keys))
    if isinstance(obj, tuple) and obj and all(_is_array(c) for c in obj):
        length = _columns_length(obj, [str(i) for i in range(len(obj))])
        return DatasetSpec(binding, "tensors", _type_name(obj), length)
    if isinstance(obj, list | tuple):
        first = obj[0] if obj else None
        sample_keys: tuple[str, ...] = ()
        if isinstance(first, Mapping) and all(isinstance(k, str) for k in first):
            sample_keys = tuple(first)
        return DatasetSpec(binding, "samples", _type_name(obj), len(obj), None, sample_keys)
    if hasattr(obj, "__getitem__"):
        try:
            length = len(obj)  # type: ignore[arg-type]
        except TypeError:
            raise PlanTypeError.single(
                "dataset",
                f"map-style dataset {type(obj).__name__} has no __len__; define __len__, or "
                f"make it an IterableDataset",
            ) from None
        except Exception as exc:  # a __len__ too large, negative or failing
            raise _len_failed("dataset", obj, exc) from exc
        identity = getattr(obj, "_fingerprint", None)  # a loaderkit image source's listing
        return DatasetSpec(
            binding,
            "torch_map",
            _type_name(obj),
            int(length),
            identity if isinstance(identity, str) else None,
            shards=shard_count(obj, int(length)),
        )
    if hasattr(obj, "__iter__"):
        raise PlanTypeError.single(
            "dataset",
            f"got a plain iterable {type(obj).__name__}; wrap it in a "
            f"torch.utils.data.IterableDataset, or pass a list of samples",
        )
    raise PlanTypeError.single(
        "dataset",
        f"cannot load samples from {type(obj).__name__}; pass a torch Dataset, an HF "
        f"Dataset, a dict of columns, a tuple of tensors or a list of samples",
    )


def is_sharded(obj: object) -> bool:
    """Whether ``obj`` is a sharded dataset (a ``ShardLayout``).

    It declares the :class:`~loaderkit.datasets.shards.layout.ShardLayout` attributes
    (``shard_counts`` and ``shard_infos``), found without evaluating them.
    """
    for name in ("shard_counts", "shard_infos"):
        try:
            inspect.getattr_static(obj, name)
        except AttributeError:
            return False
    return True


def shard_count(obj: object, length: int) -> int | None:
    """The number of shards of a sharded dataset (``None``: not sharded), its counts checked.

    ``shard_counts`` must be a tuple of ints ``>= 0`` summing to ``len(obj)``: the order maps
    positions through it, so a wrong one would read the wrong samples.
    """
    if not is_sharded(obj):
        return None
    try:
        counts = obj.shard_counts  # type: ignore[attr-defined]
    except Exception as exc:  # a property that fails: the dataset's own error, named
        raise PlanError.single(
            "dataset",
            f"{type(obj).__name__}.shard_counts failed ({type(exc).__name__}: "
            f"{shown(str(exc))}); fix the dataset's shard_counts",
        ) from exc
    if not isinstance(counts, tuple) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts
    ):
        raise PlanTypeError.single(
            "dataset",
            f"{type(obj).__name__}.shard_counts must be a tuple of ints >= 0 (samples per "
            f"shard), got {shown(counts)}; return one count per shard, in the shard order",
        )
    total = sum(counts)
    if total != length:
        raise PlanError.single(
            "dataset",
            f"{type(obj).__name__}.shard_counts sum to {total:,} but len() is {length:,}; the "
            f"shard counts must add up to the dataset's length",
        )
    return len(counts)


def dataset_summary(spec: DatasetSpec) -> str:
    """One line: kind, type and size, for ``explain()``."""
    kind = DATASET_KINDS.get(spec.kind, spec.kind)
    size = "unknown length (streamed)" if spec.length is None else f"{spec.length:,} samples"
    if spec.shards is not None:
        size += f" in {spec.shards:,} shard{'' if spec.shards == 1 else 's'}"
    short = inert(spec.type_name.rsplit(".", 1)[-1])
    names = [inert(c) for c in spec.columns[: LISTED + 1]]
    cols = f", columns {', '.join(listed(names, 'columns', total=len(spec.columns)))}"
    cols = cols if spec.columns else ""
    made = ""
    if spec.source is not None and spec.source.is_ref:  # code: a file may not call it
        made = (
            f"; recorded as made by {spec.source.describe()}, an import path a plan file "
            f"may not call"
        )
    elif spec.source is not None:
        made = f"; made by {spec.source.describe()}"
    held = "" if spec.storage == "auto" else f"; storage {spec.storage!r}"
    return f"{spec.binding!r}: {kind} ({short}), {size}{cols}{made}{held}"
