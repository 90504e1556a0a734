"""Benchmark of length bucketing (``loaderkit.order.bucketing``): padding, budgets, speed, memory.

1. Padding. 20,000 sequences with lengths uniform in [16, 512] (``numpy.random.default_rng(0)``),
   batches of 64, in shuffled batch order; the figure is the fraction of padding tokens
   (``1 - real / padded``, each batch padded to its longest sequence), the mean over epochs
   (seeds for the baselines):

   * random batching (the epoch's plain shuffle cut into batches of 64): the baseline, ~48 %;
   * HF ``transformers``' ``LengthGroupedSampler`` (random mega-batches of 50 batches, sorted
     by length inside), when transformers is importable: ~2 %;
   * fully sorted by length (no randomness at all; the floor): ~0.3 %;
   * loaderkit, ``bucket_ids(lengths, N // (4 * 64))`` then ``bucketed_batches(batch_size=64)``
     - target <= 1.5 %.

2. Token budget: the same data with ``max_tokens=16384`` (linear cost, no cap on the batch
   size): budget utilization, ``real tokens / (batches * 16384)`` - target >= 97 %.

3. Speed and memory: the index generation of a bucketed epoch of 10,000,000 samples (lengths
   uniform in [16, 512], ``N // 256`` buckets), with batches of 64 and with ``max_tokens=16384``:
   samples per second (median over epochs; the stable sort, the cut, the batch shuffle and the
   final indices included) - target >= 1M samples/s; and the peak extra memory traced by
   ``tracemalloc`` (which tracks numpy's allocations) while it runs, its result included -
   target <= 64 MiB. The one-time ``bucket_ids`` of the 10M lengths is reported apart.

4. (Information, no target.) Real tokens per second through loaderkit's ``text`` collator
   alone (samples hold numpy ``input_ids``), for random batches of 64, bucketed batches of 64
   and bucketed batches under ``max_tokens=16384``: the collator's share of what bucketing
   saves. The end-to-end figure (loader + collator + model step) is measured with the loader.

Run it as ``python benchmarks/bench_bucketing.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints the tables and returns the figures (``met:<target>`` keys are 1.0
when that target was met, 0.0 when not). ``quick=True`` runs fewer epochs and repeats, never
smaller sizes.
"""

from __future__ import annotations

import gc
import importlib
import statistics
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    from loaderkit.order import EpochOrder
    from loaderkit.order.batches import EpochBatches
    from loaderkit.order.bucketing import bucket_ids, bucketed_batches, padding_stats
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import EpochOrder
    from loaderkit.order.batches import EpochBatches
    from loaderkit.order.bucketing import bucket_ids, bucketed_batches, padding_stats

N, MIN_LEN, MAX_LEN, BATCH = 20_000, 16, 512, 64
NUM_BUCKETS = N // (4 * BATCH)
MAX_TOKENS = 16_384
BIG_N = 10_000_000
BIG_BUCKETS = BIG_N // 256
SEED = 1234
MIB = 2.0**20

TARGET_WASTE = 0.015
TARGET_UTILIZATION = 0.97
TARGET_RATE = 1e6
TARGET_PEAK_MIB = 64.0

TARGET_WASTE_NAME = f"bucketed padding at B={BATCH} <= {TARGET_WASTE:.1%}"
TARGET_UTIL_NAME = f"budget utilization at max_tokens={MAX_TOKENS} >= {TARGET_UTILIZATION:.0%}"


def lengths_of(n: int, seed: int = 0) -> np.ndarray:
    """The workload: ``n`` lengths uniform in ``[MIN_LEN, MAX_LEN]``."""
    return np.random.default_rng(seed).integers(MIN_LEN, MAX_LEN + 1, n)


def fixed_batches(order: np.ndarray, size: int) -> EpochBatches:
    """``order`` cut into consecutive batches of ``size`` (the last one may be smaller)."""
    n = int(order.size)
    offsets = np.append(np.arange(0, n, size, dtype=np.int64), np.int64(n))
    return EpochBatches(order.astype(np.int64), offsets)


