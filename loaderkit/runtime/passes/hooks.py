"""Pass hooks: code above the runtime told of every pass a loader starts.

A hook is handed a pass's :class:`PassInfo` and its items (batches,
:data:`~loaderkit.runtime.records.NO_BATCH` for a batch whose every sample the ``skip`` policy
dropped, failed batches) before the loader counts them, and returns the items to deliver
(the same iterator when it has nothing to do). The runtime imports no hook: the layers above
it register theirs (Accelerate's gradient state, :mod:`loaderkit.integrations.gradient_state`,
is registered by ``import loaderkit``, without importing Accelerate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from loaderkit.runtime.planners import Planner

__all__ = ["PassHook", "PassInfo", "add_pass_hook", "hooked", "remove_pass_hook"]


class PassInfo(NamedTuple):
    """What a hook learns of a pass as it starts."""

    loader: object
    """The loader whose pass this is (``Loader`` or ``StreamLoader``)."""
    epoch: int
    start: int
    """The index of the pass's first batch (after a resume, the batches delivered)."""
    planner: Planner | None
    """A map-style loader's planner (its batch counts, repeats, layout); ``None``: a stream."""
    skipping: bool
    """Whether the ``skip`` policy may leave batches undelivered (``NO_BATCH`` items)."""


PassHook = Callable[[PassInfo, Iterator[Any]], Iterator[Any]]
"""A pass hook (see the module docstring)."""

_HOOKS: list[PassHook] = []


def add_pass_hook(hook: PassHook) -> None:
    """Tell ``hook`` of every pass from now on (once, however often it is added)."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def remove_pass_hook(hook: PassHook) -> None:
    """Tell ``hook`` of no pass from now on (nothing happens if it was not added)."""
    if hook in _HOOKS:
        _HOOKS.remove(hook)


def hooked(info: PassInfo, items: Iterator[Any]) -> Iterator[Any]:
    """``items`` handed through every registered hook, in the order they were added."""
    for hook in _HOOKS:
        items = hook(info, items)
    return items
