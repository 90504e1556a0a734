"""The figures of docs/sampling.md: padding, batch sizes under a budget, curriculum schedules.

Run from the repository root::

    python docs/plots/sampling_plots.py

The workload of the first two is the one of ``benchmarks/bench_bucketing.py``: 20,000
sequences with lengths uniform in [16, 512] (``numpy.random.default_rng(0)``), batches of 64,
epoch 0 of seed 1234. The third draws ``loaderkit.order.competence`` for the built-in
schedules and ``eligible_count`` for 10,000 samples. Everything is deterministic; the script
writes ``docs/img/sampling-padding.png``, ``docs/img/sampling-budget.png`` and
``docs/img/sampling-curriculum.png`` and prints the figures the guide quotes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import numpy.typing as npt

from loaderkit.order import (
    EpochBatches,
    EpochOrder,
    bucket_ids,
    bucketed_batches,
    competence,
    eligible_count,
    padding_stats,
)

matplotlib.use("Agg")

N, MIN_LEN, MAX_LEN, BATCH = 20_000, 16, 512, 64
MAX_TOKENS = 16_384
SEED, EPOCH = 1234, 0
IMG = Path(__file__).resolve().parents[1] / "img"

RANDOM_COLOR, BUCKETED_COLOR, BUDGET_COLOR = "#d62728", "#1f77b4", "#2ca02c"

# the curriculum figure: schedules of competence(), and the dataset size of its second panel
CURRICULUM_N = 10_000
CURRICULUM_HORIZON, CURRICULUM_START = 10, 0.1
CURRICULUM_STEPS = ((3, 0.25), (6, 0.5), (8, 0.75))
CURRICULUM_SCHEDULES: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("linear", "linear", {}, "#1f77b4"),
    ("root, degree 2", "root", {"degree": 2.0}, "#2ca02c"),
    ("root, degree 3", "root", {"degree": 3.0}, "#9467bd"),
    (
        "discrete, steps (3, .25) (6, .5) (8, .75)",
        "discrete",
        {"steps": CURRICULUM_STEPS},
        "#d62728",
    ),
)


def workload() -> npt.NDArray[np.int64]:
    """The lengths: ``N`` values uniform in ``[MIN_LEN, MAX_LEN]``."""
    return np.random.default_rng(0).integers(MIN_LEN, MAX_LEN + 1, N)


def random_batches(n: int) -> EpochBatches:
    """The baseline: the plain shuffle of the epoch cut into batches of ``BATCH``."""
    order = EpochOrder(n, SEED, EPOCH, True).indices(0, n).astype(np.int64)
    offsets = np.append(np.arange(0, n, BATCH, dtype=np.int64), np.int64(n))
    return EpochBatches(order, offsets)


def per_batch(
    lengths: npt.NDArray[np.int64], batches: EpochBatches
) -> dict[str, npt.NDArray[np.float64]]:
    """Size, longest, mean length, padding fraction and padded tokens of every batch."""
    sizes = batches.sizes()
    starts = batches.offsets[:-1]
    batched = lengths[batches.indices]
    longest = np.maximum.reduceat(batched, starts).astype(np.float64)
    total = np.add.reduceat(batched, starts).astype(np.float64)
    return {
        "size": sizes.astype(np.float64),
        "longest": longest,
        "mean": total / sizes,
        "padding": 1.0 - total / (sizes * longest),
        "padded_tokens": sizes * longest,
    }


def plot_padding(lengths: npt.NDArray[np.int64], out: Path) -> None:
    """Figure (a): per-batch padding fraction and longest vs mean length, random vs bucketed."""
    import matplotlib.pyplot as plt

    ids = bucket_ids(lengths, N // (4 * BATCH))
    random = per_batch(lengths, random_batches(N))
    bucketed = per_batch(
        lengths, bucketed_batches(lengths, bucket_ids=ids, seed=SEED, epoch=EPOCH, batch_size=BATCH)
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    bins = np.linspace(0.0, 0.7, 71)
    for name, data, color in (
        ("random batches", random, RANDOM_COLOR),
        ("bucketed (with_bucketing)", bucketed, BUCKETED_COLOR),
    ):
        waste = 1.0 - data["mean"].dot(data["size"]) / data["padded_tokens"].sum()
        left.hist(
            data["padding"],
            bins=bins,
            color=color,
            alpha=0.75,
            label=f"{name}: {waste:.1%} of all tokens",
        )
        right.scatter(
            data["mean"], data["longest"], s=9, color=color, alpha=0.6, label=name, linewidths=0
        )
    left.set_xlabel("padding fraction of the batch (1 - real tokens / padded tokens)")
    left.set_ylabel("number of batches")
    left.set_title("Padding per batch")
    left.legend(title="epoch 0, 313 batches", loc="upper right")
    right.plot([MIN_LEN, MAX_LEN], [MIN_LEN, MAX_LEN], color="gray", lw=1, ls="--")
    right.annotate("longest = mean (no padding)", (330, 262), color="gray", rotation=36)
    right.set_xlabel("mean sequence length in the batch (tokens)")
    right.set_ylabel("longest sequence in the batch (tokens)")
    right.set_title("Each batch is padded to its longest sequence")
    right.set_xlim(0, MAX_LEN + 16)
    right.set_ylim(0, MAX_LEN + 16)
    right.legend(loc="lower right", markerscale=2)
    fig.suptitle(
        f"{N:,} sequences, lengths uniform in [{MIN_LEN}, {MAX_LEN}], batches of {BATCH}: "
        f"random batching vs length bucketing ({N // (4 * BATCH)} buckets)"
    )
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)


def plot_budget(lengths: npt.NDArray[np.int64], out: Path) -> None:
    """Figure (b): batch sizes and padded tokens under ``max_tokens`` vs a fixed batch of 64."""
    import matplotlib.pyplot as plt

    ids = bucket_ids(lengths, N // (4 * BATCH))
    fixed_batches = bucketed_batches(
        lengths, bucket_ids=ids, seed=SEED, epoch=EPOCH, batch_size=BATCH
    )
    budget_batches = bucketed_batches(
        lengths, bucket_ids=ids, seed=SEED, epoch=EPOCH, batch_size=None, max_tokens=MAX_TOKENS
    )
    fixed = per_batch(lengths, fixed_batches)
    budget = per_batch(lengths, budget_batches)
    stats = padding_stats(lengths, budget_batches, max_tokens=MAX_TOKENS)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    curve = np.arange(MIN_LEN, MAX_LEN + 1)
    left.plot(
        curve,
        MAX_TOKENS // curve,
        color="gray",
        lw=1,
        ls="--",
        label=f"largest size allowed: {MAX_TOKENS:,} // longest",
    )
    left.scatter(
        budget["longest"],
        budget["size"],
        s=10,
        color=BUDGET_COLOR,
        linewidths=0,
        label=f"max_tokens={MAX_TOKENS:,}: {len(budget_batches)} batches",
    )
    left.scatter(
        fixed["longest"],
        fixed["size"],
        s=10,
        color=BUCKETED_COLOR,
        linewidths=0,
        label=f"fixed batch {BATCH}: {len(fixed_batches)} batches",
    )
    left.set_yscale("log", base=2)
    left.set_yticks(
        [16, 32, 64, 128, 256, 512, 1024], ["16", "32", "64", "128", "256", "512", "1024"]
    )
    left.set_xlabel("longest sequence in the batch (tokens)")
    left.set_ylabel("samples in the batch (log scale)")
    left.set_title("Batch size follows the length under a budget")
    left.legend(loc="upper right")
    for name, data, color in (
        (f"fixed batch {BATCH}", fixed, BUCKETED_COLOR),
        (
            f"max_tokens={MAX_TOKENS:,} ({stats['utilization']:.1%} used)",
            budget,
            BUDGET_COLOR,
        ),
    ):
        right.plot(
            np.arange(data["size"].size),
            data["padded_tokens"],
            color=color,
            lw=0.8,
            marker="o",
            markersize=2,
            label=name,
        )
    right.axhline(MAX_TOKENS, color="gray", lw=1, ls="--", label="the budget")
    right.set_xlabel("batch number in the epoch (shuffled order)")
    right.set_ylabel("tokens in the padded batch (samples x longest)")
    right.set_ylim(0, 41_000)
    right.set_yticks(range(0, 35_001, 5_000))
    right.yaxis.set_major_formatter(lambda value, _: f"{value / 1000:g}k")
    right.set_title("Tokens per batch: the budget keeps them level")
    right.legend(loc="upper center", ncols=3, fontsize="small")
    fig.suptitle(
        f"Bucketed batches of {N:,} sequences (lengths uniform in [{MIN_LEN}, {MAX_LEN}]): "
        f"fixed size {BATCH} vs a token budget of {MAX_TOKENS:,} (cost linear)"
    )
    fig.savefig(out, dpi=110, metadata={"Software": None})
    plt.close(fig)


def schedule_value(schedule: str, options: dict[str, Any], t: float) -> float:
    """``competence(schedule, t)`` with the figure's horizon and start."""
    return competence(schedule, t, horizon=CURRICULUM_HORIZON, start=CURRICULUM_START, **options)


