"""Image sources: image_folder / image_files against torchvision's ImageFolder, side by side.

Fixtures are made here with Pillow (small images, few files): every image mode, an EXIF
rotation, truncated and corrupt files, an empty class folder, non-image files, a FIFO and a
symlink leading out of the folder.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import loaderkit.datasets as lkd
from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.datasets.images import decode_image, shrink_target
from loaderkit.testing import collect

PIL = pytest.importorskip("PIL")
from PIL import Image, ImageOps  # noqa: E402

tv_datasets = pytest.importorskip("torchvision.datasets")
v2 = pytest.importorskip("torchvision.transforms.v2")
tv_transforms = pytest.importorskip("torchvision.transforms")

pytestmark = pytest.mark.timeout(180)

RNG = np.random.default_rng(0)


def _pixels(h: int = 12, w: int = 16, channels: int = 3) -> np.ndarray:
    return RNG.integers(0, 256, (h, w, channels), dtype=np.uint8)


def _smooth(h: int, w: int) -> np.ndarray:
    """A photo-like image (gradients and a little noise): JPEG scaling is meaningful on it."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (h + w)], axis=-1)
    noise = RNG.normal(0, 4, (h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def make_modes(folder: Path) -> dict[str, Path]:
    """One file per PIL mode the issue names, in class folders ``a`` and ``b``."""
    (folder / "a").mkdir(parents=True)
    (folder / "b" / "nested").mkdir(parents=True)
    files = {
        "RGB": folder / "a" / "rgb.jpg",
        "L": folder / "a" / "gray.png",
        "RGBA": folder / "a" / "rgba.png",
        "P": folder / "b" / "palette.png",
        "CMYK": folder / "b" / "cmyk.jpg",
        "I;16": folder / "b" / "nested" / "deep16.png",
        "BMP": folder / "b" / "x.BMP",
        "WEBP": folder / "a" / "w.webp",
    }
    Image.fromarray(_pixels()).save(files["RGB"], quality=90)
    Image.fromarray(_pixels(channels=1)[:, :, 0]).save(files["L"])
    Image.fromarray(_pixels(channels=4), "RGBA").save(files["RGBA"])
    palette = Image.fromarray(_pixels()).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    palette.info["transparency"] = 0
    palette.save(files["P"], transparency=0)
    Image.fromarray(_pixels()).convert("CMYK").save(files["CMYK"])
    deep = (RNG.integers(0, 65535, (12, 16))).astype(np.uint16)
    Image.fromarray(deep).save(files["I;16"])
    Image.fromarray(_pixels()).save(files["BMP"])
    Image.fromarray(_pixels()).save(files["WEBP"], lossless=True)
    return files


def oracle_tensor(image: Image.Image) -> torch.Tensor:
    array = np.array(image)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array).permute(2, 0, 1)


@pytest.fixture
def modes(tmp_path: Path) -> Path:
    root = tmp_path / "modes"
    files = make_modes(root)
    assert Image.open(files["I;16"]).mode.startswith("I;16")
    assert Image.open(files["P"]).mode == "P"
    assert Image.open(files["CMYK"]).mode == "CMYK"
    (root / "a" / "README.txt").write_text("not an image")
    (root / "b" / "labels.csv").write_text("x,y\n")
    (root / "stray.jpg").write_bytes(b"in the root, not in a class folder")
    return root


# -- the listing: torchvision's ImageFolder is the oracle -----------------------------------------


def test_classes_samples_and_pixels_match_imagefolder(modes: Path):
    ds = lkd.image_folder(modes)
    oracle = tv_datasets.ImageFolder(str(modes))
    assert ds.classes == oracle.classes == ["a", "b"]
    assert ds.class_to_idx == oracle.class_to_idx
    assert ds.samples == oracle.samples
    assert ds.targets == oracle.targets
    assert len(ds) == len(oracle) == 8
    for i in range(len(ds)):
        image, label = ds[i]
        want, want_label = oracle[i]
        assert label == want_label
        assert image.dtype == torch.uint8 and image.shape[0] == 3
        assert torch.equal(image, oracle_tensor(want)), oracle.samples[i][0]


def test_non_images_are_left_out_and_reported(modes: Path):
    ds = lkd.image_folder(modes)
    assert dict(ds.skipped) == {
        "a/README.txt": "not an image file name",
        "b/labels.csv": "not an image file name",
        "stray.jpg": "not in a class folder",
    }
    assert "3 files left out" in repr(ds)


@pytest.mark.parametrize("mode", ["L", "RGBA"])
def test_other_modes_convert_as_pil_does(modes: Path, mode: str):
    ds = lkd.image_folder(modes, mode=mode)
    oracle = tv_datasets.ImageFolder(str(modes), loader=lambda p: Image.open(p).convert(mode))
    for i in range(len(ds)):
        image, _ = ds[i]
        assert image.shape[0] == len(mode)
        assert torch.equal(image, oracle_tensor(oracle[i][0]))


def test_exif_orientation_is_applied(tmp_path: Path):
    root = tmp_path / "exif"
    (root / "c").mkdir(parents=True)
    image = Image.fromarray(_pixels(10, 20))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    image.save(root / "c" / "rotated.jpg", exif=exif.tobytes(), quality=95)
    got = lkd.image_folder(root, decoder="pil")[0][0]
    fast = lkd.image_folder(root, decoder="torchvision").loaderkit_prepare(None)[0][0]
    raw = Image.open(root / "c" / "rotated.jpg")
    assert raw.size == (20, 10)
    want = oracle_tensor(ImageOps.exif_transpose(raw).convert("RGB"))
    assert tuple(got.shape) == (3, 20, 10)  # (C, H, W) once turned upright
    assert torch.equal(got, want)
    assert torch.equal(fast, want)
    # ImageFolder does not apply the orientation (a documented difference)
    assert tuple(oracle_tensor(tv_datasets.ImageFolder(str(root))[0][0]).shape) == (3, 10, 20)


def test_empty_class_folder_is_refused_as_torchvision_does(modes: Path):
    (modes / "c_empty").mkdir()
    (modes / "c_empty" / "notes.txt").write_text("no images")
    with pytest.raises(FileNotFoundError, match="c_empty"):
        tv_datasets.ImageFolder(str(modes))
    with pytest.raises(PlanError, match=r"'c_empty'.*allow_empty=True"):
        lkd.image_folder(modes)
    ds = lkd.image_folder(modes, allow_empty=True)
    oracle = tv_datasets.ImageFolder(str(modes), allow_empty=True)
    assert ds.classes == oracle.classes == ["a", "b", "c_empty"]
    assert ds.samples == oracle.samples


def test_no_class_folder_and_missing_root(tmp_path: Path):
    (tmp_path / "flat").mkdir()
    Image.fromarray(_pixels()).save(tmp_path / "flat" / "x.png")
    with pytest.raises(PlanError, match="no class folders"):
        lkd.image_folder(tmp_path / "flat")
    with pytest.raises(PlanError, match="is not a folder"):
        lkd.image_folder(tmp_path / "absent")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifos_and_links_out_of_the_folder_are_not_read(modes: Path, tmp_path: Path):
    os.mkfifo(modes / "a" / "pipe.jpg")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.fromarray(_pixels()).save(outside / "secret.png")
    (modes / "b" / "link.png").symlink_to(outside / "secret.png")
    (modes / "b" / "inside.png").symlink_to(modes / "a" / "gray.png")
    (modes / "b" / "proc.png").symlink_to("/proc/self/pagemap")
    (modes / "linked_class").symlink_to(outside, target_is_directory=True)
    ds = lkd.image_folder(modes)  # returns: the FIFO is never opened
    skipped = dict(ds.skipped)
    assert skipped["a/pipe.jpg"].startswith("not a regular file")
    assert skipped["b/link.png"].startswith("a symlink leading outside the folder")
    assert skipped["b/proc.png"].startswith("a symlink leading outside the folder")
    assert skipped["linked_class"].startswith("a symlink leading outside the folder")
    assert str(modes / "b" / "inside.png") in ds.paths  # a link inside the folder is followed
    followed = lkd.image_folder(modes, follow_external_links=True)
    assert dict(followed.skipped)["b/proc.png"] == "under /proc (system files, not data)"
    assert str(modes / "b" / "link.png") in followed.paths
    assert "linked_class" in followed.classes


def test_image_files_glob_labels_and_named_non_images(modes: Path):
    ds = lkd.image_files(str(modes / "a" / "*"), labels=["x", "y", "x", "y", "x"])
    names = sorted(os.listdir(modes / "a"))
    assert names == ["README.txt", "gray.png", "rgb.jpg", "rgba.png", "w.webp"]
    assert [Path(p).name for p in ds.paths] == ["gray.png", "rgb.jpg", "rgba.png", "w.webp"]
    assert ds.classes == ["x", "y"]
    assert ds.targets == [1, 0, 1, 0]  # README.txt (label "x") was left out with its label
    image, label = ds[1]
    assert label == 0 and torch.equal(image, oracle_tensor(Image.open(ds.paths[1])))
    bare = lkd.image_files([str(modes / "a" / "rgb.jpg")])
    assert isinstance(bare[0], torch.Tensor)
    with pytest.raises(PlanError, match=r"README\.txt': not an image file name"):
        lkd.image_files([str(modes / "a" / "README.txt")])
    with pytest.raises(PlanError, match=r"absent\.jpg': cannot be read \(No such file"):
        lkd.image_files([str(modes / "a" / "absent.jpg")])
    with pytest.raises(PlanError, match="one label per file"):
        lkd.image_files(str(modes / "a" / "*.png"), labels=[0])


def test_the_dataset_pickles_cheaply_and_decodes_lazily(modes: Path, monkeypatch):
    opened = []
    original = Image.open
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a) or original(*a, **k))
    ds = lkd.image_folder(modes)
    assert opened == []  # listing opens no image
    blob = pickle.dumps(ds)
    assert len(blob) < 4000
    assert b"PIL.Image" not in blob  # paths and labels only
    assert torch.equal(pickle.loads(blob)[3][0], ds[3][0])


