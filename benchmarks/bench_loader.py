"""Benchmark of ``Loader`` against plain torch, every baseline measured in the same run.

Workloads (all in the main process unless workers are named; all shuffled):

1. ``TensorDataset`` of 200,000 x 32 float32 rows, batch 1024, workers 0: samples/s of
   ``DataLoader(TensorDataset(X), batch_size=1024, shuffle=True)`` and of loaderkit over the
   same ``TensorDataset`` - target >= 40x the DataLoader. Two reference rows (no target): the
   "limit", a bare loop of ``X[perm[i:i+B]]`` gathers over a fresh ``torch.randperm`` per
   epoch, and loaderkit over the tuple ``(X,)`` (its column-gather path).
2. HF ``datasets.Dataset`` of 100,000 rows, one column ``x`` of fixed-length lists of 16 float32
   plus an int64 ``label``, ``set_format("torch")``, batch 256: samples/s of
   ``DataLoader(ds, batch_size=256, shuffle=True)`` and of loaderkit - target >= 1.3x.
3. A per-sample map-style dataset (:class:`ArithmeticDataset`: ``__getitem__`` does a little
   Python work and returns ``{"x": 16 float32, "label": int}``; no ``__getitems__``), batch 64,
   workers 0 and workers 2: samples/s of a plain ``DataLoader`` with the same settings and of
   loaderkit with its defaults - target >= 0.97x. The default ``"per_sample"`` watches which
   global RNGs the user's code draws from (here none, so none is seeded). A reference row (no
   target) gives ``with_global_rngs("per_worker")`` (torch's seeding); the difference per
   sample is printed. With workers both loaders keep persistent workers (torch:
   ``persistent_workers=True``; loaderkit's default) and worker start-up is EXCLUDED for both:
   the warm-up epoch starts the workers and only later epochs are timed.
3c. The cheapest dataset a user times first (:class:`CheapDataset`: ``{"x":
   torch.full((8,), float(i)), "y": i}``), 20,000 samples, batch 64, workers 0 and 2, as
   workload 3 - target >= 0.97x the ``DataLoader`` with loaderkit's defaults.
4. Resume at batch ``k`` in {0, 1000, 7000} of a shuffled epoch of a ``TensorDataset`` of
   2,000,000 x 4 float32, batch 256, workers 0: the time from nothing to the first batch
   (build the loader, ``load_state_dict(state)``, ``next(iter(loader))``) with the state taken
   after ``k`` delivered batches - target <= 10 ms and flat in ``k`` (max/min <= 1.5, or a
   spread under 1 ms). Baseline: torchdata's ``StatefulDataLoader`` over the same data
   (new loader, ``load_state_dict``, first batch; it regenerates the permutation and
   fast-forwards the sampler ``k * 256`` steps). Both resumed batches are checked against the
   batch ``k`` the first pass delivered.
5. ``compile()`` + ``build()`` of an in-memory plan (``TensorDataset`` of 10,000 rows, batch 32,
   shuffle, workers 0), from a builder already chained - target <= 5 ms. Baseline: constructing
   ``DataLoader(ds, batch_size=32, shuffle=True)``. Reference row: the whole chain from
   ``DataLoaderBuilder()`` to ``build()``.

Every figure is a median over timed repeats (5 by default, 3 with ``quick=True``; more for
the millisecond-scale workloads, and 5 calls per round for workload 1's cheap reference rows)
after one warm-up, with baseline and loaderkit repeats interleaved so that a noisy neighbour
hits both alike. Ratios are loaderkit / baseline: for throughput higher is better, for times
lower is better. torch keeps its default intra-op threads (the same for every loader).

``quick=True`` also shrinks workload 3's dataset (50,000 -> 10,000 samples); the table says
so.

Run it as ``python benchmarks/bench_loader.py [--quick]``; ``benchmarks/run.py`` calls
:func:`main`, which prints the tables and returns the figures (``met:<target>`` keys are 1.0
when that target was met, 0.0 when not).
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

try:
    from loaderkit import DataLoaderBuilder
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from loaderkit import DataLoaderBuilder
from loaderkit.plan.sections.global_rngs import GlobalRngs

TENSOR_N, TENSOR_DIM, TENSOR_BATCH = 200_000, 32, 1024
HF_N, HF_DIM, HF_BATCH = 100_000, 16, 256
ARROW_N, ARROW_N_QUICK, ARROW_BATCH, ARROW_WORKERS = 1_000_000, 200_000, 1024, 2
CUSTOM_N, CUSTOM_N_QUICK, CUSTOM_BATCH, CUSTOM_WORKERS = 50_000, 10_000, 64, (0, 2)
CHEAP_N = 20_000
RESUME_N, RESUME_DIM, RESUME_BATCH, RESUME_KS = 2_000_000, 4, 256, (0, 1000, 7000)
BUILD_N, BUILD_BATCH = 10_000, 32

TARGET_TENSOR_RATIO = 40.0
TARGET_HF_RATIO = 1.3
TARGET_ARROW_VS_W0 = 1.0
TARGET_ARROW_VS_TORCH = 5.0
TARGET_CUSTOM_RATIO = 0.97
TARGET_RESUME_MS = 10.0
FLAT_MAX_OVER_MIN, FLAT_SPREAD_MS = 1.5, 1.0
TARGET_BUILD_MS = 5.0

NAN = float("nan")


class CheapDataset(Dataset[dict[str, Any]]):
    """The cheapest per-sample dataset a user times first: ``{"x": 8 floats of i, "y": i}``.

    Draws from no global RNG, has no ``__getitems__``: what the default seeding must not tax.
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"x": torch.full((8,), float(i)), "y": i}


