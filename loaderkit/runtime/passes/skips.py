"""The ``skip`` error policy's accounting: exact counts per epoch and per run, and the budget.

A batch's dropped samples are counted when the batch is *delivered* (the position a state
records), so a state holds exactly the counts of the batches before its position, and a run
resumed from it counts like the uninterrupted one. The budget is checked on the counts with
the batch being delivered; a batch that spends it is not delivered and not counted (the next
pass reads it again, and raises again).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from loaderkit.errors import DataError, ResumeError
from loaderkit.plan.sections.error_policy import SKIPPED_RECORDS_KEPT, ErrorPolicySpec
from loaderkit.runtime.records import NO_BATCH, Fetched, Skipped

__all__ = ["RATE_FROM", "SKIPPED_RECORDS_KEPT", "SkipCounts", "SkipLedger", "over_budget"]

_LOG = logging.getLogger("loaderkit")

RATE_FROM = 100
"""The skip policy's max_error_rate is checked once this many samples were read (in scope)."""

_COUNTS = ("skipped", "read", "epoch_skipped", "epoch_read")


@attrs.frozen
class SkipCounts:
    """Exact totals of the ``skip`` policy (``loader.skip_counts``), also in ``state_dict()``.

    ``skipped`` / ``read``: samples dropped / read (kept and dropped) in the whole run, the
    epochs before a resume included; ``by_type``: the dropped ones by exception type name.
    ``epoch_skipped`` / ``epoch_read`` / ``epoch_by_type``: the same for epoch ``epoch`` alone
    (``None`` before any batch). Only delivered batches count (see the module docstring).
    """

    skipped: int = 0
    read: int = 0
    by_type: Mapping[str, int] = attrs.field(factory=dict)
    epoch: int | None = None
    epoch_skipped: int = 0
    epoch_read: int = 0
    epoch_by_type: Mapping[str, int] = attrs.field(factory=dict)

    def add(
        self, epoch: int, first: bool, requested: int, records: Sequence[Skipped]
    ) -> SkipCounts:
        """The counts after a delivered batch of ``epoch`` (``first``: its batch 0)."""
        fresh = first or epoch != self.epoch  # a new epoch (or the same one read again)
        by_type, epoch_by_type = dict(self.by_type), {} if fresh else dict(self.epoch_by_type)
        for record in records:
            by_type[record.exc_type] = by_type.get(record.exc_type, 0) + 1
            epoch_by_type[record.exc_type] = epoch_by_type.get(record.exc_type, 0) + 1
        return SkipCounts(
            skipped=self.skipped + len(records),
            read=self.read + requested,
            by_type=by_type,
            epoch=epoch,
            epoch_skipped=(0 if fresh else self.epoch_skipped) + len(records),
            epoch_read=(0 if fresh else self.epoch_read) + requested,
            epoch_by_type=epoch_by_type,
        )

    def in_scope(self, spec: ErrorPolicySpec) -> tuple[int, int, Mapping[str, int]]:
        """(dropped, read, by type) as the budget of ``spec`` counts them (``spec.per``)."""
        if spec.per == "run":
            return self.skipped, self.read, self.by_type
        return self.epoch_skipped, self.epoch_read, self.epoch_by_type

    def to_state(self) -> dict[str, Any]:
        """The JSON-serializable ``state["skips"]``: every field, by name."""
        return attrs.asdict(self)

    @classmethod
    def from_state(cls, value: object) -> SkipCounts:
        """The counts of a saved ``state["skips"]``; zero for a state without it.

        Raises :class:`ResumeError` naming the key for anything else than what
        :meth:`to_state` makes.
        """
        if value is None:  # a state from before the counts were saved: start from zero
            return cls()
        problem = _state_problem(value)
        if problem:
            raise ResumeError(
                f"state['skips'] {problem} (got {value!r:.200}); pass what state_dict() "
                f"returned, or drop the 'skips' key to count from zero"
            )
        assert isinstance(value, Mapping)
        fields: dict[str, Any] = {
            key: dict(item) if isinstance(item, Mapping) else item for key, item in value.items()
        }
        return cls(**fields)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _state_problem(value: object) -> str:
    """What is wrong with a saved ``state["skips"]`` ('' if nothing)."""
    keys = tuple(field.name for field in attrs.fields(SkipCounts))
    if not isinstance(value, Mapping) or set(value) != set(keys):
        return f"must be a dict with the keys {', '.join(keys)}"
    if not all(_count(value[key]) for key in _COUNTS):
        return f"must hold ints >= 0 at {', '.join(_COUNTS)}"
    if value["epoch"] is not None and not _count(value["epoch"]):
        return "must hold an int >= 0 or None at epoch"
    for key in ("by_type", "epoch_by_type"):
        table = value[key]
        if not isinstance(table, Mapping) or not all(
            isinstance(k, str) and _count(v) for k, v in table.items()
        ):
            return f"must map exception type names to ints >= 0 at {key}"
    if value["skipped"] > value["read"] or value["epoch_skipped"] > value["epoch_read"]:
        return "cannot have more samples skipped than read"
    return ""


