"""Workers: torch's worker pool as the loaders run it.

Start, shutdown and failure diagnosis, what crosses from a worker to the main process, and
how samples are stored for the workers to read.
"""

__all__: list[str] = []  # its modules are imported by name
