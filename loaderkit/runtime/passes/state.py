"""The ``state_dict()`` format the loaders share: its version, its shape, whose stream it is."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loaderkit._limits import LIMITS
from loaderkit._text import inert, shown
from loaderkit._validate import check_plain_tree
from loaderkit.errors import PlanError, ResumeError
from loaderkit.plan.diff import diff_dicts
from loaderkit.runtime.passes.skips import SkipCounts

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan
    from loaderkit.runtime.passes.cursor import PassCursor
    from loaderkit.runtime.passes.skips import SkipLedger

__all__ = [
    "MAP_STATE_KEYS",
    "STATE_VERSION",
    "STREAM_STATE_KEYS",
    "check_epoch",
    "check_map_state",
    "check_state_bounds",
    "check_state_shape",
    "check_stream",
    "check_stream_state",
    "load_position",
    "plan_differences",
    "read_pass_ended",
    "write_state",
]

STATE_VERSION = 1
"""The version of the ``state_dict()`` format."""

MAP_STATE_KEYS = (
    "loaderkit_state",
    "fingerprint",
    "epoch",
    "batches_delivered",
    "world_size",
    "rank",
    "plan",
)
"""The keys every ``Loader.state_dict()`` has."""

STREAM_STATE_KEYS = (
    "loaderkit_state",
    "stream",
    "fingerprint",
    "epoch",
    "batches_delivered",
    "world_size",
    "rank",
    "num_workers",
    "worker_batches",
    "next_worker",
    "plan",
)
"""The keys every ``StreamLoader.state_dict()`` has."""


def check_epoch(epoch: object) -> int:
    """``epoch`` for the loaders' ``set_epoch`` (an int >= 0; else the ValueError saying so)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"set_epoch: epoch must be an int >= 0 (got {shown(epoch)})")
    return epoch


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
            f"state format {shown(state['loaderkit_state'])} is not the one this loaderkit "
            f"reads ({STATE_VERSION})"
        )
    for key in counts:
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ResumeError(f"state[{key!r}] must be an int >= 0 (got {shown(value)})")
        if value > LIMITS.integer:
            raise ResumeError(
                f"state[{key!r}] must be <= {LIMITS.integer:,} (got {shown(value)}); pass what "
                f"{maker}.state_dict() returned"
            )
    check_state_bounds(state, maker)


STATE_DEPTH = 2 * LIMITS.depth
"""Nesting of a loader state (its source states included): no state loaderkit writes is
nested deeper, and a deeper one would exhaust the stack of whatever reads it."""


def check_state_bounds(state: Mapping[str, Any], maker: str) -> None:
    """Raise :class:`ResumeError` unless ``state`` is within the bounds of plan data.

    Its ``plan`` (and its ``skips``) are plain data with a plan's bounds (``LIMITS``:
    nesting, values, string and integer size; checked as a plan file is, without
    recursion), its strings (a
    fingerprint, a split) are at most ``LIMITS.string_chars`` characters and its integers at
    most ``LIMITS.integer``, and the state as a
    whole (the sources' saved states included) is nested at most :data:`STATE_DEPTH` deep.
    A hostile or damaged state (a ``plan`` of a million keys, a 50 MB string, 200,000
    levels) is refused here before anything compares, copies or shows it.
    """
    fix = f"pass what {maker}.state_dict() returned"
    for key, value in state.items():
        if isinstance(value, str) and len(value) > LIMITS.string_chars:
            raise ResumeError(
                f"state[{shown(key)}] is a string of {len(value):,} characters; a loader "
                f"state holds at most {LIMITS.string_chars:,}: {fix}"
            )
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LIMITS.integer:
            raise ResumeError(
                f"state[{shown(key)}] must be at most {LIMITS.integer:,} (got {shown(value)}); "
                f"{fix}"
            )
    for key in _PLAIN_KEYS:
        if key not in state:
            continue
        try:
            problems = check_plain_tree(state[key], key)
        except PlanError as exc:
            problems = list(exc.problems)
        if problems:
            listed = "; ".join(str(p) for p in problems[:5])
            more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
            raise ResumeError(
                f"state[{key!r}] is not the plain data a loader saves: {listed}{more}; {fix}"
            )
    _check_depth(state, fix)


_PLAIN_KEYS = ("plan", "skips")
"""The parts of a state that are plain data of a plan's size (the plan, the skip counts):
checked against a plan's bounds (``LIMITS``)."""


