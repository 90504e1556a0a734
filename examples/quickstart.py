"""Quickstart: builder -> plan -> file -> loader -> checkpoint -> exact resume."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

from loaderkit import DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.testing import assert_batches_equal


def main() -> None:
    features = torch.randn(1_000, 16)
    labels = torch.randint(0, 10, (1_000,))
    train = TensorDataset(features, labels)

    builder = (
        DataLoaderBuilder()
        .with_dataset(train, name="train")
        .with_batch_size(64, drop_last=True)
        .with_shuffle()
        .with_seed(1234)
        .with_workers(2)
    )
    print(builder)  # the chain that rebuilds it

    plan = builder.compile()
    print(plan.explain())

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train-plan.toml"
        plan.save(path)
        again = LoaderPlan.load(path, bindings={"train": train})
        assert again == plan and again.fingerprint == plan.fingerprint
        print(f"\nsaved and reloaded {path.name}: same fingerprint {again.fingerprint[:12]}")

    bigger = plan.to_builder().with_batch_size(128, drop_last=True).compile()
    print("\nwhat changes with a larger batch:")
    for line in plan.diff(bigger):
        print("  " + line)

    # build it: two epochs with 2 workers, a checkpoint after 5 batches of epoch 1
    with plan.build() as loader:
        print(f"\n{loader!r}")
        seen = 0
        for _features, labels in loader:  # epoch 0
            seen += len(labels)
        print(f"epoch 0: {seen} samples in {len(loader)} batches")
        epoch1 = iter(loader)  # a new pass: epoch 1 (each iter() is the next epoch)
        head = [next(epoch1) for _ in range(5)]
        checkpoint = loader.state_dict()  # small, JSON-serializable
        tail = list(epoch1)
    print(f"checkpoint after {len(head)} batches of epoch {checkpoint['epoch']}")

    # a new process would do this: same plan, load the state, continue exactly there
    with plan.build() as resumed:
        resumed.load_state_dict(checkpoint)
        again = list(resumed)
    assert_batches_equal(tail, again)
    print(f"resumed: the remaining {len(again)} batches are identical, bit for bit")

    try:
        builder.with_workers(0, prefetch_factor=4).with_distributed(world_size=2, rank=2).compile()
    except PlanError as err:
        print(f"\na broken plan is refused with every problem at once:\n{err}")


if __name__ == "__main__":
    main()
