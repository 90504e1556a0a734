r"""The exceptions loaderkit raises, as one documented tree.

::

    LoaderkitError                    base of everything loaderkit raises on purpose
    ├── PlanError (ValueError)        a misconfiguration: a with_* method, compile() or load()
    │   └── PlanTypeError (TypeError) ... where a value has the wrong type (True for an int)
    ├── DataError                     a bad sample or batch met while loading (names the
    │   │                             sample, the worker and the collator)
    │   └── DataError[T] (T)          ... made from an exception of type T the data raised:
    │                                 also a T, so ``except ValueError`` catches it
    ├── WorkerError (RuntimeError)    a worker process died or a batch timed out (names the
    │                                 worker, its exit code or signal, or the timeout)
    ├── ResumeError (ValueError)      a state_dict that does not fit this plan (shows the diff)
    ├── UnknownNameError (LookupError) a name missing from a registry (in loaderkit.registry)
    └── NotBuiltYetError              a setting the plan holds that build() cannot honour yet

Every message has the same shape: what is wrong, where (a dotted *path* into the plan such as
``workers.prefetch_factor``), the value received, and the fix. ``PlanError`` carries *all* the
problems found at once in ``.problems``; each :class:`Problem` has a ``.path`` and a ``.message``.

A message can hold text from a plan file, a saved state or a dataset, all untrusted: every
message is made inert here (``loaderkit._text``): control characters are escaped (``\x1b``),
each line is bounded, and a message lists at most 50 problems or differences, then a count.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from loaderkit._text import LINE_CHARS, inert, inert_lines, listed

__all__ = [
    "DataError",
    "LoaderkitError",
    "NotBuiltYetError",
    "PlanError",
    "PlanTypeError",
    "Problem",
    "ResumeError",
    "WorkerError",
    "data_error",
    "data_error_type",
    "portable_exception",
    "portable_type",
]


class LoaderkitError(Exception):
    """Base class of every error loaderkit raises on purpose.

    A message given as the first argument is made inert (``loaderkit._text.inert_lines``):
    whatever untrusted text it holds reaches a terminal escaped and bounded.
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            args = (inert_lines(args[0]), *args[1:])
        super().__init__(*args)


def _lines(text: str) -> str:
    return inert_lines(text, LINE_CHARS)


@attrs.frozen
class Problem:
    r"""One thing wrong with a plan: where (``path``) and what, with the value and the fix.

    ``related`` names the other plan sections a conflict involves (``("bucketing",)`` for a
    fixed batch size under a token budget), so that the error can say who set them (a preset:
    see ``loaderkit.presets``); it is not compared.

    Both texts are made inert as the problem is made (``loaderkit._text``): a key or a value
    of an untrusted plan in them is escaped (``\x1b``) and bounded (a path at 200
    characters, each line of a message at 2,000; a path keeps no newline).
    """

    path: str = attrs.field(converter=inert)
    message: str = attrs.field(converter=_lines)
    related: tuple[str, ...] = attrs.field(default=(), eq=False, kw_only=True)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def prefixed(self, prefix: str) -> Problem:
        """Return the same problem with ``prefix`` put in front of its path."""
        return Problem(
            f"{prefix}.{self.path}" if self.path else prefix, self.message, related=self.related
        )