def _check_depth(state: Mapping[str, Any], fix: str) -> None:
    """Raise :class:`ResumeError` for a state nested deeper than :data:`STATE_DEPTH`."""
    stack: list[tuple[object, int]] = [(state, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth >= STATE_DEPTH:
            raise ResumeError(f"the state is nested more than {STATE_DEPTH} levels deep; {fix}")
        stack.extend((child, depth + 1) for child in children)


def read_pass_ended(state: Mapping[str, Any]) -> bool:
    """Whether the pass of ``state`` ended (its iterator raised ``StopIteration``).

    ``False`` for a state written before loaderkit recorded it (``pass_ended`` absent): such
    a state resumes where its batches delivered say, as it did. Raises
    :class:`ResumeError` for a value that is not a bool.
    """
    ended = state.get("pass_ended", False)
    if not isinstance(ended, bool):
        raise ResumeError(
            f"state['pass_ended'] must be a bool (got {shown(ended)}); pass what state_dict() "
            f"returned"
        )
    return ended


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
        if (
            isinstance(saved, int)
            and not isinstance(saved, bool)
            and 0 < saved <= LIMITS.integer
            and saved != here
        ):
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
        f"{_fingerprint(state['fingerprint'])}, this plan {plan.fingerprint[:12]}); "
        f"load it into a loader built from the same plan, or pass strict=False. "
        f"Differences (state -> this plan):",
        differences,
    )


def _fingerprint(value: object) -> str:
    """A saved fingerprint as messages show it: its first 12 characters (escaped)."""
    return inert(value[:12]) if isinstance(value, str) else shown(value, 40)


def plan_differences(state: Mapping[str, Any], plan: LoaderPlan) -> list[str]:
    """The plan fields that differ, ``path: state's -> plan's`` (never empty)."""
    old = state["plan"] if isinstance(state["plan"], Mapping) else {}
    return diff_dicts(old, plan.to_dict()) or [
        "(no visible field differs: the datasets' identities differ)"
    ]


def check_stream_state(
    state: Mapping[str, Any], plan: LoaderPlan, place: tuple[int, int, int], *, strict: bool
) -> tuple[list[int], list[Any], bool]:
    """Check a :class:`~loaderkit.runtime.stream.loader.StreamLoader` state against its loader.

    ``place`` is the loader's (world size, rank, num_workers), which a stream's shards depend
    on. Returns what a resume needs: the batches each producer delivered, each producer's
    saved source state (or ``None``) and whether the pass was complete. Raises
    :class:`ResumeError` saying why the state does not fit (``strict=False`` skips the
    fingerprint check; the layout must still fit).
    """
    producers = max(place[2], 1)
    counts = ("epoch", "batches_delivered", "world_size", "rank", "next_worker")
    check_state_shape(state, STREAM_STATE_KEYS, "stream", "StreamLoader", counts)
    if strict and state["fingerprint"] != plan.fingerprint:
        raise ResumeError(
            f"the state was saved by a loader of another plan (fingerprint "
            f"{_fingerprint(state['fingerprint'])}, this plan {plan.fingerprint[:12]}); "
            f"a stream's order depends on the whole plan, num_workers included: load it "
            f"into a loader built from the same plan, or pass strict=False. Differences "
            f"(state -> this plan):",
            plan_differences(state, plan),
        )
    here = place
    there = (state["world_size"], state["rank"], state["num_workers"])
    if here != there:
        raise ResumeError(
            f"the state was saved at world size {there[0]}, rank {there[1]}, num_workers "
            f"{shown(there[2])}; this loader has {here[0]}, {here[1]}, {here[2]}: a stream's "
            f"shards depend on all three, so resume with the same ones"
        )
    per_worker = state["worker_batches"]
    if (
        not isinstance(per_worker, list)
        or len(per_worker) != producers
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in per_worker)
        or sum(per_worker) != state["batches_delivered"]
        or state["next_worker"] >= producers
    ):
        raise ResumeError(
            f"state['worker_batches'] must list the batches each of the {producers} "
            f"producers delivered, summing to batches_delivered, and next_worker must be "
            f"one of them (got {shown(per_worker)}, next_worker {shown(state['next_worker'])})"
        )
    states = _checked_states(state.get("worker_states"), per_worker, producers)
    complete = state.get("pass_complete", False)  # absent from earlier states
    if not isinstance(complete, bool):
        raise ResumeError(f"state['pass_complete'] must be a bool (got {shown(complete)})")
    return per_worker, states, complete


