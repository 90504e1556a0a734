"""Helpers of the untrusted-plan tests: a canary module and a watch over side effects.

A hostile plan must do nothing but fail: :class:`SideEffects` watches a block of code and
reports every import of a new module, every process started, every file or folder written,
created or removed, and every ``exec``/``eval`` of code, through the interpreter's audit
events (PEP 578), plus the canary files and the children of this process.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CANARY_MODULE = "lk_untrusted_canary"
"""A module that creates ``<its folder>/imported`` when imported (see :func:`write_canary`)."""

PROBE_MODULE = "lk_untrusted_probe"
"""A module the tests trust: a class with a property, a module ``__getattr__``, a nested
class and a function; each of the first two creates a file when its code runs."""

_CANARY_SOURCE = '''\
"""Creates a file when imported: a plan file must never make loaderkit import it."""
import pathlib

pathlib.Path(__file__).with_name("imported").write_text("imported")


def factory(**options):
    pathlib.Path(__file__).with_name("called").write_text("called")
    return [1, 2, 3]


def collate(samples):
    pathlib.Path(__file__).with_name("called").write_text("called")
    return samples


class Thing:
    pass
'''

_PROBE_SOURCE = '''\
"""Trusted by the tests: its property and module __getattr__ must never run from a plan."""
import pathlib

_HERE = pathlib.Path(__file__).parent


class Holder:
    @property
    def prop(self):
        (_HERE / "property-ran").write_text("ran")
        return print

    class Inner:
        pass

    @staticmethod
    def static(sample):
        return sample


def transform(sample):
    return sample


def __getattr__(name):
    (_HERE / "getattr-ran").write_text(name)
    return print
'''

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_FORBIDDEN_PREFIXES = (
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.mkdir",
    "os.makedirs",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.symlink",
    "os.link",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.putenv",
    "os.unsetenv",
    "subprocess.",
    "shutil.",
    "socket.",
    "pickle.find_class",
    "marshal.load",
    "ctypes.",
    "webbrowser.",
    "urllib.",
    "builtins.input",
    "exec",
    "import",
)


def write_canary(folder: Path) -> None:
    """Write the canary and probe modules into ``folder`` (put it on ``sys.path``)."""
    (folder / f"{CANARY_MODULE}.py").write_text(_CANARY_SOURCE)
    (folder / f"{PROBE_MODULE}.py").write_text(_PROBE_SOURCE)


def _writes(args: tuple[object, ...]) -> bool:
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str) and set(mode) & set("wax+"):
        return True
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


class _Recorder:
    """The one audit hook of the process: records forbidden events while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.events: list[str] = []

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if not self.active:
            return
        if event == "open":
            if _writes(args):
                self.events.append(f"open for writing {args[0]!r}")
            return
        if event.startswith(_FORBIDDEN_PREFIXES):
            shown = repr(args)
            self.events.append(f"{event} {shown[:120]}")


def _recorder() -> _Recorder:
    found = getattr(sys, "_lk_untrusted_recorder", None)
    if isinstance(found, _Recorder):
        return found
    made = _Recorder()
    sys.addaudithook(made)
    sys._lk_untrusted_recorder = made  # type: ignore[attr-defined]
    return made


def children() -> set[str]:
    """The pids of this process's living children (every thread's, from ``/proc``)."""
    found: set[str] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update((task / "children").read_text().split())
        except OSError:  # a thread that ended meanwhile
            continue
    return found


class SideEffects:
    """What a block did that a hostile plan must never make loaderkit do."""

    def __init__(self, canary_dir: Path, watched: Path) -> None:
        self.canary_dir = canary_dir
        self.watched = watched
        self.recorder = _recorder()

    def _files(self) -> set[Path]:
        # files written from this process are audit events; this catches other processes'
        return set(self.watched.iterdir()) | set(self.canary_dir.rglob("*"))

    @contextmanager
    def watch(self, what: str) -> Iterator[None]:
        """Run the block; afterwards assert it had no side effect (naming ``what``)."""
        modules = set(sys.modules)
        files = self._files()
        kids = children()
        workers = set(multiprocessing.active_children())  # earlier tests' may still be exiting
        self.recorder.events.clear()
        self.recorder.active = True
        try:
            yield
        finally:
            self.recorder.active = False
        events = list(self.recorder.events)
        new_modules = sorted(set(sys.modules) - modules)
        new_files = sorted(str(p) for p in self._files() - files)
        new_kids = children() - kids
        assert not events, f"{what}: audit events {events}"
        assert not new_modules, f"{what}: imported {new_modules}"
        assert not new_files, f"{what}: created {new_files}"
        assert not new_kids, f"{what}: started processes {new_kids}"
        started = set(multiprocessing.active_children()) - workers
        assert not started, f"{what}: started workers {started}"
        assert CANARY_MODULE not in sys.modules, f"{what}: imported the canary"
        for name in ("imported", "called", "property-ran", "getattr-ran"):
            assert not (self.canary_dir / name).exists(), f"{what}: the canary says {name}"


def raw_controls(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on: every one ``str.isprintable()``
    refuses (ESC, CSI, BEL, C1 controls, bidi overrides, ...) except the newline."""
    return sorted({char for char in text if char != "\n" and not char.isprintable()})


def assert_inert(text: str, label: str = "") -> None:
    """``text`` holds no raw control character (newlines apart): it is safe on a terminal."""
    found = raw_controls(text)
    assert not found, f"{label}: raw {[hex(ord(c)) for c in found]} in {text[:300]!r}"
