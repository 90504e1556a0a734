"""Import paths that moved, and where they went: the one list of them.

The runtime's modules were one flat folder until they became the subsystems they are
(``passes/``, ``fetch/``, ``workers/``, ``cache/``, ``stream/``, ``planners/``; see
``docs/architecture.md``). A path the docs gave before keeps working:

- a module of :data:`MOVED_MODULES` imports as the module it became (the same module object,
  so its names are the same objects: ``loaderkit.runtime.state.STATE_VERSION`` is
  ``loaderkit.runtime.passes.state.STATE_VERSION``);
- a name of :data:`MOVED_NAMES` is read from a package that was a module before
  (``loaderkit.runtime.stream.StreamLoader``).

New code imports the new paths; ``tests/pure/test_moved_paths.py`` imports every old one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["MOVED_MODULES", "MOVED_NAMES", "install", "moved_name"]

MOVED_MODULES: dict[str, str] = {
    "loaderkit.runtime.outcomes": "loaderkit.runtime.records",
    "loaderkit.runtime.state": "loaderkit.runtime.passes.state",
    "loaderkit.runtime.epoch_sampler": "loaderkit.runtime.passes.epoch_sampler",
    "loaderkit.runtime.stream_read": "loaderkit.runtime.stream.read",
}
"""Old module path -> the module it is now."""

MOVED_NAMES: dict[str, dict[str, str]] = {
    "loaderkit.runtime.stream": {"StreamLoader": "loaderkit.runtime.stream.loader"},
}
"""Package that was a module -> {name it had -> the module that has it now}."""


def moved_name(package: str, name: str) -> Any:
    """The object ``package.name`` was before ``package`` became a package (``__getattr__``)."""
    module = MOVED_NAMES.get(package, {}).get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module it became."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new one, already imported.

        Importing it under its old name has set its ``__spec__`` to the old name's: put its
        own back (``importlib.reload`` and pickling by module read it).
        """
        module.__spec__ = self._specs[module.__name__]


_ALIAS = _Alias()


def install() -> None:
    """Serve :data:`MOVED_MODULES` (once per process; ``loaderkit.runtime`` calls it)."""
    if not any(finder is _ALIAS for finder in sys.meta_path):
        sys.meta_path.append(_ALIAS)
