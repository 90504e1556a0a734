"""Fetching: one batch request made into one batch, in the main process or a worker.

The fetcher, the per-sample step shared by map-style and stream paths, the sources it reads,
the callables a plan names, and the seeding of the global RNGs.
"""

__all__: list[str] = []  # its modules are imported by name
