"""The order engine: the pure sampling math deciding which sample indices form each batch.

Everything here is deterministic, bit-for-bit reproducible across platforms
and numpy releases (see ``docs/order.md``), and imports only numpy and the
standard library, never torch.

- :func:`derive_key` and the RNG helpers (:func:`sample_seed`, :func:`sample_rng`,
  :func:`batch_rng`, :func:`worker_seed`) derive stable keys from a seed and a path.
- :class:`FeistelPermutation` is a keyed bijection of ``[0, n)`` computed pointwise.
- :class:`EpochOrder`, :class:`BatchLayout`, :func:`epoch_batches` and
  :func:`batch_indices` turn an epoch into batches of sample indices.
- :class:`ShardLayout` splits each global batch between ranks (the elastic layout).
- :class:`ShardOrder` is a sharded dataset's shard-aware shuffle (shards shuffled, then samples
  within windows of shards), computed per position; :class:`ShardUses` the shards a range of
  it reads, in the order they are first needed (what the shard cache prefetches and evicts by).
- :func:`weighted_sample` / :func:`weighted_batches` draw samples by weight, with or without
  replacement, from counter-based uniforms (:func:`uniform_draws`).
- :func:`bucketed_batches` makes length-bucketed batches (fixed size or a token budget) as an
  :class:`EpochBatches`, which :meth:`EpochBatches.shard` deals out to ranks;
  :func:`bucketed_sequence_batches` does the same for an epoch another sampler chose.
- :func:`mixture_batches` reads several sources as one (weighted, sequential, round-robin,
  ...); :func:`mixture_num_batches` counts its batches and :func:`source_of` maps its global
  indices back to sources.
"""

from loaderkit.order.batches import EpochBatches
from loaderkit.order.bucketing import (
    bucket_ids,
    bucketed_batches,
    bucketed_sequence_batches,
)
from loaderkit.order.curriculum import (
    competence,
    curriculum_epoch_batches,
    curriculum_step_batch,
    curriculum_step_batches,
    difficulty_order,
    eligible_count,
)
from loaderkit.order.epoch import BatchLayout, EpochOrder, batch_indices, epoch_batches
from loaderkit.order.feistel import FeistelPermutation
from loaderkit.order.keys import batch_rng, derive_key, sample_rng, sample_seed, worker_seed
from loaderkit.order.mixture import mixture_batches, mixture_num_batches, source_of
from loaderkit.order.shard import ShardLayout
from loaderkit.order.shard_order import DEFAULT_WINDOW_SHARDS, ShardOrder, ShardUses
from loaderkit.order.token_budget import padding_stats
from loaderkit.order.weighted import uniform_draws, weighted_batches, weighted_sample

__all__ = [
    "DEFAULT_WINDOW_SHARDS",
    "BatchLayout",
    "EpochBatches",
    "EpochOrder",
    "FeistelPermutation",
    "ShardLayout",
    "ShardOrder",
    "ShardUses",
    "batch_indices",
    "batch_rng",
    "bucket_ids",
    "bucketed_batches",
    "bucketed_sequence_batches",
    "competence",
    "curriculum_epoch_batches",
    "curriculum_step_batch",
    "curriculum_step_batches",
    "derive_key",
    "difficulty_order",
    "eligible_count",
    "epoch_batches",
    "mixture_batches",
    "mixture_num_batches",
    "padding_stats",
    "sample_rng",
    "sample_seed",
    "source_of",
    "uniform_draws",
    "weighted_batches",
    "weighted_sample",
    "worker_seed",
]
