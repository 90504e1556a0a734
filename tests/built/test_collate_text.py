"""The text collators: padding properties, LM labels, MLM masking and its determinism, errors."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from loaderkit import DataError, DataLoaderBuilder, LoaderPlan, PlanError, PlanTypeError
from loaderkit._frozen import FrozenMap
from loaderkit.collators import BatchContext, collators
from loaderkit.collators.base import (
    check_bool_option,
    check_choice_option,
    check_float_list_option,
    check_int_list_option,
    check_int_option,
    check_mapping_option,
    check_name_option,
    check_names_option,
    check_number_option,
)
from loaderkit.collators.multimodal import MultimodalCollator
from loaderkit.collators.packed import PackedCollator
from loaderkit.collators.text import (
    CausalLMCollator,
    MaskedLMCollator,
    Seq2SeqCollator,
    TextCollator,
)
from loaderkit.collators.vision import VisionCollator
from loaderkit.testing import (
    assert_batches_equal,
    assert_resumable,
    assert_worker_invariant,
    batches_differ,
    collect,
)

pytestmark = pytest.mark.timeout(120)

KINDS = ("list", "np.int32", "np.int64", "torch.int32", "torch.int64")
EXPECTED_DTYPE = {
    "list": torch.int64,
    "np.int32": torch.int32,
    "np.int64": torch.int64,
    "torch.int32": torch.int32,
    "torch.int64": torch.int64,
}


def as_kind(row: list[int], kind: str):
    if kind == "list":
        return list(row)
    if kind.startswith("np."):
        return np.asarray(row, dtype=getattr(np, kind[3:]))
    return torch.tensor(row, dtype=getattr(torch, kind[6:]))


def context(n: int, seed: int = 0, epoch: int = 0, first: int = 0) -> BatchContext:
    return BatchContext(seed, epoch, 0, np.arange(first, first + n, dtype=np.int64))


def kept(row: list[int], max_length: int | None, side: str) -> list[int]:
    if max_length is None or len(row) <= max_length:
        return row
    return row[:max_length] if side == "right" else row[len(row) - max_length :]


rows_strategy = st.lists(
    st.lists(st.integers(1, 1000), min_size=0, max_size=20), min_size=1, max_size=6
)


# -- padding properties ----------------------------------------------------------------------


@given(
    rows=rows_strategy,
    kind=st.sampled_from(KINDS),
    padding_side=st.sampled_from(["right", "left"]),
    truncation_side=st.sampled_from(["right", "left"]),
    max_length=st.none() | st.integers(1, 25),
    multiple=st.none() | st.integers(1, 8),
    to_max_length=st.booleans(),
    pad=st.integers(0, 5),
)
def test_rows_are_their_tokens_then_padding(
    rows, kind, padding_side, truncation_side, max_length, multiple, to_max_length, pad
):
    collate = TextCollator(
        pad_token_id=pad,
        padding_side=padding_side,
        truncation_side=truncation_side,
        max_length=max_length,
        pad_to_multiple_of=multiple,
        padding="max_length" if to_max_length and max_length else "longest",
    )
    samples = [
        {"input_ids": as_kind(r, kind), "labels": as_kind([t + 1 for t in r], kind)} for r in rows
    ]
    batch = collate(samples)
    assert list(batch) == ["input_ids", "labels", "attention_mask"]
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert ids.dtype == labels.dtype == EXPECTED_DTYPE[kind]
    assert mask.dtype == torch.int64
    lengths = [len(kept(r, max_length, truncation_side)) for r in rows]
    width = ids.shape[1]
    assert ids.shape == labels.shape == mask.shape == (len(rows), width)
    expected_width = max_length if to_max_length and max_length else max(lengths)
    if multiple:
        assert width % multiple == 0
        assert expected_width <= width < expected_width + multiple
    else:
        assert width == expected_width
    for i, row in enumerate(rows):
        tokens = kept(row, max_length, truncation_side)
        n, padding = len(tokens), width - len(tokens)
        real = slice(0, n) if padding_side == "right" else slice(padding, width)
        gap = slice(n, width) if padding_side == "right" else slice(0, padding)
        assert ids[i, real].tolist() == tokens
        assert ids[i, gap].tolist() == [pad] * padding
        assert labels[i, real].tolist() == [t + 1 for t in tokens]
        assert labels[i, gap].tolist() == [-100] * padding
        assert mask[i, real].tolist() == [1] * n
        assert mask[i, gap].tolist() == [0] * padding
    assert torch.equal(labels == -100, mask == 0)


@given(rows=rows_strategy, multiple=st.none() | st.integers(1, 8))
def test_left_padding_mirrors_right_padding(rows, multiple):
    samples = [{"input_ids": r, "token_type_ids": [1] * len(r)} for r in rows]
    right = TextCollator(pad_to_multiple_of=multiple, pad_token_id=7)(samples)
    left = TextCollator(pad_to_multiple_of=multiple, pad_token_id=7, padding_side="left")(samples)
    width = right["input_ids"].shape[1]
    for key in right:
        assert right[key].shape == left[key].shape
        for i, r in enumerate(rows):
            rolled = torch.roll(right[key][i], width - len(r))
            assert torch.equal(rolled, left[key][i]), key


def test_truncation_keeps_the_start_or_the_end():
    samples = [{"input_ids": [1, 2, 3, 4, 5]}, {"input_ids": [6, 7]}]
    right = TextCollator(max_length=3)(samples)
    left = TextCollator(max_length=3, truncation_side="left")(samples)
    assert right["input_ids"].tolist() == [[1, 2, 3], [6, 7, 0]]
    assert left["input_ids"].tolist() == [[3, 4, 5], [6, 7, 0]]
    assert left["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    padded = TextCollator(max_length=4, padding="max_length", pad_to_multiple_of=3)(samples)
    assert padded["input_ids"].tolist() == [[1, 2, 3, 4, 0, 0], [6, 7, 0, 0, 0, 0]]


@pytest.mark.parametrize(
    ("row", "dtype"),
    [
        ([1, 2], torch.int64),
        ([True, False], torch.bool),
        ([0.5, 1.5], torch.float32),
        (np.array([1, 2], dtype=np.uint16), torch.uint16),
        (np.array([1, 2], dtype=np.int16), torch.int16),
        (torch.tensor([1, 2], dtype=torch.int32), torch.int32),
        (torch.tensor([1.0, 2.0], dtype=torch.bfloat16), torch.bfloat16),
    ],
    ids=["int", "bool", "float", "np.uint16", "np.int16", "torch.int32", "torch.bfloat16"],
)
def test_dtypes_are_kept(row, dtype):
    batch = TextCollator()([{"input_ids": row}, {"input_ids": row[:1]}])
    ids = batch["input_ids"]
    assert ids.dtype == dtype
    first, second = float(row[0]), float(row[1])
    assert ids.to(torch.float64).tolist() == [[first, second], [first, 0.0]]


def test_a_batch_may_mix_lists_arrays_and_tensors():
    samples = [
        {"input_ids": [1, 2, 3]},
        {"input_ids": np.array([4], dtype=np.int64)},
        {"input_ids": torch.tensor([5, 6])},
    ]
    batch = TextCollator()(samples)
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0], [5, 6, 0]]
    assert batch["input_ids"].dtype == torch.int64


def test_an_empty_list_does_not_change_the_dtype_of_a_mixed_batch():
    samples = [{"input_ids": np.array([1, 2], dtype=np.int32)}, {"input_ids": []}]
    batch = TextCollator()(samples)
    assert batch["input_ids"].dtype == torch.int32
    assert batch["input_ids"].tolist() == [[1, 2], [0, 0]]


def test_other_keys_use_the_default_collator_and_tokenizer_outputs_are_padded():
    samples = [
        {
            "input_ids": [5, 6, 7],
            "token_type_ids": [0, 1, 1],
            "special_tokens_mask": [1, 0, 1],
            "attention_mask": [1, 1, 0],  # the sample's own mask is kept, then padded with 0
            "label": 3,
            "text": "a b c",
            "weight": 0.5,
        },
        {
            "input_ids": [8],
            "token_type_ids": [1],
            "special_tokens_mask": [0],
            "attention_mask": [1],
            "label": 4,
            "text": "d",
            "weight": 1.5,
        },
    ]
    batch = TextCollator(pad_token_id=1)(samples)
    assert list(batch) == list(samples[0])  # no second attention_mask
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 1, 1]]
    assert batch["token_type_ids"].tolist() == [[0, 1, 1], [1, 0, 0]]
    assert batch["special_tokens_mask"].tolist() == [[1, 0, 1], [0, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert batch["label"].tolist() == [3, 4]
    assert batch["text"] == ["a b c", "d"]
    assert batch["weight"].dtype == torch.float64


def test_extra_keys_and_pad_values():
    samples = [
        {"input_ids": [5, 6], "position_ids": [0, 1]},
        {"input_ids": [7], "position_ids": [0]},
    ]
    batch = TextCollator(
        keys=["input_ids", "position_ids"], pad_values={"position_ids": -1, "input_ids": 9}
    )(samples)
    assert batch["input_ids"].tolist() == [[5, 6], [7, 9]]
    assert batch["position_ids"].tolist() == [[0, 1], [0, -1]]
    without = TextCollator(return_attention_mask=False)([{"input_ids": [1]}, {"input_ids": []}])
    assert list(without) == ["input_ids"]
    assert without["input_ids"].tolist() == [[1], [0]]


def test_an_unlisted_ragged_key_gets_a_hint():
    samples = [
        {"input_ids": [1, 2], "position_ids": [0, 1]},
        {"input_ids": [3], "position_ids": [0]},
    ]
    with pytest.raises(DataError, match=r"add it to keys=") as info:
        TextCollator()(samples)
    assert "position_ids" in str(info.value)


def test_sequence_level_label_vectors_with_token_labels_false():
    samples = [
        {"input_ids": [1, 2, 3], "labels": [0.0, 1.0]},
        {"input_ids": [4], "labels": [1.0, 1.0]},
    ]
    with pytest.raises(DataError, match=r"'labels' at batch position 0 has length 2.*token_labels"):
        TextCollator()(samples)
    batch = TextCollator(token_labels=False)(samples)
    assert batch["labels"].tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert batch["labels"].dtype == torch.float32
    ragged = [samples[0], {"input_ids": [4], "labels": [1.0]}]
    with pytest.raises(DataError, match=r"'labels' at batch position 1 has length 1.*stacked"):
        TextCollator(token_labels=False)(ragged)
    scalar = TextCollator()([{"input_ids": [1], "labels": 1}, {"input_ids": [2, 3], "labels": 0}])
    assert scalar["labels"].tolist() == [1, 0]


def test_empty_sequences_and_an_all_empty_batch():
    batch = TextCollator(pad_to_multiple_of=4)([{"input_ids": []}, {"input_ids": []}])
    assert batch["input_ids"].shape == (2, 0)
    assert batch["attention_mask"].shape == (2, 0)


# -- causal LM -------------------------------------------------------------------------------


@given(rows=rows_strategy, padding_side=st.sampled_from(["right", "left"]), shift=st.booleans())
def test_causal_lm_labels(rows, padding_side, shift):
    samples = [{"input_ids": np.asarray(r, dtype=np.int32)} for r in rows]
    batch = CausalLMCollator(padding_side=padding_side, shift=shift, pad_token_id=2)(samples)
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert ids.dtype == torch.int32
    assert labels.dtype == torch.int64
    width = ids.shape[1]
    for i, row in enumerate(rows):
        offset = 0 if padding_side == "right" else width - len(row)
        expected = [-100] * width
        for t, token in enumerate(row):
            if shift:
                expected[offset + t] = row[t + 1] if t + 1 < len(row) else -100
            else:
                expected[offset + t] = token
        assert labels[i].tolist() == expected
    if not shift:
        assert torch.equal(labels == -100, mask == 0)


def test_causal_lm_uses_the_samples_labels():
    samples = [
        {"input_ids": [5, 6, 7], "labels": [-100, 6, 7]},
        {"input_ids": [8, 9], "labels": [-100, 9]},
    ]
    batch = CausalLMCollator()(samples)
    assert list(batch) == ["input_ids", "labels", "attention_mask"]
    assert batch["labels"].tolist() == [[-100, 6, 7], [-100, 9, -100]]
    shifted = CausalLMCollator(shift=True)(samples)
    assert shifted["labels"].tolist() == [[6, 7, -100], [9, -100, -100]]
    with pytest.raises(DataError, match=r"'labels' at batch position 1 has length 1"):
        CausalLMCollator()([samples[0], {"input_ids": [8, 9], "labels": [9]}])


def test_causal_lm_does_not_mask_real_tokens_equal_to_the_pad_id():
    batch = CausalLMCollator(pad_token_id=0)([{"input_ids": [0, 5, 0]}, {"input_ids": [3]}])
    assert batch["labels"].tolist() == [[0, 5, 0], [3, -100, -100]]


# -- seq2seq ---------------------------------------------------------------------------------


def test_seq2seq_decoder_input_ids():
    samples = [
        {"input_ids": [1, 2, 3], "labels": [4, 5]},
        {"input_ids": [6], "labels": [7, -100, 8]},
    ]
    batch = Seq2SeqCollator(decoder_start_token_id=9, pad_token_id=0, padding_side="left")(samples)
    assert list(batch) == ["input_ids", "labels", "attention_mask", "decoder_input_ids"]
    assert batch["input_ids"].tolist() == [[1, 2, 3], [0, 0, 6]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]
    assert batch["labels"].tolist() == [[4, 5, -100], [7, -100, 8]]  # targets: right padded
    assert batch["decoder_input_ids"].tolist() == [[9, 4, 5], [9, 7, 0]]
    assert batch["decoder_input_ids"].dtype == batch["labels"].dtype == torch.int64


@given(
    targets=st.lists(st.lists(st.integers(1, 50), max_size=12), min_size=1, max_size=5),
    max_target_length=st.none() | st.integers(1, 10),
    multiple=st.none() | st.integers(1, 4),
)
def test_seq2seq_property(targets, max_target_length, multiple):
    samples = [{"input_ids": [1] * (1 + i), "labels": t} for i, t in enumerate(targets)]
    batch = Seq2SeqCollator(
        decoder_start_token_id=99,
        pad_token_id=3,
        max_target_length=max_target_length,
        pad_to_multiple_of=multiple,
    )(samples)
    labels, decoder = batch["labels"], batch["decoder_input_ids"]
    width = labels.shape[1]
    if multiple:
        assert width % multiple == 0
    for i, t in enumerate(targets):
        t = t[:max_target_length] if max_target_length else t
        assert labels[i].tolist() == t + [-100] * (width - len(t))
        if width:
            assert decoder[i].tolist() == ([99, *t, *([3] * width)])[:width]


def test_seq2seq_keeps_given_decoder_inputs_and_can_skip_them():
    samples = [
        {"input_ids": [1], "labels": [4, 5], "decoder_input_ids": [9, 4]},
        {"input_ids": [6, 7], "labels": [8], "decoder_input_ids": [9]},
    ]
    batch = Seq2SeqCollator(decoder_start_token_id=2)(samples)
    assert batch["decoder_input_ids"].tolist() == [[9, 4], [9, 0]]
    plain = [{"input_ids": [1], "labels": [4, 5]}, {"input_ids": [6, 7], "labels": [8]}]
    skipped = Seq2SeqCollator(decoder_start_token_id=2, make_decoder_input_ids=False)(plain)
    assert "decoder_input_ids" not in skipped
    inference = Seq2SeqCollator(decoder_start_token_id=2)(
        [{"input_ids": [1]}, {"input_ids": [2, 3]}]
    )
    assert list(inference) == ["input_ids", "attention_mask"]


# -- masked LM -------------------------------------------------------------------------------

MASK, VOCAB, SPECIAL = 4, 1000, (1, 2)


def mlm(**options) -> MaskedLMCollator:
    return MaskedLMCollator(mask_token_id=MASK, vocab_size=VOCAB, **options)


def test_mlm_masking_rates_and_split():
    rng = np.random.default_rng(0)
    collate = mlm(special_token_ids=list(SPECIAL))
    selected = real = masked = randomized = kept_same = 0
    for b in range(40):
        rows = [rng.integers(10, VOCAB, rng.integers(20, 120)).tolist() for _ in range(16)]
        samples = [{"input_ids": r} for r in rows]
        original = TextCollator()(samples)["input_ids"]
        batch = collate(samples, context=context(16, first=16 * b))
        ids, labels, attn = batch["input_ids"], batch["labels"], batch["attention_mask"]
        chosen = labels != -100
        real += int(attn.sum())
        selected += int(chosen.sum())
        masked += int((chosen & (ids == MASK)).sum())
        kept_same += int((chosen & (ids == labels)).sum())
        randomized += int((chosen & (ids != MASK) & (ids != labels)).sum())
        assert torch.equal(ids[~chosen], original[~chosen])
        assert torch.equal(labels[chosen], original[chosen])
    rate = selected / real
    assert abs(rate - 0.15) < 0.01, rate
    assert abs(masked / selected - 0.8) < 0.025
    assert abs(randomized / selected - 0.1) < 0.02
    assert abs(kept_same / selected - 0.1) < 0.02


def test_mlm_never_masks_special_tokens_or_padding():
    rows = [[1, *range(10, 60), 2], [1, 11, 12, 2], [1, 2]]
    collate = mlm(special_token_ids=[1, 2], mlm_probability=0.9, pad_token_id=0)
    for first in range(0, 300, 3):
        samples = [{"input_ids": r} for r in rows]
        original = TextCollator()(samples)["input_ids"]
        batch = collate(samples, context=context(3, first=first))
        ids, labels, attn = batch["input_ids"], batch["labels"], batch["attention_mask"]
        special = (original == 1) | (original == 2)
        assert bool((labels[special] == -100).all())
        assert bool((labels[attn == 0] == -100).all())
        assert bool((ids[attn == 0] == 0).all())
        for i, r in enumerate(rows):  # specials stay where they were
            assert ids[i, 0] == 1 and ids[i, len(r) - 1] == 2


def test_mlm_honours_and_drops_special_tokens_mask():
    samples = [
        {"input_ids": [5, 6, 7], "special_tokens_mask": [1, 0, 1]},
        {"input_ids": [8], "special_tokens_mask": [0]},
    ]
    collate = mlm(mlm_probability=0.99)
    for first in range(0, 40, 2):
        batch = collate(samples, context=context(2, first=first))
        assert "special_tokens_mask" not in batch
        assert batch["labels"][0, 0] == -100 and batch["labels"][0, 2] == -100
        assert batch["input_ids"][0, 0] == 5 and batch["input_ids"][0, 2] == 7


def test_mlm_masks_a_sample_the_same_in_any_batch():
    rng = np.random.default_rng(1)
    rows = [rng.integers(10, VOCAB, rng.integers(5, 40)).tolist() for _ in range(8)]
    collate = mlm()
    whole = collate([{"input_ids": r} for r in rows], context=context(8, first=100))
    for start in (0, 4):
        part = collate(
            [{"input_ids": r} for r in rows[start : start + 4]],
            context=context(4, first=100 + start),
        )
        for i in range(4):
            n = len(rows[start + i])
            for key in ("input_ids", "labels"):
                assert torch.equal(part[key][i, :n], whole[key][start + i, :n])
    other_epoch = collate([{"input_ids": r} for r in rows], context=context(8, epoch=1, first=100))
    assert not torch.equal(other_epoch["labels"], whole["labels"])


def test_mlm_keeps_the_id_dtype_and_returns_int64_labels():
    samples = [
        {"input_ids": np.arange(10, 40, dtype=np.int32)},
        {"input_ids": np.arange(10, 12, dtype=np.int32)},
    ]
    batch = mlm(mlm_probability=0.5)(samples, context=context(2))
    assert batch["input_ids"].dtype == torch.int32
    assert batch["labels"].dtype == torch.int64
    assert int(batch["input_ids"].max()) < VOCAB


def test_mlm_refuses_ids_whose_dtype_cannot_hold_the_vocabulary():
    samples = [{"input_ids": np.array([5, 6], dtype=np.uint8)}]
    with pytest.raises(DataError, match=r"uint8, which cannot hold mask_token_id=4"):
        mlm()(samples, context=context(1))


def test_mlm_without_a_context_says_how_to_give_one():
    with pytest.raises(TypeError, match=r"context=loaderkit.collators.BatchContext"):
        mlm()([{"input_ids": [5, 6]}])


def test_mlm_refuses_samples_with_labels():
    with pytest.raises(DataError, match="makes the labels itself"):
        mlm()([{"input_ids": [5], "labels": [5]}], context=context(1))


def mlm_dataset(n: int = 45) -> list[dict[str, list[int]]]:
    rng = np.random.default_rng(7)
    return [
        {"input_ids": [1, *rng.integers(10, VOCAB, rng.integers(3, 30)).tolist(), 2]}
        for _ in range(n)
    ]


def mlm_builder(seed: int = 0) -> DataLoaderBuilder:
    return (
        DataLoaderBuilder()
        .with_dataset(mlm_dataset())
        .with_batch_size(8)
        .with_shuffle()
        .with_seed(seed)
        .with_collator(
            "masked_lm", mask_token_id=MASK, vocab_size=VOCAB, special_token_ids=list(SPECIAL)
        )
    )


def test_mlm_is_worker_invariant_resumable_and_seeded():
    plan = mlm_builder().with_workers(2).compile()
    assert_worker_invariant(plan, workers=(0, 2))
    assert_resumable(plan.to_builder().with_workers(0).compile(), at=[0, 3])
    ordered = [mlm_builder(seed).with_shuffle(False).compile() for seed in (0, 1)]
    runs = []
    for plan in ordered:
        with plan.build() as loader:
            runs.append(collect(loader))
    assert all(
        torch.equal(a["attention_mask"], b["attention_mask"]) for a, b in zip(*runs, strict=True)
    )
    assert any(batches_differ(a["labels"], b["labels"]) for a, b in zip(*runs, strict=True))


# -- errors ----------------------------------------------------------------------------------


def test_mismatched_keys_name_the_key_and_the_position():
    samples = [
        {"input_ids": [1], "labels": [1]},
        {"input_ids": [2], "labels": [2]},
        {"input_ids": [3]},
    ]
    for collate in (TextCollator(), CausalLMCollator(), Seq2SeqCollator(decoder_start_token_id=0)):
        with pytest.raises(DataError, match=r"batch position 2.*missing \['labels'\]"):
            collate(samples)


def test_a_missing_configured_key():
    with pytest.raises(DataError, match=r"no key 'token_type_ids'"):
        TextCollator(keys=["input_ids", "token_type_ids"])([{"input_ids": [1]}])


@pytest.mark.parametrize(
    ("bad", "shape"),
    [
        (np.zeros((2, 3), dtype=np.int64), r"\(2, 3\)"),
        (torch.zeros(2, 3, dtype=torch.int64), r"\(2, 3\)"),
        ([[1, 2, 3], [4, 5, 6]], r"\(2, 3\)"),
        (torch.tensor(5), r"\(\)"),
    ],
    ids=["numpy", "torch", "nested list", "0-d tensor"],
)
def test_a_sequence_that_is_not_1d(bad, shape):
    samples = [{"input_ids": [1, 2]}, {"input_ids": [3]}, {"input_ids": bad}]
    with pytest.raises(DataError, match=rf"'input_ids' at batch position 2 has shape {shape}"):
        TextCollator()(samples)


def test_values_that_are_not_sequences_of_numbers():
    with pytest.raises(
        DataError, match=r"'input_ids' at batch position 1 is a int, not a sequence"
    ):
        TextCollator()([{"input_ids": torch.tensor([1])}, {"input_ids": 7}])
    with pytest.raises(DataError, match=r"position 1 holds <U1 values, not numbers"):
        TextCollator()([{"input_ids": [1]}, {"input_ids": ["a"]}])


def test_mixed_batches_with_bad_rows():
    ragged = [{"input_ids": np.array([1])}, {"input_ids": [[1], [2, 3]]}]
    with pytest.raises(
        DataError, match=r"'input_ids' at batch position 1 has shape \(2, \.\.\.\) \(a ragged"
    ):
        TextCollator()(ragged)
    strings = [{"input_ids": np.array([1])}, {"input_ids": np.array(["a", "b"])}]
    with pytest.raises(DataError, match=r"position 1 holds <U1 values, not numbers"):
        TextCollator()(strings)


def test_a_pad_value_the_dtype_cannot_hold():
    samples = [{"input_ids": [1, 2], "labels": np.array([1, 2], dtype=np.uint8)}]
    samples.append({"input_ids": [3], "labels": np.array([3], dtype=np.uint8)})
    with pytest.raises(DataError, match=r"cannot pad 'labels' \(uint8\) with -100"):
        TextCollator()(samples)


def test_a_data_error_through_the_loader_names_the_batch():
    data = [{"input_ids": [1, 2]}, {"input_ids": [[1], [2]]}]
    plan = DataLoaderBuilder().with_dataset(data).with_batch_size(2).with_collator("text").compile()
    with plan.build() as loader, pytest.raises(DataError, match="batch 0 of epoch 0") as info:
        collect(loader)
    assert "text" in str(info.value.collator)
    assert "batch position 1 has shape (2, 1)" in str(info.value)


@pytest.mark.parametrize(
    ("name", "options", "path"),
    [
        ("text", {"padding_side": "middle"}, "padding_side"),
        ("text", {"truncation_side": "up"}, "truncation_side"),
        ("text", {"pad_to_multiple_of": 0}, "pad_to_multiple_of"),
        ("text", {"max_length": 0}, "max_length"),
        ("text", {"pad_token_id": -1}, "pad_token_id"),
        ("text", {"pad_token_id": True}, "pad_token_id"),
        ("text", {"padding": "max_length"}, "padding"),
        ("text", {"keys": "input_ids"}, "keys"),
        ("text", {"keys": []}, "keys"),
        ("text", {"keys": ["input_ids", "labels"]}, "keys"),
        ("text", {"keys": ["input_ids", "input_ids"]}, "keys"),
        ("text", {"pad_values": {"x": 1.5}}, "pad_values"),
        ("text", {"return_attention_mask": 1}, "return_attention_mask"),
        ("text", {"shift": True}, "shift"),
        ("causal_lm", {"shift": "yes"}, "shift"),
        ("masked_lm", {"vocab_size": 10}, "mask_token_id"),
        ("masked_lm", {"mask_token_id": 3, "vocab_size": 0}, "vocab_size"),
        ("masked_lm", {"mask_token_id": 10, "vocab_size": 10}, "mask_token_id"),
        (
            "masked_lm",
            {"mask_token_id": 3, "vocab_size": 10, "mlm_probability": 0},
            "mlm_probability",
        ),
        (
            "masked_lm",
            {"mask_token_id": 3, "vocab_size": 10, "mlm_probability": 1.5},
            "mlm_probability",
        ),
        (
            "masked_lm",
            {"mask_token_id": 3, "vocab_size": 10, "mlm_probability": True},
            "mlm_probability",
        ),
        (
            "masked_lm",
            {"mask_token_id": 3, "vocab_size": 10, "special_token_ids": [-1]},
            "special_token_ids",
        ),
        ("seq2seq", {}, "decoder_start_token_id"),
        ("seq2seq", {"decoder_start_token_id": 0, "max_target_length": 0}, "max_target_length"),
        ("seq2seq", {"decoder_start_token_id": 0, "keys": ["decoder_input_ids"]}, "keys"),
    ],
)
def test_bad_options_fail_at_with_collator_with_the_exact_path(name, options, path):
    builder = DataLoaderBuilder().with_dataset([{"input_ids": [1]}])
    with pytest.raises(PlanError) as info:
        builder.with_collator(name, **options)
    assert info.value.paths == (f"collator.options.{path}",), str(info.value)


# -- the shared option checks (loaderkit.collators.base) -----------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "kwargs", "wrong_type", "message"),
    [
        (check_bool_option, 1, {}, True, "must be True or False (got int 1)"),
        (check_int_option, True, {}, True, "must be an int (got bool True)"),
        (check_int_option, -1, {"minimum": 0}, False, "must be >= 0 (got -1)"),
        (check_int_option, None, {}, True, "must be an int (got NoneType None)"),
        (check_number_option, "x", {}, True, "must be a number (got str 'x')"),
        (check_number_option, float("inf"), {}, False, "must be finite (got inf)"),
        (check_number_option, 0, {"minimum": 0, "exclusive_minimum": True}, False, "must be > 0"),
        (check_number_option, 2, {"maximum": 1}, False, "must be <= 1 (got 2)"),
        (
            check_number_option,
            1.0,
            {"minimum": 0, "maximum": 1, "exclusive_maximum": True},
            False,
            "must be in [0, 1) (got 1.0)",
        ),
        (check_choice_option, 3, {"choices": ("a", "b")}, True, "must be one of 'a', 'b' (got 3)"),
        (
            check_choice_option,
            "bb",
            {"choices": ("a", "b"), "allow_none": True, "suggest": True, "fix": "do x"},
            False,
            "must be one of 'a', 'b' or None (got 'bb'); did you mean 'b'?; do x",
        ),
        (check_name_option, "", {}, False, "must be a non-empty string (got str '')"),
        (check_name_option, 3, {}, True, "must be a non-empty string (got int 3)"),
        (check_names_option, "a", {}, True, "must be a non-empty list of key names (got str 'a')"),
        (check_names_option, (), {}, False, "non-empty list of key names (got an empty list)"),
        (check_names_option, ["a", 1], {}, True, "item 1 must be a non-empty string (got int 1)"),
        (check_names_option, ("a", "a"), {}, False, "names 'a' twice; list each key once"),
        (check_int_list_option, (1, 2.0), {}, True, "item 1 must be an int (got float 2.0)"),
        (check_int_list_option, [1, -1], {"minimum": 0}, False, "item 1 must be >= 0 (got -1)"),
        (check_float_list_option, [0.5, None], {}, True, "item 1 must be a number"),
        (check_float_list_option, (), {"nonempty": True}, False, "(got an empty list)"),
        (check_mapping_option, [1], {"what": "of a to b"}, True, "must be a mapping of a to b"),
        (
            check_mapping_option,
            {1: 2},
            {},
            True,
            "every key must be a non-empty string (got int 1)",
        ),
        (
            check_mapping_option,
            FrozenMap({"k": 1.5}),
            {"value_type": int},
            True,
            "the value of 'k' must be an int (got float 1.5)",
        ),
    ],
)
def test_the_shared_option_checks_raise_at_the_option_path(
    check, value, kwargs, wrong_type, message
):
    choices = kwargs.pop("choices", None)
    args = ("opt", value) if choices is None else ("opt", value, choices)
    with pytest.raises(PlanError) as info:
        check(*args, **kwargs)
    assert info.value.paths == ("collator.options.opt",)
    assert isinstance(info.value, PlanTypeError) is wrong_type
    assert isinstance(info.value, TypeError) is wrong_type
    assert message in str(info.value)


def test_the_shared_option_checks_take_frozen_and_raw_options_alike():
    for names in (["a", "b"], ("a", "b")):
        assert check_names_option("keys", names) == ("a", "b")
    for numbers in ([1, 0.5], (1, 0.5)):
        assert check_float_list_option("mean", numbers) == (1.0, 0.5)
    for ints in ([3, 4], (3, 4)):
        assert check_int_list_option("ids", ints, minimum=0) == (3, 4)
    for mapping in ({"b": 1, "a": 2}, FrozenMap({"b": 1, "a": 2})):
        checked = check_mapping_option("pad_values", mapping, value_type=int)
        assert type(checked) is dict
        assert checked == {"a": 2, "b": 1}
    assert check_int_option("n", None, allow_none=True) is None
    assert check_choice_option("c", None, ("x",), allow_none=True) is None
    assert check_number_option("p", 1, minimum=0, maximum=1) == 1.0
    # a plan freezes the options before the constructor sees them
    plan = (
        DataLoaderBuilder()
        .with_dataset([{"input_ids": [1]}])
        .with_collator(
            "masked_lm",
            mask_token_id=3,
            vocab_size=10,
            special_token_ids=[1, 2],
            keys=["input_ids"],
            pad_values={"input_ids": 0},
        )
        .compile()
    )
    assert isinstance(plan.collator.options["pad_values"], FrozenMap)
    assert isinstance(plan.collator.options["keys"], tuple)
    frozen = MaskedLMCollator(**plan.collator.options)
    assert frozen.keys == ("input_ids",)
    assert frozen.special_token_ids == (1, 2)
    assert frozen.pad_values == {"input_ids": 0}
    assert frozen == MaskedLMCollator(
        mask_token_id=3,
        vocab_size=10,
        special_token_ids=[1, 2],
        keys=["input_ids"],
        pad_values={"input_ids": 0},
    )


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda: TextCollator(return_attention_mask=1), "return_attention_mask"),
        (lambda: TextCollator(max_length="8"), "max_length"),
        (lambda: TextCollator(padding_side=None), "padding_side"),
        (lambda: TextCollator(pad_values={"x": 1.5}), "pad_values"),
        (
            lambda: MaskedLMCollator(mask_token_id=3, vocab_size=10, special_token_ids=5),
            "special_token_ids",
        ),
        (lambda: PackedCollator(max_length=8, shift_labels=1), "shift_labels"),
        (lambda: PackedCollator(max_length=8, attention_mask=True), "attention_mask"),
        (lambda: VisionCollator(to_rgb="yes"), "to_rgb"),
        (lambda: VisionCollator(mean="0.5", std=[0.5]), "mean"),
        (lambda: VisionCollator(normalize=3), "normalize"),
        (lambda: MultimodalCollator(collators=[1]), "collators"),
        (lambda: MultimodalCollator(collators={"a": "vision"}), "collators.a"),
        (
            lambda: MultimodalCollator(
                collators={"a": {"name": "vision", "options": {"to_rgb": 1}}}
            ),
            "collators.a.options.to_rgb",
        ),
    ],
)
def test_option_values_of_the_wrong_type_are_plan_type_errors(build, path):
    with pytest.raises(PlanTypeError) as info:
        build()
    assert info.value.paths == (f"collator.options.{path}",)


def test_the_registry_lists_the_text_collators():
    for name in ("text", "causal_lm", "masked_lm", "seq2seq"):
        entry = collators.get(name)
        assert entry.modality == "text"
        assert entry.validate


def test_constructing_and_compiling_does_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        from loaderkit import DataLoaderBuilder
        from loaderkit.collators.text import MaskedLMCollator, Seq2SeqCollator, TextCollator
        TextCollator(max_length=8, pad_to_multiple_of=8)
        MaskedLMCollator(mask_token_id=3, vocab_size=10)
        Seq2SeqCollator(decoder_start_token_id=0)
        DataLoaderBuilder().with_dataset([{"input_ids": [1]}]).with_collator(
            "causal_lm", shift=True).compile()
        assert "torch" not in sys.modules, "torch was imported"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- pickling and plans ----------------------------------------------------------------------

ALL = [
    TextCollator(keys=["input_ids", "token_type_ids"], pad_values={"token_type_ids": 0}),
    CausalLMCollator(shift=True, padding_side="left"),
    MaskedLMCollator(mask_token_id=4, vocab_size=50, special_token_ids=[1]),
    Seq2SeqCollator(decoder_start_token_id=0, max_target_length=3),
]


@pytest.mark.parametrize("collate", ALL, ids=lambda c: type(c).__name__)
def test_collators_pickle_and_make_the_same_batches(collate):
    again = pickle.loads(pickle.dumps(collate))
    assert again == collate
    assert repr(again) == repr(collate)
    samples = [
        {"input_ids": [1, 7, 8, 9], "token_type_ids": [0, 0, 1, 1]},
        {"input_ids": [1, 5], "token_type_ids": [0, 1]},
    ]
    if isinstance(collate, Seq2SeqCollator):
        samples = [{**s, "labels": [3, 4, 5, 6]} for s in samples]
    kwargs = {"context": context(2)} if collate.uses_context else {}
    assert batches_differ(collate(samples, **kwargs), again(samples, **kwargs)) is None


def test_a_spawn_worker_loader_with_the_text_collator():
    data = [{"input_ids": list(range(1, 2 + i % 7)), "label": i % 3} for i in range(40)]
    builder = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(8)
        .with_shuffle()
        .with_collator("text", pad_to_multiple_of=4)
    )
    with builder.compile().build() as loader:
        expected = collect(loader)
    plan = builder.with_workers(2, start_method="spawn", persistent=False).compile()
    with plan.build() as loader:
        assert_batches_equal(expected, collect(loader), label="spawn vs main process")
    assert expected[0]["input_ids"].shape[1] % 4 == 0


def test_a_plan_with_a_text_collator_round_trips():
    data = [{"input_ids": [1, 2]}, {"input_ids": [3]}]
    plan = DataLoaderBuilder().with_dataset(data).with_collator("text", pad_token_id=0).compile()
    again = LoaderPlan.from_dict(plan.to_dict(), bindings=plan.bindings)
    assert again == plan
    assert again.fingerprint == plan.fingerprint
    rich = (
        DataLoaderBuilder()
        .with_dataset(data)
        .with_batch_size(2)
        .with_collator(
            "masked_lm",
            mask_token_id=4,
            vocab_size=50,
            special_token_ids=[1, 2],
            keys=["input_ids"],
            pad_values={"input_ids": 0},
        )
        .compile()
    )
    again = LoaderPlan.from_dict(rich.to_dict(), bindings=rich.bindings)
    assert again == rich
    with rich.build() as a, again.build() as b:
        assert_batches_equal(collect(a), collect(b))


@settings(max_examples=20)
@given(st.integers(0, 2**32))
def test_text_collate_is_a_pure_function(seed):
    rng = np.random.default_rng(seed)
    samples = [{"input_ids": rng.integers(0, 99, rng.integers(0, 9)).tolist()} for _ in range(3)]
    before = [dict(s) for s in samples]
    assert batches_differ(TextCollator()(samples), TextCollator()(samples)) is None
    assert samples == before
