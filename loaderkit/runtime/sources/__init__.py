"""Sources: uniform random access over every kind of dataset a plan accepts.

Lists, torch map-style datasets, HF datasets (batches read straight from the Arrow table) and
mixtures of them, as the fetcher and the sample cache read them.
"""

__all__: list[str] = []  # its modules are imported by name
