"""What every collator can rely on: the batch context, the device step, shared checks.

A collator is any callable taking the list of samples. Built-in collators are instances of
:class:`Collator` subclasses whose constructors take the plan's options and check them in pure
Python (no torch), so a plan with bad options fails at ``compile()``; torch is imported only
when a batch is made.

Optional hooks, used by the loader when a collator has them:

- ``uses_context = True``: the collator is called as ``collate(samples, context=ctx)`` with a
  :class:`BatchContext` that derives random streams from (seed, epoch, sample index), so random
  collators (MLM masking) give the same batch for any number of workers, after a resume, and
  at any world size.
- ``on_device(batch)``: applied in the main process after the batch reached the plan's device
  (e.g. normalizing uint8 images on the GPU, after shipping 4x fewer bytes).
- ``padded_length()``: how the collator pads a batch, as a rule of
  :mod:`loaderkit.order.padding` (``PaddedLength`` or ``PackedRows``); a token budget
  (``with_bucketing(..., max_tokens=...)``) bounds the padded tensor computed with it. Without
  it, batches are taken to be padded to their longest sample.
- ``with_max_length(n)`` (``supports_max_length = True`` on built-in classes): a copy of the
  collator that cuts sequences to at most ``n`` tokens; a plan's ``with_max_length``
  schedule (a sequence-length curriculum) asks for one per length it reaches.

The ``check_*_option`` functions check one constructor option each and return it normalized
(lists as tuples, mappings as dicts). They take options frozen by a plan (tuples, FrozenMaps)
or raw (lists, dicts) alike, and raise a :class:`~loaderkit.PlanError` with one problem at
``collator.options.<option>``: a :class:`~loaderkit.PlanTypeError` for a value of the wrong
type, a plain ``PlanError`` for a bad value of the right type; the message shows the value
received and what to give instead. :func:`option_error` makes such an error for the checks
that span options. :func:`data_error`, :func:`check_not_empty` and :func:`check_keys` make the
:class:`~loaderkit.DataError` of a bad batch, named by its collator.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

import numpy as np
import numpy.typing as npt

from loaderkit._validate import did_you_mean
from loaderkit.errors import DataError, PlanError, PlanTypeError
from loaderkit.order.keys import batch_rng, sample_rng

if TYPE_CHECKING:
    import torch

__all__ = [
    "BatchContext",
    "Collator",
    "check_auto_bool_option",
    "check_bool_option",
    "check_choice_option",
    "check_float_list_option",
    "check_int_list_option",
    "check_int_option",
    "check_keys",
    "check_mapping_option",
    "check_name_option",
    "check_names_option",
    "check_not_empty",
    "check_number_option",
    "data_error",
    "describe_shapes",
    "option_error",
]


@dataclass(frozen=True)
class BatchContext:
    """Where a batch sits in the stream: what random collators key their randomness by."""

    seed: int
    epoch: int
    batch_index: int
    indices: npt.NDArray[np.int64]

    def sample_rngs(self, component: str) -> list[np.random.Generator]:
        """One generator per sample, keyed by (seed, component, epoch, sample index)."""
        return [sample_rng(self.seed, component, self.epoch, int(i)) for i in self.indices]

    def batch_rng(self, component: str) -> np.random.Generator:
        """One generator for the batch, keyed by (seed, component, epoch, batch index)."""
        return batch_rng(self.seed, component, self.epoch, self.batch_index)


class Collator:
    """Base class of the built-in collators (subclass it for yours, or use any callable)."""

    uses_context: ClassVar[bool] = False
    name: ClassVar[str] = "collator"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        """Make a batch from ``samples``."""
        raise NotImplementedError

    def on_device(self, batch: Any) -> Any:
        """Finish a batch after it reached its device (default: unchanged)."""
        return batch

    def for_device(self, device: torch.device) -> Collator:
        """The collator a loader delivering to ``device`` uses (default: this one).

        Called once when the loader is built, before the workers start, with the resolved
        device; a collator with choices that depend on it (the ``vision`` collator's
        ``normalize_on_device="auto"``) returns a copy with them made.
        """
        return self

    def loaderkit_explain(self) -> str | None:
        """A line for ``loader.explain()`` about what was chosen for the device (default: none)."""
        return None

    supports_max_length: ClassVar[bool] = False
    """Whether :meth:`with_max_length` works (the collator has a ``max_length`` option)."""

    def with_max_length(self, max_length: int) -> Collator:
        """A copy whose ``max_length`` is at most ``max_length`` (its own, if smaller, stays).

        What a sequence-length schedule (``with_max_length``) applies per batch. Collators
        with a ``max_length`` attribute get it for free by setting ``supports_max_length``.
        """
        if not self.supports_max_length:
            raise NotImplementedError(f"collator {self.name!r} has no max_length to schedule")
        clone = copy.copy(self)
        own = getattr(self, "max_length", None)
        clone.max_length = max_length if own is None else min(own, max_length)  # type: ignore[attr-defined]
        return clone

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(type(self).__name__)


# -- option checks (pure Python) -----------------------------------------------------------------
#
# Every check raises a PlanError with one problem at ``collator.options.<option>`` (``option`` may
# be dotted, as ``collators.text.keys``): a PlanTypeError when the value has the wrong type, a
# plain PlanError when its type is right but its value is not. Messages say what is expected and
# show the value received (``(got str 'x')``); ``fix`` adds advice after a ``"; "``. Options
# arrive frozen from plans (lists as tuples, dicts as FrozenMaps) or raw from direct
# construction: lists and tuples, dicts and other mappings are all accepted. ``bool`` is never
# taken for a number.

_Problem = tuple[str, bool]
"""A check's finding: the message, and whether the value has the wrong type."""


