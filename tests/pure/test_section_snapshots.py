"""Snapshots of every plan section: what the plan layer writes, byte for byte (issue 17).

The plan layer (``loaderkit/plan/``) is moving into one module per section; this pins what it
produces today so that the move can be shown to change nothing. ``CORPUS`` is a hand-written
set of builder chains exercising every section and its optional keys (schedules as tables and
functions, per-sample values as columns, functions and arrays, mixtures, splits, every check
kind, error budgets, caches, workers, devices, distributed settings, presets). For each, the
file ``tests/pure/snapshots/<name>.txt`` holds:

- ``repr(builder)``;
- ``json.dumps(plan.to_dict(), sort_keys=True)``;
- the text ``plan.save`` writes as ``.json`` and as ``.toml`` (or the error it raises);
- ``plan.fingerprint`` and the elastic fingerprints at world sizes 1 and 2
  (``loaderkit.plan.fingerprint.compute_elastic_fingerprint``);
- ``plan.explain()``.

``snapshots/shipped-plans.txt`` pins the fingerprints (or the refusal) of the plan files in the
repository (``docs/``, ``tests/``) and of the plan blocks in the Markdown docs, loaded with
``require_bindings=False``.

The test recomputes all of it and compares exactly. To rewrite the files after an intended
change, run::

    LOADERKIT_UPDATE_SNAPSHOTS=1 python -m pytest tests/pure/test_section_snapshots.py

and review the diff. Datasets are plain deterministic data (lists, dicts of lists, numpy
columns, ``loaderkit.datasets.load("tokens", ...)``), and each case runs in an empty working
directory, so that nothing stored names this machine. Streams (iterable datasets) are left
out: making one needs torch or HF ``datasets``, and these tests run without both.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import loaderkit.datasets as lkd
from loaderkit import DataLoaderBuilder, LoaderkitError, LoaderPlan, presets
from loaderkit.plan.fingerprint import compute_elastic_fingerprint
from loaderkit.plan.sections import FILE_KEYS as SECTIONS
from loaderkit.plan.sections.checks import CHECK_KINDS
from loaderkit.plan.sections.mixture import MIXTURE_MODES
from loaderkit.testing._functions import (
    batch_size_schedule,
    competence_schedule,
    max_length_schedule,
    mixture_weights_schedule,
    sample_collate,
    sample_difficulty,
    sample_length,
    sample_transform_rng,
    sample_weight,
)
from loaderkit.testing.strategies import sample_transform

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("LOADERKIT_UPDATE_SNAPSHOTS") == "1"

# -- datasets: plain, deterministic data -----------------------------------------------------------

INTS = list(range(40))
COLUMNS = {"x": [float(i) / 4 for i in range(40)], "y": [i % 4 for i in range(40)]}
TOKENS = [
    {
        "input_ids": list(range(1, 2 + i % 9)),
        "labels": [-100] * (i % 3) + list(range(1 + i % 3, 2 + i % 9)),
        "label": i % 3,
    }
    for i in range(48)
]
ARRAYS = (np.arange(24, dtype=np.int64), np.arange(24, dtype=np.float64) / 2)
IMAGES = [{"pixel_values": [[[i % 255] * 6] * 6] * 3, "label": i % 10} for i in range(20)]
SEQ2SEQ = [{"input_ids": list(range(1, 3 + i % 5)), "labels": [7] * (1 + i % 4)} for i in range(30)]
TABLE = {
    "f0": [float(i) for i in range(30)],
    "f1": [i / 2 for i in range(30)],
    "label": [i % 2 for i in range(30)],
}
LENGTHS = [1 + i % 9 for i in range(48)]
WEIGHTS = [0.5 * (1 + i % 3) for i in range(48)]
DIFFICULTY = np.array([float(i % 7) for i in range(48)])


def _synthetic() -> object:
    return lkd.load("tokens", n=64, vocab_size=100, min_length=4, max_length=16, seed=7)


def _base() -> DataLoaderBuilder:
    return DataLoaderBuilder().with_dataset(TOKENS, name="train")


def _text() -> DataLoaderBuilder:
    return _base().with_collator("text", pad_token_id=0)


def _mixture(**options: object) -> DataLoaderBuilder:
    sources = {"wiki": TOKENS[:30], "code": TOKENS[30:], "books": TOKENS[:10]}
    return DataLoaderBuilder().with_mixture(sources, **options)  # type: ignore[arg-type]


def _mixture2(**options: object) -> DataLoaderBuilder:
    return DataLoaderBuilder().with_mixture(
        {"wiki": TOKENS[:30], "code": TOKENS[30:]},
        **options,  # type: ignore[arg-type]
    )


# -- the corpus ------------------------------------------------------------------------------------

CORPUS: dict[str, Callable[[], DataLoaderBuilder]] = {
    # dataset
    "dataset-list-defaults": lambda: DataLoaderBuilder().with_dataset(INTS),
    "dataset-columns-named": lambda: DataLoaderBuilder().with_dataset(COLUMNS, name="train"),
    "dataset-numpy-columns": lambda: DataLoaderBuilder().with_dataset(ARRAYS, name="arrays"),
    "dataset-token-samples": lambda: _base(),
    "dataset-source": lambda: DataLoaderBuilder().with_dataset(_synthetic(), name="corpus"),
    # batch
    "batch-fixed-drop-last": lambda: _base().with_batch_size(8, drop_last=True),
    "batch-table-by-step": lambda: _base().with_batch_size([(2, 4), (5.5, 8)], by="step"),
    "batch-table-by-epoch": lambda: _base().with_batch_size([(1, 2), (3, 6)], drop_last=True),
    "batch-function": lambda: _base().with_batch_size(batch_size_schedule),
    "batch-function-ref-by-step": lambda: _base().with_batch_size(
        "loaderkit.testing._functions:batch_size_schedule", by="step"
    ),
    "batch-none-unbatched": lambda: DataLoaderBuilder().with_dataset(INTS).with_batch_size(None),
    "batch-none-budget-keeps-drop-last": lambda: (
        _base().with_batch_size(None, drop_last=True).with_bucketing("input_ids", max_tokens=64)
    ),
    # order
    "order-shuffle-seed": lambda: _base().with_shuffle().with_seed(1234),
    "order-in-order-largest-seed": lambda: _base().with_shuffle(False).with_seed(2**63 - 1),
    # collator and task
    "collator-text-options": lambda: _base().with_collator(
        "text",
        pad_token_id=1,
        padding_side="left",
        truncation_side="left",
        max_length=12,
        pad_to_multiple_of=8,
        return_attention_mask=False,
        keys=["input_ids"],
        pad_values={"input_ids": 1},
    ),
    "collator-causal-lm-shift": lambda: _base().with_collator("causal_lm", shift=True),
    "collator-masked-lm": lambda: _base().with_collator(
        "masked_lm", mask_token_id=4, vocab_size=100, mlm_probability=0.2, special_token_ids=[0, 1]
    ),
    "collator-seq2seq": lambda: (
        DataLoaderBuilder()
        .with_dataset(SEQ2SEQ)
        .with_collator("seq2seq", decoder_start_token_id=2, max_target_length=6)
    ),
    "collator-packed": lambda: _base().with_collator(
        "packed", max_length=16, overflow="truncate", shift_labels=True, attention_mask="padding"
    ),
    "collator-vision": lambda: (
        DataLoaderBuilder()
        .with_dataset(IMAGES)
        .with_collator("vision", normalize="imagenet", layout="chw", to_rgb=True)
    ),
    "collator-vision-normalize-none": lambda: (
        DataLoaderBuilder().with_dataset(IMAGES).with_collator("vision", normalize=None)
    ),
    "collator-multimodal": lambda: _base().with_collator(
        "multimodal",
        collators={"input_ids": {"name": "text", "options": {"pad_token_id": 3}}},
    ),
    "collator-torch-default": lambda: _base().with_collator("torch_default"),
    "collator-auto-text": lambda: _base().with_collator("auto"),
    "collator-auto-vision": lambda: DataLoaderBuilder().with_dataset(IMAGES).with_collator("auto"),
    "collator-function": lambda: _base().with_collator(sample_collate),
    "collator-ref": lambda: _base().with_collator("loaderkit.testing._functions:sample_collate"),
    "task-text": lambda: _base().with_task("text", pad_token_id=2),
    "task-vision": lambda: DataLoaderBuilder().with_dataset(IMAGES).with_task("vision"),
    "task-tabular": lambda: DataLoaderBuilder().with_dataset(TABLE).with_task("tabular"),
    # transform
    "transform-function": lambda: _base().with_transform(sample_transform),
    "transform-rng": lambda: _base().with_transform(sample_transform_rng),
    "global-rngs-per-worker": lambda: (
        _base().with_transform(sample_transform_rng).with_global_rngs("per_worker")
    ),
    "transform-ref": lambda: _base().with_transform(
        "loaderkit.testing._functions:sample_transform_rng"
    ),
    # bucketing
    "bucketing-column": lambda: _text().with_batch_size(4).with_bucketing("input_ids"),
    "bucketing-array-all-options": lambda: _text().with_bucketing(
        LENGTHS, num_buckets=4, max_tokens=64, max_batch_size=8, cost="quadratic"
    ),
    "bucketing-function-budget": lambda: _text().with_bucketing(sample_length, max_tokens=48),
    "bucketing-numpy-buckets": lambda: (
        _text().with_batch_size(6).with_shuffle().with_bucketing(np.array(LENGTHS), num_buckets=3)
    ),
    # sampling weights
    "weights-column": lambda: _base().with_sampling_weights("label"),
    "weights-array-no-replacement": lambda: _base().with_sampling_weights(
        WEIGHTS, replacement=False, num_samples=20
    ),
    "weights-function-num-samples": lambda: _base().with_sampling_weights(
        sample_weight, num_samples=100
    ),
    # curriculum
    "curriculum-linear": lambda: _base().with_curriculum(LENGTHS, horizon=4),
    "curriculum-root-all-options": lambda: _base().with_curriculum(
        DIFFICULTY, "root", horizon=10, start=0.25, degree=3.0
    ),
    "curriculum-discrete-by-step": lambda: (
        _base()
        .with_batch_size(4)
        .with_curriculum("label", "discrete", by="step", steps=[(10, 0.3), (20, 0.6), (30, 1.0)])
    ),
    "curriculum-function": lambda: _base().with_curriculum(sample_difficulty, competence_schedule),
    # max_length
    "max-length-int": lambda: _text().with_max_length(8),
    "max-length-table-by-step": lambda: _text().with_max_length(
        [(4, 4), (8, 8), (12, 16)], by="step"
    ),
    "max-length-function": lambda: _text().with_max_length(max_length_schedule),
    # split
    "split-defaults": lambda: _base().with_split(),
    "split-counts-seed": lambda: _base().with_split(5, 3, seed=99),
    "split-test-only-stratified": lambda: _base().with_split(0, 0.25, stratify_by="label"),
    # checks
    "checks-every-kind": lambda: _text().with_checks(
        keys=["input_ids", "attention_mask"],
        dtypes={"input_ids": "int64", "attention_mask": "int64"},
        shapes={"input_ids": ["B", "T"], "attention_mask": ["B", "T"], "labels": ["B", "..."]},
        finite=["input_ids"],
        ranges={"input_ids": [0, None], "attention_mask": [0, 1]},
        label_pad=True,
        classes={"label": 3},
        every=4,
    ),
    "checks-label-pad-options": lambda: _text().with_checks(
        label_pad={
            "labels": "labels",
            "mask": "attention_mask",
            "ignore_index": -1,
            "mode": "only_pad",
        },
    ),
    "checks-class-variants": lambda: _text().with_checks(
        classes={"label": {"n": 3, "ignore_index": -100}, "labels": {"one_hot": 8}},
        ranges={"label": [None, 2.5]},
    ),
    "checks-tuple-batch": lambda: (
        DataLoaderBuilder()
        .with_dataset(ARRAYS)
        .with_batch_size(4)
        .with_checks(shapes={"0": [4], "1": ["*"]}, dtypes={"1": "float64"})
    ),
    # error policy
    "errors-skip": lambda: _base().with_error_policy("skip"),
    "errors-skip-max-errors-per-run": lambda: _base().with_error_policy(
        "skip", max_errors=3, per="run"
    ),
    "errors-skip-rate-and-count": lambda: _base().with_error_policy(
        "skip", max_errors=10, max_error_rate=0.05
    ),
    "errors-raise-explicit": lambda: _base().with_error_policy("raise"),
    # cache
    "cache-memory": lambda: _base().with_cache(),
    "cache-memory-transformed-capped": lambda: (
        _base()
        .with_transform(sample_transform)
        .with_cache("memory", stage="transformed", max_bytes=2**20)
    ),
    "cache-disk": lambda: _base().with_cache("disk", path="sample-cache"),
    "cache-disk-transformed-workers": lambda: (
        _base()
        .with_transform(sample_transform)
        .with_workers(2)
        .with_cache("disk", stage="transformed", path="cache/dir", max_bytes=10**9)
    ),
    # workers
    "workers-every-option": lambda: _base().with_workers(
        3, prefetch_factor=4, persistent=False, pin_memory=True, start_method="spawn", timeout=12.5
    ),
    "workers-two": lambda: _base().with_workers(2),
    "workers-zero-pin": lambda: _base().with_workers(0, pin_memory=False),
    "workers-auto": lambda: _base().with_workers("auto", start_method="forkserver"),
    # device
    "device-cuda": lambda: _base().with_device("cuda"),
    "device-cuda-index": lambda: _base().with_device("cuda:1"),
    "device-mps": lambda: _base().with_device("mps"),
    "device-auto": lambda: _base().with_device("auto"),
    # distributed
    "distributed-detected": lambda: _base().with_distributed(),
    "distributed-explicit": lambda: (
        _base().with_batch_size(4).with_distributed(world_size=2, rank=1)
    ),
    "distributed-uneven-batches": lambda: (
        _base()
        .with_batch_size(4, drop_last=True)
        .with_distributed(world_size=4, rank=3, even_batches=False)
    ),
    "distributed-switched-off": lambda: (
        _base().with_distributed(world_size=2, rank=0).with_distributed(enabled=False)
    ),
    # mixtures
    "mixture-defaults": lambda: _mixture(),
    "mixture-weights-dict-stratified": lambda: _mixture(
        weights={"wiki": 2.0, "code": 1.0, "books": 0.5}, stratified=True, num_samples=60
    ).with_batch_size(6),
    "mixture-weights-list-source-key": lambda: _mixture(weights=[1, 1, 2], source_key="source"),
    "mixture-weights-table-by-step": lambda: _mixture2(
        weights=[(100, {"wiki": 1.0, "code": 0.0}), (200, {"wiki": 1.0, "code": 1.0})], by="step"
    ),
    "mixture-weights-function": lambda: _mixture2(weights=mixture_weights_schedule),
    **{
        f"mixture-mode-{mode.replace('_', '-')}": (lambda mode=mode: _mixture(mode=mode))
        for mode in MIXTURE_MODES
        if mode != "weighted"
    },
    # presets
    "preset-causal-lm": lambda: presets.causal_lm_pretraining(
        _synthetic(), name="corpus", max_length=32, max_tokens=256, seed=3
    ),
    "preset-causal-lm-batch-no-bucketing": lambda: presets.causal_lm_pretraining(
        TOKENS, batch_size=8, bucketing=False, max_length=16, checks=False
    ),
    "preset-instruction-tuning": lambda: presets.instruction_tuning(
        TOKENS, max_length=16, batch_size=4, overflow="truncate"
    ),
    "preset-masked-lm": lambda: presets.masked_lm(
        TOKENS, mask_token_id=4, vocab_size=100, max_length=16, max_tokens=128
    ),
    "preset-seq2seq": lambda: presets.seq2seq(
        SEQ2SEQ, decoder_start_token_id=0, max_length=16, max_target_length=8, batch_size=4
    ),
    "preset-image-classification": lambda: presets.image_classification(
        IMAGES, batch_size=4, seed=11
    ),
    "preset-tabular": lambda: presets.tabular(TABLE, batch_size=8, finite=["f0", "f1"]),
    "preset-without-checks": lambda: presets.instruction_tuning(
        TOKENS, max_length=16, batch_size=4
    ).without("checks"),
    "preset-changed": lambda: (
        presets.tabular(TABLE, batch_size=8).with_workers(2).with_split(0.2, seed=5)
    ),
    # many sections at once
    "everything": lambda: (
        _text()
        .with_batch_size(4)
        .with_shuffle()
        .with_seed(42)
        .with_transform(sample_transform)
        .with_bucketing("input_ids", num_buckets=3)
        .with_max_length(12)
        .with_split(0.25, seed=1)
        .with_checks(keys=["input_ids"], every=2)
        .with_error_policy("skip", max_errors=2)
        .with_cache("memory", stage="transformed")
        .with_workers(2, prefetch_factor=2, start_method="spawn")
        .with_device("cuda:0")
        .with_distributed(world_size=2, rank=0)
    ),
}


# -- the snapshot text ---------------------------------------------------------------------------


def _attempt(fn: Callable[[], str]) -> str:
    """``fn()``, or the error it raises (type and message) when that is what today gives."""
    try:
        return fn()
    except (LoaderkitError, TypeError, ValueError) as exc:
        return f"raises {type(exc).__name__}: {exc}"


def _saved(plan: LoaderPlan, path: Path) -> str:
    plan.save(path)
    return path.read_text(encoding="utf-8")


def snapshot(builder: DataLoaderBuilder, folder: Path) -> str:
    """The text stored for ``builder``: one ``=== part`` header per part."""
    plan = builder.compile()
    parts = {
        "repr": repr(builder),
        "to_dict": json.dumps(plan.to_dict(), sort_keys=True),
        "plan.json": _attempt(lambda: _saved(plan, folder / "plan.json")),
        "plan.toml": _attempt(lambda: _saved(plan, folder / "plan.toml")),
        "fingerprint": plan.fingerprint,
        "elastic fingerprint, world size 1": _attempt(lambda: compute_elastic_fingerprint(plan, 1)),
        "elastic fingerprint, world size 2": _attempt(lambda: compute_elastic_fingerprint(plan, 2)),
        "explain": plan.explain(),
    }
    return "".join(f"=== {name}\n{text.rstrip()}\n" for name, text in parts.items())


def _parts(text: str) -> dict[str, str]:
    names = re.findall(r"^=== (.+)$", text, flags=re.M)
    bodies = re.split(r"^=== .+\n", text, flags=re.M)[1:]
    return dict(zip(names, bodies, strict=True))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory, and a machine of 8 CPUs and one rank (``workers("auto")``)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    for name in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _compare(path: Path, text: str) -> None:
    """Equal to the stored file, part by part; with ``LOADERKIT_UPDATE_SNAPSHOTS=1``: rewrite it."""
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no snapshot {path.name}; run with LOADERKIT_UPDATE_SNAPSHOTS=1"
    stored = path.read_text(encoding="utf-8")
    got, want = _parts(text), _parts(stored)
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], f"{path.name}: {name} changed"
    assert text == stored


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_plan_layer_writes_what_it_wrote(name: str, here: Path) -> None:
    text = snapshot(CORPUS[name](), here)
    machine = (tempfile.gettempdir(), str(here), str(ROOT), " at 0x")
    for where in machine:
        assert where not in text  # nothing names this machine
    _compare(SNAPSHOTS / f"{name}.txt", text)


def test_every_snapshot_file_has_its_case() -> None:
    stored = {p.stem for p in SNAPSHOTS.glob("*.txt")} - {"shipped-plans"}
    assert stored == set(CORPUS)


def test_the_corpus_sets_every_section_and_option(here: Path) -> None:
    """Every plan section is set by some case, with every key it writes set by some case."""
    dicts = [CORPUS[name]().compile().to_dict() for name in sorted(CORPUS)]
    default = DataLoaderBuilder().with_dataset([0]).compile().to_dict()
    for section in SECTIONS:
        if section == "schema_version":
            continue
        assert any(section in d and d[section] != default.get(section) for d in dicts), section
    keys = {(s, k) for d in dicts for s, v in d.items() if isinstance(v, dict) for k in v}
    for section, key in [
        ("batch", "schedule"), ("batch", "size_fn"), ("batch", "by"), ("batch", "batched"),
        ("order", "seed"),
        ("transform", "accepts_rng"), ("bucketing", "num_buckets"), ("bucketing", "max_tokens"),
        ("bucketing", "max_batch_size"), ("bucketing", "cost"), ("sampling_weights", "num_samples"),
        ("sampling_weights", "replacement"), ("curriculum", "horizon"), ("curriculum", "steps"),
        ("curriculum", "degree"), ("curriculum", "start"), ("mixture", "weights"),
        ("mixture", "weights_fn"), ("mixture", "stratified"), ("mixture", "source_key"),
        ("mixture", "num_samples"), ("mixture", "mode"), ("split", "stratify_by"),
        ("split", "seed"), ("error_policy", "max_errors"), ("error_policy", "max_error_rate"),
        ("error_policy", "per"), ("cache", "path"), ("cache", "max_bytes"), ("cache", "stage"),
        ("workers", "prefetch_factor"), ("workers", "persistent"), ("workers", "pin_memory"),
        ("workers", "start_method"), ("workers", "timeout"), ("distributed", "world_size"),
        ("distributed", "rank"), ("checks", "every"), ("preset", "name"),
    ]:  # fmt: skip
        assert (section, key) in keys, (section, key)
    kinds = {k for d in dicts for k in d.get("checks", {})}
    assert set(CHECK_KINDS) <= kinds
    modes = {d["mixture"].get("mode", "weighted") for d in dicts if "mixture" in d}
    assert modes == set(MIXTURE_MODES)


# -- the plan files shipped in the repository ---------------------------------------------------


def _shipped_files() -> list[Path]:
    found = [*ROOT.glob("docs/**/*.toml"), *ROOT.glob("docs/**/*.json")]
    found += [*ROOT.glob("examples/**/*.toml"), *ROOT.glob("examples/**/*.json")]
    found += [p for p in ROOT.glob("tests/**/*") if p.suffix in (".toml", ".json")]
    return sorted(p for p in found if SNAPSHOTS not in p.parents and ".hypothesis" not in p.parts)


def _doc_blocks() -> list[tuple[str, str, str]]:
    """``(name, suffix, text)`` of each ```toml / ```json block in the docs that holds a plan."""
    blocks = []
    for md in sorted([ROOT / "README.md", *ROOT.glob("docs/**/*.md")]):
        text = md.read_text(encoding="utf-8")
        for i, m in enumerate(re.finditer(r"```(toml|json)\n(.*?)```", text, flags=re.S)):
            if "schema_version" in m.group(2):
                line = text[: m.start()].count("\n") + 1
                name = f"{md.relative_to(ROOT).as_posix()}:{line} (block {i})"
                blocks.append((name, f".{m.group(1)}", m.group(2)))
    return blocks


def _loaded(path: Path) -> str:
    try:
        plan = LoaderPlan.load(path, require_bindings=False)
    except LoaderkitError as exc:
        paths = sorted({p.path for p in getattr(exc, "problems", ())})
        return f"refused ({type(exc).__name__} at {', '.join(paths) or '-'})"
    return f"{plan.fingerprint} elastic@1 {compute_elastic_fingerprint(plan, 1)[:16]}"


def test_the_shipped_plan_files_keep_their_fingerprints(here: Path) -> None:
    lines = [f"{p.relative_to(ROOT).as_posix()}: {_loaded(p)}" for p in _shipped_files()]
    for name, suffix, text in _doc_blocks():
        path = here / f"block{suffix}"
        path.write_text(text, encoding="utf-8")
        lines.append(f"{name}: {_loaded(path)}")
    assert any("docs/example-plan.toml: " in line and "refused" not in line for line in lines)
    _compare(SNAPSHOTS / "shipped-plans.txt", "\n".join(lines) + "\n")