# -- bad files ------------------------------------------------------------------------------------


def make_bad(root: Path) -> list[str]:
    """10 good JPEGs in two classes; one truncated, one corrupt. Returns the bad names."""
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(5):
            Image.fromarray(_pixels()).save(root / c / f"{i}.jpg")
    whole = (root / "a" / "2.jpg").read_bytes()
    (root / "a" / "2.jpg").write_bytes(whole[: len(whole) // 2])
    (root / "b" / "3.jpg").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    return ["a/2.jpg", "b/3.jpg"]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("decoder", ["pil", "torchvision"])
def test_truncated_and_corrupt_files_are_data_errors_naming_the_file(tmp_path, workers, decoder):
    make_bad(tmp_path)
    ds = lkd.image_folder(tmp_path, decoder=decoder)
    with pytest.raises(DataError, match=r"a/2\.jpg.*OSError: .*[Tt]runcated") as error:
        ds.loaderkit_prepare(None)[2]
    assert isinstance(error.value, OSError)  # PIL's error, whichever decoder ran first
    plan = DataLoaderBuilder().with_dataset(ds).with_batch_size(4).with_workers(workers)
    with pytest.raises(DataError, match=r"sample 2 .*could not be loaded.*'a/2\.jpg'") as error:
        collect(plan.with_collator("vision").compile().build())
    assert error.value.sample_index == 2


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_policy_skips_and_counts_bad_images(tmp_path, workers):
    bad = make_bad(tmp_path)
    ds = lkd.image_folder(tmp_path)
    plan = (
        DataLoaderBuilder()
        .with_dataset(ds)
        .with_batch_size(4)
        .with_workers(workers)
        .with_collator("vision")
        .with_error_policy("skip")
        .compile()
    )
    loader = plan.build()
    batches = collect(loader)
    assert sum(len(b[1]) for b in batches) == 8
    assert loader.skip_counts.skipped == 2
    assert sorted(r.sample_index for r in loader.skipped) == [2, 8]
    messages = " ".join(r.message for r in loader.skipped)
    assert all(name in messages for name in bad)
    loader.close()


# -- plan files -----------------------------------------------------------------------------------


def _plan(ds) -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(ds, name="train")
        .with_batch_size(3)
        .with_shuffle()
        .with_seed(1)
        .with_collator("vision", normalize="imagenet")
        .compile()
    )


def test_plan_file_round_trip_with_relative_root(modes: Path, tmp_path: Path):
    plan = _plan(lkd.image_folder(modes))
    plan.save(tmp_path / "train.toml")
    text = (tmp_path / "train.toml").read_text()
    assert 'root = "modes"' in text
    assert 'name = "image_folder"' in text
    loaded = LoaderPlan.load(tmp_path / "train.toml")
    assert loaded.fingerprint == plan.fingerprint
    want = collect(plan.build())
    got = collect(loaded.build())
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # the plan and its folder moved together: the relative root still finds the images
    moved = tmp_path.parent / (tmp_path.name + "_moved")
    shutil.copytree(tmp_path, moved, symlinks=True, copy_function=shutil.copy2)
    assert LoaderPlan.load(moved / "train.toml").fingerprint == plan.fingerprint


def test_a_changed_added_or_removed_file_is_noticed_on_load(modes: Path, tmp_path: Path):
    _plan(lkd.image_folder(modes)).save(tmp_path / "train.toml")
    target = modes / "a" / "rgb.jpg"
    Image.fromarray(_pixels()).save(target, quality=50)  # new bytes, new size or time
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    with pytest.raises(PlanError, match=r"image_folder.*its data changed"):
        LoaderPlan.load(tmp_path / "train.toml")
    _plan(lkd.image_folder(modes)).save(tmp_path / "train.toml")
    Image.fromarray(_pixels()).save(modes / "b" / "new.png")
    with pytest.raises(PlanError, match=r"9 files.*8 files"):
        LoaderPlan.load(tmp_path / "train.toml")
    (modes / "b" / "new.png").unlink()
    (modes / "a" / "gray.png").unlink()
    with pytest.raises(PlanError, match=r"7 files.*8 files"):
        LoaderPlan.load(tmp_path / "train.toml")


def test_content_hash_identity_survives_copies_and_notices_new_bytes(modes: Path, tmp_path):
    ds = lkd.image_folder(modes, hash_contents=True)
    copy = tmp_path / "copy"
    shutil.copytree(modes, copy, copy_function=shutil.copy)  # new times, same bytes
    assert lkd.image_folder(copy, hash_contents=True)._fingerprint == ds._fingerprint
    assert lkd.image_folder(copy)._fingerprint != lkd.image_folder(modes)._fingerprint
    data = bytearray((copy / "a" / "rgba.png").read_bytes())
    (copy / "a" / "rgba.png").write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 1]))
    assert lkd.image_folder(copy, hash_contents=True)._fingerprint != ds._fingerprint


