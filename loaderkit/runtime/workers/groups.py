"""Each worker leads a process group of its own, so what it starts ends with it (POSIX).

A dataset may start processes in a worker (a decoder, ``ffmpeg``, a helper server): the
worker's children, the loader's grandchildren. torch leaves them behind when the main process
is interrupted, terminated or killed (its workers end; their children are not told). Here,
where the platform has process groups (POSIX; not Windows):

- each worker makes itself the leader of a new process group as it starts
  (:func:`lead_process_group`), which the processes it starts join (unless they leave it:
  ``start_new_session=True``, ``setsid``, ``setpgid``);
- a worker that ends sends ``SIGTERM`` to its group: when it exits (its loop ended), and when
  it is sent ``SIGTERM`` itself (the main process's shutdown terminates it);
- a thread in each worker watches the main process (the worker's parent): once it is gone
  (``SIGKILL``, a crash), the worker ends its group (``SIGTERM``, then ``SIGKILL`` after
  :data:`GROUP_GRACE`) and itself;
- the main process, once it has reaped a pool's workers, ends what is left of their groups
  (:func:`end_groups`: ``SIGTERM``, then ``SIGKILL`` after :data:`GROUP_GRACE`).

The group's processes also stop receiving the terminal's ``Ctrl-C`` (it goes to the
foreground group, the main process's): the main process shuts its workers down instead.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from multiprocessing import util
from types import FrameType

__all__ = ["GROUP_GRACE", "PARENT_POLL", "end_groups", "group_alive", "lead_process_group"]

GROUP_GRACE = 0.5
"""Seconds a group's processes get after ``SIGTERM`` before ``SIGKILL``."""

PARENT_POLL = 0.25
"""Seconds between a worker's checks that the main process is still there."""

SUPPORTED = sys.platform != "win32" and hasattr(os, "setpgid") and hasattr(os, "killpg")
"""Whether the platform has process groups to end a worker's children with."""

_leader: list[int] = []
"""In a worker: ``[its pid, its parent's pid]`` once it leads its group (else empty)."""


def lead_process_group() -> bool:
    """Make this process (a worker, in its main thread) lead a group ended with it.

    Returns whether it does (``False`` where the platform has no process groups, or
    ``setpgid`` failed). Installs the ``SIGTERM`` handler, the exit hook and the thread
    watching the parent described in the module docstring. ``SIGTTOU`` is ignored so that a
    worker writing to the terminal from its background group is never stopped.
    """
    if not SUPPORTED or threading.current_thread() is not threading.main_thread():
        return False
    try:
        os.setpgid(0, 0)
    except OSError:
        return False
    _leader[:] = [os.getpid(), os.getppid()]
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    util.Finalize(None, _on_exit, exitpriority=0)
    threading.Thread(target=_watch_parent, name="loaderkit-parent-watch", daemon=True).start()
    return True


def _leads() -> bool:
    """Whether this process is the leader that :func:`lead_process_group` made.

    A process the worker forked (``os.fork``) inherits the handlers: it is not the leader.
    """
    return bool(_leader) and _leader[0] == os.getpid()


def _parent_gone() -> bool:
    return bool(_leader) and os.getppid() != _leader[1]


def _signal_group(sig: signal.Signals) -> None:
    try:
        os.killpg(os.getpid(), sig)
    except OSError:  # the group is gone already (or we may no longer signal it)
        return


def _term_others() -> None:
    """``SIGTERM`` to the rest of this leader's group (main thread: the leader ignores it)."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        _signal_group(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _sweep_when_orphaned() -> None:
    """With the main process gone, nobody else ends the group: ``SIGKILL`` it, us included."""
    if _parent_gone():
        time.sleep(GROUP_GRACE)
        _signal_group(signal.SIGKILL)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """The leader was told to end: its group first, then itself, by ``SIGTERM`` as asked."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _leads():
        _term_others()
        _sweep_when_orphaned()
    os.kill(os.getpid(), signal.SIGTERM)


def _on_exit() -> None:
    """The worker's loop ended (multiprocessing's exit hook): its group ends with it."""
    if _leads():
        _term_others()
        _sweep_when_orphaned()


def _watch_parent() -> None:
    """Wait for the main process to go; then end this worker and its group."""
    while not _parent_gone():
        time.sleep(PARENT_POLL)
    os.kill(os.getpid(), signal.SIGTERM)  # the main thread's handler ends the group and us
    time.sleep(GROUP_GRACE * 4)  # its handler did not run (stuck in C code): no grace left
    _signal_group(signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a process (zombies included)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, not ours to signal
        return True
    return True


def end_groups(pgids: Iterable[int], grace: float = GROUP_GRACE) -> None:
    """End the process groups ``pgids`` (of workers already reaped): ``SIGTERM``, then ``SIGKILL``.

    Their processes get ``grace`` seconds in all (not per group) to exit after ``SIGTERM``.
    """
    if not SUPPORTED:
        return
    alive = [g for g in pgids if g > 0 and group_alive(g)]
    for pgid in alive:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except OSError:
            continue
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        alive = [g for g in alive if group_alive(g)]
        if alive:
            time.sleep(0.02)
    for pgid in alive:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            continue
