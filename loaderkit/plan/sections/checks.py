"""The ``[checks]`` section: the batch contract of ``with_checks``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from loaderkit._validate import (
    check_choice,
    check_int,
    check_number,
    check_str,
    did_you_mean,
    unknown_keys,
)
from loaderkit.errors import PlanError, PlanTypeError, Problem
from loaderkit.plan.sections.base import RuleContext, Section, explain_row

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.reader import Reader
    from loaderkit.plan.sections.base import ReprContext

__all__ = [
    "CHECK_DTYPES",
    "CHECK_KINDS",
    "LABEL_PAD_MODES",
    "SECTION",
    "ChecksSpec",
    "ClassCheck",
    "LabelPadCheck",
    "checks_calls",
    "checks_line",
    "checks_problems",
    "checks_spec",
    "checks_to_dict",
    "read_checks",
]

CHECK_KINDS = ("keys", "dtypes", "shapes", "finite", "ranges", "label_pad", "classes")
"""The checks of a batch contract (``with_checks``), in the order they run."""

LABEL_PAD_MODES = ("strict", "only_pad")


@attrs.frozen
class LabelPadCheck:
    """Labels and padding agree: ``labels == ignore_index`` where ``mask == 0``.

    ``"strict"``: exactly there; ``"only_pad"``: real positions may hold ``ignore_index`` too.
    """

    labels: str = "labels"
    mask: str = "attention_mask"
    ignore_index: int = -100
    mode: str = "strict"


@attrs.frozen
class ClassCheck:
    """Class ids in ``[0, n)`` (``ignore_index`` allowed too), or one-hot rows of width ``n``."""

    key: str
    n: int
    one_hot: bool = False
    ignore_index: int | None = None


@attrs.frozen
class ChecksSpec:
    """A batch contract checked while loading (see ``with_checks``); never changes a batch.

    Each check is keyed by a key path of the batch (``"input_ids"``, ``"0"`` for a tuple's
    first item, ``"a.b"`` inside nested dicts). ``every`` is ``None`` (the first batch each
    iterator delivers) or ``N`` (also every batch whose index in its epoch is a multiple of N).
    """

    keys: tuple[str, ...] = ()
    dtypes: tuple[tuple[str, str], ...] = ()
    shapes: tuple[tuple[str, tuple[int | str, ...]], ...] = ()
    finite: tuple[str, ...] = ()
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()
    label_pad: LabelPadCheck | None = None
    classes: tuple[ClassCheck, ...] = ()
    every: int | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of check this contract holds, in ``CHECK_KINDS`` order."""
        return tuple(kind for kind in CHECK_KINDS if getattr(self, kind))


CHECK_DTYPES = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
"""The dtype names ``with_checks(dtypes=...)`` takes (torch's names, without ``torch.``)."""

_DTYPE_ALIASES = {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "short": "int16",
    "int": "int32",
    "long": "int64",
    "cfloat": "complex64",
    "cdouble": "complex128",
}
_DIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIMS_HINT = "an int size, a dim name such as 'B', '*' (any size) or '...' (any number of dims)"


def _check_key(path: str, key: object) -> str:
    text = check_str(path, key)
    if not all(text.split(".")):
        raise PlanError.single(
            path,
            f"{text!r} is not a key path: join key names with '.' ('a.b'); items of a tuple "
            f"batch are '0', '1', ...",
        )
    return text