class ArithmeticDataset(Dataset[dict[str, Any]]):
    """A per-sample map-style dataset: each sample is a little Python arithmetic.

    Sample ``i`` is ``{"x": 16 float32 made from i, "label": an int in [0, 10)}``. It has no
    ``__getitems__``, so every loader must call ``__getitem__`` once per sample. Defined at
    module level so worker processes can unpickle it.
    """

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Any]:
        i = int(index)
        base = (i * 2654435761) % 1009
        x = torch.tensor([((base + 7 * j) % 97) / 97.0 for j in range(16)], dtype=torch.float32)
        return {"x": x, "label": (i * 31 + base) % 10}


# -- measurement ------------------------------------------------------------------------------


def _interleaved(
    fns: dict[str, Callable[[], float]],
    repeats: int,
    warmup: int = 1,
    per_round: dict[str, int] | None = None,
) -> dict[str, float]:
    """Median of what each ``fn()`` returns (its own timing, in seconds) over ``repeats`` rounds.

    Every function runs ``warmup`` untimed times first; then each round calls every function
    in turn (``per_round[name]`` times, default once), so slow phases of a shared machine hit
    all of them alike. Cheap functions get several calls per round: one stall of a few
    milliseconds (a descheduled intra-op thread) would otherwise dominate their few samples.
    """
    per_round = per_round or {}
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            samples[name].extend(fn() for _ in range(per_round.get(name, 1)))
    return {name: statistics.median(values) for name, values in samples.items()}


def _epoch(loader: Iterable[Any]) -> Callable[[], float]:
    """A function timing one full pass over ``loader`` (seconds)."""

    def run() -> float:
        start = time.perf_counter()
        for _batch in loader:
            pass
        return time.perf_counter() - start

    return run


def _plan(
    dataset: object, batch_size: int, workers: int = 0, global_rngs: GlobalRngs | None = None
) -> Any:
    """loaderkit's defaults (``global_rngs`` only for a reference row)."""
    builder = (
        DataLoaderBuilder()
        .with_dataset(dataset)
        .with_batch_size(batch_size)
        .with_shuffle()
        .with_seed(0)
        .with_workers(workers)
    )
    if global_rngs is not None:
        builder = builder.with_global_rngs(global_rngs)
    return builder.compile()


