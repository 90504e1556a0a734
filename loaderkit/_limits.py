"""The bounds on what a plan may set.

One declaration, :data:`LIMITS`, that the checks read and ``docs/security.md`` lists.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["LIMITS", "Limits"]


def _limit(doc: str, default: int) -> Any:
    return attrs.field(default=default, metadata={"doc": doc})


@attrs.frozen
class Limits:
    """The bounds on what a plan (a file, a dict, or builder arguments) may set.

    One declaration: the checks read these numbers, ``docs/security.md`` lists them (a test
    keeps the two equal), and a value over a bound is a ``PlanError`` naming its path and the
    bound. They keep a hostile or mistaken plan from hanging, exhausting memory or crashing a
    reader; none of them is near what a real plan needs.
    """

    file_bytes: int = _limit("size of a plan file, in bytes (the default: see below)", 2**20)
    depth: int = _limit("nesting of tables and arrays in a plan", 32)
    values: int = _limit("values (numbers, strings, tables, array items) in a plan", 100_000)
    string_chars: int = _limit("characters of one string or key", 4096)
    integer: int = _limit("magnitude of any integer", 2**63 - 1)
    dataset_length: int = _limit("samples in a dataset (`dataset.length`)", 2**48)
    batch_size: int = _limit(
        "samples in a batch, tokens in a budget or a sequence, buckets", 2**31 - 1
    )
    num_workers: int = _limit("`workers.num_workers`", 256)
    prefetch_factor: int = _limit("`workers.prefetch_factor`", 1024)
    batches_in_flight: int = _limit("`num_workers x prefetch_factor`", 16_384)
    workers_per_cpu: int = _limit(
        "worker processes per CPU of the machine that builds the loader (checked by `build()`)",
        8,
    )
    device_index: int = _limit("`N` of a `cuda:N` device", 1023)
    timeout_seconds: int = _limit("`workers.timeout`, in seconds (one week)", 7 * 24 * 3600)

    def rows(self) -> list[tuple[str, int, str]]:
        """``(name, bound, what it bounds)`` for each limit, in declaration order."""
        return [
            (field.name, getattr(self, field.name), field.metadata["doc"])
            for field in attrs.fields(type(self))
        ]


LIMITS: Final = Limits()
"""The bounds in force (see :class:`Limits`)."""
