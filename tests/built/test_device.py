"""Device delivery: resolution (with CUDA availability mocked), nested moves, pinning."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest
import torch

import loaderkit as lk
from loaderkit import DataLoaderBuilder
from loaderkit.runtime.passes import device as dev


class Pair(NamedTuple):
    a: torch.Tensor
    b: list[torch.Tensor]


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    meta: dict[str, torch.Tensor]
    name: str = "batch"


def test_auto_resolves_to_cpu_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dev.resolve_device("auto") == torch.device("cpu")


def test_auto_resolves_to_cuda_when_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dev.resolve_device("auto") == torch.device("cuda")


def test_cuda_without_cuda_fails_clearly_at_build(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plan = DataLoaderBuilder().with_dataset([1, 2]).with_device("cuda").compile()  # compiles
    with pytest.raises(lk.PlanError) as err:
        plan.build()
    assert err.value.paths == ("device",)
    assert "with_device('auto')" in str(err.value)


def test_a_missing_cuda_index_is_named(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(lk.PlanError, match="has 1 CUDA device"):
        dev.resolve_device("cuda:3")


@pytest.mark.parametrize(
    ("pin", "device", "expected"),
    [
        (None, "cpu", False),
        (None, "cuda", True),
        (True, "cpu", True),
        (False, "cuda", False),
    ],
)
def test_pinning_decision(pin, device, expected):
    assert dev.wants_pinning(pin, torch.device(device)) is expected


def test_nested_batches_are_moved_whole_keeping_their_types():
    batch = {
        "pair": Pair(torch.ones(2), [torch.zeros(1), torch.zeros(2)]),
        "dc": Batch(torch.ones(3), {"m": torch.ones(1)}),
        "tuple": (torch.ones(1), 3, "s"),
        "other": None,
    }
    seen = []

    def record(t):
        seen.append(t.shape)
        return t * 2

    out = dev.map_tensors(batch, record)
    assert len(seen) == 6
    assert isinstance(out["pair"], Pair)
    assert isinstance(out["pair"].b, list)
    assert isinstance(out["dc"], Batch)
    assert out["dc"].name == "batch"
    assert torch.equal(out["dc"].meta["m"], torch.full((1,), 2.0))
    assert out["tuple"][1:] == (3, "s")
    assert out["other"] is None
    moved = dev.move_to(batch, torch.device("cpu"))
    assert moved["pair"].a.device.type == "cpu"


def test_cpu_delivery_passes_batches_through():
    batches = [torch.ones(2), {"x": torch.zeros(1)}]
    out = list(dev.deliver(iter(batches), torch.device("cpu"), pin_host=False))
    assert out[0] is batches[0]
    assert out[1] is batches[1]


def test_loader_delivers_on_cpu_by_default():
    loader = DataLoaderBuilder().with_dataset(list(range(4))).with_batch_size(2).compile().build()
    assert loader.device == torch.device("cpu")
    assert all(b.device.type == "cpu" for b in loader)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("workers", [0, 2])
def test_cuda_delivery_matches_cpu(workers):
    base = (
        DataLoaderBuilder()
        .with_dataset((torch.randn(64, 8), torch.arange(64)))
        .with_batch_size(16)
        .with_shuffle()
        .with_workers(workers)
    )
    cpu = list(base.compile().build())
    gpu_loader = base.with_device("cuda").compile().build()
    assert gpu_loader.pin_memory
    gpu = list(gpu_loader)
    assert len(cpu) == len(gpu)
    for c, g in zip(cpu, gpu, strict=True):
        assert g[0].is_cuda
        assert torch.equal(c[0], g[0].cpu())
        assert torch.equal(c[1], g[1].cpu())
