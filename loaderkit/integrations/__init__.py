"""Drop-in support for the training stacks people already use.

One module per client, imported on demand (``import loaderkit`` imports none of them but
:mod:`~loaderkit.integrations.gradient_state`, which registers Accelerate's pass hook and
imports nothing of Accelerate, nor of any package they adapt to):

- :mod:`loaderkit.integrations.accelerate`: ``skip_first_batches``, Accelerate's
  ``skip_first_batches`` for a loaderkit loader, and ``AcceleratedLoader``, kept for existing
  code (a loader itself tells Accelerate where each pass ends, so that ``accumulate()`` syncs
  the last partial window of an epoch: :mod:`loaderkit.integrations.gradient_state`).
- :mod:`loaderkit.integrations.transformers`: ``LoaderkitTrainer``, a ``transformers.Trainer``
  that trains on a loaderkit loader and resumes from its checkpoints exactly.

- :mod:`loaderkit.integrations.lightning`: ``for_lightning`` for streamed loaders, which
  Lightning reads one batch ahead, and for map-style loaders given the ``Trainer`` (their
  epoch is then ``trainer.current_epoch``, which a resume by steps from an epoch-end
  checkpoint needs). Other loaders go to ``Trainer.fit`` as they are (Lightning sets their
  epoch through ``loader.sampler``), and a :class:`~loaderkit.DataModule` through
  :meth:`~loaderkit.DataModule.to_lightning`.
"""

from __future__ import annotations

__all__: list[str] = []
