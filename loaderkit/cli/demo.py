"""``loaderkit demo``: the main job on the bundled corpus, with an exact-resume proof.

1. Compile a plan over :class:`loaderkit.demo.DemoText` (recorded in the plan as the
   registered dataset ``demo_text``, so ``--save-plan`` writes a file the other commands
   load): shuffled, length-bucketed batches made by the ``causal_lm`` collator, a batch
   contract (``with_checks``), ``--workers`` worker processes.
2. Run ``--epochs`` epochs with a progress bar, recording the sha256 of every batch, and save
   the loader's state halfway through the first epoch (as a training checkpoint would).
3. Build a *new* loader, ``load_state_dict`` the saved state (after a JSON round trip), run it
   to the end, and compare its batches' digests with the uninterrupted run's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from loaderkit.cli.app import EXIT_OK, CliError, echo
from loaderkit.cli.digest import batch_digest, batch_samples, batch_tokens, stream_digest

if TYPE_CHECKING:
    from loaderkit.plan import LoaderPlan
    from loaderkit.runtime.loader import Loader

__all__ = ["RunStats", "demo_plan", "progress_bar", "run_demo"]


@attrs.define
class RunStats:
    """What a run of a loader delivered and how long it took."""

    batches: int = 0
    samples: int = 0
    tokens: int = 0
    slots: int = 0
    """Token positions of the batches, padding included (batch size x width)."""
    seconds: float = 0.0

    def add(self, batch: Any) -> None:
        """Count one delivered batch."""
        self.batches += 1
        self.samples += batch_samples(batch)
        tokens = batch_tokens(batch)
        if tokens is not None:
            self.tokens += tokens
            self.slots += int(batch["input_ids"].numel())

    def summary(self) -> str:
        """Throughput in one line: samples/s, tokens/s, padding share."""
        seconds = max(self.seconds, 1e-9)
        line = (
            f"{self.batches} batches, {self.samples:,} samples, {self.tokens:,} tokens in "
            f"{self.seconds:.2f} s: {self.samples / seconds:,.0f} samples/s, "
            f"{self.tokens / seconds:,.0f} tokens/s"
        )
        if self.slots:
            line += f"; padding {1 - self.tokens / self.slots:.1%} of the token slots"
        return line


def demo_plan(
    *, workers: int = 2, batch_size: int = 16, seed: int = 0, num_samples: int | None = None
) -> LoaderPlan:
    """The demo's plan over the bundled corpus (see the module docstring)."""
    from loaderkit.builder import DataLoaderBuilder
    from loaderkit.demo import load_demo_text

    dataset = load_demo_text(num_samples=num_samples)
    return (
        DataLoaderBuilder()
        .with_dataset(dataset, name="demo_text")
        .with_batch_size(batch_size)
        .with_shuffle()
        .with_seed(seed)
        .with_bucketing("input_ids")
        .with_collator("causal_lm", pad_token_id=0)
        .with_checks(
            keys=["input_ids", "attention_mask", "labels"],
            dtypes={"input_ids": "int64", "labels": "int64"},
            label_pad=True,
            classes={"input_ids": dataset.tokenizer.vocab_size},
        )
        .with_workers(workers)
        .compile()
    )


def progress_bar(console: Console) -> Progress:
    """The progress bar of the CLI's runs: what, bar, batches done, elapsed, a status."""
    return Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
    )


def _batches(
    loader: Loader, epochs: int, resume_at: tuple[int, int] = (0, 0)
) -> Iterator[tuple[int, int, Any]]:
    """``(epoch, batch index, batch)`` to the end of ``epochs``, the way a training loop runs.

    ``set_epoch(epoch)`` before each pass (the DDP habit); a loader that loaded a state at
    ``resume_at = (epoch, batches delivered)`` continues that pass from there (``set_epoch``
    with the state's own epoch does not rewind it), then runs the later epochs whole.
    """
    first_epoch, start = resume_at
    for epoch in range(first_epoch, epochs):
        loader.set_epoch(epoch)
        for index, batch in enumerate(loader, start=start if epoch == first_epoch else 0):
            yield epoch, index, batch


def _run(
    loader: Loader,
    epochs: int,
    progress: Progress,
    description: str,
    checkpoint: tuple[int, int] | None = None,
    resume_at: tuple[int, int] = (0, 0),
) -> tuple[list[str], RunStats, dict[str, Any] | None]:
    """Digest every batch to the end of ``epochs``; save the state after ``checkpoint``."""
    remaining = (epochs - resume_at[0]) * len(loader) - resume_at[1]
    task = progress.add_task(description, total=remaining, status="")
    digests: list[str] = []
    stats = RunStats()
    state: dict[str, Any] | None = None
    started = time.perf_counter()
    for epoch, index, batch in _batches(loader, epochs, resume_at):
        digests.append(batch_digest(batch))
        stats.add(batch)
        if checkpoint == (epoch, index + 1):
            state = json.loads(json.dumps(loader.state_dict()))  # as a checkpoint file holds it
            progress.update(task, status=f"state saved at epoch {epoch}, batch {index + 1}")
        progress.advance(task)
    stats.seconds = time.perf_counter() - started
    return digests, stats, state


def run_demo(
    *, workers: int, epochs: int, batch_size: int, seed: int, save_plan: Path | None
) -> int:
    """Run ``loaderkit demo`` (see the module docstring); return the exit code.

    A resumed stream that differs from the uninterrupted one raises :class:`CliError`.
    """
    plan = demo_plan(workers=workers, batch_size=batch_size, seed=seed)
    if save_plan is not None:
        plan.save(save_plan)
        echo(f"plan saved to {save_plan}: try `loaderkit explain {save_plan}`")
    echo(plan.explain())
    echo()
    console = Console(stderr=True)
    with progress_bar(console) as progress:
        with plan.build() as loader:
            per_epoch = len(loader)
            at = (0, max(1, per_epoch // 2))
            reference, stats, state = _run(loader, epochs, progress, "uninterrupted run", at)
        assert state is not None
        with plan.build() as resumed:  # a new loader, as a restarted job would build
            resumed.load_state_dict(state)
            position = (state["epoch"], state["batches_delivered"])
            after, _, _ = _run(
                resumed, epochs, progress, "resumed from the state", resume_at=position
            )
    how = (
        "0 workers: loaded in this process"
        if workers == 0
        else f"{workers} worker{'s' if workers > 1 else ''}, start-up included"
    )
    echo(f"throughput: {stats.summary()} ({how})")
    skipped = at[1]
    expected = reference[skipped:]
    where = f"epoch {at[0]}, batch {at[1]}"
    if after != expected:
        bad = next(
            (i for i, (a, b) in enumerate(zip(after, expected, strict=False)) if a != b),
            min(len(after), len(expected)),
        )
        got = after[bad][:12] if bad < len(after) else "nothing"
        wanted = expected[bad][:12] if bad < len(expected) else "nothing"
        raise CliError(
            f"resume: the resumed stream differs from the uninterrupted one: batch {bad} after "
            f"the checkpoint ({where}) is {got} resumed, {wanted} uninterrupted "
            f"({len(after)} batches resumed, {len(expected)} expected)",
            "the loader state did not restore the position; report this with the plan "
            "(--save-plan) and the loaderkit version",
        )
    echo(
        f"resume: OK, the {len(after)} batches after the checkpoint ({where}) equal the "
        f"uninterrupted run's, bit for bit (stream sha256 {stream_digest(after)[:16]})"
    )
    return EXIT_OK
