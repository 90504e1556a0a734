"""Batch contracts at run time: the checks of ``with_checks`` applied to delivered batches.

The plan holds the contract (:class:`~loaderkit.plan.sections.checks.ChecksSpec`, made by
``DataLoaderBuilder.with_checks`` and kept in plan files); the loader runs it here, in the main
process, on the batch it is about to hand over (after the copy to the device and the collator's
``on_device``), so what is checked is what the training step receives. A violation raises
:class:`~loaderkit.DataError` naming the key, the check, the epoch and batch, the positions
in the batch and the dataset samples at those positions. ``LoaderPlan.check()`` runs the
contract on the first batch and returns a :class:`CheckReport`. See ``docs/checks.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import torch

from loaderkit._validate import did_you_mean
from loaderkit.errors import DataError
from loaderkit.plan.sections.checks import ChecksSpec, ClassCheck, LabelPadCheck

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.loader import Loader

__all__ = ["BatchChecker", "CheckReport", "batch_checker", "check_loader"]

SHOWN = 5
"""How many positions, samples or keys a message lists before "and N more"."""

_MISSING = object()

Indices = Callable[[int, int], Sequence[int]]
"""``(epoch, batch index) -> dataset sample indices`` (``Loader.batch_indices``)."""


def lookup(batch: Any, key: str) -> Any:
    """The value at key path ``key`` of ``batch`` (``_MISSING`` when there is none).

    A mapping key that contains dots is found as it is; otherwise ``"a.b"`` walks nested
    mappings, ``"0"`` indexes a tuple or list, and a name reads a field of a named tuple or a
    dataclass.
    """
    if isinstance(batch, Mapping) and key in batch:
        return batch[key]
    node = batch
    for part in key.split("."):
        if isinstance(node, Mapping):
            node = node.get(part, _MISSING)
        elif isinstance(node, tuple) and part in getattr(node, "_fields", ()):
            node = getattr(node, part)
        elif isinstance(node, list | tuple):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else _MISSING
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            names = {f.name for f in dataclasses.fields(node)}
            node = getattr(node, part) if part in names else _MISSING
        else:
            node = _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _is_array(value: object) -> bool:
    return isinstance(value, torch.Tensor | np.ndarray)


def _walkable(value: object) -> bool:
    """Containers whose items are listed one by one (lists of strings are one leaf)."""
    if isinstance(value, Mapping):
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return True
    if isinstance(value, list | tuple):
        return any(_is_array(v) or _walkable(v) for v in value)
    return False


def leaves(batch: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``(key path, value)`` of every leaf of ``batch``, in order."""
    if isinstance(batch, Mapping):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in batch.items()]
    elif isinstance(batch, tuple) and hasattr(batch, "_fields"):
        items = list(zip(batch._fields, batch, strict=True))
    elif isinstance(batch, list | tuple):
        items = [(str(i), v) for i, v in enumerate(batch)]
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        items = [(f.name, getattr(batch, f.name)) for f in dataclasses.fields(batch)]
    else:
        return [(prefix.rstrip(".") or "<batch>", batch)]
    out: list[tuple[str, Any]] = []
    for key, value in items:
        if _walkable(value):
            out.extend(leaves(value, f"{prefix}{key}."))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _dtype_name(value: Any) -> str:
    return str(value.dtype).removeprefix("torch.")


def _describe(value: Any) -> tuple[str, str]:
    """``(dtype, shape)`` of a leaf as a report shows them."""
    if _is_array(value):
        return _dtype_name(value), str(list(value.shape))
    if isinstance(value, list | tuple):
        return type(value).__name__, f"{len(value)} items"
    return type(value).__name__, "-"


def _listing(values: Sequence[object], shown: int = SHOWN) -> str:
    text = ", ".join(str(v) for v in values[:shown])
    if len(values) > shown:
        text += f" and {len(values) - shown} more"
    return text


def _interval(low: float | None, high: float | None) -> str:
    left = "(-inf" if low is None else f"[{_show(low)}"
    right = "inf)" if high is None else f"{_show(high)}]"
    return f"{left}, {right}"