def test_a_plan_file_may_not_name_a_folder_outside_its_own(modes: Path, tmp_path: Path):
    plans = tmp_path / "plans"
    plans.mkdir()
    _plan(lkd.image_folder(modes)).save(plans / "train.toml")
    with pytest.raises(PlanError, match="outside the plan file's folder"):
        LoaderPlan.load(plans / "train.toml")
    loaded = LoaderPlan.load(plans / "train.toml", allow_external_paths=True)
    assert loaded.dataset.length == 8


# -- HF datasets with an Image feature ------------------------------------------------------------


def test_hf_image_feature_goes_through_the_same_decode(modes: Path):
    datasets = pytest.importorskip("datasets")
    folder = lkd.image_folder(modes)
    paths, labels = zip(*folder.samples, strict=True)
    for decode in (True, False):
        hf = datasets.Dataset.from_dict({"image": list(paths), "label": list(labels)}).cast_column(
            "image", datasets.Image(decode=decode)
        )
        assert isinstance(hf[0]["image"], dict) != decode

        def to_tensor(sample):
            return decode_image(sample["image"]), sample["label"]

        plan = (
            DataLoaderBuilder()
            .with_dataset(hf)
            .with_batch_size(8)
            .with_transform(to_tensor)
            .with_collator("vision", normalize="imagenet")
        )
        want = (
            DataLoaderBuilder()
            .with_dataset(folder)
            .with_batch_size(8)
            .with_collator("vision", normalize="imagenet")
        )
        ((got_images, got_labels),) = collect(plan.compile().build())
        ((want_images, want_labels),) = collect(want.compile().build())
        assert torch.equal(got_images, want_images)
        assert torch.equal(got_labels, want_labels)


