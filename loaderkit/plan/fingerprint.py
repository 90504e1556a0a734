"""The stream fingerprint: a sha256 over exactly the fields that can change a batch.

Two plans with equal fingerprints yield equal batch streams. Fields are *stream* fields (they
can change which samples a batch holds, in which order, or what the collator and transforms make
of them) or *execution* fields (how fast and where batches arrive). Only stream fields are
hashed.

Which field of which section is which is declared by the section itself
(:mod:`loaderkit.plan.sections`: its ``fingerprint`` kind, its ``stream`` hook and its rows);
the table of ``docs/plan-format.md`` ("The stream fingerprint") is made from those
declarations (:func:`loaderkit.plan.sections.fingerprint_table`), and a test keeps the page
equal to it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from loaderkit.plan.sections import SECTIONS

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
    """The fields of ``plan`` that can change what a batch contains, as plain data.

    Each section says what of it is hashed (:attr:`~loaderkit.plan.sections.base.Section.stream`).
    """
    data: dict[str, Any] = {"fingerprint_version": FINGERPRINT_VERSION}
    for section in SECTIONS:
        data.update(section.stream_entries(plan))
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
    if not b.batched:  # each rank delivers its samples one by one: no batch dimension
        batch["batched"] = False
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
