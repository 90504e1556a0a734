"""The ``state_dict()`` format the loaders share: its version, its shape, whose stream it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loaderkit.errors import ResumeError
from loaderkit.plan.display import diff_dicts

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["STATE_VERSION", "check_state_shape", "check_stream", "plan_differences"]

STATE_VERSION = 1
"""The version of the ``state_dict()`` format."""


def check_state_shape(
    state: object,
    keys: Sequence[str],
    kind: str,
    maker: str,
    counts: Sequence[str] = ("epoch", "batches_delivered", "world_size", "rank"),
) -> None:
    """Raise :class:`ResumeError` unless ``state`` is a dict of this format with ``keys``.

    ``kind`` and ``maker`` name the state and the class whose ``state_dict()`` makes it;
    each of ``counts`` must be an int >= 0.
    """
    if not isinstance(state, Mapping):
        raise ResumeError(f"a loader state is a dict (got {type(state).__name__})")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ResumeError(
            f"not a loaderkit {kind} state: missing {', '.join(missing)}; pass what "
            f"{maker}.state_dict() returned"
        )
    if state["loaderkit_state"] != STATE_VERSION:
        raise ResumeError(
            f"state format {state['loaderkit_state']!r} is not the one this loaderkit "
            f"reads ({STATE_VERSION})"
        )
    for key in counts:
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ResumeError(f"state[{key!r}] must be an int >= 0 (got {value!r})")


def check_stream(
    state: Mapping[str, Any],
    plan: LoaderPlan,
    world_size: int,
    rank: int,
    global_fingerprint: str,
) -> None:
    """Raise :class:`ResumeError` unless ``state`` continues the global stream of a loader.

    The loader reads ``plan`` as rank ``rank`` of ``world_size``; ``global_fingerprint`` is
    the fingerprint of its global stream (the same at any world size when the global batch
    is).
    """
    same_place = (state["world_size"], state["rank"]) == (world_size, rank)
    if state["fingerprint"] == plan.fingerprint and same_place:
        return
    if state.get("global_fingerprint") == global_fingerprint:
        return  # another world size or rank, the same global stream: an elastic resume
    differences = plan_differences(state, plan)
    world, mine = state["world_size"], world_size
    tied = ""
    if plan.bucketing is not None and plan.bucketing.max_tokens is not None:
        tied = "a token budget is per rank, so the global batches depend on the world size"
    elif plan.batch.fn is not None:
        tied = "a batch-size function gives per-rank sizes, tied to the world size"
    if world != mine and tied:
        raise ResumeError(
            f"the state was saved at {world} rank(s), this loader has {mine}: {tied}; "
            f"resume at {world} rank(s), or pass strict=False to take the position anyway"
        )
    if world != mine:
        saved = state.get("global_batch_size")
        here = plan.batch.batch_size * mine
        if isinstance(saved, int) and saved != here:
            fix = (
                f"build this loader with with_batch_size({saved // mine}) to continue the "
                f"same stream"
                if saved % mine == 0
                else f"{saved} samples cannot be split over {mine} ranks; pick a world size "
                f"that divides it"
            )
            raise ResumeError(
                f"the state was saved at {world} rank(s) with a global batch of {saved} "
                f"samples; this loader has {mine} rank(s) x {plan.batch.batch_size} = "
                f"{here}: another global batch is another stream; {fix}. Differences "
                f"(state -> this plan):",
                differences,
            )
        raise ResumeError(
            f"the state was saved by rank {state['rank']} of {world}, this loader is rank "
            f"{rank} of {mine}, and their global streams differ: the plans differ "
            f"beyond the world size; resume with the same plan, or pass strict=False. "
            f"Differences (state -> this plan):",
            differences,
        )
    raise ResumeError(
        f"the state was saved by a loader of another plan (fingerprint "
        f"{str(state['fingerprint'])[:12]}, this plan {plan.fingerprint[:12]}); "
        f"load it into a loader built from the same plan, or pass strict=False. "
        f"Differences (state -> this plan):",
        differences,
    )


def plan_differences(state: Mapping[str, Any], plan: LoaderPlan) -> list[str]:
    """The plan fields that differ, ``path: state's -> plan's`` (never empty)."""
    old = state["plan"] if isinstance(state["plan"], Mapping) else {}
    return diff_dicts(old, plan.to_dict()) or [
        "(no visible field differs: the datasets' identities differ)"
    ]