class PlanError(LoaderkitError, ValueError):
    """A plan is misconfigured; ``.problems`` lists every problem found, each with a path.

    Raised by the builder's ``with_*`` methods (one problem: the argument they were given),
    by ``compile()`` (every cross-field rule at once) and when a plan file is loaded: then
    ``file`` is the file's path, and the message starts with it
    (``plans/train.toml: batch.batch_size: must be >= 1 (got 0); ...``).
    """

    problems: tuple[Problem, ...]
    file: str | None
    """The plan file the problems were found in (``LoaderPlan.load``), else ``None``."""

    def __init__(self, problems: Iterable[Problem] | Problem, *, file: str | None = None) -> None:
        if isinstance(problems, Problem):
            problems = (problems,)
        self.problems = tuple(problems)
        self.file = file
        if not self.problems:
            raise ValueError("PlanError needs at least one problem")
        super().__init__(self._render())

    @classmethod
    def single(cls, path: str, message: str) -> PlanError:
        """Build an error holding one problem."""
        return cls((Problem(path, message),))

    def in_file(self, file: str) -> PlanError:
        """The same error (its type and problems) found in the plan file ``file``.

        An error that names its file already is returned as it is.
        """
        if self.file is not None:
            return self
        return type(self)(self.problems, file=file)

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths of all problems, in the order they were found."""
        return tuple(p.path for p in self.problems)

    @property
    def where(self) -> str:
        """``"<file>: "`` for an error found in a plan file (escaped and bounded), else ``""``."""
        return "" if self.file is None else f"{inert(self.file, LINE_CHARS)}: "

    def listed(self) -> list[str]:
        """The problems as the message lists them: the first 50, then a count of the rest."""
        return listed([str(p) for p in self.problems[:51]], "problems", total=len(self.problems))

    def _render(self) -> str:
        # the file's path may hold control characters (a planted name): escaped by `where`
        if len(self.problems) == 1:
            return f"{self.where}{self.problems[0]}"
        lines = [f"{self.where}{len(self.problems):,} problems in the plan:"]
        lines.extend(f"  - {line}" for line in self.listed())
        return "\n".join(lines)

    def __reduce__(
        self,
    ) -> tuple[type[PlanError], tuple[tuple[Problem, ...]], dict[str, str | None]]:
        return (type(self), (self.problems,), {"file": self.file})

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        """Restore ``file`` after unpickling, with the message that names it."""
        self.file = None if state is None else state.get("file")
        self.args = (self._render(),)


class PlanTypeError(PlanError, TypeError):
    """A ``PlanError`` raised because a value has the wrong type."""


class DataError(LoaderkitError):
    """A sample or batch could not be loaded or collated.

    ``sample_index``, ``worker_id``, ``collator`` and ``batch_index`` say where, when known.
    A ``DataError`` made from an exception raised by the dataset, a transform or a collator
    (see :func:`data_error`) is *also* an instance of that exception's type, so the
    ``except ValueError:`` written for torch's ``DataLoader`` still catches it;
    ``original_type`` names that type (``None`` when there was none) and ``__cause__`` is the
    original exception (when it could cross from the worker process).
    """

    original_type: type[BaseException] | None = None

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
        self.message = inert_lines(message)  # a sample's repr, a dataset's text: untrusted
        # not super().__init__: in a typed DataError the original type's __init__ comes next
        # in the MRO, and it may need other arguments (UnicodeDecodeError needs five)
        BaseException.__init__(self, self.message)

    def __str__(self) -> str:
        # the message as given: some original types print otherwise (KeyError quotes it)
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        typed = bool(type(self).__dict__.get("_typed", False))
        return (
            _rebuild_data_error,
            (
                DataError if typed else type(self),
                self.message,
                self.sample_index,
                self.worker_id,
                self.collator,
                self.batch_index,
                portable_type(self.original_type),
                portable_exception(self.__cause__),
            ),
        )


_TYPED: dict[type[BaseException], type[DataError]] = {}
"""The typed DataError class made for each original exception type (made once, reused)."""

_UNTYPED: set[type[BaseException]] = set()
"""Original types a DataError cannot also be an instance of (see :func:`data_error_type`)."""


def data_error_type(original: type[BaseException] | None) -> type[DataError]:
    """The class of a :class:`DataError` that is also an ``original`` (made once, cached).

    ``DataError[ValueError]`` for ``ValueError``: ``except ValueError`` and ``except
    DataError`` both catch it. Plain :class:`DataError` (the original is then only the
    error's ``original_type`` and ``__cause__``) when ``original`` is ``None``, already a base
    of ``DataError`` (``Exception``), not an ``Exception`` (``KeyboardInterrupt``),
    ``StopIteration`` or ``StopAsyncIteration`` (raised in a generator, they turn into a
    ``RuntimeError``, and an iteration catching them would end silently), ``SyntaxError``
    (``traceback`` prints it from fields of its own), a loaderkit error
    (a ``DataError`` gives its own ``original_type``), or a type that cannot be subclassed
    together with ``DataError`` (a final type, a metaclass or memory layout conflict).
    """
    if original is None or original in _UNTYPED:
        return DataError
    found = _TYPED.get(original)
    if found is not None:
        return found
    made: type[DataError] = DataError
    if (
        issubclass(original, Exception)
        and not issubclass(DataError, original)
        and not issubclass(
            original, StopIteration | StopAsyncIteration | SyntaxError | LoaderkitError
        )
    ):
        try:
            made = type(
                f"DataError[{original.__name__}]",
                (DataError, original),
                {"__module__": __name__, "original_type": original, "_typed": True},
            )
            made("probe", sample_index=0)  # the original type may not allow it (its __new__)
        except Exception:  # noqa: BLE001 - any failure means: a plain DataError
            made = DataError
    if made is DataError:
        _UNTYPED.add(original)
    else:
        _TYPED[original] = made
    return made


def data_error(
    message: str,
    original: BaseException | type[BaseException] | None,
    *,
    sample_index: int | None = None,
    worker_id: int | None = None,
    collator: str | None = None,
    batch_index: int | None = None,
) -> DataError:
    """A :class:`DataError` that is also an instance of ``original``'s type where possible.

    ``original`` is the exception the data raised (or its type). A ``DataError`` passes its
    own ``original_type`` on. The caller raises the result ``from`` the original exception.
    """
    if isinstance(original, DataError):
        kind: type[BaseException] | None = original.original_type
    elif isinstance(original, BaseException):
        kind = type(original)
    else:
        kind = original
    try:
        error = data_error_type(kind)(
            message,
            sample_index=sample_index,
            worker_id=worker_id,
            collator=collator,
            batch_index=batch_index,
        )
    except Exception:  # noqa: BLE001 - e.g. an original __new__ that refuses this message
        error = DataError(
            message,
            sample_index=sample_index,
            worker_id=worker_id,
            collator=collator,
            batch_index=batch_index,
        )
    error.original_type = kind
    return error


def _survives_pickle(value: object) -> bool:
    """Whether ``value`` survives a pickle round trip (what crossing processes needs)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:  # noqa: BLE001 - whatever pickle refuses is not sent
        return False
    return True


def portable_type(kind: type[BaseException] | None) -> type[BaseException] | None:
    """``kind`` if pickle can name it (a class defined at a module's top level), else ``None``."""
    return kind if kind is not None and _survives_pickle(kind) else None


def portable_exception(exc: BaseException | None) -> BaseException | None:
    """``exc`` if it survives a pickle round trip (to cross processes), else ``None``.

    An exception whose ``__init__`` needs other arguments than its ``args`` (a common user
    pattern) cannot be unpickled; it is then left out rather than breaking the transfer.
    """
    return exc if exc is not None and _survives_pickle(exc) else None


def _rebuild_data_error(
    cls: type[DataError],
    message: str,
    sample_index: int | None,
    worker_id: int | None,
    collator: str | None,
    batch_index: int | None,
    original_type: type[BaseException] | None = None,
    cause: BaseException | None = None,
) -> DataError:
    if cls is DataError:
        error = data_error(
            message,
            original_type,
            sample_index=sample_index,
            worker_id=worker_id,
            collator=collator,
            batch_index=batch_index,
        )
    else:
        error = cls(
            message,
            sample_index=sample_index,
            worker_id=worker_id,
            collator=collator,
            batch_index=batch_index,
        )
    error.original_type = original_type
    error.__cause__ = cause
    return error


class ResumeError(LoaderkitError, ValueError):
    """A loader state does not fit the plan it is loaded into; ``.diff`` lists the differences.

    Each difference is escaped and bounded (``loaderkit._text.inert``); the message lists the
    first 50, then a count of the rest (``.diff`` holds them all).
    """

    def __init__(self, message: str, diff: Sequence[str] = ()) -> None:
        self.diff = tuple(inert(line, LINE_CHARS) for line in diff)
        text = message
        if self.diff:
            shown = listed(self.diff[:51], "differences", total=len(self.diff))
            text += "\n" + "\n".join(f"  {line}" for line in shown)
        super().__init__(text)


class WorkerError(LoaderkitError, RuntimeError):
    """A worker process died (killed, crashed, exited) or did not deliver within the timeout.

    ``worker_id`` and ``pid`` name the worker where torch reported them; ``signal`` or
    ``exit_code`` say how it ended; ``timeout`` is set for a timeout, and ``batch_index`` is
    the batch of the epoch that was being waited for when it is known (a timeout always names
    it, with the worker that held it). The loader stays usable: the next iteration starts new
    workers from the last delivered batch. Except where ``restartable`` is ``False``: the
    workers failed while starting up (with start method ``spawn`` or ``forkserver``: a script
    without an ``if __name__ == "__main__":`` guard, an import that fails in a worker), so new
    workers would fail the same way; the message names the likely cause.
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
        restartable: bool = True,
    ) -> None:
        super().__init__(message)
        self.worker_id = worker_id
        self.pid = pid
        self.signal = signal
        self.exit_code = exit_code
        self.timeout = timeout
        self.batch_index = batch_index
        self.restartable = restartable


class NotBuiltYetError(LoaderkitError, NotImplementedError):
    """The plan is valid but ``build()`` does not support one of its settings yet."""
