"""Sharded datasets: shard files in a store (local disks, object stores) read as one map-style dataset."""

__all__: list[str] = []
