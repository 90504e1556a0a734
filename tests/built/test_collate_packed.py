"""The ``packed`` collator: next-fit packing, boundary labels, cu_seqlens, overflow, errors."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError
from loaderkit.collators import collators
from loaderkit.collators.packed import PackedCollator, unpack
from loaderkit.testing import assert_batches_equal, assert_worker_invariant, collect

pytestmark = pytest.mark.timeout(120)

IGNORE = -100
KINDS = ("list", "numpy-int32", "numpy-uint16", "torch-int64", "torch-int32")
DTYPES = {
    "list": torch.int64,
    "numpy-int32": torch.int32,
    "numpy-uint16": torch.uint16,
    "torch-int64": torch.int64,
    "torch-int32": torch.int32,
}


def _as(kind: str, values: list[int]):
    if kind == "list":
        return list(values)
    if kind == "numpy-int32":
        return np.asarray(values, dtype=np.int32)
    if kind == "numpy-uint16":
        return np.asarray(values, dtype=np.uint16)
    if kind == "torch-int64":
        return torch.tensor(values, dtype=torch.int64)
    return torch.tensor(values, dtype=torch.int32)


def _sequences(lengths: list[int]) -> list[list[int]]:
    """Distinct, recognizable token ids: sequence i holds 1000 * (i + 1) + t."""
    return [[1000 * (i + 1) + t for t in range(n)] for i, n in enumerate(lengths)]


def _expected_segments(seqs, overflow, max_length):
    """(batch position, tokens) of each segment in order: the overflow rule, spelled out."""
    out = []
    for pos, seq in enumerate(seqs):
        if len(seq) <= max_length or overflow == "error":
            out.append((pos, list(seq)))
        elif overflow == "truncate":
            out.append((pos, list(seq[:max_length])))
        else:
            for start in range(0, len(seq), max_length):
                out.append((pos, list(seq[start : start + max_length])))
    return out


def _reference(seqs, labels, *, max_length, overflow, shift, pad=0):
    """A per-token pure-Python next-fit packer to compare the vectorized one against."""
    tokens = _expected_segments(seqs, overflow, max_length)
    targets = _expected_segments(labels if labels is not None else seqs, overflow, max_length)
    rows: list[list[tuple[int, list[int], list[int]]]] = []
    used = max_length
    for (pos, toks), (_, labs) in zip(tokens, targets, strict=True):
        if used + len(toks) > max_length:
            rows.append([])
            used = 0
        rows[-1].append((pos, toks, labs))
        used += len(toks)
    ids, lab, positions, owners, cu = [], [], [], [], [0]
    for row in rows:
        r_ids, r_lab, r_pos, r_own = [], [], [], []
        for pos, toks, labs in row:
            r_ids += toks
            r_pos += list(range(len(toks)))
            r_own += [pos] * len(toks)
            if shift:
                r_lab += [*labs[1:], IGNORE]
            else:
                r_lab += [IGNORE, *labs[1:]]
            cu.append(cu[-1] + len(toks))
        padding = max_length - len(r_ids)
        if padding:
            cu.append(cu[-1] + padding)
        ids.append(r_ids + [pad] * padding)
        lab.append(r_lab + [IGNORE] * padding)
        positions.append(r_pos + list(range(padding)))
        owners.append(r_own + [-1] * padding)
    return {
        "input_ids": ids,
        "labels": lab,
        "position_ids": positions,
        "sequence_ids": owners,
        "cu_seqlens": cu,
    }


@st.composite
def batches(draw, overflow_modes=("error", "truncate", "split")):
    max_length = draw(st.integers(1, 16))
    overflow = draw(st.sampled_from(overflow_modes))
    top = max_length if overflow == "error" else 3 * max_length + 2
    lengths = draw(st.lists(st.integers(1, top), min_size=1, max_size=10))
    kind = draw(st.sampled_from(KINDS))
    with_labels = draw(st.booleans())
    seqs = _sequences(lengths)
    labels = None
    if with_labels:
        labels = [[draw(st.sampled_from([IGNORE, 7, 8, 9])) for _ in range(n)] for n in lengths]
    samples = []
    for i, seq in enumerate(seqs):
        sample = {"input_ids": _as(kind, seq)}
        if labels is not None:
            sample["labels"] = labels[i]
        samples.append(sample)
    return {
        "max_length": max_length,
        "overflow": overflow,
        "kind": kind,
        "seqs": seqs,
        "labels": labels,
        "samples": samples,
    }


# -- properties --------------------------------------------------------------------------------


@given(case=batches(), shift=st.booleans(), pad=st.integers(0, 3))
def test_matches_a_per_token_reference_packer(case, shift, pad):
    collate = PackedCollator(
        max_length=case["max_length"],
        overflow=case["overflow"],
        shift_labels=shift,
        pad_token_id=pad,
    )
    batch = collate(case["samples"])
    want = _reference(
        case["seqs"],
        case["labels"],
        max_length=case["max_length"],
        overflow=case["overflow"],
        shift=shift,
        pad=pad,
    )
    for key in ("input_ids", "labels", "position_ids", "sequence_ids"):
        assert batch[key].tolist() == want[key], key
    assert batch["cu_seqlens"].tolist() == want["cu_seqlens"]


@given(case=batches())
def test_unpacking_gives_the_original_sequences_in_order(case):
    max_length, overflow = case["max_length"], case["overflow"]
    batch = PackedCollator(max_length=max_length, overflow=overflow)(case["samples"])
    got = unpack(batch)
    cut = max_length if overflow == "truncate" else None
    assert [t.tolist() for t in got] == [s[:cut] for s in case["seqs"]]
    assert all(t.dtype == DTYPES[case["kind"]] for t in got)
    assert batch["input_ids"].dtype == DTYPES[case["kind"]]


@given(case=batches(), shift=st.booleans())
def test_structure_of_a_packed_batch(case, shift):
    max_length = case["max_length"]
    collate = PackedCollator(
        max_length=max_length,
        overflow=case["overflow"],
        shift_labels=shift,
        attention_mask="padding",
    )
    batch = collate(case["samples"])
    ids, labels, positions = batch["input_ids"], batch["labels"], batch["position_ids"]
    owners, mask, cu = batch["sequence_ids"], batch["attention_mask"], batch["cu_seqlens"]
    rows = batch["num_rows"]

    # shapes and dtypes: no row exceeds max_length
    assert ids.shape == labels.shape == positions.shape == owners.shape == (rows, max_length)
    assert mask.shape == (rows, max_length) and mask.dtype == torch.int64
    assert positions.dtype == torch.int64 and owners.dtype == torch.int64
    assert cu.dtype == torch.int32 and cu.dim() == 1
    assert isinstance(batch["max_seqlen"], int) and isinstance(rows, int)
    assert isinstance(batch["packing_efficiency"], float)
    real = owners >= 0
    assert torch.equal(mask, real.long())

    # efficiency: real tokens over the whole tensor
    kept = sum(
        min(len(s), max_length) if case["overflow"] == "truncate" else len(s) for s in case["seqs"]
    )
    assert int(real.sum()) == kept
    assert batch["packing_efficiency"] == kept / (rows * max_length)

    flat_pos, flat_owner = positions.reshape(-1), owners.reshape(-1)
    starts = (flat_pos == 0).nonzero().flatten()
    # cu_seqlens: a segment starts exactly where position_ids restart, padding included, and
    # the segments tile the flattened batch
    assert cu.tolist() == [*starts.tolist(), rows * max_length]
    seg_lens = cu.diff()
    assert bool((seg_lens > 0).all())
    assert batch["max_seqlen"] == int(seg_lens.max())
    assert bool((seg_lens <= max_length).all())
    # a segment never crosses a row, and holds one owner
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True):
        assert a // max_length == (b - 1) // max_length
        assert len(set(flat_owner[a:b].tolist())) == 1
        assert flat_pos[a:b].tolist() == list(range(b - a))
    # next-fit: a row is closed only when the next segment does not fit in its padding
    for r in range(1, rows):
        row_start = r * max_length
        first_len = int(seg_lens[cu.tolist().index(row_start)])
        assert first_len > max_length - int(real[r - 1].sum())
    # order: owners are non-decreasing over the real tokens
    real_owners = flat_owner[flat_owner >= 0]
    assert bool((real_owners.diff() >= 0).all())

    # labels: padding is ignored; the boundary rule of the docs
    flat_labels = labels.reshape(-1)
    assert bool((flat_labels[~real.reshape(-1)] == IGNORE).all())
    real_starts = [
        a for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True) if int(flat_owner[a]) >= 0
    ]
    real_ends = [
        b - 1
        for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)
        if int(flat_owner[a]) >= 0
    ]
    # no loss term crosses a segment, in the flattened stream (so per row too): the label at t
    # is predicted from t - 1 (model shifts) or belongs to t + 1 (shift_labels)
    used = (flat_labels != IGNORE).nonzero().flatten().tolist()
    step = 1 if shift else -1
    for t in used:
        assert 0 <= t + step < flat_pos.numel()
        assert flat_pos[max(t, t + step)] == flat_pos[min(t, t + step)] + 1
        assert flat_owner[t + step] == flat_owner[t]
    if shift:
        assert all(int(flat_labels[e]) == IGNORE for e in real_ends)
    else:
        assert all(int(flat_labels[s]) == IGNORE for s in real_starts)
    # padding right-aligned in each row: real tokens first
    for row in real.tolist():
        assert row == sorted(row, reverse=True)


def test_boundary_labels_for_a_model_that_shifts():
    batch = PackedCollator(max_length=8)(
        [{"input_ids": [11, 12, 13]}, {"input_ids": [21, 22]}, {"input_ids": [31, 32, 33, 34]}]
    )
    assert batch["input_ids"].tolist() == [
        [11, 12, 13, 21, 22, 0, 0, 0],
        [31, 32, 33, 34, 0, 0, 0, 0],
    ]
    # labels[t] is the target of the model's prediction made at t - 1: the first token of each
    # sequence would be predicted from another sequence (or from nothing), so it is ignored
    assert batch["labels"].tolist() == [
        [IGNORE, 12, 13, IGNORE, 22, IGNORE, IGNORE, IGNORE],
        [IGNORE, 32, 33, 34, IGNORE, IGNORE, IGNORE, IGNORE],
    ]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 2, 3, 0, 1, 2, 3]]
    assert batch["cu_seqlens"].tolist() == [0, 3, 5, 8, 12, 16]
    assert batch["max_seqlen"] == 4
    assert batch["num_rows"] == 2
    assert batch["packing_efficiency"] == 9 / 16
    assert "attention_mask" not in batch
    # the loss an HF-style model computes never crosses a sequence
    shifted = batch["labels"][:, 1:]
    context_owner = batch["sequence_ids"][:, :-1]
    target_owner = batch["sequence_ids"][:, 1:]
    used = shifted != IGNORE
    assert torch.equal(context_owner[used], target_owner[used])


def test_shift_labels_gives_next_token_targets_within_each_sequence():
    batch = PackedCollator(max_length=8, shift_labels=True)(
        [{"input_ids": [11, 12, 13]}, {"input_ids": [21, 22]}]
    )
    assert batch["labels"].tolist() == [[12, 13, IGNORE, 22, IGNORE, IGNORE, IGNORE, IGNORE]]


def test_given_labels_are_used_and_keep_their_masking():
    batch = PackedCollator(max_length=6)(
        [
            {"input_ids": [1, 2, 3], "labels": [-100, -100, 3]},
            {"input_ids": [4, 5], "labels": [4, 5]},
        ]
    )
    assert batch["labels"].tolist() == [[IGNORE, IGNORE, 3, IGNORE, 5, IGNORE]]


def test_dtypes():
    u16 = [{"input_ids": np.array([1, 2, 3], dtype=np.uint16)}]
    batch = PackedCollator(max_length=4)(u16)
    assert batch["input_ids"].dtype == torch.uint16
    assert batch["labels"].dtype == torch.int64  # uint16 cannot hold -100
    i32 = [{"input_ids": torch.tensor([1, 2], dtype=torch.int32)}]
    batch = PackedCollator(max_length=4)(i32)
    assert batch["input_ids"].dtype == torch.int32 and batch["labels"].dtype == torch.int32
    i16 = [{"input_ids": [1, 2], "labels": np.array([1, 2], dtype=np.int16)}]
    assert PackedCollator(max_length=4)(i16)["labels"].dtype == torch.int16
    mixed = [{"input_ids": np.array([1], dtype=np.int32)}, {"input_ids": [2, 3]}]
    assert PackedCollator(max_length=4)(mixed)["input_ids"].dtype == torch.int64


def test_padding_mask_option():
    batch = PackedCollator(max_length=4, attention_mask="padding", pad_token_id=9)(
        [{"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]}]
    )
    assert batch["input_ids"].tolist() == [[1, 2, 3, 9], [4, 5, 9, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 0, 0]]


# -- overflow ----------------------------------------------------------------------------------


def test_overflow_error_names_the_position_and_length():
    samples = [{"input_ids": [1, 2]}, {"input_ids": [1, 2, 3, 4, 5]}]
    with pytest.raises(DataError, match=r"batch position 1 has 5 tokens, more than max_length=4"):
        PackedCollator(max_length=4)(samples)


def test_overflow_truncate_and_split():
    samples = [{"input_ids": [1, 2, 3, 4, 5, 6, 7]}, {"input_ids": [8]}]
    cut = PackedCollator(max_length=3, overflow="truncate")(samples)
    assert cut["input_ids"].tolist() == [[1, 2, 3], [8, 0, 0]]
    assert [t.tolist() for t in unpack(cut)] == [[1, 2, 3], [8]]
    split = PackedCollator(max_length=3, overflow="split")(samples)
    assert split["input_ids"].tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 0]]
    assert split["position_ids"].tolist() == [[0, 1, 2], [0, 1, 2], [0, 0, 0]]
    assert split["sequence_ids"].tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, -1]]
    assert split["labels"].tolist() == [[IGNORE, 2, 3], [IGNORE, 5, 6], [IGNORE, IGNORE, IGNORE]]
    assert [t.tolist() for t in unpack(split)] == [[1, 2, 3, 4, 5, 6, 7], [8]]
    assert [t.tolist() for t in unpack(split, "position_ids")] == [[0, 1, 2, 0, 1, 2, 0], [0]]


def test_overflow_through_the_loader_is_a_data_error():
    samples = [{"input_ids": [1] * n} for n in (3, 70, 5)]
    plan = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_batch_size(3)
        .with_collator("packed", max_length=64)
        .compile()
    )
    with plan.build() as loader, pytest.raises(DataError, match="batch position 1 has 70 tokens"):
        collect(loader)


# -- bad options and bad samples ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"max_length": 0}, "collator.options.max_length"),
        ({"max_length": -3}, "collator.options.max_length"),
        ({"max_length": 2.5}, "collator.options.max_length"),
        ({"max_length": True}, "collator.options.max_length"),
        ({}, "collator.options.max_length"),
        ({"max_length": 8, "pad_token_id": -1}, "collator.options.pad_token_id"),
        ({"max_length": 8, "ignore_index": "x"}, "collator.options.ignore_index"),
        ({"max_length": 8, "overflow": "wrap"}, "collator.options.overflow"),
        ({"max_length": 8, "shift_labels": 1}, "collator.options.shift_labels"),
        ({"max_length": 8, "attention_mask": True}, "collator.options.attention_mask"),
        ({"max_length": 8, "packing": "ffd"}, "collator.options.packing"),
    ],
)
def test_bad_options_are_plan_errors_with_their_path(options, path):
    with pytest.raises(PlanError) as info:
        DataLoaderBuilder().with_dataset([{"input_ids": [1]}]).with_collator("packed", **options)
    assert info.value.paths == (path,)


def test_options_are_checked_without_torch():
    code = (
        "import sys\n"
        "from loaderkit.collators.packed import PackedCollator\n"
        "PackedCollator(max_length=8, overflow='split', attention_mask='padding')\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("samples", "match"),
    [
        ([], "empty batch"),
        ([{"labels": [1]}], "needs an 'input_ids' key"),
        ([{"input_ids": [1]}, {"input_ids": [2], "labels": [2]}], "batch position 1 has keys"),
        ([{"input_ids": [1]}, {"ids": [2]}], "batch position 1 has keys"),
        ([{"input_ids": [1]}, [2]], "batch position 1"),
        ([[1, 2]], "mappings"),
        ([{"input_ids": [1, 2]}, {"input_ids": []}], "batch position 1 has no input_ids"),
        ([{"input_ids": [1, 2], "labels": [1]}], "1 labels for 2 input_ids"),
        ([{"input_ids": [1.5, 2.0]}], "'input_ids' of the sample at batch position 0"),
        ([{"input_ids": torch.ones(2, 2, dtype=torch.long)}], "1-d tensor"),
        ([{"input_ids": torch.ones(3)}], "integer token ids"),
        ([{"input_ids": "abc"}], "list, numpy array or tensor"),
        ([{"input_ids": [[1, 2], [3]]}], "flat list"),
        (
            [{"input_ids": np.array([1], dtype=np.uint64)}, {"input_ids": [2]}],
            "do not combine",
        ),
    ],
)
def test_bad_samples_are_data_errors(samples, match):
    collate = PackedCollator(max_length=4, pad_token_id=0)
    with pytest.raises(DataError, match=match):
        collate(samples)


def test_a_pad_token_that_does_not_fit_the_dtype_is_a_data_error():
    with pytest.raises(DataError, match="pad_token_id=300 does not fit"):
        PackedCollator(max_length=4, pad_token_id=300)(
            [{"input_ids": np.array([1], dtype=np.uint8)}]
        )


def test_other_keys_are_dropped():
    batch = PackedCollator(max_length=4)([{"input_ids": [1, 2], "attention_mask": [1, 1]}])
    assert list(batch) == [
        "input_ids",
        "labels",
        "position_ids",
        "cu_seqlens",
        "max_seqlen",
        "sequence_ids",
        "num_rows",
        "packing_efficiency",
    ]


# -- end to end ----------------------------------------------------------------------------------


def _corpus(n: int = 60) -> list[dict[str, list[int]]]:
    rng = np.random.default_rng(7)
    return [
        {"input_ids": rng.integers(1, 30_000, size=int(rng.integers(1, 64))).tolist()}
        for _ in range(n)
    ]


def test_end_to_end_worker_invariant_and_pickling():
    corpus = _corpus()
    plan = (
        DataLoaderBuilder()
        .with_dataset(corpus)
        .with_batch_size(8)
        .with_shuffle()
        .with_seed(11)
        .with_collator("packed", max_length=64)
        .compile()
    )
    assert_worker_invariant(plan, workers=(0, 2))

    with plan.build() as loader:
        batches = collect(loader)
    # every sample of the epoch comes back whole, exactly once
    seen = sorted(tuple(t.tolist()) for b in batches for t in unpack(b))
    assert seen == sorted(tuple(s["input_ids"]) for s in corpus)

    # the collator pickles (spawned workers receive it) and packs the same after
    collate = PackedCollator(max_length=64, overflow="split", attention_mask="padding")
    again = pickle.loads(pickle.dumps(collate))
    assert again == collate
    assert_batches_equal([collate(corpus[:8])], [again(corpus[:8])])

    # the plan stores the options as plain data
    data = json.loads(json.dumps(plan.to_dict()))
    assert LoaderPlan.from_dict(data, require_bindings=False).fingerprint == plan.fingerprint


def test_registered_as_a_text_collator():
    entry = collators.get("packed")
    assert entry.factory is PackedCollator
    assert entry.modality == "text"
    assert entry.validate
