"""Hypothesis strategies of sample datasets to run plans and presets on.

:func:`sample_datasets` (and :func:`token_datasets`, :func:`image_datasets`,
:func:`tabular_datasets`) draw map-style datasets of token sequences, images or tabular rows,
as torch datasets or HF ``datasets.Dataset`` objects. ``from loaderkit.testing import
sample_datasets`` is the usual way in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

from loaderkit.testing._args import check_choice, check_range, require, st

__all__ = [
    "BACKENDS",
    "DATASET_KINDS",
    "TOKEN_LABELS",
    "Backend",
    "DatasetKind",
    "TokenLabels",
    "image_datasets",
    "sample_datasets",
    "tabular_datasets",
    "token_datasets",
]


DatasetKind = Literal["tokens", "images", "tabular"]
DATASET_KINDS: tuple[DatasetKind, ...] = get_args(DatasetKind)
"""What :func:`sample_datasets` draws: token sequences, images or tabular rows."""

Backend = Literal["torch", "hf"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
"""How a drawn dataset is given: a map-style torch ``Dataset`` or an HF ``datasets.Dataset``."""

TokenLabels = Literal["prompt_masked", "target", "class"]
TOKEN_LABELS: tuple[TokenLabels | None, ...] = (None, *get_args(TokenLabels))
"""What ``labels`` a token sample carries (see :func:`token_datasets`)."""

IGNORE_INDEX = -100


def _hf_dataset(columns: dict[str, Any], features: Any = None) -> Any:
    import datasets as hf

    return hf.Dataset.from_dict(columns, features=features)


def token_datasets(
    *,
    min_size: int = 1,
    max_size: int = 24,
    vocab_size: int = 64,
    min_length: int = 1,
    max_length: int = 16,
    labels: TokenLabels | None = None,
    num_classes: int = 2,
    min_target_length: int = 1,
    max_target_length: int = 8,
    tensors: bool = False,
    backend: Backend = "torch",
) -> st.SearchStrategy[Any]:
    """Map-style datasets of tokenized text: samples ``{"input_ids": [ids...], ...}``.

    ``min_size``..``max_size`` samples, each ``input_ids`` a list of ``min_length``..
    ``max_length`` ids in ``[0, vocab_size)``. ``labels``:

    - ``None``: no labels;
    - ``"prompt_masked"``: ``labels`` are the ids with a prompt of random length (at least one
      token left) set to -100, as for instruction tuning;
    - ``"target"``: ``labels`` are a separate sequence of ``min_target_length``..
      ``max_target_length`` ids, as for seq2seq;
    - ``"class"``: ``label`` is one int in ``[0, num_classes)`` per sample.

    ``tensors=True`` gives int64 1-d tensors instead of lists. ``backend="torch"`` gives a
    ``torch.utils.data.Dataset`` (``loaderkit.testing._samples.SampleDataset``, picklable),
    ``"hf"`` an HF ``datasets.Dataset`` (with ``tensors``: in the ``"torch"`` format).
    """
    check_range("min_size", min_size, "max_size", max_size, 0)
    check_range("min_length", min_length, "max_length", max_length, 1)
    check_range("min_target_length", min_target_length, "max_target_length", max_target_length, 1)
    check_range("vocab_size", vocab_size, "vocab_size", vocab_size, 1)
    check_range("num_classes", num_classes, "num_classes", num_classes, 1)
    check_choice("labels", labels, TOKEN_LABELS)
    check_choice("backend", backend, BACKENDS)
    ids = st.integers(0, vocab_size - 1)
    sequences = st.lists(ids, min_size=min_length, max_size=max_length)

    @st.composite
    def sample(draw: st.DrawFn) -> dict[str, Any]:
        tokens = draw(sequences)
        out: dict[str, Any] = {"input_ids": tokens}
        if labels == "prompt_masked":
            prompt = draw(st.integers(0, len(tokens) - 1))
            out["labels"] = [IGNORE_INDEX] * prompt + tokens[prompt:]
        elif labels == "target":
            out["labels"] = draw(
                st.lists(ids, min_size=min_target_length, max_size=max_target_length)
            )
        elif labels == "class":
            out["label"] = draw(st.integers(0, num_classes - 1))
        return out

    def token_dataset(samples: list[dict[str, Any]]) -> Any:
        if backend == "hf":
            keys = list(samples[0]) if samples else ["input_ids"]
            ds = _hf_dataset({k: [s[k] for s in samples] for k in keys})
            return ds.with_format("torch") if tensors else ds
        from loaderkit.testing._samples import SampleDataset

        if tensors:
            import torch

            samples = [
                {k: torch.tensor(v, dtype=torch.int64) for k, v in s.items()} for s in samples
            ]
        return SampleDataset(samples, "tokens")

    return st.lists(sample(), min_size=min_size, max_size=max_size).map(token_dataset)


def image_datasets(
    *,
    min_size: int = 1,
    max_size: int = 12,
    channels: int | tuple[int, ...] = 3,
    min_side: int = 5,
    max_side: int = 12,
    dtype: str = "uint8",
    layout: str = "chw",
    pil: bool = False,
    num_classes: int = 10,
    tuples: bool = False,
    image_key: str = "pixel_values",
    backend: Backend = "torch",
) -> st.SearchStrategy[Any]:
    """Map-style datasets of images with class labels, every image of one dataset one size.

    Samples are ``{image_key: image, "label": int}``, or ``(image, label)`` with
    ``tuples=True`` (torchvision's form). Images are tensors of ``channels`` channels (one
    count, or a tuple to draw one per dataset), ``min_side``..``max_side`` pixels high and
    wide, in ``layout`` ``"chw"`` or ``"hwc"``, ``dtype`` ``"uint8"`` (0..255) or ``"float32"``
    (0..1); with ``pil=True`` they are PIL images (uint8; 1, 3 or 4 channels: modes ``L``,
    ``RGB``, ``RGBA``). Sides start at 5 by default so that ``layout="auto"`` of the vision
    collator can always tell CHW from HWC. Pixels come from a drawn seed (hypothesis shrinks
    the seed, the size and the labels). ``backend="hf"`` gives an HF ``datasets.Dataset``:
    with ``pil``, an ``Image`` feature (decoded to PIL on access), otherwise the arrays in the
    ``"torch"`` format.
    """
    choices = (channels,) if isinstance(channels, int) else tuple(channels)
    require(
        bool(choices) and all(isinstance(c, int) and c >= 1 for c in choices),
        f"channels must be an int >= 1 or a tuple of them (got {channels!r})",
    )
    check_range("min_size", min_size, "max_size", max_size, 0)
    check_range("min_side", min_side, "max_side", max_side, 1)
    check_range("num_classes", num_classes, "num_classes", num_classes, 1)
    check_choice("dtype", dtype, ("uint8", "float32"))
    check_choice("layout", layout, ("chw", "hwc"))
    check_choice("backend", backend, BACKENDS)
    require(
        not pil or (dtype == "uint8" and set(choices) <= {1, 3, 4}),
        f"pil=True needs dtype='uint8' and 1, 3 or 4 channels (got dtype={dtype!r}, "
        f"channels={channels!r})",
    )
    require(not (tuples and backend == "hf"), "tuples=True needs backend='torch'")

    @st.composite
    def draw_dataset(draw: st.DrawFn) -> Any:
        import numpy as np

        n = draw(st.integers(min_size, max_size))
        c = draw(st.sampled_from(choices))
        h, w = draw(st.integers(min_side, max_side)), draw(st.integers(min_side, max_side))
        seed = draw(st.integers(0, 2**32 - 1))
        labels = draw(st.lists(st.integers(0, num_classes - 1), min_size=n, max_size=n))
        pixels = np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)
        return _images(pixels, labels)

    def _images(pixels: Any, labels: list[int]) -> Any:
        import numpy as np
        import torch

        images: list[Any]
        if pil:
            from PIL import Image

            hwc = np.ascontiguousarray(pixels.transpose(0, 2, 3, 1))
            images = [  # uint8 (H, W) -> mode L, (H, W, 3) -> RGB, (H, W, 4) -> RGBA
                Image.fromarray(img[:, :, 0] if img.shape[2] == 1 else img) for img in hwc
            ]
        else:
            array = pixels if layout == "chw" else pixels.transpose(0, 2, 3, 1)
            if dtype == "float32":
                array = array.astype(np.float32) / np.float32(255)
            images = [torch.from_numpy(np.ascontiguousarray(img)) for img in array]
        if backend == "hf":
            import datasets as hf

            if pil:
                features = hf.Features({image_key: hf.Image(), "label": hf.Value("int64")})
                return _hf_dataset({image_key: images, "label": labels}, features)
            columns = {image_key: [img.numpy() for img in images], "label": labels}
            return _hf_dataset(columns).with_format("torch")
        from loaderkit.testing._samples import SampleDataset

        if tuples:
            return SampleDataset(list(zip(images, labels, strict=True)), "images")
        samples = [
            {image_key: img, "label": label} for img, label in zip(images, labels, strict=True)
        ]
        return SampleDataset(samples, "images")

    return draw_dataset()


def tabular_datasets(
    *,
    min_size: int = 1,
    max_size: int = 32,
    min_features: int = 1,
    max_features: int = 6,
    num_classes: int | None = 3,
    columns: bool = False,
    allow_nan: bool = False,
    backend: Backend = "torch",
) -> st.SearchStrategy[Any]:
    """Map-style datasets of tabular rows: float32 features and a label per row.

    ``min_features``..``max_features`` features per row (one count per dataset), finite
    float32 values in [-1000, 1000] (``allow_nan=True`` mixes in NaN). Labels are int64 classes
    in ``[0, num_classes)``, or float32 regression targets with ``num_classes=None``. With
    ``backend="torch"``: a ``TensorDataset(features, labels)`` (samples are ``(features,
    label)`` tuples), or with ``columns=True`` samples ``{"f0": x0, "f1": x1, ..., "label":
    y}`` of numpy scalars. With ``backend="hf"``: an HF ``datasets.Dataset`` with a
    ``features`` list column and ``label`` (``columns=True``: one column per feature).
    """
    from hypothesis.extra import numpy as hnp

    check_range("min_size", min_size, "max_size", max_size, 0)
    check_range("min_features", min_features, "max_features", max_features, 1)
    require(
        num_classes is None or (isinstance(num_classes, int) and num_classes >= 1),
        f"num_classes must be an int >= 1, or None for float targets (got {num_classes!r})",
    )
    check_choice("backend", backend, BACKENDS)
    values = st.floats(-1000, 1000, width=32, allow_nan=allow_nan, allow_infinity=False)

    @st.composite
    def draw_dataset(draw: st.DrawFn) -> Any:
        import numpy as np

        n = draw(st.integers(min_size, max_size))
        f = draw(st.integers(min_features, max_features))
        features = draw(hnp.arrays(np.float32, (n, f), elements=values))
        if num_classes is None:
            labels = draw(hnp.arrays(np.float32, (n,), elements=values.filter(lambda v: v == v)))
        else:
            labels = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, num_classes - 1)))
        return _table(np.array(features), np.array(labels))

    def _table(features: Any, labels: Any) -> Any:
        names = [f"f{i}" for i in range(features.shape[1])]
        if backend == "hf":
            if columns:
                return _hf_dataset({**dict(zip(names, features.T, strict=True)), "label": labels})
            return _hf_dataset({"features": features, "label": labels})
        from loaderkit.testing._samples import SampleDataset, TabularDataset

        if columns:
            rows = [
                {**dict(zip(names, row, strict=True)), "label": label}
                for row, label in zip(features, labels, strict=True)
            ]
            return SampleDataset(rows, "tabular")
        import torch

        return TabularDataset(torch.from_numpy(features), torch.from_numpy(labels))

    return draw_dataset()


def sample_datasets(kind: DatasetKind = "tokens", **options: Any) -> st.SearchStrategy[Any]:
    """Map-style datasets for property tests of your plans: ``kind`` and its keyword options.

    ``kind`` is ``"tokens"`` (:func:`token_datasets`), ``"images"`` (:func:`image_datasets`)
    or ``"tabular"`` (:func:`tabular_datasets`); ``options`` go to that function. Every kind
    takes ``min_size`` / ``max_size`` (samples) and ``backend`` (``"torch"`` or ``"hf"``)::

        @given(sample_datasets("tokens", vocab_size=100, max_length=32, labels="prompt_masked"))
        def test_my_plan(ds): ...
    """
    makers: dict[str, Callable[..., st.SearchStrategy[Any]]] = {
        "tokens": token_datasets,
        "images": image_datasets,
        "tabular": tabular_datasets,
    }
    require(
        kind in makers,
        f"kind must be one of {', '.join(map(repr, makers))} (got {kind!r})",
    )
    return makers[kind](**options)