def _pattern(dims: tuple[int | str, ...]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


@attrs.frozen
class CheckReport:
    """What ``LoaderPlan.check()`` (or ``Loader.check()``) checked on a batch: all passed.

    ``passed`` has one line per check kind; ``layout`` is ``(key, dtype, shape)`` for every
    leaf of the batch, to help write a contract. ``str(report)`` shows both.
    """

    epoch: int
    batch_index: int
    samples: tuple[int, ...]
    passed: tuple[str, ...]
    layout: tuple[tuple[str, str, str], ...]

    def __str__(self) -> str:
        where = (
            f"epoch {self.epoch}, batch {self.batch_index} ({len(self.samples)} samples: "
            f"{_listing(self.samples, 8)})"
        )
        if self.passed:
            lines = [f"batch checks passed on {where}"]
            lines.extend(f"  {line}" for line in self.passed)
        else:
            lines = [f"no batch checks in this plan (add them with with_checks); loaded {where}"]
        width = max((len(key) for key, _, _ in self.layout), default=0)
        dtype_width = max((len(dtype) for _, dtype, _ in self.layout), default=0)
        lines.append("the batch:")
        lines.extend(
            f"  {key:<{width}}  {dtype:<{dtype_width}}  {shape}".rstrip()
            for key, dtype, shape in self.layout
        )
        return "\n".join(lines)


class _Run:
    """One batch being checked: where it is, and how to name what failed."""

    def __init__(
        self,
        batch: Any,
        epoch: int,
        batch_index: int,
        indices: Indices,
        collator: str,
        origin: str = "",
    ) -> None:
        self.batch = batch
        self.epoch = epoch
        self.batch_index = batch_index
        self.indices = indices
        self.collator = collator
        self.origin = origin

    def fail(
        self,
        key: str,
        check: str,
        what: str,
        fix: str,
        bad: torch.Tensor | None = None,
    ) -> DataError:
        """The error for ``key`` failing ``check``; ``bad`` marks the offending elements."""
        samples = list(self.indices(self.epoch, self.batch_index))
        where = ""
        first_sample: int | None = None
        if bad is not None and bad.dim() > 0:
            rows: list[int] = bad.reshape(bad.shape[0], -1).any(1).nonzero().flatten().tolist()
            where = f"; batch positions {_listing(rows)} of {bad.shape[0]}"
            if len(samples) == bad.shape[0]:
                picked = [samples[r] for r in rows]
                first_sample = picked[0] if picked else None
                where += f" (dataset samples {_listing(picked)})"
            else:
                where += (
                    f" (rows are not samples here; the batch holds samples {_listing(samples)})"
                )
        else:
            where = f"; the batch holds dataset samples {_listing(samples)}"
        origin = f"; {self.origin}" if self.origin else ""
        message = (
            f"batch check failed: {key!r} ({check}) in epoch {self.epoch}, batch "
            f"{self.batch_index}: {what}{where}; {fix}{origin}"
        )
        return DataError(
            message,
            sample_index=first_sample,
            batch_index=self.batch_index,
            collator=self.collator,
        )

    def value(self, key: str, check: str) -> Any:
        found = lookup(self.batch, key)
        if found is _MISSING:
            available = [k for k, _ in leaves(self.batch)]
            if not isinstance(self.batch, Mapping | list | tuple) and len(available) == 1:
                have = f"the batch is a {type(self.batch).__name__}, not a dict or tuple"
            else:
                have = f"the batch has {_listing(available, 10)}"
            raise self.fail(
                key,
                check,
                f"is missing; {have}{did_you_mean(key, available)}",
                f"make the collator return {key!r}, or fix the key in with_checks",
            )
        return found

    def tensor(self, key: str, check: str) -> torch.Tensor:
        value = self.value(key, check)
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, np.ndarray):
            return torch.as_tensor(value)
        if isinstance(value, bool | int | float):
            return torch.tensor(value)
        raise self.fail(
            key,
            check,
            f"is a {type(value).__name__}, not a tensor or array",
            "make the collator return tensors (the default collator stacks numbers into them)",
        )