@dataclass
class Row:
    """One line of a table: a workload, its baseline and loaderkit figures, the target."""

    workload: str
    baseline: float
    loaderkit: float
    ratio: float
    target: str
    met: bool | None  # None: a reference row without a target


def _ratio(loaderkit: float, baseline: float) -> float:
    if math.isnan(baseline) or math.isnan(loaderkit) or baseline == 0:
        return NAN
    return loaderkit / baseline


# -- workloads --------------------------------------------------------------------------------


def _tensor_workload(repeats: int, figures: dict[str, float]) -> list[Row]:
    n, b = TENSOR_N, TENSOR_BATCH
    x = torch.randn(n, TENSOR_DIM, generator=torch.Generator().manual_seed(0))
    ds = TensorDataset(x)
    torch_loader = DataLoader(ds, batch_size=b, shuffle=True)
    loader = _plan(ds, b).build()
    columns_loader = _plan((x,), b).build()

    def limit() -> float:
        start = time.perf_counter()
        perm = torch.randperm(n)
        for i in range(0, n, b):
            x[perm[i : i + b]]
        return time.perf_counter() - start

    seconds = _interleaved(
        {
            "torch": _epoch(torch_loader),
            "loaderkit": _epoch(loader),
            "limit": limit,
            "columns": _epoch(columns_loader),
        },
        repeats,
        per_round={"limit": 5, "columns": 5},
    )
    sps = {name: n / s for name, s in seconds.items()}
    ratio = _ratio(sps["loaderkit"], sps["torch"])
    met = ratio >= TARGET_TENSOR_RATIO
    figures.update(
        tensor_torch_sps=sps["torch"],
        tensor_loaderkit_sps=sps["loaderkit"],
        tensor_limit_sps=sps["limit"],
        tensor_columns_loaderkit_sps=sps["columns"],
        tensor_ratio=ratio,
    )
    figures["met:1 TensorDataset >= 40x DataLoader"] = float(met)
    name = f"1 TensorDataset {n // 1000}k x {TENSOR_DIM}, B={b}, w0"
    return [
        Row(f"{name}: vs DataLoader", sps["torch"], sps["loaderkit"], ratio, ">= 40x", met),
        Row(
            "  ref: vs limit (bare X[perm[i:i+B]] loop)",
            sps["limit"],
            sps["loaderkit"],
            _ratio(sps["loaderkit"], sps["limit"]),
            "",
            None,
        ),
        Row(
            "  ref: loaderkit over the tuple (X,), vs DataLoader",
            sps["torch"],
            sps["columns"],
            _ratio(sps["columns"], sps["torch"]),
            "",
            None,
        ),
    ]


def _hf_dataset(n: int, dim: int) -> Any:
    import datasets

    rng = np.random.default_rng(0)
    list_type = getattr(datasets, "List", None) or datasets.Sequence  # List: datasets >= 4
    features = datasets.Features(
        {"x": list_type(datasets.Value("float32"), length=dim), "label": datasets.Value("int64")}
    )
    ds = datasets.Dataset.from_dict(
        {
            "x": rng.standard_normal((n, dim), dtype=np.float32),
            "label": rng.integers(0, 10, n, dtype=np.int64),
        },
        features=features,
    )
    ds.set_format("torch")
    return ds


def _hf_workload(repeats: int, figures: dict[str, float]) -> list[Row]:
    n, b = HF_N, HF_BATCH
    ds = _hf_dataset(n, HF_DIM)
    seconds = _interleaved(
        {
            "torch": _epoch(DataLoader(ds, batch_size=b, shuffle=True)),
            "loaderkit": _epoch(_plan(ds, b).build()),
        },
        repeats,
    )
    sps = {name: n / s for name, s in seconds.items()}
    ratio = _ratio(sps["loaderkit"], sps["torch"])
    met = ratio >= TARGET_HF_RATIO
    figures.update(hf_torch_sps=sps["torch"], hf_loaderkit_sps=sps["loaderkit"], hf_ratio=ratio)
    figures["met:2 HF Dataset >= 1.3x DataLoader"] = float(met)
    name = f"2 HF Dataset (torch format) {n // 1000}k x {HF_DIM}, B={b}, w0"
    return [Row(f"{name}: vs DataLoader", sps["torch"], sps["loaderkit"], ratio, ">= 1.3x", met)]