def random_batches(n: int, epoch: int) -> EpochBatches:
    """The baseline: the epoch's plain shuffle cut into batches of ``BATCH``."""
    return fixed_batches(EpochOrder(n, SEED, epoch, True).indices(0, n), BATCH)


def hf_batches(lengths: np.ndarray, epoch: int) -> EpochBatches | None:
    """HF ``LengthGroupedSampler`` cut into batches of ``BATCH``; None without transformers."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch = importlib.import_module("torch")
            utils = importlib.import_module("transformers.trainer_pt_utils")
    except Exception:  # noqa: BLE001 - any import failure means "unavailable"
        return None
    generator = torch.Generator().manual_seed(epoch)
    sampler = utils.LengthGroupedSampler(BATCH, lengths=lengths.tolist(), generator=generator)
    return fixed_batches(np.fromiter(iter(sampler), dtype=np.int64, count=lengths.size), BATCH)


def sorted_batches(lengths: np.ndarray) -> EpochBatches:
    """The floor: every sample sorted by length, cut into batches of ``BATCH``."""
    return fixed_batches(np.argsort(lengths, kind="stable"), BATCH)


def _padding(epochs: int) -> dict[str, float]:
    """Workloads 1 and 2: padding fractions and budget utilization (means over epochs)."""
    lengths = lengths_of(N)
    ids = bucket_ids(lengths, NUM_BUCKETS)
    waste: dict[str, list[float]] = {"random": [], "hf": [], "bucketed": []}
    budget: dict[str, list[float]] = {}
    for epoch in range(epochs):
        waste["random"].append(padding_stats(lengths, random_batches(N, epoch))["waste"])
        hf = hf_batches(lengths, epoch)
        if hf is not None:
            waste["hf"].append(padding_stats(lengths, hf)["waste"])
        ours = bucketed_batches(lengths, bucket_ids=ids, seed=SEED, epoch=epoch, batch_size=BATCH)
        waste["bucketed"].append(padding_stats(lengths, ours)["waste"])
        tokens = bucketed_batches(
            lengths, bucket_ids=ids, seed=SEED, epoch=epoch, batch_size=None, max_tokens=MAX_TOKENS
        )
        for key, value in padding_stats(lengths, tokens, max_tokens=MAX_TOKENS).items():
            budget.setdefault(key, []).append(value)
    figures = {f"waste_{k}": statistics.fmean(v) if v else float("nan") for k, v in waste.items()}
    figures["waste_sorted"] = padding_stats(lengths, sorted_batches(lengths))["waste"]
    figures["waste_bucketed_max"] = max(waste["bucketed"])
    for key in ("utilization", "fill", "waste", "num_batches", "batch_size_min"):
        figures[f"budget_{key}"] = statistics.fmean(budget[key])
    figures["budget_utilization_min"] = min(budget["utilization"])
    figures["budget_batch_size_max"] = max(budget["batch_size_max"])
    figures["budget_max_batch_cost"] = max(budget["max_batch_cost"])
    return figures


def _peak_mib(fn: Callable[[], object]) -> float:
    """Peak extra memory (MiB) traced by tracemalloc while ``fn()`` runs, its result included."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return (peak - base) / MIB


def _speed(repeats: int) -> dict[str, float]:
    """Workload 3: the 10M-sample epoch, seconds and peak memory, both batchings."""
    lengths = lengths_of(BIG_N, seed=1)
    start = time.perf_counter()
    ids = bucket_ids(lengths, BIG_BUCKETS)
    figures = {"bucket_ids_10m_s": time.perf_counter() - start}
    figures["bucket_ids_10m_peak_mib"] = _peak_mib(lambda: bucket_ids(lengths, BIG_BUCKETS))
    modes: dict[str, dict[str, Any]] = {
        "fixed": {"batch_size": BATCH},
        "budget": {"batch_size": None, "max_tokens": MAX_TOKENS},
    }
    for name, kwargs in modes.items():

        def epoch(e: int, kwargs: dict[str, Any] = kwargs) -> EpochBatches:
            return bucketed_batches(lengths, bucket_ids=ids, seed=SEED, epoch=e, **kwargs)

        times = []
        for e in range(repeats):
            gc.collect()
            start = time.perf_counter()
            result = epoch(e)
            times.append(time.perf_counter() - start)
            del result
        seconds = statistics.median(times)
        figures[f"epoch_10m_{name}_s"] = seconds
        figures[f"epoch_10m_{name}_samples_per_s"] = BIG_N / seconds
        figures[f"epoch_10m_{name}_peak_mib"] = _peak_mib(lambda: epoch(repeats))
    return figures