# -- the vision collator and torchvision transforms -----------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_vision_batches_equal_imagefolder_and_dataloader(modes: Path, workers: int):
    """v2 CenterCrop on uint8 tensors + the vision collator: ImageFolder + ToTensor + Normalize."""
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    oracle = tv_datasets.ImageFolder(
        str(modes),
        transform=tv_transforms.Compose(
            [
                tv_transforms.CenterCrop(10),
                tv_transforms.ToTensor(),
                tv_transforms.Normalize(mean, std),
            ]
        ),
    )
    want = list(torch.utils.data.DataLoader(oracle, batch_size=3))
    plan = (
        DataLoaderBuilder()
        .with_dataset(lkd.image_folder(modes))
        .with_batch_size(3)
        .with_transform(v2.CenterCrop(10))
        .with_collator("vision", normalize="imagenet")
        .with_workers(workers)
        .compile()
    )
    got = collect(plan.build())
    assert len(got) == len(want) == 3
    for (images, labels), (want_images, want_labels) in zip(got, want, strict=True):
        assert images.dtype == torch.float32 and images.shape[1:] == (3, 10, 10)
        torch.testing.assert_close(images, want_images, atol=1e-5, rtol=0)
        assert torch.equal(labels, want_labels)


# -- fast decode ----------------------------------------------------------------------------------


