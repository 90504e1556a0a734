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
   saves. It is small: the collator's cost grows with real tokens, not with padding.

5. End to end: real (non-pad) tokens per second through loader + ``text`` collator + a tiny
   model step, on the same 20,000 samples (numpy ``input_ids``, vocabulary 30,000) - target
   >= 1.5x the baseline. The model: ``Embedding(30000, 64)`` and one
   ``TransformerEncoderLayer(d_model=64, nhead=2, dim_feedforward=128, batch_first=True)`` in
   eval mode, forward only under ``torch.inference_mode()`` with ``src_key_padding_mask`` from
   the attention mask, on the CPU with ``torch.set_num_threads(1)`` (restored afterwards); it
   runs on the whole padded ``(B, L)`` batch, so padding costs time (attention quadratically
   in ``L``). Real tokens are ``attention_mask.sum()``.

   * baseline: ``torch.utils.data.DataLoader(samples, batch_size=64, shuffle=True,
     collate_fn=TextCollator())`` (loaderkit's ``text`` collator: the collation is the same,
     the batching and the loader differ), its generator seeded per round;
   * loaderkit: ``DataLoaderBuilder().with_dataset(samples).with_shuffle().with_seed(1234)
     .with_bucketing("input_ids", max_tokens=16384).with_collator("text")``, built once
     (lengths measured at ``build()``, untimed), ``set_epoch(round)``; main process.

   A whole epoch would take minutes on a small CPU, so each round runs each loader from
   ``iter()`` until the batch that brings its real tokens to ``300,000`` (about 6 % of the
   epoch's 5.3M), timing ``iter()`` and, per batch, ``next()`` (fetch + collate) plus the
   model step. The two loaders are interleaved batch by batch (the one with less time so far
   takes the next batch), so a busy neighbour slows both alike. Round ``r`` uses epoch ``r``
   for both loaders; one untimed warm-up batch each; the figure is the median over rounds.
   The loaderkit prefix is a random draw of ~19 of the epoch's 330 batches, whose lengths
   vary, so single rounds spread more than the median (the smallest and largest per-round
   ratios are returned too).

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
    from loaderkit.order.bucketing import bucket_ids, bucketed_batches
    from loaderkit.order.token_budget import padding_stats
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit.order import EpochOrder
    from loaderkit.order.batches import EpochBatches
    from loaderkit.order.bucketing import bucket_ids, bucketed_batches
    from loaderkit.order.token_budget import padding_stats

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

# workload 5: the tiny model step and how much of each epoch a round runs
VOCAB = 30_000
D_MODEL, NHEAD, DIM_FF = 64, 2, 128
E2E_THREADS = 1
E2E_TOKENS = 300_000
TARGET_E2E = 1.5
TARGET_E2E_NAME = (
    f"end-to-end real tokens/s (loader + text collator + model), max_tokens={MAX_TOKENS} vs "
    f"random batches of {BATCH} >= {TARGET_E2E:g}x"
)


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


def text_samples(lengths: np.ndarray) -> list[dict[str, np.ndarray]]:
    """One sample ``{"input_ids": <int64 array of its length>}`` per length (fixed seed)."""
    rng = np.random.default_rng(7)
    return [{"input_ids": rng.integers(0, VOCAB, int(n))} for n in lengths]


def _collate(repeats: int) -> dict[str, float]:
    """Workload 4 (information): real tokens per second through the text collator alone."""
    try:
        from loaderkit.collators.text import TextCollator
    except ImportError:  # torch missing
        return {}
    lengths = lengths_of(N)
    samples = text_samples(lengths)
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


def _model_step(torch: Any) -> Callable[[dict[str, Any]], tuple[int, int]]:
    """Workload 5's model: embedding + one encoder layer over the padded batch.

    The step returns (real tokens, padded tokens) of the batch.
    """
    torch.manual_seed(0)
    embed = torch.nn.Embedding(VOCAB, D_MODEL)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=D_MODEL, nhead=NHEAD, dim_feedforward=DIM_FF, batch_first=True
    ).eval()

    def step(batch: dict[str, Any]) -> tuple[int, int]:
        mask = batch["attention_mask"]
        layer(embed(batch["input_ids"]), src_key_padding_mask=mask == 0)
        return int(mask.sum()), int(mask.numel())

    return step


