"""``build_loader``: the loader a plan gets, a :class:`Loader` or a :class:`StreamLoader`.

The one module above both loader facades (they never import each other): a map-style dataset
gets a :class:`~loaderkit.runtime.loader.Loader`, an iterable (streamed) one a
:class:`~loaderkit.runtime.stream.loader.StreamLoader`, which is a ``Loader`` for
``isinstance`` (:mod:`~loaderkit.runtime.passes.surface`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from loaderkit.runtime.loader import Loader
from loaderkit.runtime.stream.loader import StreamLoader

if TYPE_CHECKING:
    from loaderkit.plan.plan import LoaderPlan

__all__ = ["build_loader"]


def build_loader(plan: LoaderPlan, *, split: str = "train") -> Loader:
    """Make the loader for ``plan`` (for ``split``, the part of its split).

    An iterable (streamed) dataset with its live objects gets a
    :class:`~loaderkit.runtime.stream.loader.StreamLoader`; everything else a
    :class:`~loaderkit.runtime.loader.Loader` (which names what is missing).
    """
    if plan.dataset.iterable and plan.bindings is not None:
        # a Loader for isinstance (LoaderSurface), typed as what plan.build() documents
        return cast("Loader", StreamLoader(plan))
    return Loader(plan, split=split)