def _arrow_workers_workload(repeats: int, n: int, figures: dict[str, float]) -> list[Row]:
    """Issue 24: Arrow rows (16 float32 + a label), batch 1024, 2 workers out of habit.

    The same plan with 0 and 2 workers, and torch's ``DataLoader`` with 2 workers; each
    loader built once (persistent workers for torch), every epoch timed whole.
    """
    b, w = ARROW_BATCH, ARROW_WORKERS
    ds = _hf_dataset(n, HF_DIM)
    none = _plan(ds, b, 0).build()
    two = _plan(ds, b, w).build()
    torch_two = DataLoader(ds, batch_size=b, shuffle=True, num_workers=w, persistent_workers=True)
    try:
        seconds = _interleaved(
            {"torch w2": _epoch(torch_two), "loaderkit w0": _epoch(none), "w2": _epoch(two)},
            repeats,
        )
    finally:
        none.close()
        two.close()
        del torch_two
    sps = {name: n / s for name, s in seconds.items()}
    vs_w0 = _ratio(sps["w2"], sps["loaderkit w0"])
    vs_torch = _ratio(sps["w2"], sps["torch w2"])
    figures.update(arrow_w0_sps=sps["loaderkit w0"], arrow_w2_sps=sps["w2"])
    figures.update(arrow_torch_w2_sps=sps["torch w2"], arrow_w2_vs_w0=vs_w0)
    figures["arrow_w2_vs_torch"] = vs_torch
    met_w0, met_torch = vs_w0 >= TARGET_ARROW_VS_W0, vs_torch >= TARGET_ARROW_VS_TORCH
    figures["met:2w HF Arrow w2 >= 1.0x w0"] = float(met_w0)
    figures["met:2w HF Arrow w2 >= 5x DataLoader w2"] = float(met_torch)
    name = f"2w HF Arrow rows {n // 1000}k x {HF_DIM} + label, B={b}, w{w}"
    return [
        Row(
            f"{name}: vs the same plan, w0",
            sps["loaderkit w0"],
            sps["w2"],
            vs_w0,
            ">= 1.0x",
            met_w0,
        ),
        Row(
            f"{name}: vs DataLoader w{w}", sps["torch w2"], sps["w2"], vs_torch, ">= 5x", met_torch
        ),
    ]


