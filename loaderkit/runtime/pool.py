"""torch's worker pool as the loaders run it: made, diagnosed when it breaks, shut down fast.

torch's multi-process iterator is read here through its private attributes (its workers,
queues and task bookkeeping); every such read is guarded, since this also runs from
``__del__``.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data._utils import signal_handling

from loaderkit.errors import DataError, WorkerError
from loaderkit.order.keys import derive_key
from loaderkit.plan.workers import ResolvedWorkers

__all__ = [
    "BROKEN_GRACE",
    "REMOVE_WORKER_PIDS",
    "SHUTDOWN_GRACE",
    "TIMEOUT",
    "WORKER_KILLED",
    "Awaited",
    "awaited_batch",
    "awaited_task",
    "base_seed_generator",
    "broken_pool",
    "dead_workers",
    "end_processes",
    "identity",
    "shutdown_pool",
    "worker_error",
    "worker_pool",
]


def identity(batch: Any) -> Any:
    """``batch`` itself: the ``collate_fn`` of a pool whose workers make whole batches."""
    return batch


def base_seed_generator(seed: int) -> torch.Generator:
    """The generator torch draws its workers' base seed from, keyed by the plan's seed.

    So starting workers neither reads nor moves the caller's global torch RNG.
    """
    generator = torch.Generator()
    generator.manual_seed(derive_key(seed, "torch-base-seed") % 2**63)
    return generator


def worker_pool(
    dataset: Dataset[Any],
    workers: ResolvedWorkers,
    *,
    seed: int,
    pin_memory: bool,
    persistent: bool,
    sampler: Sampler[Any] | None = None,
) -> DataLoader[Any]:
    """The torch ``DataLoader`` whose workers make whole batches (or a stream's items).

    The worker settings of the plan, the base seed keyed by the plan's ``seed``
    (:func:`base_seed_generator`), no collation of its own (:func:`identity`).
    """
    return DataLoader(
        dataset,
        sampler=sampler,
        batch_size=None,
        collate_fn=identity,
        num_workers=workers.num_workers,
        prefetch_factor=workers.prefetch_factor,
        persistent_workers=persistent,
        pin_memory=pin_memory,
        timeout=workers.timeout or 0,
        multiprocessing_context=workers.start_method,
        generator=base_seed_generator(seed),
    )


WORKER_KILLED = re.compile(
    r"DataLoader worker \(pid(?:\(s\))? ([\d, ]+)\) "
    r"(?:is killed by signal: ([^.]+)|exited unexpectedly(?: with exit code (-?\d+))?)"
)
"""torch's message for a worker that died: (pids, signal name, exit code)."""

TIMEOUT = re.compile(r"DataLoader timed out after (\d+(?:\.\d+)?) seconds")
"""torch's message for a batch that timed out: (seconds)."""


SHUTDOWN_GRACE = 0.5
"""Seconds a pool's workers get to exit on their own at shutdown before they are terminated."""

REMOVE_WORKER_PIDS: Callable[[int], None] = signal_handling._remove_worker_pids  # type: ignore[attr-defined]
"""Unregisters a pool's pids from torch's SIGCHLD handler (what its shutdown does)."""

BROKEN_GRACE = 0.2
"""The same for a broken pool (a worker died or timed out): its results are discarded."""


def shutdown_pool(iterator: object, grace: float = SHUTDOWN_GRACE) -> None:
    """Shut a torch multi-process iterator's workers down within about ``grace`` seconds.

    torch's own ``_shutdown_workers`` joins each worker with a 5 s timeout in turn, so a
    stuck worker (or one whose index queue was already finalized by the garbage collector)
    costs 5 s, per worker. Here the workers are told to stop (done event, then ``None`` on
    each index queue), joined against one shared deadline, and those still alive are
    terminated, then killed. The pids are unregistered from torch's SIGCHLD handler first, so
    a terminated worker raises nothing in the main thread. The iterator is marked shut down,
    so torch's ``__del__`` does nothing more (also in a process forked later, which inherits
    a copy of it). Every step is guarded: this also runs from ``__del__``.
    """
    if getattr(iterator, "_shutdown", True):
        return  # not a multi-process iterator, or shut down already
    pool: Any = iterator  # torch's _MultiProcessingDataLoaderIter, read by its private names
    workers: list[Any] = list(getattr(iterator, "_workers", ()))
    if any(getattr(w, "_parent_pid", None) != os.getpid() for w in workers):
        return  # a copy inherited by a forked process: the workers are not ours
    pool._shutdown = True
    steps: list[Callable[[], object]] = []
    done = getattr(iterator, "_pin_memory_thread_done_event", None)
    thread = getattr(iterator, "_pin_memory_thread", None)
    results = getattr(iterator, "_worker_result_queue", None)
    if done is not None and thread is not None and results is not None:
        steps += [done.set, lambda: results.put((None, None)), lambda: thread.join(grace)]
    steps.append(pool._workers_done_event.set)
    persistent = getattr(iterator, "_persistent_workers", False)
    status: list[bool] = list(getattr(iterator, "_workers_status", ()))
    for worker_id in range(len(workers)):
        if persistent or (worker_id < len(status) and status[worker_id]):
            steps.append(
                functools.partial(pool._mark_worker_as_unavailable, worker_id, shutdown=True)
            )
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - a queue finalized already: terminate below
            continue
    deadline = time.monotonic() + grace
    try:
        for w in workers:
            w.join(timeout=max(deadline - time.monotonic(), 0.0))
    finally:
        if getattr(iterator, "_worker_pids_set", False):
            REMOVE_WORKER_PIDS(id(iterator))
            pool._worker_pids_set = False
        end_processes(workers)
        queues = [*getattr(iterator, "_index_queues", ()), results]
        for queue in queues:
            try:
                queue.cancel_join_thread()
                queue.close()
            except Exception:  # noqa: BLE001 - closed already
                continue


def end_processes(processes: Sequence[Any]) -> None:
    """Terminate, then kill, the processes still alive; reap them all."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.terminate()
    deadline = time.monotonic() + 0.5
    for p in alive:
        p.join(timeout=max(deadline - time.monotonic(), 0.0))
        if p.is_alive():
            p.kill()
            p.join(timeout=0.5)


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
    shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
    return Awaited(epoch, batch, worker, pid, f" (samples {shown})")


def worker_error(
    exc: Exception,
    timeout: float | None,
    dead: Sequence[tuple[int, int | None, int]] = (),
    awaited: Awaited | None = None,
) -> WorkerError | None:
    """The :class:`WorkerError` for a torch worker failure, or ``None`` for anything else."""
    text = str(exc)
    batch = None if awaited is None else awaited.batch_index
    if dead and ("DataLoader worker" in text or not isinstance(exc, RuntimeError | DataError)):
        worker_id, pid, code = dead[0]
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
    timed = TIMEOUT.search(text)
    if timed:
        seconds = float(timed.group(1))
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
    killed = WORKER_KILLED.search(text)
    if killed:
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
            " (SIGKILL: often the out-of-memory killer; lower num_workers or the memory a "
            "sample needs)"
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
    return None


def broken_pool(
    iterator: object,
    exc: Exception,
    timeout: float | None,
    where: tuple[int, int] | None,
    batch_indices: Callable[[int, int], list[int]],
    on_broken: Callable[[], None],
) -> WorkerError | None:
    """The :class:`WorkerError` for ``exc`` if a worker died or timed out, else ``None``.

    The pool is then shut down (within about a second, stuck workers terminated) and
    ``on_broken()`` called. ``where`` is (epoch, first batch) of the pass, to name the batch
    that was awaited and its samples (``batch_indices``); ``timeout`` is the workers'
    setting, for the message. torch's SIGCHLD handler raises its own RuntimeError in the
    main thread whenever a worker ends, wherever the main thread is; while this handles a
    death it may fire again, so its errors are absorbed until the pool is shut down (which
    unregisters the workers from the handler).
    """
    error: WorkerError | None = None
    awaited = awaited_batch(iterator, where, batch_indices)
    for _ in range(5):
        try:
            if error is None:
                timed_out = TIMEOUT.search(str(exc)) is not None
                dead = [] if timed_out else dead_workers(iterator)
                error = worker_error(exc, timeout, dead, awaited)
                if error is None:
                    return None
            shutdown_pool(iterator, grace=BROKEN_GRACE)
            on_broken()  # e.g. the loader's close(): the next iteration starts new workers
            return error
        except RuntimeError as again:
            if "DataLoader worker" not in str(again):
                raise
    return error
