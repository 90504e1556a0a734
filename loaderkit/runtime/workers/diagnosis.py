"""A broken worker pool diagnosed: which worker died or timed out, holding which batch, and why.

torch reports a dead worker or a timeout as a ``RuntimeError`` with only its own words; the
functions here read its multi-process iterator (guarded: its attributes are private) for the
worker, its pid and exit code, and the batch it held, and make the :class:`WorkerError` that
names them and says whether iterating again helps (``restartable``). A worker that died while
starting up under ``spawn`` or ``forkserver`` is told apart (:class:`StartedWorkers`): new
workers would die the same way.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from loaderkit._text import sample_list
from loaderkit.errors import DataError, WorkerError
from loaderkit.runtime.workers.pool import (
    BROKEN_GRACE,
    StartedWorkers,
    WorkerStartError,
    main_module_unguarded,
    shutdown_pool,
)

__all__ = [
    "STARTS_BY_IMPORT",
    "TIMEOUT",
    "WORKER_KILLED",
    "Awaited",
    "awaited_batch",
    "awaited_task",
    "broken_pool",
    "dead_workers",
    "worker_error",
]


WORKER_KILLED = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) "
    r"(?:is killed by signal: ([^.]+)|exited unexpectedly(?: with exit code (-?\d+))?)"
)
"""torch's message for a worker that died: (pids, signal name, exit code)."""

TIMEOUT = re.compile(r"DataLoader timed out after (\d+(?:\.\d+)?) seconds")
"""torch's message for a batch that timed out: (seconds)."""


def dead_workers(iterator: object, *, wait: float = 1.0) -> list[tuple[int, int | None, int]]:
    """``(worker id, pid, exit code)`` of the torch iterator's workers that have ended.

    A negative exit code is the signal that ended the worker (multiprocessing's convention).
    A worker that is dying may not be reaped yet: the workers are polled for up to ``wait``
    seconds in all (not per worker) until one is found.
    """
    workers = list(getattr(iterator, "_workers", ()))
    deadline = time.monotonic() + wait
    while True:
        found = []
        for worker_id, process in enumerate(workers):
            code = process.exitcode  # polls (reaps) without blocking
            if code is not None and code != 0:
                found.append((worker_id, process.pid, int(code)))
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def awaited_task(iterator: object) -> tuple[int, int | None] | None:
    """(task index in the pass, worker id) of the batch torch's iterator is waiting for.

    torch sends task ``i`` of a pass to a worker (round-robin over the available ones),
    records it in ``_task_info[i] = (worker id,)`` until it arrives, and returns tasks in
    order: ``_rcvd_idx`` is the one awaited.
    """
    index = getattr(iterator, "_rcvd_idx", None)
    info = getattr(iterator, "_task_info", {})
    if not isinstance(index, int):
        return None
    task = info.get(index) if isinstance(info, dict) else None
    worker = task[0] if isinstance(task, tuple) and task and isinstance(task[0], int) else None
    return index, worker


class Awaited(NamedTuple):
    """The batch a broken pool was waiting for, and the worker that held it."""

    epoch: int | None
    batch_index: int | None
    worker_id: int | None
    pid: int | None
    samples: str = ""


def awaited_batch(
    iterator: object,
    where: tuple[int, int] | None,
    batch_indices: Callable[[int, int], list[int]],
) -> Awaited:
    """The batch the torch iterator waits for (its epoch, index, samples) and its worker.

    ``where`` is (epoch, first batch) of the pass; ``batch_indices(epoch, batch)`` names the
    batch's samples (a courtesy: if it fails, they are left out).
    """
    found = awaited_task(iterator)
    if found is None:
        return Awaited(None, None, None, None)
    task, worker = found
    workers = list(getattr(iterator, "_workers", ()))
    pid = workers[worker].pid if worker is not None and worker < len(workers) else None
    if where is None:
        return Awaited(None, None, worker, pid)
    epoch, first = where
    batch = first + task
    try:
        indices = batch_indices(epoch, batch)
    except Exception:  # noqa: BLE001 - naming the samples is a courtesy
        return Awaited(epoch, batch, worker, pid)
    return Awaited(epoch, batch, worker, pid, f" (samples {sample_list(indices)})")


STARTS_BY_IMPORT = ("spawn", "forkserver")
"""The start methods whose workers import the main module and unpickle what they receive."""

