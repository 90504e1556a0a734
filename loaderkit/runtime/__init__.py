"""The runtime layer: runs a plan; the only place that turns a plan into torch objects.

Its subsystems are its folders (``docs/architecture.md`` is the map); paths that moved when
they became folders keep working through :mod:`loaderkit.runtime.moved`.
"""

from loaderkit.runtime.moved import install as _install_moved

__all__: list[str] = []  # its modules are imported by name; nothing is re-exported here

_install_moved()
