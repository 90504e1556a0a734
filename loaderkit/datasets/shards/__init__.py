"""Sharded datasets: shard files in a store (local disks, object stores) as one dataset."""

__all__: list[str] = []
