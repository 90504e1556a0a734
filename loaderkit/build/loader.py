"""Plan -> loader. The loader itself arrives with the loader issue."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from loaderkit.errors import NotBuiltYetError

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan


class Loader:
    """Placeholder type for the loader ``LoaderPlan.build()`` returns."""


def build_loader(plan: LoaderPlan) -> NoReturn:
    """Not implemented yet: raises ``NotBuiltYetError``."""
    raise NotBuiltYetError(
        f"LoaderPlan.build() is not implemented yet (plan {plan.fingerprint[:12]}); the plan is "
        "valid and can be saved, explained and diffed"
    )
