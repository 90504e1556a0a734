"""torch's worker pool as the loaders run it: made and shut down fast.

torch's multi-process iterator is read here through its private attributes (its workers,
queues and task bookkeeping); every such read is guarded, since this also runs from
``__del__``.

A worker that fails while starting up (start method ``spawn`` or ``forkserver``: it imports
the main module and unpickles what the loader sends it) gets a :class:`WorkerError` naming the
likely cause, with ``restartable=False``: a script without an ``if __name__ == "__main__":``
guard (:func:`main_module_unguarded`), or the exception that unpickling raised in the worker
(:class:`ShippedToWorkers` keeps it and raises it as :class:`WorkerStartError` at first use,
instead of letting the worker die with only a traceback on stderr).

When the pool breaks (a worker died or timed out), :mod:`loaderkit.runtime.workers.diagnosis`
says which worker and batch, and why.

Each worker leads a process group of its own, so the processes a dataset starts in it end
with it (:mod:`loaderkit.runtime.workers.groups`); shutting a pool down ends what is left of them.
"""

from __future__ import annotations

import ast
import atexit
import functools
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import util as _mp_util  # noqa: F401 - its exit hook is registered first
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data._utils import signal_handling

from loaderkit.order.keys import derive_key
from loaderkit.plan.workers import ResolvedWorkers
from loaderkit.runtime.workers.groups import end_groups, lead_process_group

__all__ = [
    "BROKEN_GRACE",
    "REMOVE_WORKER_PIDS",
    "SHUTDOWN_GRACE",
    "ShippedToWorkers",
    "StartedWorkers",
    "WorkerStartError",
    "arrived",
    "base_seed_generator",
    "end_processes",
    "identity",
    "main_module_unguarded",
    "shutdown_pool",
    "worker_pool",
]


def identity(batch: Any) -> Any:
    """``batch`` itself: the ``collate_fn`` of a pool whose workers make whole batches."""
    return batch


class WorkerStartError(Exception):
    """Raised in a worker whose copy of the loader's objects could not be unpickled.

    Its message is the unpickling error (``"ModuleNotFoundError: No module named 'x'"``),
    then, after a blank line, that error's traceback in the worker. torch sends it to the main
    process, where :func:`worker_error` makes it a :class:`WorkerError`.
    """


class ShippedToWorkers:
    """A dataset torch sends to its workers whose unpickling there cannot kill the worker.

    Pickled (``spawn``, ``forkserver``) as its state, itself pickled by torch's
    ``ForkingPickler`` (so tensors still travel through shared memory) and unpickled while the
    worker starts, as before; but a failure (a module the worker cannot import, a class
    defined where workers cannot find it) is kept, and :meth:`check_arrived` raises it as a
    :class:`WorkerStartError` at the first use, which torch reports to the main process. With
    ``fork`` nothing is pickled.
    """

    def __reduce__(self) -> tuple[Callable[[type[Any], bytes], Any], tuple[type[Any], bytes]]:
        return (arrived, (type(self), bytes(ForkingPickler.dumps(self.__dict__))))

    def check_arrived(self) -> None:
        """Raise :class:`WorkerStartError` if this object's state failed to unpickle here."""
        failure = self.__dict__.get("_arrival_failure")
        if failure is not None:
            raise WorkerStartError(failure)


def arrived(cls: type[Any], payload: bytes) -> Any:
    """A :class:`ShippedToWorkers` of type ``cls`` from its pickled state (in a worker).

    A state that fails to unpickle gives an object holding only the failure.
    """
    obj = object.__new__(cls)
    try:
        state = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 - kept, raised at first use (check_arrived)
        trace = traceback.format_exc().rstrip()
        obj.__dict__["_arrival_failure"] = f"{type(exc).__name__}: {exc}\n\n{trace}"
    else:
        obj.__dict__.update(state)
    return obj


class StartedWorkers:
    """Which workers of a pool got through start-up: torch's ``worker_init_fn`` of the pool.

    torch calls it in each worker once the worker has started (imported the main module,
    unpickled what it was sent) and before its first batch; it records the worker's pid
    under its id in memory shared with the main process. A worker that died with another pid
    recorded (none: 0) died starting up. Shared memory is inherited (``fork``) or sent while
    the workers are made (``spawn``, ``forkserver``), as multiprocessing allows.
    """

    def __init__(self, workers: int, start_method: str | None) -> None:
        context = multiprocessing.get_context(start_method)
        self.pids = context.RawArray("q", max(workers, 1))
        self.groups = context.RawArray("q", max(workers, 1))
        """Worker id -> the process group it leads (its pid; 0: none), see groups.py."""

    def __call__(self, worker_id: int) -> None:
        """Record that worker ``worker_id`` (this process) started; make it lead its group."""
        self.groups[worker_id] = os.getpid() if lead_process_group() else 0
        self.pids[worker_id] = os.getpid()

    def group_ids(self) -> list[int]:
        """The process groups the pool's workers made (to end once the workers are reaped)."""
        return [g for g in self.groups if g > 0]

    def started(self, worker_id: int, pid: int | None) -> bool:
        """Whether the worker ``worker_id`` with process id ``pid`` got through start-up."""
        return 0 <= worker_id < len(self.pids) and pid is not None and self.pids[worker_id] == pid


def main_module_unguarded() -> str | None:
    """The main module's file if it has no ``if __name__ == "__main__":`` guard, else None.

    With ``spawn`` or ``forkserver`` every worker imports the main module again: without the
    guard, each runs the script's top level (building and iterating loaders) instead of
    loading batches, and dies. ``None`` also when the main module is no readable Python file
    (a notebook, ``python -c``, an interactive session).
    """
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            found: set[object] = {n.id for n in names if isinstance(n, ast.Name)}
            found |= {n.value for n in names if isinstance(n, ast.Constant)}
            if found >= {"__name__", "__main__"}:
                return None
    return path


def base_seed_generator(seed: int) -> torch.Generator:
    """The generator torch draws its workers' base seed from, keyed by the plan's seed.

    So starting workers neither reads nor moves the caller's global torch RNG.
    """
    generator = torch.Generator()
    generator.manual_seed(derive_key(seed, "torch-base-seed") % 2**63)
    return generator


_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()
"""The multi-process iterators of the pools made here, while they exist (see _shutdown_all)."""


class _Pool(DataLoader[Any]):
    """torch's ``DataLoader``, whose multi-process iterators are shut down at exit.

    At interpreter exit multiprocessing terminates the workers that are still running, and
    what they started may be left running; this module's exit hook (which runs before
    multiprocessing's) shuts each live pool down instead, its workers' process groups too.
    """

    def _get_iterator(self) -> Any:
        iterator = super()._get_iterator()
        if self.num_workers > 0:
            _LIVE.add(iterator)
        return iterator


def _shutdown_all() -> None:
    """Shut down every pool still running (registered with ``atexit``)."""
    for iterator in list(_LIVE):
        shutdown_pool(iterator)


atexit.register(_shutdown_all)  # after multiprocessing's own hook: so it runs first


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
    (:func:`base_seed_generator`), no collation of its own (:func:`identity`), and a
    ``worker_init_fn`` recording which workers started (:class:`StartedWorkers`).
    """
    return _Pool(
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
        worker_init_fn=StartedWorkers(workers.num_workers, workers.start_method),
    )


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
        started = getattr(iterator, "_worker_init_fn", None)  # worker_pool's
        if isinstance(started, StartedWorkers):
            end_groups(started.group_ids())  # what the workers started and left behind
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