_IN_WORKER = re.compile(r"in DataLoader worker process (\d+)")
_RESTART_FAILS = "Iterating again would start the workers the same way and fail again"


def _unpickling_failed(exc: WorkerStartError, start_method: str | None) -> WorkerError:
    """The error for a worker that could not unpickle what the loader sent it."""
    text = str(exc)  # torch's "Caught WorkerStartError in DataLoader worker process N. ..."
    found = _IN_WORKER.search(text)
    worker = int(found.group(1)) if found else None
    cause, _, trace = text.rsplit("WorkerStartError: ", 1)[-1].partition("\n\n")
    who = "a worker" if worker is None else f"worker {worker}"
    method = f"start method {start_method!r}" if start_method else "its start method"
    return WorkerError(
        f"{who} could not unpickle the loader's objects (the dataset, the collator, the "
        f"transform) while starting up: {cause.strip()}. With {method} a worker imports the "
        f"module of every class and function it receives: define them in a module it can "
        f"import (not in a notebook or a script run with python -c), or use "
        f"start_method='fork' where the platform has it. {_RESTART_FAILS}"
        + (f"\n\nThe worker's traceback:\n{trace.strip()}" if trace.strip() else ""),
        worker_id=worker,
        restartable=False,
    )


def _died_starting(worker_id: int, pid: int | None, code: int, start_method: str) -> WorkerError:
    """The error for a worker that exited before its first batch under spawn / forkserver."""
    unguarded = main_module_unguarded()
    if unguarded is not None:
        cause = (
            f"with start method {start_method!r} every worker imports the main module again, "
            f'and {unguarded!r} has no `if __name__ == "__main__":` guard, so each worker runs '
            f"the script (building and iterating loaders) instead of loading batches: put the "
            f"script's work under that guard (or use start_method='fork' where the platform "
            f"has it)"
        )
    else:
        cause = (
            f"with start method {start_method!r} a worker imports the main module and the "
            f"modules of the plan's classes and functions again: its traceback (on stderr) "
            f"names what failed, often an import"
        )
    return WorkerError(
        f"worker {worker_id} (pid {pid}) exited with exit code {code} before its first batch, "
        f"while starting up: {cause}. {_RESTART_FAILS}",
        worker_id=worker_id,
        pid=pid,
        exit_code=code,
        restartable=False,
    )


def worker_error(
    exc: Exception,
    timeout: float | None,
    dead: Sequence[tuple[int, int | None, int]] = (),
    awaited: Awaited | None = None,
    *,
    start_method: str | None = None,
    started: Callable[[int, int | None], bool] | None = None,
) -> WorkerError | None:
    """The :class:`WorkerError` for a torch worker failure, or ``None`` for anything else.

    ``start_method`` is the workers' (resolved); ``started`` says whether a worker (id, pid)
    got through start-up (:class:`StartedWorkers`): one that exited before (with ``spawn`` or
    ``forkserver``) died starting up, and new workers would too (``restartable=False``, the
    likely cause named).
    """
    text = str(exc)
    batch = None if awaited is None else awaited.batch_index
    if isinstance(exc, WorkerStartError):
        return _unpickling_failed(exc, start_method)
    if dead and ("DataLoader worker" in text or not isinstance(exc, RuntimeError | DataError)):
        worker_id, pid, code = dead[0]
        starting = started is not None and not started(worker_id, pid)
        if starting and code > 0 and start_method in STARTS_BY_IMPORT:
            return _died_starting(worker_id, pid, code, start_method)
        return _died(worker_id, pid, code, batch)
    timed = TIMEOUT.search(text)
    if timed:
        return _timed_out(float(timed.group(1)), timeout, awaited, batch)
    killed = WORKER_KILLED.search(text)
    if killed:
        return _killed(killed, text, batch)
    return None