def _show(value: Any) -> str:
    """A tensor element as messages show it: float32 noise rounded away (0.08, not 0.0799...)."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _item(values: torch.Tensor) -> str:
    return _show(values.item())


def _first(values: torch.Tensor, bad: torch.Tensor) -> tuple[list[int], str]:
    """The index of the first marked element and its value, shown."""
    index: list[int] = bad.nonzero()[0].tolist()
    return index, _item(values[tuple(index)])


class BatchChecker:
    """Runs a :class:`~loaderkit.plan.sections.checks.ChecksSpec` on batches (``with_checks``)."""

    def __init__(self, spec: ChecksSpec, collator: str = "", *, origin: str = "") -> None:
        self.spec = spec
        self.collator = collator
        self.origin = origin
        """Who set the checks when the user did not (a preset), appended to every failure:
        ``"with_checks was set by the preset image_classification (options ...)"``."""

    def due(self, batch_index: int, first: bool) -> bool:
        """Whether batch ``batch_index`` of its epoch is checked (``first``: of an iterator)."""
        every = self.spec.every
        return first or (every is not None and batch_index % every == 0)

    def run(self, batch: Any, epoch: int, batch_index: int, indices: Indices) -> CheckReport:
        """Check batch ``batch_index`` of ``epoch``: raise ``DataError``, or say what passed."""
        run = _Run(batch, epoch, batch_index, indices, self.collator, self.origin)
        spec = self.spec
        passed: list[str] = []
        if spec.keys:
            for key in spec.keys:
                run.value(key, "keys")
            passed.append(f"keys       {', '.join(spec.keys)}: present")
        if spec.dtypes:
            for key, want in spec.dtypes:
                value = run.value(key, "dtypes")
                if not _is_array(value):
                    raise run.fail(
                        key,
                        "dtypes",
                        f"is a {type(value).__name__}, not a tensor of {want}",
                        "make the collator return tensors",
                    )
                got = _dtype_name(value)
                if got != want:
                    raise run.fail(
                        key,
                        "dtypes",
                        f"has dtype {got}, expected {want}",
                        f"convert it in the collator or a transform (.to(torch.{want})), or "
                        f"change with_checks(dtypes=...)",
                    )
            shown = ", ".join(f"{key} {want}" for key, want in spec.dtypes)
            passed.append(f"dtypes     {shown}")
        if spec.shapes:
            passed.append(f"shapes     {self._shapes(run)}")
        if spec.finite:
            for key in spec.finite:
                self._finite(run, key)
            passed.append(f"finite     {', '.join(spec.finite)}: no NaN or Inf")
        if spec.ranges:
            shown = "; ".join(self._range(run, key, low, high) for key, low, high in spec.ranges)
            passed.append(f"ranges     {shown}")
        if spec.label_pad is not None:
            passed.append(f"label_pad  {self._label_pad(run, spec.label_pad)}")
        if spec.classes:
            shown = "; ".join(self._classes(run, check) for check in spec.classes)
            passed.append(f"classes    {shown}")
        return CheckReport(
            epoch,
            batch_index,
            tuple(int(i) for i in indices(epoch, batch_index)),
            tuple(passed),
            tuple((key, *_describe(value)) for key, value in leaves(batch)),
        )

    # -- one kind each ----------------------------------------------------------------------

    def _shapes(self, run: _Run) -> str:
        sizes: dict[str, tuple[int, str, int]] = {}  # name -> (size, key, axis)
        for key, dims in self.spec.shapes:
            shape = tuple(int(s) for s in run.tensor(key, "shapes").shape)
            problem = _match(dims, shape, sizes, key)
            if problem is not None:
                raise run.fail(
                    key,
                    "shapes",
                    f"has shape {list(shape)}, expected {_pattern(dims)}: {problem}",
                    "fix the collator's output, or the shape in with_checks(shapes=...)",
                )
        shown = ", ".join(f"{key} {_pattern(dims)}" for key, dims in self.spec.shapes)
        if sizes:
            shown += ": " + ", ".join(f"{name}={size}" for name, (size, _, _) in sizes.items())
        return shown

    def _finite(self, run: _Run, key: str) -> None:
        values = run.tensor(key, "finite")
        if not (values.is_floating_point() or values.is_complex()):
            return  # integers and bools are always finite
        bad = ~torch.isfinite(values)
        if bool(bad.any()):
            index, value = _first(values, bad)
            raise run.fail(
                key,
                "finite",
                f"holds {int(bad.sum())} NaN or Inf values, the first {value} at {index}",
                "find what makes them in the samples listed (bad records, a transform dividing "
                "by zero) and fix or filter them",
                bad,
            )

    def _range(self, run: _Run, key: str, low: float | None, high: float | None) -> str:
        values = run.tensor(key, "ranges")
        interval = _interval(low, high)
        if values.is_complex():
            raise run.fail(
                key, "ranges", f"is complex ({_dtype_name(values)})", "ranges need real values"
            )
        if values.dtype == torch.bool:
            values = values.to(torch.uint8)
        inside = torch.ones_like(values, dtype=torch.bool)
        if low is not None:
            inside &= values >= low
        if high is not None:
            inside &= values <= high
        bad = ~inside
        if values.numel() == 0:
            return f"{key} in {interval} (empty)"
        lowest, highest = _item(values.min()), _item(values.max())
        if bool(bad.any()):
            index, value = _first(values, bad)
            raise run.fail(
                key,
                "ranges",
                f"holds {int(bad.sum())} values outside {interval}, the first {value} at "
                f"{index} (min {lowest}, max {highest})",
                "fix or clip the data (a transform), or widen with_checks(ranges=...)",
                bad,
            )
        return f"{key} in {interval} (min {lowest}, max {highest})"

    def _label_pad(self, run: _Run, check: LabelPadCheck) -> str:
        labels = run.tensor(check.labels, "label_pad")
        mask = run.tensor(check.mask, "label_pad")
        ignore = check.ignore_index
        rule = "exactly where" if check.mode == "strict" else "wherever"
        meaning = f"{check.labels} is {ignore} {rule} {check.mask} is 0"
        if labels.shape != mask.shape:
            raise run.fail(
                check.labels,
                "label_pad",
                f"has shape {list(labels.shape)} but {check.mask!r} has {list(mask.shape)}; "
                f"label_pad compares them position by position",
                "give labels one entry per token, or name the right keys in label_pad",
            )
        padding = mask == 0
        ignored = labels == ignore
        bad = padding & ~ignored if check.mode == "only_pad" else padding ^ ignored
        if bool(bad.any()):
            index, value = _first(labels, bad)
            at = f"{check.mask} is {'0' if padding[tuple(index)] else 'not 0'}"
            if check.mode == "strict":
                fix = (
                    f"pad labels with {ignore} exactly where {check.mask} is 0; if real "
                    f"positions hold {ignore} on purpose (prompt masking, shifted causal-LM "
                    f"labels), use label_pad={{'mode': 'only_pad'}}"
                )
            else:
                fix = f"pad labels with {ignore} where {check.mask} is 0 (label_pad_token_id)"
            raise run.fail(
                check.labels,
                "label_pad",
                f"{meaning} does not hold at {int(bad.sum())} positions, the first {index}: "
                f"label {value} where {at}",
                fix,
                bad,
            )
        return f"{meaning} ({check.mode})"

    def _classes(self, run: _Run, check: ClassCheck) -> str:
        key, n = check.key, check.n
        values = run.tensor(key, "classes")
        if check.one_hot:
            return self._one_hot(run, check, values)
        if values.is_floating_point() or values.is_complex():
            raise run.fail(
                key,
                "classes",
                f"has dtype {_dtype_name(values)}; class ids are integers",
                "make the labels integers (int64 for cross-entropy), or use "
                "{'one_hot': n} for one-hot rows",
            )
        valid = (values >= 0) & (values < n)
        besides = ""
        if check.ignore_index is not None:
            valid |= values == check.ignore_index
            besides = f" (or {check.ignore_index})"
        bad = ~valid
        if bool(bad.any()):
            index, value = _first(values, bad)
            raise run.fail(
                key,
                "classes",
                f"holds {int(bad.sum())} class ids outside [0, {n}){besides}, the first {value} "
                f"at {index}",
                f"fix the labels or the number of classes in with_checks(classes={{{key!r}: "
                f"{n}}}); a value to skip such as -100 goes in {{'n': {n}, 'ignore_index': -100}}",
                bad,
            )
        if values.numel() == 0:
            return f"{key} in [0, {n}){besides} (empty)"
        shown = f"min {_item(values.min())}, max {_item(values.max())}"
        return f"{key} in [0, {n}){besides} ({shown})"

    def _one_hot(self, run: _Run, check: ClassCheck, values: torch.Tensor) -> str:
        key, n = check.key, check.n
        if values.dim() == 0 or values.shape[-1] != n:
            width = "no dims" if values.dim() == 0 else f"last dim {values.shape[-1]}"
            raise run.fail(
                key,
                "classes",
                f"has {width}; one-hot rows of {n} classes need a last dim of {n}",
                f"fix the encoding, or the count in with_checks(classes={{{key!r}: "
                f"{{'one_hot': {n}}}}})",
            )
        bad = (values != 0) & (values != 1)
        if bool(bad.any()):
            index, value = _first(values, bad)
            raise run.fail(
                key,
                "classes",
                f"holds {int(bad.sum())} values other than 0 and 1, the first {value} at {index}",
                "one-hot rows hold 0s and a single 1; use class ids with {key: n} otherwise",
                bad,
            )
        sums = values.sum(-1)
        wrong = sums != 1
        if bool(wrong.any()):
            index, total = _first(sums, wrong)
            marks = wrong.unsqueeze(-1).expand(values.shape)
            raise run.fail(
                key,
                "classes",
                f"has {int(wrong.sum())} rows that do not hold exactly one 1, the first at "
                f"{index} sums to {total}",
                "one-hot rows hold a single 1; multi-label targets need another check",
                marks,
            )
        return f"{key} one-hot of {n}"


def _match(
    dims: tuple[int | str, ...],
    shape: tuple[int, ...],
    sizes: dict[str, tuple[int, str, int]],
    key: str,
) -> str | None:
    """Why ``shape`` does not fit ``dims`` (``None`` if it does), binding named dims."""
    if "..." in dims:
        cut = dims.index("...")
        head, tail = dims[:cut], dims[cut + 1 :]
        if len(shape) < len(head) + len(tail):
            return f"it has {len(shape)} dims, at least {len(head) + len(tail)} expected"
        pairs = list(enumerate(head)) + [
            (len(shape) - len(tail) + i, d) for i, d in enumerate(tail)
        ]
    else:
        if len(shape) != len(dims):
            return f"it has {len(shape)} dims, {len(dims)} expected"
        pairs = list(enumerate(dims))
    for axis, dim in pairs:
        size = shape[axis]
        if isinstance(dim, int):
            if size != dim:
                return f"dim {axis} is {size}, expected {dim}"
        elif dim != "*":
            if dim in sizes and sizes[dim][0] != size:
                bound, other, other_axis = sizes[dim]
                return (
                    f"dim {axis} ({dim}) is {size} but {dim} is {bound} in {other!r} "
                    f"(dim {other_axis})"
                )
            sizes.setdefault(dim, (size, key, axis))
    return None


def batch_checker(plan: LoaderPlan) -> BatchChecker | None:
    """The checker of ``plan``'s ``with_checks`` (``None`` without checks), for its loader.

    Its failures name the collator and, when a preset set the checks (``plan.preset``, and
    the checks are still the preset's), the preset and the options that decide them.
    """
    if plan.checks is None:
        return None
    origin = plan.to_builder()._preset_notes().get("checks", "")
    return BatchChecker(plan.checks, plan.collator.describe(), origin=origin)


def check_loader(loader: Loader) -> CheckReport:
    """Run ``loader``'s checks on the first batch of its current epoch (see ``Loader.check``).

    The position is put back afterwards with ``load_state_dict``; ``Loader.check()`` also puts
    back what the next pass starts (a check is not a pass), so call that.
    """
    checker = loader.batch_checks
    if checker is None:
        checker = BatchChecker(ChecksSpec(), loader.plan.collator.describe())
    state = loader.state_dict()
    epoch = loader.epoch
    loader.set_epoch(epoch)
    try:
        iterator = iter(loader)
        try:
            batch = next(iterator)  # the loader runs its checks on it
        except StopIteration:
            raise DataError(f"epoch {epoch} has no batch to check", batch_index=0) from None
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
    finally:
        loader.load_state_dict(state)
    return checker.run(batch, epoch, 0, loader.batch_indices)