def _key_list(path: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PlanTypeError.single(
            path,
            f"must be a list of keys (got {type(value).__name__} {value!r}); e.g. "
            f"['input_ids', 'labels']",
        )
    keys = tuple(_check_key(f"{path}[{i}]", key) for i, key in enumerate(value))
    for i, key in enumerate(keys):
        if key in keys[:i]:
            raise PlanError.single(f"{path}[{i}]", f"{key!r} is listed twice; list each key once")
    return keys


def _key_table(path: str, value: object, what: str) -> list[tuple[str, str, object]]:
    """``(key, path of the key, value)`` of a ``{key: value}`` check table."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise PlanTypeError.single(
            path, f"must be a mapping of keys to {what} (got {type(value).__name__} {value!r})"
        )
    table = []
    for key, item in value.items():
        where = f"{path}.{key}" if isinstance(key, str) else path
        table.append((_check_key(where, key), where, item))
    return table


def _dtype_name(path: str, value: object) -> str:
    text = check_str(path, value)
    name = text.removeprefix("torch.")
    name = _DTYPE_ALIASES.get(name, name)
    if name not in CHECK_DTYPES:
        hint = did_you_mean(name, CHECK_DTYPES) or f"; known: {', '.join(CHECK_DTYPES)}"
        raise PlanError.single(path, f"unknown dtype {text!r}{hint}")
    return name


def _shape(path: str, value: object) -> tuple[int | str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PlanTypeError.single(
            path,
            f"must be a list of dims, each {_DIMS_HINT} (got {type(value).__name__} "
            f"{value!r}); e.g. ['B', 'T'] or ['B', 3, 224, 224]",
        )
    dims: list[int | str] = []
    for i, dim in enumerate(value):
        where = f"{path}[{i}]"
        if isinstance(dim, bool) or not isinstance(dim, int | str):
            raise PlanTypeError.single(
                where, f"must be {_DIMS_HINT} (got {type(dim).__name__} {dim!r})"
            )
        if isinstance(dim, int) and dim < 0:
            raise PlanError.single(where, f"must be >= 0 (got {dim}); sizes count elements")
        if isinstance(dim, str) and dim not in ("*", "...") and not _DIM_NAME.match(dim):
            raise PlanError.single(
                where,
                f"{dim!r} is not a dim name: use letters, digits and '_' ('B', 'T', "
                f"'seq_len'), '*' for any size or '...' for any number of dims",
            )
        if dim == "..." and "..." in dims:
            raise PlanError.single(where, "'...' may appear once in a shape")
        dims.append(dim)
    return tuple(dims)


def _bound(path: str, value: object) -> int | float | None:
    if value is None:
        return None
    number = check_number(path, value, fix="bounds are finite numbers, or None for an open end")
    return value if isinstance(value, int) else number


def _range(path: str, value: object) -> tuple[int | float | None, int | float | None]:
    if isinstance(value, Mapping):
        problems = unknown_keys(path, value, ("low", "high"))
        if problems:
            raise PlanError(problems)
        low, high = value.get("low"), value.get("high")
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        low, high = value
    else:
        raise PlanTypeError.single(
            path,
            f"must be [low, high] (inclusive; None for an open end) or a table with low and/or "
            f"high (got {type(value).__name__} {value!r})",
        )
    lo, hi = _bound(f"{path}.low", low), _bound(f"{path}.high", high)
    if lo is None and hi is None:
        raise PlanError.single(path, "has no bound; give low, high or both")
    if lo is not None and hi is not None and lo > hi:
        raise PlanError.single(
            path, f"low {lo} is above high {hi}; ranges are [low, high], both included"
        )
    return lo, hi


def _label_pad(path: str, value: object) -> LabelPadCheck | None:
    if value is None or value is False:
        return None
    if value is True:
        return LabelPadCheck()
    if not isinstance(value, Mapping):
        raise PlanTypeError.single(
            path,
            f"must be True or a mapping with labels, mask, ignore_index, mode (got "
            f"{type(value).__name__} {value!r})",
        )
    problems = unknown_keys(path, value, ("labels", "mask", "ignore_index", "mode"))
    if problems:
        raise PlanError(problems)
    default = LabelPadCheck()
    labels = _check_key(f"{path}.labels", value.get("labels", default.labels))
    mask = _check_key(f"{path}.mask", value.get("mask", default.mask))
    ignore = check_int(f"{path}.ignore_index", value.get("ignore_index", default.ignore_index))
    mode = check_choice(f"{path}.mode", value.get("mode", default.mode), LABEL_PAD_MODES)
    if labels == mask:
        raise PlanError.single(path, f"labels and mask are both {labels!r}; name two keys")
    return LabelPadCheck(labels, mask, ignore, mode)


def _class_check(path: str, key: str, value: object) -> ClassCheck:
    if not isinstance(value, Mapping):
        n = check_int(path, value, minimum=1, fix="the number of classes: ids are in [0, n)")
        return ClassCheck(key, n)
    problems = unknown_keys(path, value, ("n", "one_hot", "ignore_index"))
    if problems:
        raise PlanError(problems)
    given = [k for k in ("n", "one_hot") if k in value]
    if len(given) != 1:
        raise PlanError.single(
            path,
            f"needs exactly one of n (class ids in [0, n)) or one_hot (one-hot rows of width "
            f"n) (got {', '.join(given) or 'none'})",
        )
    n = check_int(f"{path}.{given[0]}", value[given[0]], minimum=1, fix="the number of classes")
    ignore = value.get("ignore_index")
    if ignore is not None:
        ignore = check_int(f"{path}.ignore_index", ignore)
        if given[0] == "one_hot":
            raise PlanError.single(
                f"{path}.ignore_index", "applies to class ids, not to one-hot rows; drop it"
            )
    return ClassCheck(key, n, given[0] == "one_hot", ignore)


def checks_spec(
    *,
    keys: object = None,
    dtypes: object = None,
    shapes: object = None,
    finite: object = None,
    ranges: object = None,
    label_pad: object = None,
    classes: object = None,
    every: object = None,
) -> ChecksSpec:
    """The batch contract of ``with_checks`` (also how a ``[checks]`` table is read)."""
    spec = ChecksSpec(
        keys=_key_list("checks.keys", keys),
        dtypes=tuple(
            (key, _dtype_name(where, v))
            for key, where, v in _key_table("checks.dtypes", dtypes, "dtype names")
        ),
        shapes=tuple(
            (key, _shape(where, v))
            for key, where, v in _key_table("checks.shapes", shapes, "lists of dims")
        ),
        finite=_key_list("checks.finite", finite),
        ranges=tuple(
            (key, *_range(where, v))
            for key, where, v in _key_table("checks.ranges", ranges, "[low, high] ranges")
        ),
        label_pad=_label_pad("checks.label_pad", label_pad),
        classes=tuple(
            _class_check(where, key, v)
            for key, where, v in _key_table("checks.classes", classes, "numbers of classes")
        ),
        every=None
        if every is None
        else check_int(
            "checks.every",
            every,
            minimum=1,
            fix="N checks every N-th batch of an epoch; None checks the first batch of each "
            "iteration",
        ),
    )
    if not spec.kinds:
        raise PlanError.single(
            "checks",
            f"holds no check; pass at least one of {', '.join(CHECK_KINDS)} to with_checks",
        )
    return spec


def _class_to_dict(check: ClassCheck) -> int | dict[str, int]:
    if check.one_hot:
        return {"one_hot": check.n}
    if check.ignore_index is None:
        return check.n
    return {"n": check.n, "ignore_index": check.ignore_index}


def checks_to_dict(spec: ChecksSpec) -> dict[str, Any]:
    """The ``[checks]`` table of a plan file: the arguments ``with_checks`` takes back."""
    out: dict[str, Any] = {}
    if spec.keys:
        out["keys"] = list(spec.keys)
    if spec.dtypes:
        out["dtypes"] = dict(spec.dtypes)
    if spec.shapes:
        out["shapes"] = {key: list(dims) for key, dims in spec.shapes}
    if spec.finite:
        out["finite"] = list(spec.finite)
    if spec.ranges:
        out["ranges"] = {
            key: {name: v for name, v in (("low", low), ("high", high)) if v is not None}
            for key, low, high in spec.ranges
        }
    if spec.label_pad is not None:
        out["label_pad"] = attrs.asdict(spec.label_pad)
    if spec.classes:
        out["classes"] = {check.key: _class_to_dict(check) for check in spec.classes}
    if spec.every is not None:
        out["every"] = spec.every
    return out


def read_checks(reader: Reader, data: Mapping[str, Any]) -> ChecksSpec | None:
    """Read the ``[checks]`` table: the keyword arguments of ``with_checks``."""
    if "checks" not in data:
        return None
    sec = reader.section(data, "checks", (*CHECK_KINDS, "every"))
    if not isinstance(data["checks"], Mapping):
        return None
    spec: ChecksSpec | None = reader.attempt(lambda: checks_spec(**sec))
    return spec


def checks_problems(spec: ChecksSpec) -> list[Problem]:
    """What is wrong with a batch contract on its own: it must hold a check."""
    if spec.kinds:
        return []
    return [
        Problem(
            "checks",
            "holds no check; give with_checks at least one, or drop it with .without('checks')",
        )
    ]


def checks_line(plan: LoaderPlan) -> str:
    """The ``checks`` line of ``explain()``: which checks run on which batches."""
    spec = plan.checks
    assert spec is not None
    parts = []
    for kind in spec.kinds:
        value = getattr(spec, kind)
        parts.append(f"{kind} ({value.mode})" if kind == "label_pad" else f"{kind} ({len(value)})")
    when = "the first batch of each iteration"
    if spec.every == 1:
        when = "every batch"
    elif spec.every is not None:
        when += f" and batches 0, {spec.every}, {2 * spec.every}, ... of each epoch"
    return f"{', '.join(parts)} on {when}; a violation raises DataError"


def _rules(ctx: RuleContext) -> list[Problem]:
    sections = ctx.sections
    return checks_problems(sections["checks"])


def checks_calls(spec: ChecksSpec, ctx: ReprContext) -> tuple[str, ...]:
    """The builder's ``with_checks`` call."""
    args = [f"{key}={value!r}" for key, value in checks_to_dict(spec).items()]
    return (f".with_checks({', '.join(args)})",)


SECTION: Section[ChecksSpec] = Section(
    name="checks",
    explain=explain_row("checks", checks_line, of="checks"),
    builder_calls=checks_calls,
    read=read_checks,
    to_dict=checks_to_dict,
    fingerprint="exec",
    rules={"checks": _rules},
    why="the batch contract of `with_checks` reads batches, never changes them",
)