def _per_sample_workload(
    label: str, dataset: Dataset[Any], repeats: int, figures: dict[str, float]
) -> list[Row]:
    """Workloads 3 and 3c: a per-sample dataset of the user's, loaderkit's defaults vs torch.

    The target row is loaderkit as a user gets it (``"per_sample"``, the default: it watches
    which global RNGs the code draws from, here none); the reference row is
    ``"per_worker"``, torch's seeding.
    """
    b = CUSTOM_BATCH
    n = len(dataset)  # type: ignore[arg-type]
    rows = []
    for workers in CUSTOM_WORKERS:
        torch_loader = DataLoader(
            dataset, batch_size=b, shuffle=True, num_workers=workers, persistent_workers=workers > 0
        )
        default = _plan(dataset, b, workers).build()
        torchs_seeding = _plan(dataset, b, workers, "per_worker").build()
        try:
            # the warm-up epoch starts the persistent workers of all; later epochs reuse them
            seconds = _interleaved(
                {
                    "torch": _epoch(torch_loader),
                    "loaderkit": _epoch(default),
                    "per_worker": _epoch(torchs_seeding),
                },
                repeats,
            )
        finally:
            default.close()
            torchs_seeding.close()
            del torch_loader  # its persistent workers stop with its iterator
            gc.collect()
        sps = {name: n / s for name, s in seconds.items()}
        ratio = _ratio(sps["loaderkit"], sps["torch"])
        met = ratio >= TARGET_CUSTOM_RATIO
        key = f"{label}_w{workers}"
        figures[f"{key}_torch_sps"] = sps["torch"]
        figures[f"{key}_loaderkit_sps"] = sps["loaderkit"]
        figures[f"{key}_ratio"] = ratio
        figures[f"{key}_per_worker_sps"] = sps["per_worker"]
        figures[f"{key}_per_worker_ratio"] = _ratio(sps["per_worker"], sps["torch"])
        # what watching the RNGs costs per sample, in the process(es) that read
        cost = (seconds["loaderkit"] - seconds["per_worker"]) / n * max(workers, 1) * 1e6
        figures[f"{key}_watch_us"] = cost
        title = "per-sample dataset" if label == "custom" else "cheap dataset"
        figures[f"met:{label} {title}, workers {workers}, >= 0.97x DataLoader"] = float(met)
        name = f"{'3' if label == 'custom' else '3c'} {title} {n // 1000}k, B={b}, w{workers}"
        rows.append(
            Row(f"{name}: vs DataLoader", sps["torch"], sps["loaderkit"], ratio, ">= 0.97x", met)
        )
        rows.append(
            Row(
                f"{name}: per_worker ({cost:+.2f} us/sample for the default)",
                sps["torch"],
                sps["per_worker"],
                figures[f"{key}_per_worker_ratio"],
                "reference",
                None,
            )
        )
    return rows


