"""The exceptions loaderkit raises, as one documented tree.

::

    LoaderkitError                    base of everything loaderkit raises on purpose
    ├── PlanError (ValueError)        a misconfiguration: a with_* method, compile() or load()
    │   └── PlanTypeError (TypeError) ... where a value has the wrong type (True for an int)
    ├── DataError                     a bad sample or batch met while loading (names the
    │                                 sample, the worker and the collator)
    ├── WorkerError (RuntimeError)    a worker process died or a batch timed out (names the
    │                                 worker, its exit code or signal, or the timeout)
    ├── ResumeError (ValueError)      a state_dict that does not fit this plan (shows the diff)
    ├── UnknownNameError (LookupError) a name missing from a registry (in loaderkit.registry)
    └── NotBuiltYetError              a setting the plan holds that build() cannot honour yet

Every message has the same shape: what is wrong, where (a dotted *path* into the plan such as
``workers.prefetch_factor``), the value received, and the fix. ``PlanError`` carries *all* the
problems found at once in ``.problems``; each :class:`Problem` has a ``.path`` and a ``.message``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

__all__ = [
    "DataError",
    "LoaderkitError",
    "NotBuiltYetError",
    "PlanError",
    "PlanTypeError",
    "Problem",
    "ResumeError",
    "WorkerError",
]


class LoaderkitError(Exception):
    """Base class of every error loaderkit raises on purpose."""


@attrs.frozen
class Problem:
    """One thing wrong with a plan: where (``path``) and what, with the value and the fix."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def prefixed(self, prefix: str) -> Problem:
        """Return the same problem with ``prefix`` put in front of its path."""
        return Problem(f"{prefix}.{self.path}" if self.path else prefix, self.message)


class PlanError(LoaderkitError, ValueError):
    """A plan is misconfigured; ``.problems`` lists every problem found, each with a path.

    Raised by the builder's ``with_*`` methods (one problem: the argument they were given),
    by ``compile()`` (every cross-field rule at once) and when a plan file is loaded.
    """

    problems: tuple[Problem, ...]

    def __init__(self, problems: Iterable[Problem] | Problem) -> None:
        if isinstance(problems, Problem):
            problems = (problems,)
        self.problems = tuple(problems)
        if not self.problems:
            raise ValueError("PlanError needs at least one problem")
        super().__init__(self._render())

    @classmethod
    def single(cls, path: str, message: str) -> PlanError:
        """Build an error holding one problem."""
        return cls((Problem(path, message),))

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths of all problems, in the order they were found."""
        return tuple(p.path for p in self.problems)

    def _render(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        lines = [f"{len(self.problems)} problems in the plan:"]
        lines.extend(f"  - {p}" for p in self.problems)
        return "\n".join(lines)

    def __reduce__(self) -> tuple[type[PlanError], tuple[tuple[Problem, ...]]]:
        return (type(self), (self.problems,))


class PlanTypeError(PlanError, TypeError):
    """A ``PlanError`` raised because a value has the wrong type."""


class DataError(LoaderkitError):
    """A sample or batch could not be loaded or collated.

    ``sample_index``, ``worker_id`` and ``collator`` say where, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        sample_index: int | None = None,
        worker_id: int | None = None,
        collator: str | None = None,
        batch_index: int | None = None,
    ) -> None:
        self.sample_index = sample_index
        self.worker_id = worker_id
        self.collator = collator
        self.batch_index = batch_index
        self.message = message
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_data_error,
            (
                type(self),
                self.message,
                self.sample_index,
                self.worker_id,
                self.collator,
                self.batch_index,
            ),
        )


def _rebuild_data_error(
    cls: type[DataError],
    message: str,
    sample_index: int | None,
    worker_id: int | None,
    collator: str | None,
    batch_index: int | None,
) -> DataError:
    return cls(
        message,
        sample_index=sample_index,
        worker_id=worker_id,
        collator=collator,
        batch_index=batch_index,
    )


class ResumeError(LoaderkitError, ValueError):
    """A loader state does not fit the plan it is loaded into; ``.diff`` lists the differences."""

    def __init__(self, message: str, diff: Sequence[str] = ()) -> None:
        self.diff = tuple(diff)
        text = message
        if self.diff:
            text += "\n" + "\n".join(f"  {line}" for line in self.diff)
        super().__init__(text)


class WorkerError(LoaderkitError, RuntimeError):
    """A worker process died (killed, crashed, exited) or did not deliver within the timeout.

    ``worker_id`` and ``pid`` name the worker where torch reported them; ``signal`` or
    ``exit_code`` say how it ended; ``timeout`` is set for a timeout, and ``batch_index`` is
    the batch of the epoch that was being waited for when it is known (a timeout always names
    it, with the worker that held it). The loader stays usable: the next iteration starts new
    workers from the last delivered batch.
    """

    def __init__(
        self,
        message: str,
        *,
        worker_id: int | None = None,
        pid: int | None = None,
        signal: str | None = None,
        exit_code: int | None = None,
        timeout: float | None = None,
        batch_index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.worker_id = worker_id
        self.pid = pid
        self.signal = signal
        self.exit_code = exit_code
        self.timeout = timeout
        self.batch_index = batch_index


class NotBuiltYetError(LoaderkitError, NotImplementedError):
    """The plan is valid but ``build()`` does not support one of its settings yet."""