def _checked_states(states: object, per_worker: list[int], producers: int) -> list[Any]:
    """The per-producer source states of a saved state (``None``: none was saved)."""
    if states is None:  # a state from before worker_states: every producer replays
        return [None] * producers
    fits = isinstance(states, list) and len(states) == producers
    if fits:
        assert isinstance(states, list)
        for entry, batches in zip(states, per_worker, strict=True):
            if entry is None:
                continue
            read = entry.get("read") if isinstance(entry, Mapping) else None
            if (
                not isinstance(entry, Mapping)
                or "source" not in entry
                or isinstance(read, bool)
                or not isinstance(read, int)
                or read < 1
                or batches == 0
            ):
                fits = False
                break
    if not fits:
        raise ResumeError(
            f"state['worker_states'] must list, for each of the {producers} "
            f"producers, None or the {{'read': int >= 1, 'source': ...}} of its last "
            f"delivered batch (only for a producer that delivered one); got {shown(states)}"
        )
    return copy.deepcopy(states)  # type: ignore[arg-type]


def write_state(
    plan: LoaderPlan,
    cursor: PassCursor,
    ledger: SkipLedger,
    place: Mapping[str, Any],
    *,
    stream: Mapping[str, Any] | None = None,
    tail: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A loader's ``state_dict()``: the format both loaders write, a fresh copy every call.

    The version, the plan's fingerprint, the cursor's position (``epoch``,
    ``batches_delivered``, ``pass_ended``), ``place`` (the world size and rank, and what
    else the stream continues from), the plan, ``tail`` and the skip counts under the
    ``skip`` policy. ``stream``: a stream's ``pass_complete``, which marks its state as a
    stream's (``"stream": True``).
    """
    epoch, delivered = cursor.position
    return {
        "loaderkit_state": STATE_VERSION,
        **({} if stream is None else {"stream": True}),
        "fingerprint": plan.fingerprint,
        "epoch": epoch,
        "batches_delivered": delivered,
        **({} if stream is None else stream),
        "pass_ended": cursor.ended,
        **copy.deepcopy(dict(place)),
        "plan": copy.deepcopy(plan.to_dict()),
        **({} if tail is None else tail),
        **ledger.to_state(),
    }


def load_position(state: Mapping[str, Any], cursor: PassCursor, ledger: SkipLedger) -> None:
    """Move ``cursor`` (and ``ledger``'s counts) to a checked ``state``'s position.

    Raises :class:`ResumeError` for a bad ``pass_ended`` or ``skips``; nothing moves then.
    """
    ended = read_pass_ended(state)
    counts = SkipCounts.from_state(state.get("skips"))
    ledger.counts = counts
    cursor.load(state["epoch"], state["batches_delivered"], ended=ended)


def check_map_state(
    state: Mapping[str, Any],
    plan: LoaderPlan,
    place: tuple[int, int, str | None, str],
    num_batches: Callable[[int], int],
    *,
    strict: bool,
) -> None:
    """Raise :class:`ResumeError` unless ``state`` fits a map-style loader.

    ``place`` is the loader's (world size, rank, split part, global fingerprint);
    ``num_batches`` its batches of an epoch. ``strict=False`` only checks that the position
    fits (see ``Loader.load_state_dict``).
    """
    world_size, rank, split, global_fingerprint = place
    check_state_shape(state, MAP_STATE_KEYS, "loader", "Loader")
    if strict and state.get("split") != split:
        raise ResumeError(
            f"the state was saved by a loader of the {state.get('split')!r} part of the "
            f"split, this loader reads the {split!r} part: another part is another "
            f"stream; load it into plan.build(split={state.get('split')!r}), or pass "
            f"strict=False to take the position anyway"
        )
    if strict:
        check_stream(state, plan, world_size, rank, global_fingerprint)
    epoch, delivered = state["epoch"], state["batches_delivered"]
    if delivered and delivered > num_batches(epoch):
        raise ResumeError(
            f"the state has {delivered} batches of epoch {epoch} delivered but that epoch "
            f"of this loader has {num_batches(epoch)}"
        )
