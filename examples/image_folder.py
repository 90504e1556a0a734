"""Image classification from a folder: class folders in, normalized batches out.

Run it with ``python examples/image_folder.py``: it makes a small folder of JPEGs in a
temporary directory (``train/<class>/<image>.jpg``), then reads it the way docs/vision.md
describes: ``loaderkit.datasets.image_folder`` decodes in the workers, torchvision's v2
augmentations work on the ``uint8`` tensors, and the ``vision`` collator normalizes each
batch at once. The plan is saved next to the data and loaded back, as a training script
restarted from its plan file would. It needs Pillow and torchvision (``pip install
'loaderkit[vision]' torchvision``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
from torchvision.transforms import v2

import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, LoaderPlan


def make_folder(root: Path, n: int = 60) -> Path:
    """``n`` JPEGs of 320x240 in three class folders under ``root/train``."""
    rng = np.random.default_rng(0)
    for i in range(n):
        folder = root / "train" / ("cat", "dog", "fox")[i % 3]
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, size=(240, 320, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:03d}.jpg", quality=90)
    return root / "train"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        train = lkd.image_folder(make_folder(root))
        augment = v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip()])
        plan = (
            DataLoaderBuilder()
            .with_dataset(train, name="train")
            .with_batch_size(16)
            .with_shuffle()
            .with_seed(0)
            .with_transform(augment)
            .with_collator("vision", normalize="imagenet")
            .with_workers(2)
            .compile()
        )
        loader = plan.build()
        print(loader.explain())
        for step, (images, labels) in enumerate(loader):
            print(f"step {step}: images {tuple(images.shape)}, labels {labels.tolist()}")
        loader.close()

        plan.save(root / "train.toml")  # the folder is stored relative to the plan file
        again = LoaderPlan.load(root / "train.toml", bindings={"transform": augment})
        assert again.fingerprint == plan.fingerprint
        print(f"reloaded {root.name}/train.toml: same fingerprint {again.fingerprint[:12]}")


if __name__ == "__main__":
    main()