def over_budget(spec: ErrorPolicySpec, counts: SkipCounts, last: Skipped) -> DataError | None:
    """The :class:`DataError` to raise if ``counts`` spend the budget of ``spec``, else ``None``.

    ``last`` is the latest dropped sample (named in the message and the error's fields).
    """
    count, read, by_type = counts.in_scope(spec)
    over = spec.max_errors is not None and count > spec.max_errors
    rate = count / max(read, 1)
    if spec.max_error_rate is not None and read >= RATE_FROM:
        over = over or rate > spec.max_error_rate
    if not over:
        return None
    summary = ", ".join(
        f"{n} {kind}" for kind, n in sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    where = f"in epoch {counts.epoch}" if spec.per == "epoch" else "in this run"
    return DataError(
        f"the skip policy dropped {count:,} samples of the {read:,} read {where} "
        f"({rate:.2%}): {summary}; the budget is max_errors={spec.max_errors}, "
        f"max_error_rate={spec.max_error_rate} per {spec.per}. Last: {last.message}. Fix the "
        f"data, or raise the budget in with_error_policy('skip', ...); loader.skip_counts "
        f"has the totals, loader.skipped the last {SKIPPED_RECORDS_KEPT:,} records",
        sample_index=last.sample_index,
        worker_id=last.worker_id,
        batch_index=last.batch_index,
    )


class SkipLedger:
    """What a loader's ``skip`` policy dropped: the last records, the exact counts, the budget.

    Both loaders hold one. A batch's records are counted by :meth:`account` as the batch is
    delivered (a map-style loader sets them aside first, :meth:`set_aside`, as its host
    batches are fetched ahead, and counts them with :meth:`settle`).
    """

    def __init__(self, spec: ErrorPolicySpec) -> None:
        self._spec = spec
        self.records: list[Skipped] = []
        """The last :data:`SKIPPED_RECORDS_KEPT` records, in order (``loader.skipped``)."""
        self.counts = SkipCounts()
        """The exact totals (``loader.skip_counts``)."""
        self._unsettled: collections.deque[Fetched] = collections.deque()
        """The skip records of the host batches fetched but not yet delivered (in order)."""

    def begin_pass(self) -> None:
        """A new pass: nothing of it was fetched or delivered yet."""
        self._unsettled = collections.deque()

    def set_aside(self, fetched: Fetched) -> None:
        """Keep the records of a fetched host batch until it is delivered (:meth:`settle`)."""
        self._unsettled.append(fetched)

    def settle(self, batch: Any, epoch: int, first: bool) -> Any:
        """Count the records of ``batch``, the host batch being delivered now (see account)."""
        if not self._unsettled:  # not the skip policy
            return batch
        fetched = self._unsettled.popleft()
        return self.account(
            fetched._replace(batch=None if batch is NO_BATCH else batch), epoch, first
        )

    def account(self, fetched: Fetched, epoch: int, first: bool) -> Any:
        """Count and record what the skip policy dropped from the batch delivered now.

        ``first``: it is batch 0 of ``epoch``. Returns the batch (``NO_BATCH`` if all of it
        was dropped); raises once the budget is spent (that batch is then neither delivered
        nor counted).
        """
        records = fetched.skipped
        for record in records:
            _LOG.warning("loaderkit skipped %s", record.message)
        if records:
            self.records.extend(records)
            if len(self.records) > SKIPPED_RECORDS_KEPT:
                del self.records[: len(self.records) - SKIPPED_RECORDS_KEPT]
        counts = self.counts.add(epoch, first, fetched.requested, records)
        if records:
            error = over_budget(self._spec, counts, records[-1])
            if error is not None:
                raise error
        self.counts = counts
        return NO_BATCH if fetched.batch is None else fetched.batch

    def to_state(self) -> dict[str, Any]:
        """``state["skips"]`` under the ``skip`` policy (the counts the budget goes on from)."""
        return {"skips": self.counts.to_state()} if self._spec.policy == "skip" else {}