def test_shrink_target_reads_torchvision_steps():
    rrc = shrink_target(v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip()]))
    assert rrc is not None and rrc[0][:3] == ("crop", 224, 224)
    assert rrc[0][3] == pytest.approx((0.08 * 3 / 4) ** 0.5)  # smallest crop side / sqrt(area)
    wide = shrink_target(tv_transforms.RandomResizedCrop((32, 48), scale=(0.5, 1.0)))
    assert wide is not None and wide[0][:3] == ("crop", 32, 48)
    assert wide[0][3] == pytest.approx((0.5 * 3 / 4) ** 0.5)
    assert shrink_target(tv_transforms.Resize(64))[0] == ("shorter", 64)
    assert shrink_target(v2.Resize((32, 48)))[0] == ("box", 32, 48)
    assert shrink_target(tv_transforms.Compose([tv_transforms.Compose([v2.Resize(8)])]))[0] == (
        "shorter",
        8,
    )
    assert shrink_target(v2.Compose([v2.RandomHorizontalFlip(), v2.Resize(8)])) is None
    assert shrink_target(lambda x: x) is None


def _big_jpeg(root: Path, h: int = 480, w: int = 640) -> Path:
    (root / "c").mkdir(parents=True)
    path = root / "c" / "big.jpg"
    Image.fromarray(_smooth(h, w)).save(path, quality=92)
    return path


