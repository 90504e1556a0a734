"""What both loader facades are, without either knowing the other.

:class:`LoaderSurface` is the interface :class:`~loaderkit.runtime.loader.Loader` and
:class:`~loaderkit.runtime.stream.loader.StreamLoader` each implement (an interface with no
state: each composes its own cursor, skip ledger and state writer). ``Loader`` recognises every
``LoaderSurface`` as one of its own (``isinstance(stream_loader, Loader)`` is true, as code that
accepts "a loaderkit loader" expects, Accelerate's adapter among it) by its
``__subclasshook__``, so the two loader modules never import each other.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loaderkit.errors import PlanError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["NO_DATASET", "LoaderSurface", "plan_bindings"]

NO_DATASET = (
    "a loaderkit loader has no .dataset for Accelerate's skip_first_batches() to rebuild "
    "a DataLoader from (that would lose the plan's order, sharding and collation); use "
    "loaderkit.integrations.accelerate.skip_first_batches(loader, n), or resume with "
    "loader.load_state_dict(state)"
)
"""What reading ``.dataset`` of a loader raises (``AttributeError``), either loader's."""


class LoaderSurface(abc.ABC):
    """The methods every loaderkit loader has (torch's DataLoader's, plus the resume pair)."""

    __slots__ = ()

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """A new pass over the epoch the loader is at."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """Batches per epoch on this rank."""

    @abc.abstractmethod
    def set_epoch(self, epoch: int) -> None:
        """Where trainers tell the loader its epoch."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """The position, to resume from exactly."""

    @abc.abstractmethod
    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> None:
        """Resume from a :meth:`state_dict`."""

    @abc.abstractmethod
    def explain(self) -> str:
        """The plan's report plus what was resolved on this machine."""


def plan_bindings(plan: LoaderPlan) -> Mapping[str, object]:
    """The live objects ``plan`` is built with; :class:`PlanError` for a plan without them."""
    if plan.bindings is None:
        raise PlanError.single(
            "bindings",
            "this plan was loaded without its live objects (require_bindings=False); load "
            "it again with bindings={...} to build it",
        )
    return plan.bindings
