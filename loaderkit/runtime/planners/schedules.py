"""Values that follow the epoch or the step: batch sizes, sequence lengths, mixture weights.

A schedule is a fixed value, a table ``((until, value), ...)`` (the value of the first entry
with ``t < until``, the last entry's value after it), or a function of ``t``. ``t`` is the
epoch (``by="epoch"``) or the step (``by="step"``: the number of batches a rank delivered
before, counted from the start of training). A function's result is checked every time,
and a bad one raises :class:`~loaderkit.PlanError` naming the field and ``t``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from loaderkit.errors import PlanError
from loaderkit.plan.callables import resolve_callable
from loaderkit.plan.fields import batch_size_value
from loaderkit.plan.sections.max_length import max_length_value

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["Schedule", "batch_sizes", "max_lengths"]

T = TypeVar("T")


class Schedule(Generic[T]):
    """``schedule(t)``: the value at epoch or step ``t``."""

    def __init__(
        self,
        path: str,
        by: str,
        *,
        fixed: T | None = None,
        table: Sequence[tuple[float, T]] = (),
        fn: Callable[[int], object] | None = None,
        check: Callable[[object], T] | None = None,
    ) -> None:
        self.path = path
        self.by = by
        self.fixed = fixed
        self.table = tuple(table)
        self.fn = fn
        self.check = check
        self._memo: dict[int, T] = {}

    @property
    def varies(self) -> bool:
        """Whether the value can change with ``t``."""
        return self.fn is not None or len({v for _, v in self.table}) > 1

    def __call__(self, t: int) -> T:
        """The value at ``t``."""
        if self.fn is not None:
            memo = self._memo
            if t in memo:
                return memo[t]
            value = self.fn(t)
            assert self.check is not None
            try:
                checked = self.check(value)
            except PlanError as exc:
                raise PlanError.single(
                    self.path,
                    f"the function returned {value!r} for {self.by} {t}: {exc.problems[0].message}",
                ) from None
            if len(memo) > 4096:
                memo.clear()
            memo[t] = checked
            return checked
        for until, value in self.table:
            if t < until:
                return value
        if self.table:
            return self.table[-1][1]
        assert self.fixed is not None
        return self.fixed

    def constant_from(self) -> float | None:
        """The ``t`` from which a table's value no longer changes (``None`` for a function)."""
        if self.fn is not None:
            return None
        if not self.table:
            return 0.0
        return self.table[-2][0] if len(self.table) > 1 else 0.0


def batch_sizes(plan: LoaderPlan) -> Schedule[int]:
    """The batch size as a function of the epoch or step."""
    b = plan.batch
    fn = None if b.fn is None else resolve_callable(plan, b.fn, "batch.batch_size")
    return Schedule(
        "batch.batch_size",
        b.by,
        fixed=b.batch_size,
        table=b.schedule,
        fn=fn,
        check=batch_size_value,
    )


def max_lengths(plan: LoaderPlan) -> Schedule[int] | None:
    """The sequence length of ``with_max_length`` as a function of the epoch or step."""
    m = plan.max_length
    if m is None:
        return None
    fn = None if m.fn is None else resolve_callable(plan, m.fn, "max_length")
    return Schedule(
        "max_length", m.by, fixed=m.value, table=m.schedule, fn=fn, check=max_length_value
    )