def test_reduced_scale_decode_keeps_the_quality_of_a_full_decode(tmp_path: Path):
    path = _big_jpeg(tmp_path)
    resize = v2.Resize(100, antialias=True)
    ds = lkd.image_folder(tmp_path)
    drafted = ds.loaderkit_prepare(resize)
    full = lkd.image_folder(tmp_path, decode_scale="full").loaderkit_prepare(resize)
    assert "reduced-scale JPEGs for Resize(100)" in drafted.loaderkit_explain()
    assert "(the first JPEG, 640x480, is drafted)" in drafted.loaderkit_explain()
    assert "decode_scale='full'" in full.loaderkit_explain()
    small, big = drafted[0][0], full[0][0]
    assert tuple(big.shape) == (3, 480, 640)
    # 1/4 scale: 120 x 160, the smallest DCT scale whose shorter side is still >= 100
    assert tuple(small.shape) == (3, 120, 160)
    out_small, out_big = resize(small).float(), resize(big).float()
    assert out_small.shape == out_big.shape == (3, 100, 133)
    assert (out_small - out_big).abs().mean() < 1.5  # of 255: the same picture
    # an image that the step does not shrink by 2 or more is decoded whole
    assert tuple(drafted.loaderkit_prepare(v2.Resize(300))[0][0].shape) == (3, 480, 640)
    assert decode_image(path, target=("box", 100, 100)).shape == (3, 120, 160)


def test_a_random_crop_drafts_only_while_its_smallest_crop_keeps_the_output_size(tmp_path):
    path = _big_jpeg(tmp_path, 1600, 2400)
    default = v2.RandomResizedCrop(224)  # crops down to 8% of the area, 3:4: sides >= 480
    assert tuple(decode_image(path, target=shrink_target(default)[0]).shape) == (3, 800, 1200)
    assert (800 * 1200 * 0.08 * 3 / 4) ** 0.5 >= 224  # at 1/2 the smallest crop still does
    assert (400 * 600 * 0.08 * 3 / 4) ** 0.5 < 224  # at 1/4 it would not
    full = decode_image(path)
    half = decode_image(path, target=shrink_target(default)[0])
    functional = v2.functional

    for top, left, side in ((400, 600, 480), (0, 0, 1600), (1000, 1800, 600)):
        a = functional.resized_crop(full, top, left, side, side, [224, 224], antialias=True).float()
        b = functional.resized_crop(
            half, top // 2, left // 2, side // 2, side // 2, [224, 224]
        ).float()
        assert (a - b).abs().mean() < 1.5, (top, left, side)  # of 255: the same crop
    wide = v2.RandomResizedCrop(224, scale=(0.5, 1.0))  # smallest crop ~1200 px: 1/4 keeps 300
    small = decode_image(path, target=shrink_target(wide)[0])
    assert tuple(small.shape) == (3, 400, 600)
    assert (400 * 600 * 0.5 * 3 / 4) ** 0.5 >= 224  # the smallest crop still covers the output
    ds = lkd.image_folder(tmp_path).loaderkit_prepare(wide)
    assert "(the first JPEG, 2400x1600, is drafted)" in ds.loaderkit_explain()
    assert tuple(ds[0][0].shape) == (3, 400, 600)
    whole = lkd.image_folder(tmp_path).loaderkit_prepare(v2.RandomResizedCrop(448))
    assert "too small: decoded whole" in whole.loaderkit_explain()


def test_torchvision_and_pil_decoders_give_the_same_pixels(modes: Path):
    pil = lkd.image_folder(modes, decoder="pil").loaderkit_prepare(None)
    fast = lkd.image_folder(modes, decoder="torchvision").loaderkit_prepare(None)
    assert fast.full_decoder == "torchvision"
    for i in range(len(pil)):
        assert torch.equal(pil[i][0], fast[i][0]), pil.paths[i]


def test_explain_names_the_decode_path(modes: Path):
    plan = (
        DataLoaderBuilder()
        .with_dataset(lkd.image_folder(modes))
        .with_batch_size(4)
        .with_transform(v2.Compose([v2.RandomResizedCrop(8), v2.RandomHorizontalFlip()]))
        .with_collator("vision")
        .compile()
    )
    text = plan.build().explain()
    line = next(x for x in text.splitlines() if x.strip().startswith("images"))
    assert "8 images" in line
    assert "left out: 2 not an image file name, 1 not in a class folder" in line
    assert "RandomResizedCrop((8, 8), scale=(0.08, 1))" in line
    assert "whole JPEGs: " in line
    # the plan's own explain() says the path before anything is built, reading no file
    rows = [x for x in plan.explain().splitlines() if x.startswith("  decode")]
    assert rows == [
        "  decode      'dataset': RGB; reduced-scale JPEGs for RandomResizedCrop((8, 8), "
        "scale=(0.08, 1)), the transform's first step; whole JPEGs: the faster of PIL and "
        "torchvision.io.decode_jpeg, measured on the first JPEG at build()"
    ]