def _stateful_dataloader() -> tuple[Any, str]:
    """torchdata's ``StatefulDataLoader`` class, or ``None`` and why it is unavailable."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except Exception as exc:  # noqa: BLE001 - any import failure means "no baseline"
        return None, f"{type(exc).__name__}: {exc}"
    return StatefulDataLoader, ""


def _same_batch(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _resume_workload(repeats: int, figures: dict[str, float]) -> tuple[list[Row], list[str]]:
    n, b, ks = RESUME_N, RESUME_BATCH, RESUME_KS
    notes: list[str] = []
    ds = TensorDataset(torch.randn(n, RESUME_DIM, generator=torch.Generator().manual_seed(1)))
    plan = _plan(ds, b)

    # one untimed pass of each loader, taking the state after k delivered batches
    states: dict[int, Any] = {}
    expected: dict[int, Any] = {}
    loader = plan.build()
    iterator = iter(loader)
    for step in range(max(ks) + 1):
        if step in ks:
            states[step] = loader.state_dict()
        batch = next(iterator)
        if step in ks:
            expected[step] = batch
    del iterator, loader

    stateful_cls, why = _stateful_dataloader()
    base_states: dict[int, Any] = {}
    base_expected: dict[int, Any] = {}

    def new_stateful() -> Any:
        with warnings.catch_warnings():  # torchdata 0.11 calls the deprecated torch.set_vital
            warnings.filterwarnings("ignore", message=".*set_vital.*")
            return stateful_cls(
                ds, batch_size=b, shuffle=True, generator=torch.Generator().manual_seed(0)
            )

    if stateful_cls is not None:
        base = new_stateful()
        iterator = iter(base)
        for step in range(max(ks) + 1):
            if step in ks:
                base_states[step] = base.state_dict()
            batch = next(iterator)
            if step in ks:
                base_expected[step] = batch
        del iterator, base
    else:
        notes.append(f"StatefulDataLoader baseline unavailable ({why}); loaderkit figures only")

    exact: dict[str, bool] = {}

    def resume_loaderkit(k: int) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            resumed = plan.build()
            resumed.load_state_dict(states[k])
            batch = next(iter(resumed))
            elapsed = time.perf_counter() - start
            exact[f"loaderkit k={k}"] = _same_batch(batch, expected[k])
            return elapsed

        return run

    def resume_stateful(k: int) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            resumed = new_stateful()
            resumed.load_state_dict(base_states[k])
            batch = next(iter(resumed))
            elapsed = time.perf_counter() - start
            exact[f"StatefulDataLoader k={k}"] = _same_batch(batch, base_expected[k])
            return elapsed

        return run

    fns: dict[str, Callable[[], float]] = {}
    for k in ks:
        fns[f"loaderkit {k}"] = resume_loaderkit(k)
        if stateful_cls is not None:
            fns[f"torch {k}"] = resume_stateful(k)
    seconds = _interleaved(fns, repeats)
    wrong = [name for name, ok in exact.items() if not ok]
    if wrong:
        notes.append(f"WRONG BATCH after resume: {', '.join(wrong)}")
    figures["resume_batches_exact"] = float(not wrong)

    rows = []
    lk_ms = []
    for k in ks:
        ms = seconds[f"loaderkit {k}"] * 1e3
        base_ms = seconds[f"torch {k}"] * 1e3 if stateful_cls is not None else NAN
        lk_ms.append(ms)
        met = ms <= TARGET_RESUME_MS
        figures[f"resume_k{k}_loaderkit_ms"] = ms
        figures[f"resume_k{k}_stateful_ms"] = base_ms
        figures[f"resume_k{k}_ratio"] = _ratio(ms, base_ms)
        figures[f"met:4 resume at k={k} <= 10 ms"] = float(met)
        rows.append(
            Row(
                f"4 resume at k={k}, {n // 1_000_000}M x {RESUME_DIM}, B={b}, w0: "
                f"vs StatefulDataLoader",
                base_ms,
                ms,
                _ratio(ms, base_ms),
                "<= 10 ms",
                met,
            )
        )
    spread = max(lk_ms) - min(lk_ms)
    flat = max(lk_ms) <= FLAT_MAX_OVER_MIN * min(lk_ms) or spread < FLAT_SPREAD_MS
    figures["resume_spread_ms"] = spread
    figures["met:4 resume flat in k"] = float(flat)
    rows.append(
        Row(
            "4 flat in k: loaderkit's min over k (as baseline) vs max; ratio max/min",
            min(lk_ms),
            max(lk_ms),
            max(lk_ms) / min(lk_ms),
            "max/min <= 1.5",
            flat,
        )
    )
    return rows, notes


def _build_workload(repeats: int, figures: dict[str, float]) -> list[Row]:
    ds = TensorDataset(torch.randn(BUILD_N, 8, generator=torch.Generator().manual_seed(2)))
    builder = (
        DataLoaderBuilder()
        .with_dataset(ds)
        .with_batch_size(BUILD_BATCH)
        .with_shuffle()
        .with_seed(0)
        .with_workers(0)
    )

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return run

    seconds = _interleaved(
        {
            "torch": timed(lambda: DataLoader(ds, batch_size=BUILD_BATCH, shuffle=True)),
            "loaderkit": timed(lambda: builder.compile().build()),
            "chain": timed(lambda: _plan(ds, BUILD_BATCH).build()),
        },
        repeats,
        warmup=5,
    )
    ms = {name: s * 1e3 for name, s in seconds.items()}
    met = ms["loaderkit"] <= TARGET_BUILD_MS
    figures.update(
        build_torch_ms=ms["torch"],
        build_loaderkit_ms=ms["loaderkit"],
        build_chain_ms=ms["chain"],
        build_ratio=_ratio(ms["loaderkit"], ms["torch"]),
    )
    figures["met:5 compile() + build() <= 5 ms"] = float(met)
    name = f"5 compile() + build(), {BUILD_N // 1000}k rows, B={BUILD_BATCH}, w0"
    return [
        Row(
            f"{name}: vs DataLoader(...)",
            ms["torch"],
            ms["loaderkit"],
            _ratio(ms["loaderkit"], ms["torch"]),
            "<= 5 ms",
            met,
        ),
        Row(
            "  ref: whole chain DataLoaderBuilder()...build()",
            ms["torch"],
            ms["chain"],
            _ratio(ms["chain"], ms["torch"]),
            "",
            None,
        ),
    ]


# -- report -----------------------------------------------------------------------------------


def _fmt(value: float, digits: int) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:,.{digits}f}"


def _print_table(title: str, unit: str, rows: list[Row], digits: int) -> None:
    header = (
        "workload",
        f"baseline [{unit}]",
        f"loaderkit [{unit}]",
        "ratio [lk/base]",
        "target",
        "met",
    )
    lines = [
        (
            r.workload,
            _fmt(r.baseline, digits),
            _fmt(r.loaderkit, digits),
            "n/a" if math.isnan(r.ratio) else f"{r.ratio:.3g}x",
            r.target,
            "" if r.met is None else ("met" if r.met else "NOT MET"),
        )
        for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=True)]
    print(title)
    for i, line in enumerate([header, *lines]):
        cells = [
            f"{c:<{w}}" if j in (0, 4, 5) else f"{c:>{w}}"
            for j, (c, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("  " + "  ".join(cells).rstrip())
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def main(quick: bool = False, verbose: bool = True) -> dict[str, float]:
    """Run every workload, print the tables (when ``verbose``) and return the figures.

    Keys: ``<workload>_<who>_sps`` (samples/s), ``..._ms``, ``..._ratio`` (loaderkit /
    baseline) and ``met:<target>`` (1.0 met, 0.0 not met). A workload that crashes is
    reported and the others still run and print; ``main`` then raises ``RuntimeError``.
    """
    repeats = 3 if quick else 5
    custom_n = CUSTOM_N_QUICK if quick else CUSTOM_N
    figures: dict[str, float] = {}
    notes: list[str] = []
    failed: list[str] = []

    def attempt(label: str, run: Callable[[], list[Row]]) -> list[Row]:
        try:
            return run()
        except Exception:  # noqa: BLE001 - printed here, raised from main() at the end
            traceback.print_exc()
            failed.append(label)
            notes.append(f"workload {label} CRASHED (traceback above)")
            return []

    def resume() -> list[Row]:
        rows, resume_notes = _resume_workload(repeats + 2, figures)
        notes.extend(resume_notes)
        return rows

    if verbose:
        mode = "QUICK (3 repeats; workload 3 on 10k samples)" if quick else "full (5 repeats)"
        print(
            f"loader: {mode}; medians after a warm-up, torch baselines measured in the same run; "
            f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads"
        )
        print("  workloads 3 and 3c with workers: persistent workers, start-up excluded for both")
    throughput = attempt("1", lambda: _tensor_workload(repeats, figures))
    throughput += attempt("2", lambda: _hf_workload(repeats, figures))
    arrow_n = ARROW_N_QUICK if quick else ARROW_N
    throughput += attempt("2w", lambda: _arrow_workers_workload(repeats, arrow_n, figures))
    throughput += attempt(
        "3", lambda: _per_sample_workload("custom", ArithmeticDataset(custom_n), repeats, figures)
    )
    throughput += attempt(
        "3c", lambda: _per_sample_workload("cheap", CheapDataset(CHEAP_N), repeats, figures)
    )
    if verbose:
        _print_table(
            "throughput (higher is better; ratio >= target is met)", "samples/s", throughput, 0
        )
    latency = attempt("4", resume)
    latency += attempt("5", lambda: _build_workload(15 if quick else 50, figures))
    if verbose:
        _print_table("latency (lower is better)", "ms", latency, 3)
        for note in notes:
            print(f"  NOTE: {note}")
    if failed:
        raise RuntimeError(f"bench_loader: workload(s) {', '.join(failed)} crashed")
    return figures


if __name__ == "__main__":
    main(quick="--quick" in sys.argv[1:])
