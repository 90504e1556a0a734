"""Passes: the cursor of a loader and how its passes hand batches over.

The cursor (position, pending pass, the set_epoch and resume rules), the skip ledger, the
state format, the requests of a map-style pass and the delivery to a device.
"""

__all__: list[str] = []  # its modules are imported by name
