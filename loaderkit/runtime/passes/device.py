"""Delivering batches to a device: resolution, pinning, and overlapped CUDA copies.

With a CUDA device, host batches are pinned and copied with ``non_blocking=True`` on a side
stream; the copy of batch ``k+1`` is issued before batch ``k`` is handed over, so it overlaps
the caller's step. Before a batch is handed over, the caller's stream waits for the side stream
and every tensor is marked with ``record_stream`` so its memory is not reused early. With a CPU
device the same code path runs without streams.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from loaderkit.errors import PlanError

__all__ = ["deliver", "map_tensors", "move_to", "pin", "resolve_device", "wants_pinning"]


def resolve_device(spec: str) -> torch.device:
    """The ``torch.device`` for a plan's device string; fails clearly where it is absent."""
    if spec == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise PlanError.single(
                "device",
                f"{spec!r} was requested but CUDA is not available on this machine "
                f"(torch.cuda.is_available() is False); use with_device('auto') to fall back "
                f"to the CPU, or with_device('cpu')",
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise PlanError.single(
                "device", f"{spec!r} was requested but this machine has {count} CUDA device(s)"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise PlanError.single(
            "device", "'mps' was requested but MPS is not available on this machine; use 'auto'"
        )
    return device


def wants_pinning(pin_memory: bool | None, device: torch.device) -> bool:
    """Pin host memory when asked, or automatically when delivering to CUDA."""
    if pin_memory is None:
        return device.type == "cuda"
    return pin_memory


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Apply ``fn`` to every tensor in a nested batch, keeping the containers' types.

    Dicts (and other mappings), lists, tuples, named tuples and dataclasses are walked.
    """
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        items = {k: map_tensors(v, fn) for k, v in batch.items()}
        try:
            return type(batch)(items)  # type: ignore[call-arg]
        except TypeError:
            return items
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # named tuple
        return type(batch)(*(map_tensors(v, fn) for v in batch))
    if isinstance(batch, list | tuple):
        return type(batch)(map_tensors(v, fn) for v in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changes = {
            f.name: map_tensors(getattr(batch, f.name), fn)
            for f in dataclasses.fields(batch)
            if f.init
        }
        return dataclasses.replace(batch, **changes)
    return batch


def move_to(batch: Any, device: torch.device, *, non_blocking: bool = False) -> Any:
    """Move every tensor of a nested batch to ``device``."""
    return map_tensors(batch, lambda t: t.to(device, non_blocking=non_blocking))


def pin(batch: Any) -> Any:
    """Pin every CPU tensor of a nested batch (already pinned ones are kept)."""
    return map_tensors(batch, lambda t: t if t.is_pinned() else t.pin_memory())


def _record(batch: Any, stream: Any) -> None:
    def mark(t: torch.Tensor) -> torch.Tensor:
        t.record_stream(stream)
        return t

    map_tensors(batch, mark)


def deliver(host_batches: Iterator[Any], device: torch.device, *, pin_host: bool) -> Iterator[Any]:
    """Yield the host batches on ``device``.

    ``pin_host`` pins batches here (the main-process path; worker batches are pinned by the
    torch loader's pin thread). CUDA copies are issued one batch ahead on a side stream.
    """
    if device.type != "cuda":
        for batch in host_batches:
            yield batch if device.type == "cpu" else move_to(batch, device)
        return
    stream = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]

    def stage(batch: Any) -> Any:
        if pin_host:
            batch = pin(batch)
        with torch.cuda.stream(stream):
            return move_to(batch, device, non_blocking=True)

    ready: Any = None
    has_ready = False
    for host in host_batches:
        staged = stage(host)  # issue the copy of the next batch before handing over this one
        if has_ready:
            yield _hand_over(ready, stream, device)
        ready, has_ready = staged, True
    if has_ready:
        yield _hand_over(ready, stream, device)


def _hand_over(batch: Any, stream: Any, device: torch.device) -> Any:
    current = torch.cuda.current_stream(device)
    current.wait_stream(stream)
    _record(batch, current)
    return batch