def _interleaved(
    loaders: dict[str, Any], step: Callable[[dict[str, Any]], tuple[int, int]], budget: int
) -> dict[str, tuple[float, int, int, int]]:
    """Run ``loaders`` batch by batch through ``step`` until each has ``budget`` real tokens.

    The loader with the least time so far takes the next batch, so both run through the same
    stretch of wall-clock time. Each loader's time is ``iter()`` plus, per batch, ``next()``
    (fetch and collate) and the model step. Returns per loader: seconds, real tokens, padded
    tokens, batches.
    """
    totals = {name: [0.0, 0, 0, 0] for name in loaders}
    iterators = {}
    for name, loader in loaders.items():
        start = time.perf_counter()
        iterators[name] = iter(loader)
        totals[name][0] += time.perf_counter() - start
    active = list(loaders)
    while active:
        name = min(active, key=lambda key: totals[key][0])
        done = totals[name]
        start = time.perf_counter()
        batch = next(iterators[name], None)
        if batch is None:  # the epoch ended before the budget
            active.remove(name)
            continue
        real, padded = step(batch)
        done[0] += time.perf_counter() - start
        done[1], done[2], done[3] = done[1] + real, done[2] + padded, done[3] + 1
        if done[1] >= budget:
            active.remove(name)
    return {name: (float(t[0]), int(t[1]), int(t[2]), int(t[3])) for name, t in totals.items()}


