"""Benchmark of the ``text`` collator against hand-written torch padding and HF transformers.

Workload: 20,000 token sequences given as Python lists of ints (ids uniform in [0, 30000),
lengths uniform in [16, 512]), each sample ``{"input_ids": [...], "labels": [...]}`` (labels a
copy of the ids), cut into batches of 64 in order (313 batches). The figure is the time to
collate all the batches into ``input_ids`` (padded with 0), ``attention_mask`` and ``labels``
(padded with -100):

* loaderkit's ``text`` collator (``TextCollator()``);
* a hand-written collate: ``torch.tensor`` per row, ``torch.nn.utils.rnn.pad_sequence`` for
  ids and labels, the mask from the lengths - target: ``text`` >= 1.0x as fast;
* HF transformers, target >= 30x, measured two ways. ``DataCollatorWithPadding`` does not pad
  ``labels`` (ragged labels make it raise), so it is timed on ``input_ids`` alone against
  ``text`` on the same samples; the like-for-like baseline for ids + mask + labels is
  ``DataCollatorForTokenClassification`` (``DataCollatorWithPadding``'s padding plus labels
  padded with -100). Both use a tiny in-memory WordLevel tokenizer (nothing is downloaded);
  without transformers those rows print "unavailable".

Every figure is the median over passes (3; 1 with ``quick=True``, never a smaller workload) of
the time to collate all batches, after one warm-up batch. Within a pass the collators take
turns every 16 batches, so load from elsewhere on the machine hits all of them alike while each
still collates consecutive batches as a loader would. The outputs of the first batch are
checked to be identical between loaderkit and every baseline.

Run it as ``python benchmarks/bench_collate_text.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints a table and returns the figures (``met:<target>`` keys are 1.0 when
that target was met, 0.0 when not).
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    from loaderkit.collators.text import TextCollator
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.collators.text import TextCollator

N, MIN_LEN, MAX_LEN, VOCAB, BATCH = 20_000, 16, 512, 30_000, 64
BLOCK = 16  # batches a collator runs before the next one takes its turn
TARGET_VS_PAD_SEQUENCE = 1.0
TARGET_VS_HF = 30.0

Samples = list[dict[str, list[int]]]
Collate = Callable[[Samples], dict[str, torch.Tensor]]


def make_batches(seed: int = 0) -> list[Samples]:
    """The workload: batches of ``{"input_ids": [...], "labels": [...]}`` (Python lists)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(MIN_LEN, MAX_LEN + 1, N)
    samples = []
    for length in lengths.tolist():
        ids = rng.integers(0, VOCAB, length).tolist()
        samples.append({"input_ids": ids, "labels": list(ids)})
    return [samples[i : i + BATCH] for i in range(0, N, BATCH)]


def pad_sequence_collate(samples: Samples) -> dict[str, torch.Tensor]:
    """The hand-written baseline: per-row tensors, ``pad_sequence``, a mask from the lengths."""
    ids = [torch.tensor(s["input_ids"]) for s in samples]
    labels = [torch.tensor(s["labels"]) for s in samples]
    lengths = torch.tensor([len(t) for t in ids])
    input_ids = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=0)
    padded_labels = torch.nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=-100)
    mask = (torch.arange(input_ids.shape[1]) < lengths[:, None]).long()
    return {"input_ids": input_ids, "attention_mask": mask, "labels": padded_labels}


