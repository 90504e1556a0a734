"""The build layer: the only place that turns a plan into torch objects."""

__all__: list[str] = []  # its modules are imported by name; nothing is re-exported here