@pytest.mark.parametrize(
    ("options", "transform", "expected"),
    [
        ({}, None, "RGB; full size (no transform); whole JPEGs: the faster of"),
        (
            {"decode_scale": "full", "decoder": "pil"},
            v2.Resize(4),
            "RGB; full size (decode_scale='full', though Resize(4) shrinks); whole JPEGs: "
            "PIL (decoder='pil')",
        ),
        (
            {"decoder": "torchvision"},
            v2.RandomHorizontalFlip(),
            "RGB; full size (the transform's first step does not shrink the image); whole "
            "JPEGs: torchvision.io.decode_jpeg (decoder='torchvision')",
        ),
        ({"mode": "L"}, v2.Resize(4), "L; reduced-scale JPEGs for Resize(4), the transform's"),
    ],
)
def test_plan_explain_names_the_decode_path_of_each_source(
    modes: Path, options: dict[str, Any], transform: Any, expected: str
):
    builder = DataLoaderBuilder().with_dataset(lkd.image_folder(modes, **options))
    if transform is not None:
        builder = builder.with_transform(transform)
    row = next(x for x in builder.compile().explain().splitlines() if x.startswith("  decode"))
    assert expected in row
    if options.get("mode") == "L":
        assert row.endswith("whole JPEGs: PIL (mode 'L')")


def test_decode_image_accepts_bytes_pil_and_hf_values(modes: Path):
    path = modes / "a" / "rgba.png"
    want = oracle_tensor(Image.open(path).convert("RGB"))
    data = path.read_bytes()
    assert torch.equal(decode_image(str(path)), want)
    assert torch.equal(decode_image(data), want)
    assert torch.equal(decode_image(Image.open(io.BytesIO(data))), want)
    assert torch.equal(decode_image({"bytes": data, "path": None}), want)
    assert torch.equal(decode_image({"bytes": None, "path": str(path)}), want)
    with pytest.raises(TypeError, match="cannot decode a int"):
        decode_image(3)


@pytest.mark.parametrize(
    "options", [{}, {"progressive": True}, {"optimize": True, "quality": 30}, {"exif": True}]
)
def test_the_jpeg_frame_header_gives_the_size_pil_reads(options: dict):
    from loaderkit.datasets.images.decode_size import jpeg_size

    if options.pop("exif", False):
        exif = Image.Exif()
        exif[0x0112] = 6
        options["exif"] = exif.tobytes()
    buffer = io.BytesIO()
    Image.fromarray(_pixels(37, 53)).save(buffer, "JPEG", **options)
    data = buffer.getvalue()
    assert jpeg_size(data) == Image.open(io.BytesIO(data)).size == (53, 37)
    assert jpeg_size(data[:40]) is None  # cut before the frame header
    assert jpeg_size(b"\xff\xd8\xff\xda") is None


@pytest.mark.parametrize("decoder", ["pil", "torchvision"])
def test_a_decompression_bomb_is_a_data_error_with_either_decoder(tmp_path: Path, decoder: str):
    from loaderkit.datasets.images.decode_size import jpeg_size

    buffer = io.BytesIO()
    Image.fromarray(_pixels(16, 16)).save(buffer, "JPEG")
    data = bytearray(buffer.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2  # claims 60000 x 60000 pixels
    assert jpeg_size(bytes(data)) == (60000, 60000)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "bomb.jpg").write_bytes(bytes(data))
    ds = lkd.image_folder(tmp_path, decoder=decoder).loaderkit_prepare(None)
    with pytest.raises(DataError, match=r"'c/bomb\.jpg'.*DecompressionBomb"):
        ds[0]


