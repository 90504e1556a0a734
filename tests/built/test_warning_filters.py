"""The suite's warning filters cover every message torch raises for a dead worker.

torch's SIGCHLD handler raises in whatever frame runs when a worker process ends; inside a gc
callback (hypothesis installs one) the error is "unraisable", and pytest turns it into a
``PytestUnraisableExceptionWarning``, an error under ``pyproject.toml``'s filters unless the
filter for torch's messages ignores it. The messages here are torch's own: its handler's
check (``_error_if_any_worker_fails``) is asked about a process that really ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import traceback
import warnings

import pytest
from _pytest.config import parse_warning_filter
from torch.utils.data._utils import signal_handling

pytestmark = pytest.mark.timeout(120)

ENDINGS = {
    "killed": f"import os; os.kill(os.getpid(), {int(signal.SIGKILL)})",
    "exited": "import os; os._exit(3)",
    "bus error": f"import os; os.kill(os.getpid(), {int(signal.SIGBUS)})",
}
"""How a worker ends: by a signal (as the out-of-memory killer does), or with an exit code."""


def _torch_message(ending: str) -> str:
    """What torch's SIGCHLD handler raises for a registered worker that ended by ``ending``."""
    child = subprocess.Popen([sys.executable, "-c", ENDINGS[ending]])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet
        key = id(child)  # registered only now: the handler never sees it end
        signal_handling._set_worker_pids(key, (child.pid,))
        try:
            signal_handling._error_if_any_worker_fails()
        except RuntimeError as exc:
            return str(exc)
        finally:
            signal_handling._remove_worker_pids(key)
    finally:
        child.wait()
    raise AssertionError(f"torch reported nothing for a worker that {ending}")


def _unraisable_text(message: str) -> str:
    """``RuntimeError(message)`` raised in a gc callback, as pytest words its warning."""

    def gc_callback() -> None:
        raise RuntimeError(message)

    try:
        gc_callback()
    except RuntimeError as exc:
        trace = "".join(traceback.format_exception(exc))
    return f"Exception ignored in: {gc_callback!r}\n\n{trace}"


def _ignored_by_the_suite(config: pytest.Config, text: str) -> bool:
    """Whether the ini ``filterwarnings`` ignore a PytestUnraisableExceptionWarning of ``text``."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for line in config.getini("filterwarnings"):  # in order: the later ones win, as in pytest
            warnings.filterwarnings(*parse_warning_filter(line, escape=False))
        try:
            warnings.warn(pytest.PytestUnraisableExceptionWarning(text), stacklevel=1)
        except pytest.PytestUnraisableExceptionWarning:
            return False
    return not seen


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_torchs_message_for_a_dead_worker_is_ignored_where_it_cannot_propagate(
    ending: str, pytestconfig: pytest.Config
) -> None:
    message = _torch_message(ending)
    assert message.startswith("DataLoader worker (pid ")
    assert _ignored_by_the_suite(pytestconfig, _unraisable_text(message)), message
    # and for real: an error raised in a finalizer is unraisable; pytest reports it after this
    # test, as an error unless the filter ignores it
    _Finalized(message)


def test_other_unraisable_errors_still_fail_the_suite(pytestconfig: pytest.Config) -> None:
    for message in (
        "boom",
        "DataLoader worker (pid 12) is stuck",
        "Pin memory thread exited unexpectedly",
    ):
        assert not _ignored_by_the_suite(pytestconfig, _unraisable_text(message)), message


class _Finalized:
    """Raises its message when it is finalized (an unraisable error, as in a gc callback)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __del__(self) -> None:
        raise RuntimeError(self.message)
