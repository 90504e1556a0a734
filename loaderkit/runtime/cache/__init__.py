"""The sample cache of ``with_cache``: in memory or on disk, and the disk folder's format."""

__all__: list[str] = []  # its modules are imported by name
