"""The dataset lengths a plan was compiled for, checked against the bound datasets.

A plan records each dataset's length (``plan.dataset.length``, or each mixture source's), and
its order, sharding, split and fingerprint are computed from it. A dataset that changes length
after ``compile()`` (a list that grows, a dict column that is appended to) would be read at its
old length, silently: :class:`LengthCheck` compares them when the loader is built and at the
start of every pass, and raises a :class:`~loaderkit.PlanError` naming the binding, both
lengths and the fix.

The check costs one ``len()`` per bound dataset (one per column for a dict or tuple of
columns) per pass: never per batch. A change during a pass is seen by the next pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loaderkit.errors import PlanError
from loaderkit.plan.specs import column_rows

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.plan.specs import DatasetSpec

__all__ = ["LengthCheck"]

_FIX = (
    "compile the plan again after changing the dataset (the plan's fingerprint holds the "
    "length, so a resumed state of the old plan is refused)"
)


class _Bound:
    """One bound dataset whose length the plan holds, and where that length sits in it."""

    def __init__(self, path: str, what: str, spec: DatasetSpec, data: object) -> None:
        assert spec.length is not None
        self.path = path
        self.what = what  # "dataset 'train'" or "mixture source 'b'"
        self.planned = spec.length
        self.data = data
        self.columns: tuple[tuple[str, Any], ...] | None = None
        """``(label, column)`` of a dict or tuple of columns (each must keep its rows)."""
        if spec.kind == "columns" and isinstance(data, Mapping):
            self.columns = tuple((repr(k), v) for k, v in data.items())
        elif spec.kind == "tensors" and isinstance(data, Sequence):
            self.columns = tuple((str(i), v) for i, v in enumerate(data))

    def problem(self, when: str) -> PlanError | None:
        """The error if the dataset no longer has the planned length (``None``: it has)."""
        if self.columns is None:
            return self._compare(self.data, "", "samples", when)
        for label, column in self.columns:
            error = self._compare(column, f"column {label} of ", "rows", when)
            if error is not None:
                return error
        return None

    def _compare(self, obj: object, part: str, unit: str, when: str) -> PlanError | None:
        try:
            current = column_rows(obj) if part else len(obj)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - no __len__ any more, a failing one, non-int
            error = PlanError.single(
                self.path,
                f"len() of {part}{self.what} ({type(obj).__name__}) failed {when} "
                f"({type(exc).__name__}: {exc}); the plan was compiled for {self.planned:,} "
                f"{unit}. Its __len__ must return the number of samples, an int >= 0, the "
                f"same as at compile(); or {_FIX}",
            )
            error.__cause__ = exc
            return error
        if current == self.planned:
            return None
        return PlanError.single(
            self.path,
            f"{part}{self.what} ({type(obj).__name__}) has {current:,} {unit} {when}, but the "
            f"plan was compiled for {self.planned:,}; {_FIX}",
        )


class LengthCheck:
    """Compares the bound datasets' lengths with the plan's, in O(1) per dataset.

    Covers the plan's dataset (the whole dataset under ``with_split``: the split's parts are
    computed from its length) and each mixture source. Datasets without a planned length
    (streams) are not checked.
    """

    def __init__(self, plan: LoaderPlan) -> None:
        bindings = plan.bindings
        assert bindings is not None
        self.bound: list[_Bound] = []
        if plan.mixture is not None:
            for i, source in enumerate(plan.mixture.sources):
                if source.length is not None and source.binding in bindings:
                    self.bound.append(
                        _Bound(
                            f"mixture.sources[{i}].length",
                            f"mixture source {source.binding!r}",
                            source,
                            bindings[source.binding],
                        )
                    )
        elif plan.dataset.length is not None and plan.dataset.binding in bindings:
            spec = plan.dataset
            data = bindings[spec.binding]
            self.bound.append(_Bound("dataset.length", f"dataset {spec.binding!r}", spec, data))

    def __call__(self, when: str) -> None:
        """Raise :class:`~loaderkit.PlanError` if a dataset's length is not the planned one.

        ``when`` says when it was checked ("at build()", "at the start of epoch 2's pass").
        """
        for bound in self.bound:
            error = bound.problem(when)
            if error is not None:
                raise error
