"""Hugging Face ``transformers.Trainer`` on a loaderkit loader, resuming exactly.

``LoaderkitTrainer(model=..., args=..., train_loader=plan.build())`` is a ``Trainer`` whose
training batches are the loader's: every epoch ``e`` of training is the loader's epoch ``e``
(the Trainer calls ``set_epoch(e)`` before each), sharded by the plan itself
(``with_distributed()``), never re-wrapped by Accelerate. ``train(resume_from_checkpoint=...)``
continues exactly: the Trainer works out, from its checkpoint, the epoch and the batches of it
already trained, and skips them through
:func:`loaderkit.integrations.accelerate.skip_first_batches` (O(1) for a map-style loader:
nothing is read for the skipped batches) instead of Accelerate's, which cannot rebuild a
loaderkit loader. Gradient accumulation, the last partial accumulation window of an epoch
and the RNG states are the Trainer's own, unchanged.

This module imports ``transformers`` (import it only where you use the Trainer).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from typing import Any

from transformers import Trainer

from loaderkit.integrations.accelerate import base_loader, skip_first_batches

__all__ = ["LoaderkitTrainer"]

_PATCH_LOCK = threading.Lock()
_patched = 0


@contextlib.contextmanager
def _loaderkit_skipping() -> Iterator[None]:
    """While training, ``transformers.trainer.skip_first_batches`` also skips loaderkit loaders.

    The Trainer calls that module-level name (Accelerate's function) on the train loader when
    it resumes mid-epoch; loaderkit loaders are routed to loaderkit's own, every other
    loader still goes to Accelerate's.
    """
    global _patched
    module: Any = importlib.import_module("transformers.trainer")
    if not callable(getattr(module, "skip_first_batches", None)):  # skips some other way
        yield
        return
    with _PATCH_LOCK:
        if _patched == 0:
            original = module.skip_first_batches

            def skip(dataloader: Any, num_batches: int = 0) -> Any:
                try:
                    base_loader(dataloader)
                except TypeError:
                    return original(dataloader, num_batches)
                return skip_first_batches(dataloader, num_batches)

            skip.original = original  # type: ignore[attr-defined]
            module.skip_first_batches = skip
        _patched += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _patched -= 1
            if _patched == 0:
                module.skip_first_batches = module.skip_first_batches.original


class LoaderkitTrainer(Trainer):
    """A ``transformers.Trainer`` that trains on a loaderkit loader.

    Its batches go to the model as they are (a dict of tensors whose keys are the model's
    ``forward`` arguments, with ``labels`` for the loss); the Trainer moves them to its
    device. The batch size is the plan's: ``per_device_train_batch_size`` is not used for
    training. A streamed loader has no length: set ``max_steps``. Resuming a streamed loader
    mid-epoch reads the skipped batches again (a stream has no random access).

    ``eval_loader`` (say ``plan.for_eval().build(split="val")``) is what ``evaluate()`` and
    the ``eval_strategy`` evaluations read when no other ``eval_dataset`` is given: every
    evaluation is one whole pass of it. Its batches are gathered across ranks as they are
    (with several ranks, the samples a rank repeats to even out the ranks are counted twice).

    Args:
        *args: The ``Trainer``'s (``model``, ``args``, ...).
        train_loader: What ``plan.build()`` returned (a ``Loader`` or ``StreamLoader``), or an
            :class:`~loaderkit.integrations.accelerate.AcceleratedLoader` of one. It replaces
            ``train_dataset`` and ``data_collator``: the plan batches, collates and shards.
        eval_loader: A loaderkit loader for evaluation, or ``None``.
        **kwargs: The ``Trainer``'s.

    """

    def __init__(
        self, *args: Any, train_loader: Any, eval_loader: Any = None, **kwargs: Any
    ) -> None:
        base_loader(train_loader)  # a loaderkit loader, or a TypeError that says what to pass
        if eval_loader is not None:
            base_loader(eval_loader)
            kwargs.setdefault("eval_dataset", eval_loader)  # what the Trainer checks is set
        super().__init__(*args, **kwargs)
        self.train_loader = train_loader
        """The loader training reads."""
        self.eval_loader = eval_loader
        """The loader evaluation reads (``None``: the Trainer's own, from ``eval_dataset``)."""

    def get_train_dataloader(self) -> Any:
        """The loaderkit loader, unwrapped: it shards and collates by itself."""
        return self.train_loader

    def get_eval_dataloader(self, eval_dataset: Any = None) -> Any:
        """The eval loader when it is the dataset to evaluate; else the Trainer's own loader."""
        chosen = self.eval_dataset if eval_dataset is None else eval_dataset
        if self.eval_loader is not None and chosen is self.eval_loader:
            return self.eval_loader
        return super().get_eval_dataloader(eval_dataset)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """``Trainer.train``; a mid-epoch resume skips the trained batches in O(1)."""
        with _loaderkit_skipping():
            return super().train(*args, **kwargs)
