"""The stream fingerprint: a sha256 over exactly the fields that can change a batch.

Two plans with equal fingerprints yield equal batch streams. Fields are *stream* fields (they
can change which samples a batch holds, in which order, or what the collator and transforms make
of them) or *execution* fields (how fast and where batches arrive). Only stream fields are
hashed:

=========================  ========  =============================================================
field                      kind      why
=========================  ========  =============================================================
dataset identity           stream    binding name, kind, type, length, columns; HF fingerprint
dataset source             stream    (only when set) factory name and options, path options left
                                     out (hf_files' identity hashes the files' bytes)
batch.batch_size           stream    batch boundaries (with a schedule: its table or function,
                                     and by)
batch.drop_last            stream    whether the tail is delivered
order.shuffle, order.seed  stream    the order of the epoch and every random stream
order.buffer_size          stream    (only when set) a streamed source's shuffle buffer
collator                   stream    source, name, options, label: what a batch is made of
transform                  stream    source, name, accepts_rng, label: what a sample becomes
distributed world / rank   stream    which shard this loader delivers (1 / 0 when not sharded;
                                     "auto" when detected at build: the loader's state records
                                     the rank it resolved, and checks it on resume)
distributed.even_batches   stream    (only when sharded) whether the tail is wrapped around
workers.num_workers        both      execution for map-style data (order is worker-invariant);
                                     stream for iterable data, whose order depends on it
bucketing                  stream    length source (column / function / digest of the lengths),
                                     num_buckets, max_tokens, max_batch_size, cost; under a
                                     token budget, the registry collator's padding rule when
                                     it pads beyond the longest sample (the budget bounds the
                                     padded batch, so the rule cuts the batches)
curriculum                 stream    difficulty source, schedule (name or function), by, horizon,
                                     start, degree, steps
sampling_weights           stream    weight source (column / function / digest), replacement,
                                     num_samples
max_length                 stream    the sequence length (fixed, table or function) and by
checks                     exec      the batch contract of with_checks reads batches, never
                                     changes them
error_policy               stream    (only "skip", with its budgets and their scope, per) bad
                                     samples are dropped
mixture                    stream    sources (identity of each), mode, weights or their schedule,
                                     by, stratified, num_samples, source_key
split                      stream    val, test, seed, stratify_by: which samples each part holds
                                     (the part a loader reads is in its state: ``"split"``)
workers.* (the rest)       exec      prefetch_factor, persistent, pin_memory, start_method, timeout
cache                      exec      with_cache keeps samples to load them faster; a transformed
                                     cache needs a transform without rng (a pure function)
device                     exec      where batches are delivered, not what they hold
preset                     info      which loaderkit.presets entry made the plan (display only)
=========================  ========  =============================================================
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from loaderkit._checks import thaw_value
from loaderkit.plan.padding_rule import bucket_padding, registry_padding

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = [
    "canonical_json",
    "compute_elastic_fingerprint",
    "compute_fingerprint",
    "elastic_fields",
    "stream_fields",
]

FINGERPRINT_VERSION = 1
"""Bumped whenever what the fingerprint covers changes (old fingerprints then differ)."""


def canonical_json(data: object) -> str:
    """Deterministic JSON: sorted keys, no spaces, ASCII only, no NaN."""
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def stream_fields(plan: LoaderPlan) -> dict[str, Any]:
    """The fields of ``plan`` that can change what a batch contains, as plain data."""
    from loaderkit.plan.serde import batch_to_dict

    ds = plan.dataset
    data: dict[str, Any] = {
        "fingerprint_version": FINGERPRINT_VERSION,
        "dataset": {
            "binding": ds.binding,
            "kind": ds.kind,
            "type": ds.type_name,
            "length": ds.length,
            "identity": ds.identity,
            "columns": list(ds.columns),
        },
        "batch": batch_to_dict(plan.batch),
        "order": {"shuffle": plan.order.shuffle, "seed": plan.order.seed},
        "collator": {
            "source": plan.collator.source,
            "name": plan.collator.name,
            "options": thaw_value(plan.collator.options),
            "label": plan.collator.label,
        },
        "transform": None
        if plan.transform is None
        else {
            "source": plan.transform.source,
            "name": plan.transform.name,
            "accepts_rng": plan.transform.accepts_rng,
            "label": plan.transform.label,
        },
    }
    dist = plan.distributed
    if dist.enabled and dist.world_size != 1:
        data["distributed"] = {
            "world_size": dist.world_size if dist.world_size is not None else "auto",
            "rank": dist.rank if dist.rank is not None else "auto",
            "even_batches": dist.even_batches,
        }
    else:
        data["distributed"] = {"world_size": 1, "rank": 0}
    if ds.source is not None:  # absent otherwise: older fingerprints are unchanged
        data["dataset"]["source"] = ds.source.without_paths()
    if ds.iterable:
        data["workers"] = {"num_workers": plan.workers.num_workers}
    if plan.order.buffer_size is not None:  # absent otherwise: older fingerprints are unchanged
        data["order"]["buffer_size"] = plan.order.buffer_size
    if plan.bucketing is not None:
        from loaderkit.plan.serde import bucketing_to_dict

        data["bucketing"] = bucketing_to_dict(plan.bucketing)
        # absent when the budget is cut on the longest sample, as before padding rules: those
        # plans keep their fingerprints; the others' batches changed (issue 16), so do they
        padding = registry_padding(plan.collator) if bucket_padding(plan) is not None else None
        if padding is not None and not padding.exact:
            data["bucketing"]["padding"] = padding.to_dict()
    if plan.curriculum is not None:
        from loaderkit.plan.serde import curriculum_to_dict

        data["curriculum"] = curriculum_to_dict(plan.curriculum)
    if plan.sampling_weights is not None:
        from loaderkit.plan.serde import weights_to_dict

        data["sampling_weights"] = weights_to_dict(plan.sampling_weights)
    if plan.mixture is not None:
        from loaderkit.plan.serde import mixture_to_dict

        data["mixture"] = mixture_to_dict(plan.mixture)
        for table, spec in zip(data["mixture"]["sources"], plan.mixture.sources, strict=True):
            if spec.source is not None:  # where the files are is not what they hold
                table["source"] = spec.source.without_paths()
    if plan.error_policy.policy != "raise":  # skipping drops samples: another stream
        from loaderkit.plan.serde import error_policy_to_dict

        data["error_policy"] = error_policy_to_dict(plan.error_policy)
    if plan.max_length is not None:
        from loaderkit.plan.serde import max_length_to_dict

        data["max_length"] = max_length_to_dict(plan.max_length)
    if plan.split is not None:
        from loaderkit.plan.serde import split_to_dict

        data["split"] = split_to_dict(plan.split)
    return data


def compute_fingerprint(plan: LoaderPlan) -> str:
    """Hex sha256 of the canonical JSON of :func:`stream_fields`."""
    return hashlib.sha256(canonical_json(stream_fields(plan)).encode("ascii")).hexdigest()


def elastic_fields(plan: LoaderPlan, world_size: int) -> dict[str, Any]:
    """The fields that decide the *global* stream at ``world_size`` ranks.

    The global batch of step ``s`` is the ranks' ``s``-th batches in rank order, and it does
    not depend on the world size when the global batch size (per-rank size x world size) is
    the same. So this is :func:`stream_fields` with the rank and world size left out and the
    batch size replaced by the global one (a batch-size table scaled by the world size).
    Where the global stream does depend on the world size (a batch-size function, a token
    budget: budgets are per rank) the world size stays in.
    """
    data = stream_fields(plan)
    data.pop("distributed")
    b = plan.batch
    batch: dict[str, Any] = {"global_batch_size": b.batch_size * world_size}
    batch["drop_last"] = b.drop_last
    if b.schedule:
        batch["schedule"] = [[until, size * world_size] for until, size in b.schedule]
        batch["by"] = b.by
    if b.fn is not None:
        batch["size_fn"] = data["batch"].get("size_fn")
        batch["by"] = b.by
        batch["world_size"] = world_size
    data["batch"] = batch
    if plan.bucketing is not None and plan.bucketing.max_tokens is not None:
        data["bucketing"]["world_size"] = world_size
    data["even_batches"] = plan.distributed.even_batches
    return data


def compute_elastic_fingerprint(plan: LoaderPlan, world_size: int) -> str:
    """Hex sha256 of :func:`elastic_fields`: equal for plans whose global streams are equal."""
    text = canonical_json(elastic_fields(plan, world_size))
    return hashlib.sha256(text.encode("ascii")).hexdigest()