def _collate(repeats: int) -> dict[str, float]:
    """Workload 4 (information): real tokens per second through the text collator alone."""
    try:
        from loaderkit.collators.text import TextCollator
    except ImportError:  # torch missing
        return {}
    lengths = lengths_of(N)
    rng = np.random.default_rng(7)
    samples = [{"input_ids": rng.integers(0, 30_000, int(n))} for n in lengths]
    ids = bucket_ids(lengths, NUM_BUCKETS)
    layouts = {
        "random_b64": random_batches(N, 0),
        "bucketed_b64": bucketed_batches(
            lengths, bucket_ids=ids, seed=SEED, epoch=0, batch_size=BATCH
        ),
        "bucketed_budget": bucketed_batches(
            lengths, bucket_ids=ids, seed=SEED, epoch=0, batch_size=None, max_tokens=MAX_TOKENS
        ),
    }
    batches = {
        name: [[samples[i] for i in layout.batch(b)] for b in range(len(layout))]
        for name, layout in layouts.items()
    }
    collate = TextCollator()
    real = float(lengths.sum())
    times: dict[str, list[float]] = {name: [] for name in batches}
    for work in batches.values():  # warm-up
        for batch in work[:16]:
            collate(batch)
    for _ in range(repeats):
        for name, work in batches.items():
            gc.collect()
            start = time.perf_counter()
            for batch in work:
                collate(batch)
            times[name].append(time.perf_counter() - start)
    figures = {f"collate_{k}_tokens_per_s": real / statistics.median(v) for k, v in times.items()}
    base = figures["collate_random_b64_tokens_per_s"]
    figures["collate_budget_vs_random_b64"] = figures["collate_bucketed_budget_tokens_per_s"] / base
    return figures


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print the tables (when ``verbose``) and return the figures.

    Keys: ``waste_random``, ``waste_hf`` (NaN without transformers), ``waste_sorted``,
    ``waste_bucketed`` (+ ``_max`` over epochs); ``budget_utilization`` (+ ``_min``),
    ``budget_fill``, ``budget_waste``, ``budget_num_batches``, ``budget_batch_size_min`` /
    ``_max``, ``budget_max_batch_cost``; ``bucket_ids_10m_s``, ``bucket_ids_10m_peak_mib``,
    ``epoch_10m_{fixed,budget}_{s,samples_per_s,peak_mib}``; ``collate_*`` (information);
    and one ``met:<target>`` key per target.
    """
    epochs = 2 if quick else 5
    repeats = 2 if quick else 5
    figures = _padding(epochs)
    figures |= _speed(repeats)
    figures |= _collate(3 if quick else 7)

    figures[f"met:{TARGET_WASTE_NAME}"] = float(figures["waste_bucketed"] <= TARGET_WASTE)
    figures[f"met:{TARGET_UTIL_NAME}"] = float(figures["budget_utilization"] >= TARGET_UTILIZATION)
    for name in ("fixed", "budget"):
        rate = figures[f"epoch_10m_{name}_samples_per_s"]
        peak = figures[f"epoch_10m_{name}_peak_mib"]
        figures[f"met:{_rate_name(name)}"] = float(rate >= TARGET_RATE)
        figures[f"met:{_peak_name(name)}"] = float(peak <= TARGET_PEAK_MIB)
    if verbose:
        _print_tables(figures, epochs, repeats)
    return figures


def _mode(name: str) -> str:
    return f"B={BATCH}" if name == "fixed" else f"max_tokens={MAX_TOKENS}"


def _rate_name(name: str) -> str:
    return f"10M-sample bucketed epoch ({_mode(name)}) >= 1M samples/s"


def _peak_name(name: str) -> str:
    return f"its peak extra memory ({_mode(name)}) <= {TARGET_PEAK_MIB:g} MiB"


def _ok(figures: dict[str, float], target: str) -> str:
    return "OK" if figures[f"met:{target}"] else "MISSED"


def _print_rows(title: str, rows: list[tuple[str, str, str]]) -> None:
    print(title)
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>16}  {note}".rstrip())


def _print_tables(figures: dict[str, float], epochs: int, repeats: int) -> None:
    hf = figures["waste_hf"]
    _print_rows(
        f"1. padding tokens, {N:_} lengths uniform in [{MIN_LEN}, {MAX_LEN}], B={BATCH}; "
        f"mean of {epochs} epochs",
        [
            ("random batching (baseline)", f"{figures['waste_random']:.2%}", ""),
            (
                "HF LengthGroupedSampler",
                "unavailable" if hf != hf else f"{hf:.2%}",
                "" if hf == hf else "(pip install transformers)",
            ),
            ("fully sorted (no randomness)", f"{figures['waste_sorted']:.2%}", "the floor"),
            (
                f"loaderkit bucketing, {NUM_BUCKETS} buckets",
                f"{figures['waste_bucketed']:.2%}",
                f"worst epoch {figures['waste_bucketed_max']:.2%}; target <= {TARGET_WASTE:.1%} "
                f"{_ok(figures, TARGET_WASTE_NAME)}",
            ),
        ],
    )
    _print_rows(
        f"2. token budget max_tokens={MAX_TOKENS} (linear, no cap), same data; mean of {epochs}",
        [
            (
                "utilization (real / budget)",
                f"{figures['budget_utilization']:.2%}",
                f"worst epoch {figures['budget_utilization_min']:.2%}; target >= "
                f"{TARGET_UTILIZATION:.0%} {_ok(figures, TARGET_UTIL_NAME)}",
            ),
            ("fill (padded / budget)", f"{figures['budget_fill']:.2%}", ""),
            ("padding tokens", f"{figures['budget_waste']:.2%}", ""),
            (
                "batches per epoch",
                f"{figures['budget_num_batches']:.1f}",
                f"sizes {figures['budget_batch_size_min']:.0f}.."
                f"{figures['budget_batch_size_max']:.0f}; max cost "
                f"{figures['budget_max_batch_cost']:.0f}",
            ),
        ],
    )
    rows = [
        (
            "bucket_ids (once per loader)",
            f"{figures['bucket_ids_10m_s'] * 1e3:.0f} ms",
            f"peak {figures['bucket_ids_10m_peak_mib']:.1f} MiB",
        )
    ]
    for name in ("fixed", "budget"):
        rows.append(
            (
                f"epoch, {_mode(name)}",
                f"{figures[f'epoch_10m_{name}_samples_per_s'] / 1e6:.2f} M/s",
                f"{figures[f'epoch_10m_{name}_s'] * 1e3:.0f} ms; target >= 1 M/s "
                f"{_ok(figures, _rate_name(name))}",
            )
        )
        rows.append(
            (
                "  its peak extra memory",
                f"{figures[f'epoch_10m_{name}_peak_mib']:.1f} MiB",
                f"target <= {TARGET_PEAK_MIB:g} MiB {_ok(figures, _peak_name(name))}",
            )
        )
    _print_rows(f"3. a {BIG_N:_}-sample epoch, {BIG_BUCKETS:_} buckets; medians of {repeats}", rows)
    if "collate_random_b64_tokens_per_s" in figures:
        _print_rows(
            "4. real tokens/s through the text collator alone (information, no target)",
            [
                (
                    "random batches of 64",
                    f"{figures['collate_random_b64_tokens_per_s'] / 1e6:.1f} M/s",
                    "",
                ),
                (
                    "bucketed batches of 64",
                    f"{figures['collate_bucketed_b64_tokens_per_s'] / 1e6:.1f} M/s",
                    "",
                ),
                (
                    f"bucketed, max_tokens={MAX_TOKENS}",
                    f"{figures['collate_bucketed_budget_tokens_per_s'] / 1e6:.1f} M/s",
                    f"{figures['collate_budget_vs_random_b64']:.2f}x random batches of 64",
                ),
            ],
        )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