def test_nested_folders_are_listed_in_torchvisions_order(tmp_path: Path):
    for folder in ("c/x", "c/x-y", "c/x/z", "c/x.y/w", "c/X", "d"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for name in ("b.png", "a.png", "B.png"):
            Image.fromarray(_pixels(4, 4)).save(tmp_path / folder / name)
    ds = lkd.image_folder(tmp_path)
    assert ds.samples == tv_datasets.ImageFolder(str(tmp_path)).samples


@pytest.mark.timeout(60)
def test_a_symlink_cycle_is_listed_once_and_reported(tmp_path: Path):
    (tmp_path / "c" / "sub").mkdir(parents=True)
    Image.fromarray(_pixels(4, 4)).save(tmp_path / "c" / "sub" / "a.png")
    (tmp_path / "c" / "sub" / "loop").symlink_to(tmp_path / "c", target_is_directory=True)
    ds = lkd.image_folder(tmp_path)
    assert [Path(p).name for p in ds.paths] == ["a.png"]
    assert ("c/sub/loop", "a folder reached again through a symlink") in ds.skipped


def test_image_files_round_trip_through_a_plan_file(modes: Path, tmp_path: Path):
    ds = lkd.image_files(str(modes / "a" / "*.png"), labels=["gray", "rgba"])
    plan = DataLoaderBuilder().with_dataset(ds).with_batch_size(2).with_collator("vision")
    plan.compile().save(tmp_path / "files.toml")
    text = (tmp_path / "files.toml").read_text()
    assert 'files = "modes/a/*.png"' in text
    loaded = LoaderPlan.load(tmp_path / "files.toml")
    assert loaded.fingerprint == plan.compile().fingerprint
    ((images, labels),) = collect(loaded.build())
    assert labels.tolist() == [0, 1] and images.shape == (2, 3, 12, 16)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_changed_after_listing_is_named_not_read(modes: Path, workers: int):
    ds = lkd.image_folder(modes)
    Image.fromarray(_pixels(30, 30)).save(modes / "a" / "rgb.jpg")  # new size
    plan = DataLoaderBuilder().with_dataset(ds).with_batch_size(8).with_workers(workers)
    loader = plan.with_collator("vision", to_rgb=True).compile().build()
    with pytest.raises(DataError, match=r"'a/rgb\.jpg'.*changed after the folder was listed"):
        collect(loader)
    loader.close()
    os.utime(modes / "a" / "gray.png", ns=(1, 1))  # a new time alone: changed too
    with pytest.raises(DataError, match=r"'a/gray\.png'.*or a new time"):
        ds[ds.paths.index(str(modes / "a" / "gray.png"))]
    hashed = lkd.image_folder(modes, hash_contents=True)
    os.utime(modes / "a" / "gray.png", ns=(2, 2))  # content identity: a time alone is fine
    assert hashed[hashed.paths.index(str(modes / "a" / "gray.png"))][0].shape[0] == 3


def test_random_v2_augmentations_of_an_image_folder_do_not_depend_on_workers(tmp_path: Path):
    """The recipe's batches under the global RNG seeding: the same for 0 and 2 workers."""
    _big_jpeg(tmp_path, 48, 64)
    for i in range(7):
        Image.fromarray(_smooth(48, 64)).save(tmp_path / "c" / f"{i}.jpg")
    augment = v2.Compose([v2.RandomResizedCrop(24), v2.RandomHorizontalFlip()])

    def batches(workers: int) -> list:
        plan = (
            DataLoaderBuilder()
            .with_dataset(lkd.image_folder(tmp_path))
            .with_batch_size(4)
            .with_shuffle()
            .with_seed(3)
            .with_transform(augment)
            .with_collator("vision", normalize="imagenet")
            .with_global_rngs("per_sample")
            .with_workers(workers)
            .compile()
        )
        return collect(plan.build())

    main, two = batches(0), batches(2)
    assert len(main) == len(two) == 2
    for (a, _), (b, _) in zip(main, two, strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(main[0][0][0], main[0][0][1])  # the crops differ between samples