def hf_collators() -> tuple[Collate, Collate] | None:
    """(``DataCollatorForTokenClassification``, ``DataCollatorWithPadding``), or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # imported by name: optional, and typed the same whether installed or not
            tokenizers = importlib.import_module("tokenizers")
            transformers = importlib.import_module("transformers")
    except Exception:  # noqa: BLE001 - any import failure means "unavailable"
        return None
    model = tokenizers.models.WordLevel({"[PAD]": 0, "[UNK]": 1}, unk_token="[UNK]")
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(model), pad_token="[PAD]"
    )
    token_classification = transformers.DataCollatorForTokenClassification(
        tokenizer, return_tensors="pt"
    )
    with_padding = transformers.DataCollatorWithPadding(tokenizer, return_tensors="pt")
    return token_classification, with_padding


def _check_same(name: str, ours: dict[str, torch.Tensor], theirs: dict[str, Any]) -> None:
    for key, value in ours.items():
        other = theirs[key]
        if value.dtype != other.dtype or not torch.equal(value, other):
            raise AssertionError(f"{name}: {key!r} differs from the text collator's")


def _median_passes(
    runners: dict[str, tuple[Collate, Sequence[Samples]]], repeats: int
) -> dict[str, float]:
    """Median seconds per pass of each runner.

    The runners take turns every ``BLOCK`` batches (batches ``[i, i + BLOCK)`` by every runner,
    then the next block), so that load from elsewhere on the machine hits all of them alike,
    while each still collates consecutive batches as a loader does (interleaving every single
    batch would let one collator's memory churn evict the next one's samples from the cache).
    """
    times: dict[str, list[float]] = {name: [] for name in runners}
    n_batches = len(next(iter(runners.values()))[1])
    clock = time.perf_counter
    for _ in range(repeats):
        totals = dict.fromkeys(runners, 0.0)
        for first in range(0, n_batches, BLOCK):
            for name, (collate, batches) in runners.items():
                block = batches[first : first + BLOCK]
                start = clock()
                for batch in block:
                    collate(batch)
                totals[name] += clock() - start
        for name, total in totals.items():
            times[name].append(total)
    return {name: statistics.median(values) for name, values in times.items()}


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print a table (when ``verbose``) and return the figures (seconds)."""
    batches = make_batches()
    ids_only = [[{"input_ids": s["input_ids"]} for s in batch] for batch in batches]
    text = TextCollator()
    hf = hf_collators()
    first = batches[0]
    ours = text(first)
    _check_same("pad_sequence", ours, pad_sequence_collate(first))
    runners: dict[str, tuple[Collate, Sequence[Samples]]] = {
        "text": (text, batches),
        "pad_sequence": (pad_sequence_collate, batches),
    }
    repeats = 1 if quick else 3
    if hf is not None:
        token_classification, with_padding = hf
        _check_same("DataCollatorForTokenClassification", ours, token_classification(first))
        ours_ids = text(ids_only[0])
        _check_same("DataCollatorWithPadding", ours_ids, with_padding(ids_only[0]))
        runners["hf_token_classification"] = (token_classification, batches)
        runners["text_ids_only"] = (text, ids_only)
        runners["hf_with_padding_ids_only"] = (with_padding, ids_only)
    seconds = _median_passes(runners, repeats)
    figures = {f"{name}_s": value for name, value in seconds.items()}
    figures["speedup_vs_pad_sequence"] = seconds["pad_sequence"] / seconds["text"]
    figures[f"met:text >= {TARGET_VS_PAD_SEQUENCE:g}x pad_sequence collate"] = float(
        figures["speedup_vs_pad_sequence"] >= TARGET_VS_PAD_SEQUENCE
    )
    if hf is not None:  # without transformers these targets are not measured, not missed
        figures["speedup_vs_hf"] = seconds["hf_token_classification"] / seconds["text"]
        figures["speedup_vs_hf_with_padding_ids_only"] = (
            seconds["hf_with_padding_ids_only"] / seconds["text_ids_only"]
        )
        figures[f"met:text >= {TARGET_VS_HF:g}x HF DataCollatorForTokenClassification"] = float(
            figures["speedup_vs_hf"] >= TARGET_VS_HF
        )
        figures[f"met:text >= {TARGET_VS_HF:g}x HF DataCollatorWithPadding (input_ids)"] = float(
            figures["speedup_vs_hf_with_padding_ids_only"] >= TARGET_VS_HF
        )
    if verbose:
        _print_table(figures, len(batches), repeats, hf is not None)
    return figures


def _print_table(figures: dict[str, float], n_batches: int, repeats: int, have_hf: bool) -> None:
    def ms_per_batch(name: str) -> str:
        seconds = figures[f"{name}_s"]
        return f"{seconds * 1e3:9.1f} ms  {seconds / n_batches * 1e3:7.3f} ms/batch"

    def verdict(ratio: float, target: float) -> str:
        return f"{ratio:6.1f}x  (target >= {target:g}x {'OK' if ratio >= target else 'MISSED'})"

    print(
        f"text collate: {N:_} sequences (Python int lists, lengths {MIN_LEN}..{MAX_LEN}), batch "
        f"{BATCH} ({n_batches} batches) -> input_ids, attention_mask, labels; median of "
        f"{repeats} passes, collators taking turns every {BLOCK} batches"
    )
    rows = [
        ("loaderkit text", ms_per_batch("text"), ""),
        (
            "torch pad_sequence (hand-written)",
            ms_per_batch("pad_sequence"),
            verdict(figures["speedup_vs_pad_sequence"], TARGET_VS_PAD_SEQUENCE),
        ),
    ]
    if have_hf:
        rows += [
            (
                "HF DataCollatorForTokenClassification",
                ms_per_batch("hf_token_classification"),
                verdict(figures["speedup_vs_hf"], TARGET_VS_HF),
            ),
            ("loaderkit text, input_ids only", ms_per_batch("text_ids_only"), ""),
            (
                "HF DataCollatorWithPadding, input_ids only",
                ms_per_batch("hf_with_padding_ids_only"),
                verdict(figures["speedup_vs_hf_with_padding_ids_only"], TARGET_VS_HF),
            ),
        ]
    else:
        rows.append(("HF transformers collators", "unavailable", "(pip install transformers)"))
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value}  {note}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
