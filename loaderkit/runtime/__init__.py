"""The runtime layer: runs a plan; the only place that turns a plan into torch objects."""

__all__: list[str] = []  # its modules are imported by name; nothing is re-exported here
