"""The ``state_dict()`` format the loaders share: its version and its shape check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loaderkit.errors import ResumeError

__all__ = ["STATE_VERSION", "check_state_shape"]

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