def _died(worker_id: int, pid: int | None, code: int, batch: int | None) -> WorkerError:
    """The error for worker ``worker_id``, found ended with exit code ``code`` (< 0: signal)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"was killed by {name}"
        hint = (
            " (SIGKILL is often the out-of-memory killer: lower num_workers or the memory a "
            "sample needs)"
            if name == "SIGKILL"
            else ""
        )
    else:
        name, how, hint = None, f"exited with exit code {code}", ""
    return WorkerError(
        f"worker {worker_id} (pid {pid}) {how}{hint}; the batches it held were not "
        f"delivered. The loader stays usable: iterating again restarts the workers from "
        f"the last delivered batch",
        worker_id=worker_id,
        pid=pid,
        signal=name,
        exit_code=None if code < 0 else code,
        batch_index=batch,
    )


def _timed_out(
    seconds: float, timeout: float | None, awaited: Awaited | None, batch: int | None
) -> WorkerError:
    """The error for a batch torch gave up on after ``seconds`` (``awaited``: who held it)."""
    held = "no worker delivered it in time"
    holder: int | None = None
    holder_pid: int | None = None
    if awaited is not None:
        holder, holder_pid = awaited.worker_id, awaited.pid
        what = "a batch" if batch is None else f"batch {batch}"
        if awaited.epoch is not None and batch is not None:
            what += f" of epoch {awaited.epoch}"
        who = "its worker" if holder is None else f"worker {holder} (pid {holder_pid})"
        held = f"{what}{awaited.samples} was held by {who}, which did not deliver it in time"
    return WorkerError(
        f"a batch timed out after {seconds:g} s (with_workers(timeout={timeout})): {held}; "
        f"look for a sample or transform that blocks, or raise the timeout. The loader "
        f"stays usable: iterating again restarts the workers from the last delivered batch",
        timeout=seconds,
        worker_id=holder,
        pid=holder_pid,
        batch_index=batch,
    )


def _killed(killed: re.Match[str], text: str, batch: int | None) -> WorkerError:
    """The error for torch's own words that a worker died (:data:`WORKER_KILLED` matched)."""
    pids = [int(p) for p in re.findall(r"\d+", killed.group(1))]
    signal_name = killed.group(2)
    exit_code = None if killed.group(3) is None else int(killed.group(3))
    how = (
        f"was killed by signal {signal_name}"
        if signal_name
        else f"exited unexpectedly (exit code {exit_code})"
        if exit_code is not None
        else "exited unexpectedly"
    )
    hint = (
        " (SIGKILL: often the out-of-memory killer; lower num_workers or the memory a sample needs)"
        if signal_name and "Killed" in signal_name
        else ""
    )
    return WorkerError(
        f"worker process (pid {', '.join(map(str, pids))}) {how}{hint}; the batches it "
        f"held were not delivered. The loader stays usable: iterating again restarts the "
        f"workers from the last delivered batch. torch said: {text.splitlines()[0]}",
        pid=pids[0] if pids else None,
        signal=signal_name,
        exit_code=exit_code,
        batch_index=batch,
    )


def broken_pool(
    iterator: object,
    exc: Exception,
    timeout: float | None,
    where: tuple[int, int] | None,
    batch_indices: Callable[[int, int], list[int]],
    on_broken: Callable[[], None],
    *,
    start_method: str | None = None,
) -> WorkerError | None:
    """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

    The pool is then shut down (within about a second, stuck workers terminated) and
    ``on_broken()`` called. ``where`` is (epoch, first batch) of the pass, to name the batch
    that was awaited and its samples (``batch_indices``); ``timeout`` is the workers'
    setting, for the message; ``start_method`` (resolved) and the pool's
    :class:`StartedWorkers` tell a worker that died starting up (see :func:`worker_error`).
    torch's SIGCHLD handler raises its own RuntimeError in the
    main thread whenever a worker ends, wherever the main thread is; while this handles a
    death it may fire again, so its errors are absorbed until the pool is shut down (which
    unregisters the workers from the handler).
    """
    error: WorkerError | None = None
    awaited = awaited_batch(iterator, where, batch_indices)
    for _ in range(5):
        try:
            if error is None:
                alive = isinstance(exc, WorkerStartError) or TIMEOUT.search(str(exc)) is not None
                dead = [] if alive else dead_workers(iterator)
                started = getattr(iterator, "_worker_init_fn", None)  # worker_pool's
                error = worker_error(
                    exc,
                    timeout,
                    dead,
                    awaited,
                    start_method=start_method,
                    started=started.started if isinstance(started, StartedWorkers) else None,
                )
                if error is None:
                    return None
            shutdown_pool(iterator, grace=BROKEN_GRACE)
            on_broken()  # e.g. the loader's close(): the next iteration starts new workers
            return error
        except RuntimeError as again:
            if "DataLoader worker" not in str(again):
                raise
    return error