def plot_curriculum(out: Path) -> None:
    """Figure (c): competence c(t) of each schedule, and the eligible set per epoch."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    end = CURRICULUM_HORIZON + 2
    times = np.linspace(0.0, end, 100 * end + 1)
    epochs = np.arange(end + 1)
    for label, schedule, options, color in CURRICULUM_SCHEDULES:
        curve = [schedule_value(schedule, options, float(t)) for t in times]
        left.plot(times, curve, color=color, lw=1.8, label=label)
        counts = [
            eligible_count(CURRICULUM_N, schedule_value(schedule, options, float(t)))
            for t in epochs
        ]
        right.plot(
            epochs,
            counts,
            color=color,
            lw=1.4,
            marker="o",
            markersize=4,
            drawstyle="steps-post",
            label=label.split(", steps")[0],
        )
    left.axvline(CURRICULUM_HORIZON, color="gray", lw=1, ls="--")
    left.annotate(
        f"horizon = {CURRICULUM_HORIZON}",
        (CURRICULUM_HORIZON, 0.5),
        xytext=(-4, 0),
        textcoords="offset points",
        ha="right",
        va="center",
        rotation=90,
        color="gray",
    )
    left.set_xlabel('time t (the epoch with by="epoch", the global step with by="step")')
    left.set_ylabel("competence c(t): fraction of samples eligible")
    left.set_title(f"Schedules, start={CURRICULUM_START}, horizon={CURRICULUM_HORIZON}")
    left.set_ylim(0, 1.05)
    left.set_xlim(0, end)
    left.legend(loc="lower right", fontsize="small")
    right.set_xlabel('epoch (by="epoch": t is the epoch number)')
    right.set_ylabel(f"eligible samples, n = {CURRICULUM_N:,}")
    right.set_title("Eligible set per epoch: eligible_count(n, c(epoch))")
    right.set_xticks(epochs)
    right.set_ylim(0, CURRICULUM_N * 1.05)
    right.yaxis.set_major_formatter(lambda value, _: f"{value:,.0f}")
    right.legend(loc="lower right", fontsize="small")
    fig.suptitle(
        "Curriculum competence schedules (loaderkit.order.competence) and the size of the "
        "eligible set"
    )
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    """Write the three figures and print the figures the guide quotes."""
    IMG.mkdir(parents=True, exist_ok=True)
    lengths = workload()
    plot_padding(lengths, IMG / "sampling-padding.png")
    plot_budget(lengths, IMG / "sampling-budget.png")
    plot_curriculum(IMG / "sampling-curriculum.png")
    ids = bucket_ids(lengths, N // (4 * BATCH))
    for name, batches in (
        ("random", random_batches(N)),
        (
            "bucketed",
            bucketed_batches(lengths, bucket_ids=ids, seed=SEED, epoch=EPOCH, batch_size=BATCH),
        ),
    ):
        print(f"{name:9} padding {padding_stats(lengths, batches)['waste']:.1%}")
    budget = bucketed_batches(
        lengths, bucket_ids=ids, seed=SEED, epoch=EPOCH, batch_size=None, max_tokens=MAX_TOKENS
    )
    stats = padding_stats(lengths, budget, max_tokens=MAX_TOKENS)
    print(
        f"budget    {len(budget)} batches of {stats['batch_size_min']:.0f}-"
        f"{stats['batch_size_max']:.0f} samples, padding {stats['waste']:.1%}, "
        f"budget used {stats['utilization']:.1%}"
    )
    for label, schedule, options, _ in CURRICULUM_SCHEDULES:
        counts = [
            eligible_count(CURRICULUM_N, schedule_value(schedule, options, float(t)))
            for t in range(CURRICULUM_HORIZON + 1)
        ]
        print(f"{label:42} eligible at epochs 0..{CURRICULUM_HORIZON}: {counts}")
    names = ("sampling-padding.png", "sampling-budget.png", "sampling-curriculum.png")
    print(f"wrote {', '.join(str(IMG / name) for name in names)}")


if __name__ == "__main__":
    main()