def option_error(
    option: str, message: str, *, fix: str = "", type_error: bool = False
) -> PlanError:
    """The error of one bad collator option, at path ``collator.options.<option>``.

    A :class:`~loaderkit.PlanTypeError` when ``type_error`` (the value has the wrong type), else
    a :class:`~loaderkit.PlanError`; ``fix`` is appended after ``"; "``.
    """
    cls = PlanTypeError if type_error else PlanError
    return cls.single(f"collator.options.{option}", f"{message}; {fix}" if fix else message)


def _raise(option: str, problem: _Problem | None, *, prefix: str = "", fix: str = "") -> None:
    if problem is not None:
        message, type_error = problem
        raise option_error(option, prefix + message, fix=fix, type_error=type_error)


def _got(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def _bool_problem(value: object) -> _Problem | None:
    if not isinstance(value, bool):
        return f"must be True or False (got {_got(value)})", True
    return None


def _int_problem(value: object, minimum: int | None = None) -> _Problem | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an int (got {_got(value)})", True
    if minimum is not None and value < minimum:
        return f"must be >= {minimum} (got {value})", False
    return None


def _bounds(
    minimum: float | None, maximum: float | None, exclusive_minimum: bool, exclusive_maximum: bool
) -> str:
    if minimum is not None and maximum is not None:
        left, right = "(" if exclusive_minimum else "[", ")" if exclusive_maximum else "]"
        return f"in {left}{minimum:g}, {maximum:g}{right}"
    if minimum is not None:
        return f"{'>' if exclusive_minimum else '>='} {minimum:g}"
    assert maximum is not None
    return f"{'<' if exclusive_maximum else '<='} {maximum:g}"


def _number_problem(
    value: object,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> _Problem | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number (got {_got(value)})", True
    # written so that NaN fails every bound
    above = minimum is None or (value > minimum if exclusive_minimum else value >= minimum)
    below = maximum is None or (value < maximum if exclusive_maximum else value <= maximum)
    if not (above and below):
        bounds = _bounds(minimum, maximum, exclusive_minimum, exclusive_maximum)
        return f"must be {bounds} (got {value})", False
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be finite (got {value})", False
    return None


def _name_problem(value: object) -> _Problem | None:
    if not isinstance(value, str) or not value:
        return f"must be a non-empty string (got {_got(value)})", not isinstance(value, str)
    return None


def _list(
    option: str, value: object, *, what: str, nonempty: bool, fix: str
) -> list[Any] | tuple[Any, ...]:
    """``value`` if it is a list or a tuple (non-empty when ``nonempty``)."""
    if not isinstance(value, list | tuple):
        article = "a non-empty" if nonempty else "a"
        raise option_error(
            option,
            f"must be {article} list of {what} (got {_got(value)})",
            fix=fix,
            type_error=True,
        )
    if nonempty and not value:
        raise option_error(
            option, f"must be a non-empty list of {what} (got an empty list)", fix=fix
        )
    return value


def check_auto_bool_option(option: str, value: object, *, fix: str = "") -> bool | Literal["auto"]:
    """A bool option that may also be ``"auto"`` (decided when the loader is built)."""
    if isinstance(value, str) and value == "auto":
        return "auto"
    problem = _bool_problem(value)
    if problem is not None:
        problem = (f"must be True, False or 'auto' (got {_got(value)})", problem[1])
    _raise(option, problem, fix=fix)
    assert isinstance(value, bool)
    return value


def check_bool_option(option: str, value: object, *, fix: str = "") -> bool:
    """A bool option: exactly ``True`` or ``False`` (not 0, 1 or ``"yes"``)."""
    _raise(option, _bool_problem(value), fix=fix)
    assert isinstance(value, bool)
    return value


@overload
def check_int_option(
    option: str,
    value: object,
    *,
    minimum: int | None = None,
    allow_none: Literal[False] = False,
    fix: str = "",
) -> int: ...


@overload
def check_int_option(
    option: str, value: object, *, minimum: int | None = None, allow_none: bool, fix: str = ""
) -> int | None: ...


def check_int_option(
    option: str,
    value: object,
    *,
    minimum: int | None = None,
    allow_none: bool = False,
    fix: str = "",
) -> int | None:
    """An int option (not a bool), at least ``minimum``; ``None`` too when ``allow_none``."""
    if value is None and allow_none:
        return None
    _raise(option, _int_problem(value, minimum), fix=fix)
    assert isinstance(value, int)
    return value


def check_number_option(
    option: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    fix: str = "",
) -> float:
    """A finite number option (an int or a float, not a bool), as a float, within bounds.

    ``minimum`` and ``maximum`` are included unless ``exclusive_minimum`` /
    ``exclusive_maximum``: a probability in (0, 1) is ``minimum=0, maximum=1,
    exclusive_minimum=True, exclusive_maximum=True``.
    """
    found = _number_problem(value, minimum, maximum, exclusive_minimum, exclusive_maximum)
    _raise(option, found, fix=fix)
    assert isinstance(value, int | float)
    return float(value)


@overload
def check_choice_option(
    option: str,
    value: object,
    choices: Sequence[str],
    *,
    allow_none: Literal[False] = False,
    suggest: bool = False,
    fix: str = "",
) -> str: ...


@overload
def check_choice_option(
    option: str,
    value: object,
    choices: Sequence[str],
    *,
    allow_none: bool,
    suggest: bool = False,
    fix: str = "",
) -> str | None: ...


def check_choice_option(
    option: str,
    value: object,
    choices: Sequence[str],
    *,
    allow_none: bool = False,
    suggest: bool = False,
    fix: str = "",
) -> str | None:
    """A string option among ``choices``; ``None`` too when ``allow_none``.

    ``suggest`` adds the closest choice to the message (``did you mean 'imagenet'?``).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, str) and value in choices:
        return value
    listed = ", ".join(repr(c) for c in choices) + (" or None" if allow_none else "")
    hint = did_you_mean(value, choices) if suggest and isinstance(value, str) else ""
    raise option_error(
        option,
        f"must be one of {listed} (got {value!r}){hint}",
        fix=fix,
        type_error=not isinstance(value, str),
    )


def check_name_option(option: str, value: object, *, fix: str = "") -> str:
    """A key name option (such as ``image_key``): a non-empty string."""
    _raise(option, _name_problem(value), fix=fix)
    assert isinstance(value, str)
    return value


def check_names_option(
    option: str,
    value: object,
    *,
    what: str = "key names",
    nonempty: bool = True,
    fix: str = "",
) -> tuple[str, ...]:
    """A list of distinct key names (non-empty strings), as a tuple; non-empty by default.

    ``what`` names the items in the message (``must be a non-empty list of <what>``).
    """
    items = _list(option, value, what=what, nonempty=nonempty, fix=fix)
    seen: set[str] = set()
    for i, name in enumerate(items):
        _raise(option, _name_problem(name), prefix=f"item {i} ", fix=fix)
        if name in seen:
            raise option_error(option, f"names {name!r} twice; list each key once", fix=fix)
        seen.add(name)
    return tuple(items)


def check_int_list_option(
    option: str,
    value: object,
    *,
    minimum: int | None = None,
    nonempty: bool = False,
    what: str = "ints",
    fix: str = "",
) -> tuple[int, ...]:
    """A list of ints (not bools), each at least ``minimum``, as a tuple."""
    items = _list(option, value, what=what, nonempty=nonempty, fix=fix)
    for i, item in enumerate(items):
        _raise(option, _int_problem(item, minimum), prefix=f"item {i} ", fix=fix)
    return tuple(items)


def check_float_list_option(
    option: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    nonempty: bool = False,
    what: str = "numbers",
    fix: str = "",
) -> tuple[float, ...]:
    """A list of finite numbers (ints or floats, not bools), as a tuple of floats.

    Each number is checked as by :func:`check_number_option` with the same bounds.
    """
    items = _list(option, value, what=what, nonempty=nonempty, fix=fix)
    for i, item in enumerate(items):
        found = _number_problem(item, minimum, maximum, exclusive_minimum, exclusive_maximum)
        _raise(option, found, prefix=f"item {i} ", fix=fix)
    return tuple(float(item) for item in items)


_VALUE_PROBLEMS: dict[type, Callable[[object], _Problem | None]] = {
    bool: _bool_problem,
    int: _int_problem,
    float: _number_problem,
    str: _name_problem,
}


def check_mapping_option(
    option: str,
    value: object,
    *,
    what: str = "",
    value_type: type | None = None,
    nonempty: bool = False,
    fix: str = "",
) -> dict[str, Any]:
    """A mapping (a dict, or the FrozenMap a plan holds) with non-empty string keys, as a dict.

    ``what`` completes the message ``must be a mapping <what>`` (e.g. ``"of option names to
    values"``). ``value_type`` (``bool``, ``int``, ``float`` or ``str``) checks every value as
    :func:`check_bool_option`, :func:`check_int_option`, :func:`check_number_option` or
    :func:`check_name_option` would; the message names the key.
    """
    if value_type is not None and value_type not in _VALUE_PROBLEMS:
        raise ValueError(f"value_type must be one of bool, int, float, str (got {value_type!r})")
    article = "a non-empty" if nonempty else "a"
    described = f"{article} mapping {what}".rstrip()
    if not isinstance(value, Mapping):
        raise option_error(
            option, f"must be {described} (got {_got(value)})", fix=fix, type_error=True
        )
    if nonempty and not value:
        raise option_error(option, f"must be {described} (got an empty mapping)", fix=fix)
    for key, item in value.items():
        _raise(option, _name_problem(key), prefix="every key ", fix=fix)
        if value_type is not None:
            _raise(
                option, _VALUE_PROBLEMS[value_type](item), prefix=f"the value of {key!r} ", fix=fix
            )
    return dict(value)


# -- batch checks ------------------------------------------------------------------------------


def data_error(collator: str, message: str) -> DataError:
    """A :class:`~loaderkit.DataError` of ``collator``: ``"collator 'name': <message>"``."""
    return DataError(f"collator {collator!r}: {message}", collator=collator)


def check_not_empty(samples: Sequence[Any], *, collator: str) -> None:
    """Raise :class:`DataError` when ``samples`` is an empty batch."""
    if not samples:
        raise DataError(f"collator {collator!r} got an empty batch", collator=collator)


def check_keys(samples: Sequence[Any], *, collator: str) -> list[str]:
    """The keys of a batch of mapping samples (in the first sample's order).

    Raises :class:`DataError` naming the first batch position whose keys differ (as a set)
    from the first sample's, with the keys missing and extra.
    """
    check_not_empty(samples, collator=collator)
    first = samples[0]
    if not isinstance(first, Mapping):
        raise DataError(
            f"collator {collator!r} needs samples that are mappings of named fields (got "
            f"{type(first).__name__} at batch position 0)",
            collator=collator,
        )
    keys = list(first)
    wanted = first.keys()
    for position, sample in enumerate(samples):
        if type(sample) is dict or isinstance(sample, Mapping):
            if sample.keys() == wanted:
                continue
            got = list(sample)
            raise data_error(
                collator,
                f"sample at batch position {position} has keys {got}, position 0 has {keys} "
                f"(missing {sorted(set(keys) - set(got))}, extra {sorted(set(got) - set(keys))})",
            )
        raise data_error(
            collator,
            f"sample at batch position {position} is a {type(sample).__name__}, not a mapping "
            f"like position 0",
        )
    return keys


def describe_shapes(values: Sequence[Any]) -> str:
    """``'position 0: (3, 4), position 1: (3, 5)'`` for the first values whose shapes differ."""
    shapes = [
        tuple(getattr(v, "shape", ())) or (len(v) if hasattr(v, "__len__") else ()) for v in values
    ]
    first = shapes[0]
    for position, shape in enumerate(shapes):
        if shape != first:
            return f"position 0: {first}, position {position}: {shape}"
    return f"all {first}"