def _end_to_end(rounds: int) -> dict[str, float]:
    """Workload 5: real tokens/s through loader + text collator + model, budget vs B=64."""
    try:
        torch = importlib.import_module("torch")
        from loaderkit import DataLoaderBuilder
        from loaderkit.collators.text import TextCollator
    except ImportError:  # torch missing
        return {}
    samples = text_samples(lengths_of(N))
    ours = (
        DataLoaderBuilder()
        .with_dataset(samples)
        .with_shuffle()
        .with_seed(SEED)
        .with_bucketing("input_ids", max_tokens=MAX_TOKENS)
        .with_collator("text")
        .compile()
        .build()
    )

    def baseline(epoch: int) -> Any:
        return torch.utils.data.DataLoader(
            samples,
            batch_size=BATCH,
            shuffle=True,
            collate_fn=TextCollator(),
            generator=torch.Generator().manual_seed(SEED + epoch),
        )

    threads = torch.get_num_threads()
    torch.set_num_threads(E2E_THREADS)
    runs: dict[str, list[tuple[float, int, int, int]]] = {"random_b64": [], "budget": []}
    try:
        step = _model_step(torch)
        with torch.inference_mode():
            ours.set_epoch(rounds)  # warm-up: one batch each, an epoch no round times
            _interleaved({"random_b64": baseline(rounds), "budget": ours}, step, 1)
            for epoch in range(rounds):
                ours.set_epoch(epoch)
                gc.collect()
                done = _interleaved(
                    {"random_b64": baseline(epoch), "budget": ours}, step, E2E_TOKENS
                )
                for name, run in done.items():
                    runs[name].append(run)
    finally:
        torch.set_num_threads(threads)
    figures: dict[str, float] = {}
    for name, measured in runs.items():
        figures[f"e2e_{name}_tokens_per_s"] = statistics.median(r / s for s, r, _, _ in measured)
        figures[f"e2e_{name}_padding"] = 1.0 - sum(d[1] for d in measured) / sum(
            d[2] for d in measured
        )
        figures[f"e2e_{name}_batches"] = statistics.fmean(d[3] for d in measured)
        figures[f"e2e_{name}_real_tokens"] = statistics.fmean(d[1] for d in measured)
    base = figures["e2e_random_b64_tokens_per_s"]
    figures["e2e_budget_vs_random_b64"] = figures["e2e_budget_tokens_per_s"] / base
    ratios = [
        (b[1] / b[0]) / (r[1] / r[0])
        for r, b in zip(runs["random_b64"], runs["budget"], strict=True)
    ]
    figures["e2e_round_ratio_min"] = min(ratios)
    figures["e2e_round_ratio_max"] = max(ratios)
    figures["e2e_rounds"] = float(rounds)
    return figures


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run the benchmark, print the tables (when ``verbose``) and return the figures.

    Keys: ``waste_random``, ``waste_hf`` (NaN without transformers), ``waste_sorted``,
    ``waste_bucketed`` (+ ``_max`` over epochs); ``budget_utilization`` (+ ``_min``),
    ``budget_fill``, ``budget_waste``, ``budget_num_batches``, ``budget_batch_size_min`` /
    ``_max``, ``budget_max_batch_cost``; ``bucket_ids_10m_s``, ``bucket_ids_10m_peak_mib``,
    ``epoch_10m_{fixed,budget}_{s,samples_per_s,peak_mib}``; ``collate_*`` (information);
    ``e2e_{random_b64,budget}_{tokens_per_s,padding,batches,real_tokens}``,
    ``e2e_budget_vs_random_b64``, ``e2e_round_ratio_{min,max}``, ``e2e_rounds`` (absent
    without torch); and one ``met:<target>`` key per target.
    """
    epochs = 2 if quick else 5
    repeats = 2 if quick else 5
    figures = _padding(epochs)
    figures |= _speed(repeats)
    figures |= _collate(3 if quick else 7)
    figures |= _end_to_end(2 if quick else 5)

    figures[f"met:{TARGET_WASTE_NAME}"] = float(figures["waste_bucketed"] <= TARGET_WASTE)
    figures[f"met:{TARGET_UTIL_NAME}"] = float(figures["budget_utilization"] >= TARGET_UTILIZATION)
    for name in ("fixed", "budget"):
        rate = figures[f"epoch_10m_{name}_samples_per_s"]
        peak = figures[f"epoch_10m_{name}_peak_mib"]
        figures[f"met:{_rate_name(name)}"] = float(rate >= TARGET_RATE)
        figures[f"met:{_peak_name(name)}"] = float(peak <= TARGET_PEAK_MIB)
    if "e2e_budget_vs_random_b64" in figures:
        figures[f"met:{TARGET_E2E_NAME}"] = float(figures["e2e_budget_vs_random_b64"] >= TARGET_E2E)
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

    if "e2e_budget_vs_random_b64" in figures:
        _print_rows(
            f"5. end to end: real tokens/s through loader + text collator + model "
            f"(Embedding + 1 TransformerEncoderLayer d={D_MODEL}, {E2E_THREADS} thread); "
            f"{E2E_TOKENS:_} real tokens per loader per round, median of "
            f"{figures['e2e_rounds']:.0f}",
            [
                (
                    f"torch DataLoader, random batches of {BATCH}",
                    f"{figures['e2e_random_b64_tokens_per_s'] / 1e3:.1f} k/s",
                    f"{figures['e2e_random_b64_batches']:.1f} batches/round, "
                    f"{figures['e2e_random_b64_padding']:.1%} padding",
                ),
                (
                    f"loaderkit, bucketed, max_tokens={MAX_TOKENS}",
                    f"{figures['e2e_budget_tokens_per_s'] / 1e3:.1f} k/s",
                    f"{figures['e2e_budget_batches']:.1f} batches/round, "
                    f"{figures['e2e_budget_padding']:.1%} padding",
                ),
                (
                    "ratio",
                    f"{figures['e2e_budget_vs_random_b64']:.2f}x",
                    f"rounds {figures['e2e_round_ratio_min']:.2f}x.."
                    f"{figures['e2e_round_ratio_max']:.2f}x; target >= {TARGET_E2E:g}x "
                    f"{_ok(figures, TARGET_E2E_NAME)}",
                ),
            ],
        )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
