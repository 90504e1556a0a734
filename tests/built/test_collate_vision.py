"""The vision and multimodal collators: values, layouts, normalization, device step, errors."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import loaderkit as lk
from loaderkit import DataLoaderBuilder, LoaderPlan
from loaderkit.collators import BatchContext, Collator, collators
from loaderkit.collators.multimodal import MultimodalCollator
from loaderkit.collators.vision import PRESETS, VisionCollator
from loaderkit.testing import assert_worker_invariant, collect

pytestmark = pytest.mark.timeout(120)

STATS = {name: PRESETS[name] for name in PRESETS}


# -- helpers -----------------------------------------------------------------------------------


def reference(
    image: Any,
    *,
    layout: str,
    to_rgb: bool = False,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> torch.Tensor:
    """One image the straightforward way: to CHW, to [0, 1], then (x - mean) / std, in float64."""
    if isinstance(image, torch.Tensor):
        x = image.detach().clone()
    else:
        x = torch.from_numpy(np.array(image))
    if x.ndim == 2:
        x, layout = x[:, :, None], "hwc"
    if layout == "hwc":
        x = x.permute(2, 0, 1)
    if to_rgb and x.shape[0] == 1:
        x = x.repeat(3, 1, 1)
    if to_rgb and x.shape[0] == 4:
        x = x[:3]
    x = x.double() / 255 if x.dtype == torch.uint8 else x.double()
    if mean is not None and std is not None:
        m = torch.tensor(mean, dtype=torch.float64).view(-1, 1, 1)
        s = torch.tensor(std, dtype=torch.float64).view(-1, 1, 1)
        x = (x - m) / s
    return x


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-5) -> None:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=0)


def image(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "uint8":
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.random(size=shape).astype(dtype)


def rgb_samples(n: int, seed: int = 0, size: tuple[int, int] = (8, 9)) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {"pixel_values": image(rng, (*size, 3), "uint8"), "label": i, "id": f"s{i}"}
        for i in range(n)
    ]


# -- test collators registered for the multimodal tests (module level: they pickle) ----------


class ContextProbe(Collator):
    """Stacks ``tokens`` and reports the context it was given (indices and one batch draw)."""

    name = "_lk_probe"
    uses_context = True

    def __init__(self, *, keys: Sequence[str] = ("tokens",)) -> None:
        self.keys = list(keys)

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        if context is None:
            raise AssertionError("the probe needs a context")
        return {
            "tokens": torch.tensor([s["tokens"] for s in samples]),
            "seen": torch.from_numpy(np.asarray(context.indices).copy()),
            "draw": torch.from_numpy(context.batch_rng("probe").random(2)),
        }


class PlusOnDevice(Collator):
    """Collates ``counts``; on the device adds 100 to them."""

    name = "_lk_plus"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        return {"counts": torch.tensor([s["counts"] for s in samples])}

    def on_device(self, batch: Any) -> Any:
        return {**batch, "counts": batch["counts"] + 100}


class Tensorish(Collator):
    """Returns a bare tensor: not allowed for a multimodal entry."""

    name = "_lk_bare"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        return torch.zeros(len(samples))


class Clasher(Collator):
    """Produces an extra ``label`` key, which clashes with the default-collated ``label``."""

    name = "_lk_clash"

    def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
        return {"counts": torch.zeros(len(samples)), "label": torch.ones(len(samples))}


for _cls in (ContextProbe, PlusOnDevice, Tensorish, Clasher):
    collators.register(_cls.name, _cls, replace=True, validate=True)


def mm_samples(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "label": i,
            "pixel_values": image(rng, (6, 7, 3), "uint8"),
            "tokens": [i, i + 1],
            "counts": i * 2,
        }
        for i in range(n)
    ]


MM_OPTIONS: dict[str, Any] = {
    "pixel_values": {
        "name": "vision",
        "options": {"normalize": "imagenet", "normalize_on_device": True},
    },
    "probe": {"name": "_lk_probe"},
    "counts": {"name": "_lk_plus"},
}


# -- vision: values ----------------------------------------------------------------------------


@given(
    seed=st.integers(0, 2**32 - 1),
    batch=st.integers(1, 5),
    height=st.integers(5, 12),
    width=st.integers(5, 12),
    channels=st.sampled_from([1, 3]),
    layout=st.sampled_from(["hwc", "chw"]),
    say_layout=st.booleans(),
    container=st.sampled_from(["numpy", "tensor"]),
    dtype=st.sampled_from(["uint8", "float32", "float64"]),
    normalize=st.sampled_from([None, "imagenet", "cifar10", "custom"]),
    to_rgb=st.booleans(),
)
def test_matches_the_per_sample_reference(
    seed, batch, height, width, channels, layout, say_layout, container, dtype, normalize, to_rgb
):
    rng = np.random.default_rng(seed)
    shape = (height, width, channels) if layout == "hwc" else (channels, height, width)
    images = [image(rng, shape, dtype) for _ in range(batch)]
    if container == "tensor":
        images = [torch.from_numpy(a) for a in images]
    out_channels = 3 if to_rgb else channels
    options: dict[str, Any] = {"layout": layout if say_layout else "auto", "to_rgb": to_rgb}
    mean = std = None
    if normalize == "custom":
        mean = rng.random(out_channels).round(3).tolist()
        std = (rng.random(out_channels) + 0.1).round(3).tolist()
        options.update(mean=mean, std=std)
    elif normalize is not None and out_channels == 3:
        options["normalize"] = normalize
        mean, std = PRESETS[normalize]
    collate = VisionCollator(**options)
    out = collate([{"pixel_values": a, "label": i} for i, a in enumerate(images)])
    assert list(out) == ["pixel_values", "label"]
    expected = torch.stack(
        [reference(a, layout=layout, to_rgb=to_rgb, mean=mean, std=std) for a in images]
    )
    assert out["pixel_values"].dtype == torch.float32
    assert out["pixel_values"].is_contiguous()
    assert out["pixel_values"].shape == (batch, out_channels, height, width)
    close(out["pixel_values"], expected)
    assert out["label"].tolist() == list(range(batch))


def test_imagenet_and_cifar10_presets_use_the_published_statistics():
    assert PRESETS["imagenet"] == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert PRESETS["cifar10"] == ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))
    white = np.full((5, 6, 3), 255, dtype=np.uint8)
    for name, (mean, std) in PRESETS.items():
        out = VisionCollator(normalize=name)([white])
        expected = [(1 - m) / s for m, s in zip(mean, std, strict=True)]
        close(out[0, :, 0, 0], torch.tensor(expected))


def test_one_number_statistics_apply_to_every_channel():
    rng = np.random.default_rng(1)
    images = [image(rng, (5, 6, 3), "uint8") for _ in range(3)]
    out = VisionCollator(mean=[0.5], std=[0.25])(images)
    expected = torch.stack(
        [reference(a, layout="hwc", mean=[0.5] * 3, std=[0.25] * 3) for a in images]
    )
    close(out, expected)


def test_mixed_layouts_containers_and_dtypes_in_one_batch():
    rng = np.random.default_rng(2)
    hwc = image(rng, (7, 8, 3), "uint8")
    chw = torch.from_numpy(image(rng, (3, 7, 8), "uint8"))
    floating = image(rng, (7, 8, 3), "float32")
    out = VisionCollator(normalize="imagenet")([chw, hwc, floating])
    mean, std = PRESETS["imagenet"]
    expected = torch.stack(
        [
            reference(chw, layout="chw", mean=mean, std=std),
            reference(hwc, layout="hwc", mean=mean, std=std),
            reference(floating, layout="hwc", mean=mean, std=std),
        ]
    )
    close(out, expected)


def test_grayscale_images_2d_or_one_channel_and_to_rgb():
    rng = np.random.default_rng(3)
    flat = image(rng, (6, 5), "uint8")
    channel = image(rng, (6, 5, 1), "uint8")
    gray = VisionCollator()([flat, channel])
    assert gray.shape == (2, 1, 6, 5)
    close(gray[0, 0], torch.from_numpy(flat).double() / 255)
    rgb = VisionCollator(to_rgb=True, normalize="imagenet")([flat, channel])
    assert rgb.shape == (2, 3, 6, 5)
    mean, std = PRESETS["imagenet"]
    close(rgb[1], reference(channel, layout="hwc", to_rgb=True, mean=mean, std=std))
    rgba = image(rng, (6, 5, 4), "uint8")
    dropped = VisionCollator(to_rgb=True)([rgba])
    close(dropped[0], torch.from_numpy(rgba[:, :, :3]).permute(2, 0, 1).double() / 255)


def test_pil_images_of_every_common_mode():
    image_module = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(4)
    rgb = image_module.fromarray(image(rng, (6, 7, 3), "uint8"), "RGB")
    gray = image_module.fromarray(image(rng, (6, 7), "uint8"), "L")
    rgba = image_module.fromarray(image(rng, (6, 7, 4), "uint8"), "RGBA")
    palette = rgb.convert("P")

    out = VisionCollator()([rgb, rgb])
    close(out[0], reference(rgb, layout="hwc"))
    out = VisionCollator()([gray])
    assert out.shape == (1, 1, 6, 7)
    close(out[0], reference(gray, layout="hwc"))
    assert VisionCollator()([rgba]).shape == (1, 4, 6, 7)

    mean, std = PRESETS["imagenet"]
    out = VisionCollator(to_rgb=True, normalize="imagenet")([rgb, gray, rgba, palette])
    assert out.shape == (4, 3, 6, 7)
    for position, img in enumerate([rgb, gray, rgba, palette]):
        converted = img.convert("RGB")
        close(out[position], reference(converted, layout="hwc", mean=mean, std=std))
    # the same as converting the PIL images yourself, and as repeating the gray channel
    close(out[1], reference(gray, layout="hwc", to_rgb=True, mean=mean, std=std))
    # a palette image without to_rgb is read as its colours, not its indices
    close(VisionCollator()([palette])[0], reference(palette.convert("RGB"), layout="hwc"))


def test_bare_images_and_tuple_samples():
    rng = np.random.default_rng(5)
    images = [image(rng, (6, 7, 3), "uint8") for _ in range(3)]
    bare = VisionCollator()(images)
    assert isinstance(bare, torch.Tensor)
    assert bare.shape == (3, 3, 6, 7)
    pairs = VisionCollator()([(img, i) for i, img in enumerate(images)])
    assert isinstance(pairs, list)
    assert len(pairs) == 2
    close(pairs[0], bare)
    assert pairs[1].tolist() == [0, 1, 2]
    alone = VisionCollator()([(img,) for img in images])
    close(alone[0], bare)


@pytest.mark.parametrize(
    ("dtype", "atol"),
    [("float32", 1e-6), ("float64", 1e-12), ("float16", 2e-3), ("bfloat16", 2e-2)],
)
def test_output_dtype(dtype, atol):
    rng = np.random.default_rng(6)
    images = [image(rng, (6, 7, 3), "uint8") for _ in range(2)]
    mean, std = PRESETS["cifar10"]
    out = VisionCollator(normalize="cifar10", dtype=dtype)(images)
    assert out.dtype == getattr(torch, dtype)
    expected = torch.stack([reference(a, layout="hwc", mean=mean, std=std) for a in images])
    close(out, expected, atol=atol * 4)


def test_other_keys_keep_their_place_and_go_through_default():
    samples = [
        {"id": f"s{i}", "pixel_values": np.zeros((5, 6, 3), np.uint8), "y": i} for i in range(2)
    ]
    out = VisionCollator()(samples)
    assert list(out) == ["id", "pixel_values", "y"]
    assert out["id"] == ["s0", "s1"]
    assert out["y"].tolist() == [0, 1]
    custom = VisionCollator(image_key="img")([{"img": np.zeros((5, 6, 3), np.uint8)}])
    assert custom["img"].shape == (1, 3, 5, 6)


# -- vision: normalize_on_device -----------------------------------------------------------------


def _plan(samples: list[Any], **options: Any) -> LoaderPlan:
    return (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(4)
        .with_collator("vision", **options)
        .compile()
    )


@pytest.mark.parametrize(
    "options",
    [
        {"normalize": "imagenet"},
        {"normalize": "cifar10", "to_rgb": True},
        {"mean": [0.1, 0.2, 0.3], "std": [0.3, 0.2, 0.1]},
        {},
        {"normalize": "imagenet", "dtype": "float16"},
    ],
)
def test_normalize_on_device_equals_host_normalization_in_a_real_plan(options):
    samples = rgb_samples(10)
    host = collect(_plan(samples, **options).build())
    shipped_plan = _plan(samples, normalize_on_device=True, **options)
    device = collect(shipped_plan.build())  # on CPU: on_device still runs, in the main process
    assert len(host) == len(device) == 3
    for a, b in zip(host, device, strict=True):
        assert list(a) == list(b) == ["pixel_values", "label", "id"]
        assert a["pixel_values"].dtype == b["pixel_values"].dtype
        torch.testing.assert_close(a["pixel_values"], b["pixel_values"], atol=1e-6, rtol=0)
        assert torch.equal(a["label"], b["label"])
    # what crosses to the device is the uint8 batch: 4x fewer bytes than float32
    shipped = VisionCollator(normalize_on_device=True, **options)(samples[:4])
    assert shipped["pixel_values"].dtype == torch.uint8
    assert shipped["pixel_values"].shape == (4, 3, 8, 9)


def test_auto_normalizes_on_the_device_for_cuda_and_on_the_host_otherwise():
    """``normalize_on_device="auto"`` (the default) is decided by the device the loader delivers to.

    No GPU here: the decision is checked for a CUDA device, and the path it picks (uint8 out
    of the collator, normalized by on_device) gives the host path's numbers.
    """
    samples = rgb_samples(4)
    auto = VisionCollator(normalize="imagenet")
    assert auto.normalize_on_device == "auto"
    host = auto(samples)  # outside a loader "auto" normalizes on the host
    assert host["pixel_values"].dtype == torch.float32
    cuda = auto.for_device(torch.device("cuda"))
    assert cuda is not auto and cuda.normalize_on_device is True
    assert auto.normalize_on_device == "auto"  # the plan's collator is left as it was
    shipped = cuda(samples)
    assert shipped["pixel_values"].dtype == torch.uint8
    torch.testing.assert_close(
        cuda.on_device(shipped)["pixel_values"], host["pixel_values"], atol=1e-6, rtol=0
    )
    assert "cross to the device as uint8" in cuda.loaderkit_explain()
    assert "device cuda" in cuda.loaderkit_explain()
    cpu = auto.for_device(torch.device("cpu"))
    assert cpu.normalize_on_device is False
    assert cpu.on_device(host) is host
    # an explicit choice is kept whatever the device
    for chosen in (True, False):
        fixed = VisionCollator(normalize_on_device=chosen)
        assert fixed.for_device(torch.device("cuda")) is fixed
        assert fixed.for_device(torch.device("cpu")) is fixed


def test_a_loader_gives_its_collator_the_device_it_delivers_to():
    seen: list[torch.device] = []

    class Recording(Collator):
        def __call__(self, samples: Sequence[Any], context: BatchContext | None = None) -> Any:
            return torch.tensor([s["label"] for s in samples])

        def for_device(self, device: torch.device) -> Collator:
            seen.append(device)
            return self

    plan = (
        DataLoaderBuilder()
        .with_dataset(rgb_samples(4))
        .with_batch_size(4)
        .with_collator(Recording())
        .compile()
    )
    assert collect(plan.build())[0].tolist() == [0, 1, 2, 3]
    assert seen == [torch.device("cpu")]
    # the vision collator's decision is shown by the loader's explain()
    loader = _plan(rgb_samples(8), normalize="imagenet").build()
    line = next(x for x in loader.explain().splitlines() if x.startswith("  collator    images"))
    assert "on the host" in line and "normalize_on_device='auto', device cpu" in line
    assert collect(loader)[0]["pixel_values"].dtype == torch.float32


def test_normalize_on_device_with_float_images_and_bare_batches():
    rng = np.random.default_rng(7)
    images = [image(rng, (3, 6, 7), "float32") for _ in range(3)]
    host = VisionCollator(normalize="imagenet")(images)
    ship = VisionCollator(normalize="imagenet", normalize_on_device=True)
    shipped = ship(images)
    assert shipped.dtype == torch.float32
    torch.testing.assert_close(ship.on_device(shipped), host, atol=1e-6, rtol=0)
    pairs = ship([(img, 1) for img in images])
    torch.testing.assert_close(ship.on_device(pairs)[0], host, atol=1e-6, rtol=0)
    # without normalize_on_device, on_device leaves the batch alone
    assert VisionCollator().on_device(host) is host


# -- vision: errors --------------------------------------------------------------------------------


def test_mismatched_shapes_name_the_key_positions_and_shapes():
    rng = np.random.default_rng(8)
    samples = [
        {"pixel_values": image(rng, (8, 9, 3), "uint8")},
        {"pixel_values": image(rng, (8, 10, 3), "uint8")},
        {"pixel_values": image(rng, (3, 8, 9), "uint8")},  # CHW of the same size as 0: fine
        {"pixel_values": image(rng, (8, 10, 3), "uint8")},
    ]
    with pytest.raises(lk.DataError) as info:
        VisionCollator()(samples)
    message = str(info.value)
    assert "'pixel_values'" in message
    assert "(3, 8, 9) at batch positions 0, 2" in message
    assert "(3, 8, 10) at batch positions 1, 3" in message
    assert info.value.collator == "vision"


def test_mismatched_shapes_through_the_loader_name_the_batch():
    samples = rgb_samples(4) + rgb_samples(4, size=(8, 8))
    loader = _plan(samples, normalize="imagenet").build()
    batches = iter(loader)
    next(batches)
    samples[5]["pixel_values"] = np.zeros((9, 9, 3), np.uint8)
    with pytest.raises(lk.DataError) as info:
        next(batches)
    message = str(info.value)
    assert "batch 1 of epoch 0" in message
    assert "(3, 8, 8) at batch positions 0, 2, 3" in message
    assert "(3, 9, 9) at batch position 1" in message


@pytest.mark.parametrize(
    ("images", "options", "needle"),
    [
        ([np.zeros((3, 4, 4), np.uint8)], {}, "pass layout='hwc' or layout='chw'"),
        ([np.zeros((13, 6, 6), np.uint8)], {}, "cannot tell the layout"),
        ([np.zeros((6, 6, 3), np.int64)], {}, "dtype int64"),
        ([np.zeros((2, 6, 6, 3), np.uint8)], {}, "has shape (2, 6, 6, 3)"),
        (["not an image"], {}, "holds a str"),
        ([np.zeros((6, 6, 1), np.uint8)], {"normalize": "imagenet"}, "pass to_rgb=True"),
        ([np.zeros((2, 6, 6), np.uint8)], {"layout": "chw", "to_rgb": True}, "has 2 channels"),
        ([], {}, "empty batch"),
    ],
)
def test_bad_images_raise_data_errors(images, options, needle):
    with pytest.raises(lk.DataError) as info:
        VisionCollator(**options)(images)
    assert needle in str(info.value)


def test_ambiguous_shapes_work_with_the_layout_option():
    tiny = np.arange(48, dtype=np.uint8).reshape(3, 4, 4)
    as_chw = VisionCollator(layout="chw")([tiny])
    as_hwc = VisionCollator(layout="hwc")([tiny])
    assert as_chw.shape == (1, 3, 4, 4)
    assert as_hwc.shape == (1, 4, 3, 4)


def test_a_missing_image_key_is_named():
    with pytest.raises(lk.DataError, match="no image under 'pixel_values'"):
        VisionCollator()([{"image": np.zeros((5, 6, 3), np.uint8)}])


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"normalize": "imagenett"}, "collator.options.normalize"),
        ({"normalize": 3}, "collator.options.normalize"),
        ({"layout": "nhwc"}, "collator.options.layout"),
        ({"to_rgb": "yes"}, "collator.options.to_rgb"),
        ({"normalize_on_device": 1}, "collator.options.normalize_on_device"),
        ({"dtype": "int8"}, "collator.options.dtype"),
        ({"image_key": ""}, "collator.options.image_key"),
        ({"mean": [0.5]}, "collator.options.std"),
        ({"std": [0.5]}, "collator.options.mean"),
        ({"mean": [0.5, 0.5], "std": [0.5, 0.0]}, "collator.options.std"),
        ({"mean": [0.5, 0.5], "std": [0.1, 0.2, 0.3]}, "collator.options.std"),
        ({"mean": "0.5", "std": [0.5]}, "collator.options.mean"),
        ({"mean": [0.5, None], "std": [0.5, 0.5]}, "collator.options.mean"),
        ({"mean": [], "std": []}, "collator.options.mean"),
        ({"normalize": "imagenet", "mean": [0.5], "std": [0.5]}, "collator.options.mean"),
        ({"colour": True}, "collator.options.colour"),
    ],
)
def test_bad_options_fail_at_with_collator_with_exact_paths(options, path):
    with pytest.raises(lk.PlanError) as info:
        DataLoaderBuilder().with_collator("vision", **options)
    assert info.value.paths == (path,)


def test_option_messages_suggest_the_fix():
    with pytest.raises(lk.PlanError, match="did you mean 'imagenet'"):
        DataLoaderBuilder().with_collator("vision", normalize="imagnet")


def test_constructing_and_planning_does_not_import_torch():
    code = (
        "import sys\n"
        "from loaderkit import DataLoaderBuilder\n"
        "from loaderkit.collators.vision import VisionCollator\n"
        "from loaderkit.collators.multimodal import MultimodalCollator\n"
        "VisionCollator(normalize='imagenet', normalize_on_device=True)\n"
        "MultimodalCollator(collators={'pixel_values': {'name': 'vision'}})\n"
        "DataLoaderBuilder().with_dataset([1, 2]).with_collator('multimodal', collators={\n"
        "    'pixel_values': {'name': 'vision', 'options': {'normalize': 'cifar10'}}}).compile()\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'PIL' not in sys.modules, 'PIL was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# -- multimodal ------------------------------------------------------------------------------


def test_multimodal_composes_forwards_context_and_finishes_on_device():
    samples = mm_samples(10)
    plan = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(7)
        .with_collator("multimodal", collators=MM_OPTIONS)
        .compile()
    )
    loader = plan.build()
    batches = collect(loader)
    vision = VisionCollator(normalize="imagenet")
    for b, batch in enumerate(batches):
        indices = loader.batch_indices(0, b)
        # one flat dict, in the samples' key order; the probe's outputs sit where its key was
        assert list(batch) == ["label", "pixel_values", "tokens", "seen", "draw", "counts"]
        assert batch["label"].tolist() == indices  # not owned: the default collator
        expected = vision([samples[i] for i in indices])["pixel_values"]
        assert batch["pixel_values"].dtype == torch.float32  # vision's on_device ran
        torch.testing.assert_close(batch["pixel_values"], expected, atol=1e-6, rtol=0)
        assert batch["tokens"].tolist() == [[i, i + 1] for i in indices]
        assert batch["seen"].tolist() == indices  # the context was forwarded
        context = BatchContext(7, 0, b, np.asarray(indices, dtype=np.int64))
        assert batch["draw"].tolist() == context.batch_rng("probe").random(2).tolist()
        assert batch["counts"].tolist() == [2 * i + 100 for i in indices]  # on_device per key


def test_multimodal_direct_call_and_on_device_touch_only_the_owned_keys():
    collate = MultimodalCollator(collators=MM_OPTIONS)
    samples = mm_samples(3)
    context = BatchContext(1, 0, 0, np.arange(3, dtype=np.int64))
    batch = collate(samples, context=context)
    assert batch["pixel_values"].dtype == torch.uint8
    assert batch["counts"].tolist() == [0, 2, 4]
    finished = collate.on_device(batch)
    assert finished["pixel_values"].dtype == torch.float32
    assert finished["counts"].tolist() == [100, 102, 104]
    for key in ("label", "tokens", "seen", "draw"):
        assert finished[key] is batch[key]
    assert list(finished) == list(batch)


def test_multimodal_with_the_text_collator():
    if "text" not in collators.names():
        pytest.skip("the text collator is not registered yet")
    collate = collators.get("multimodal").factory(
        collators={
            "pixel_values": {"name": "vision", "options": {"normalize": "imagenet"}},
            "input_ids": {
                "name": "text",
                "options": {"pad_token_id": 0, "keys": ["input_ids", "attention_mask"]},
            },
        }
    )
    assert collate.collators["input_ids"]["keys"] == ["input_ids", "attention_mask"]
    samples = [
        {
            "pixel_values": np.zeros((5, 6, 3), np.uint8),
            "input_ids": list(range(1, n + 1)),
            "attention_mask": [1] * n,
            "label": n,
        }
        for n in (2, 4)
    ]
    batch = collate(samples)
    assert list(batch) == ["pixel_values", "input_ids", "attention_mask", "label"]
    assert batch["pixel_values"].shape == (2, 3, 5, 6)
    assert batch["input_ids"].tolist() == [[1, 2, 0, 0], [1, 2, 3, 4]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["label"].tolist() == [2, 4]


def test_multimodal_ownership_defaults_and_explicit_keys():
    collate = MultimodalCollator(
        collators={
            "images": {"name": "vision", "options": {"image_key": "img"}},
            "probe": {"name": "_lk_probe", "options": {"keys": ["tokens"]}},
            "counts": {"name": "_lk_plus"},
            "meta": {"name": "default", "keys": ["a", "b"]},
        }
    )
    owned = {entry: spec["keys"] for entry, spec in collate.collators.items()}
    assert owned == {
        "images": ["img"],
        "probe": ["tokens"],
        "counts": ["counts"],
        "meta": ["a", "b"],
    }


@pytest.mark.parametrize(
    ("entries", "path", "needle"),
    [
        (
            {"pixel_values": {"name": "visoin"}},
            "collator.options.collators.pixel_values.name",
            "did you mean 'vision'?",
        ),
        ({"x": {"name": 3}}, "collator.options.collators.x.name", "registered collator"),
        (
            {"pixel_values": {"name": "vision", "options": {"normalize": "imagenett"}}},
            "collator.options.collators.pixel_values.options.normalize",
            "did you mean 'imagenet'",
        ),
        (
            {"pixel_values": {"name": "vision", "options": {"colour": 1}}},
            "collator.options.collators.pixel_values.options.colour",
            "does not take option",
        ),
        (
            {"pixel_values": {"name": "vision", "options": [1]}},
            "collator.options.collators.pixel_values.options",
            "mapping of option names",
        ),
        (
            {"pixel_values": {"nmae": "vision"}},
            "collator.options.collators.pixel_values.nmae",
            "did you mean 'name'?",
        ),
        (
            {"pixel_values": "vision"},
            "collator.options.collators.pixel_values",
            "must be a mapping",
        ),
        (
            {"a": {"name": "default", "keys": "a"}},
            "collator.options.collators.a.keys",
            "must be a non-empty list of sample keys (got str 'a')",
        ),
        (
            {"a": {"name": "default", "keys": ["a", "a"]}},
            "collator.options.collators.a.keys",
            "names 'a' twice",
        ),
        (
            {"a": {"name": "default", "keys": ["a", "b"]}, "b": {"name": "default"}},
            "collator.options.collators.b.keys",
            "already owned by entry 'a'",
        ),
        (
            {"images": {"name": "vision", "keys": ["images"]}},
            "collator.options.collators.images.keys",
            "reads ['pixel_values']",
        ),
        ({}, "collator.options.collators", "non-empty mapping"),
    ],
)
def test_multimodal_bad_options_fail_with_exact_paths(entries, path, needle):
    with pytest.raises(lk.PlanError) as info:
        DataLoaderBuilder().with_collator("multimodal", collators=entries)
    assert info.value.paths == (path,)
    assert needle in str(info.value)


def test_multimodal_reports_every_bad_entry_at_once_and_at_compile():
    entries = {"pixel_values": {"name": "visoin"}, "t": {"name": "defualt"}}
    with pytest.raises(lk.PlanError) as info:
        DataLoaderBuilder().with_collator("multimodal", collators=entries)
    assert info.value.paths == (
        "collator.options.collators.pixel_values.name",
        "collator.options.collators.t.name",
    )
    # a plan file naming an unknown sub-collator fails when it is loaded (compiled)
    good = (
        DataLoaderBuilder()
        .with_dataset([1, 2])
        .with_collator("multimodal", collators={"pixel_values": {"name": "vision"}})
    )
    data = good.compile().to_dict()
    data["collator"]["options"]["collators"]["pixel_values"]["name"] = "visoin"
    with pytest.raises(lk.PlanError) as info:
        LoaderPlan.from_dict(data, require_bindings=False)
    assert "collator.options.collators.pixel_values.name" in info.value.paths
    assert "did you mean 'vision'?" in str(info.value)


@pytest.mark.parametrize(
    ("entries", "samples", "needle"),
    [
        ({"pixel_values": {"name": "vision"}}, [{"img": 1}], "owns keys ['pixel_values']"),
        ({"counts": {"name": "_lk_bare"}}, [{"counts": 1}], "returned a Tensor"),
        (
            {"counts": {"name": "_lk_clash"}},
            [{"counts": 1, "label": 2}],
            "both produce key 'label'",
        ),
        (
            {"pixel_values": {"name": "vision"}},
            [{"pixel_values": np.zeros((3, 4, 4), np.uint8)}],
            "entry 'pixel_values' ('vision'): collator 'vision'",
        ),
        ({"pixel_values": {"name": "vision"}}, [1, 2], "mappings of named fields"),
    ],
)
def test_multimodal_runtime_errors_name_the_entry(entries, samples, needle):
    with pytest.raises(lk.DataError) as info:
        MultimodalCollator(collators=entries)(samples)
    assert needle in str(info.value)


# -- both: pickling, equality, workers ---------------------------------------------------------


@pytest.mark.parametrize(
    "collate",
    [
        VisionCollator(normalize="imagenet", to_rgb=True, layout="hwc"),
        VisionCollator(mean=[0.1, 0.2, 0.3], std=(0.3, 0.2, 0.1), normalize_on_device=True),
        MultimodalCollator(collators=MM_OPTIONS),
    ],
    ids=["vision", "vision-custom", "multimodal"],
)
def test_collators_pickle_and_compare_equal(collate):
    again = pickle.loads(pickle.dumps(collate))
    assert again == collate
    assert hash(again) == hash(collate)
    assert repr(again) == repr(collate)
    samples = mm_samples(3)
    context = BatchContext(0, 0, 0, np.arange(3, dtype=np.int64))
    kwargs = {"context": context} if collate.uses_context else {}
    a, b = collate(samples, **kwargs), again(samples, **kwargs)
    assert lk.testing.batches_differ(a, b) is None


def test_plan_options_and_direct_options_give_equal_collators():
    plan = (
        DataLoaderBuilder()
        .with_dataset([1])
        .with_collator("multimodal", collators=MM_OPTIONS)
        .compile()
    )
    options = plan.to_dict()["collator"]["options"]
    assert collators.get("multimodal").factory(**options) == MultimodalCollator(
        collators=MM_OPTIONS
    )
    vision = DataLoaderBuilder().with_dataset([1]).with_collator("vision", mean=[0.5], std=[0.2])
    frozen = dict(vision.compile().collator.options)
    assert VisionCollator(**frozen) == VisionCollator(mean=[0.5], std=[0.2])


def test_two_workers_give_the_same_batches_as_none():
    vision_plan = (
        DataLoaderBuilder()
        .with_dataset(rgb_samples(13))
        .with_batch_size(4)
        .with_shuffle()
        .with_collator("vision", normalize="imagenet", normalize_on_device=True)
        .compile()
    )
    assert_worker_invariant(vision_plan)
    multimodal_plan = (
        DataLoaderBuilder()
        .with_dataset(mm_samples(11))
        .with_batch_size(3)
        .with_shuffle()
        .with_collator("multimodal", collators=MM_OPTIONS)
        .compile()
    )
    assert_worker_invariant(multimodal_plan)
