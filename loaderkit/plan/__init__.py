"""The plan layer: pure data describing a loader. Never imports torch.

``LoaderPlan`` is made by ``DataLoaderBuilder.compile()`` or ``LoaderPlan.load()``; the specs it
holds are in :mod:`loaderkit.plan.specs`.
"""

from loaderkit.plan.plan import SCHEMA_VERSION, SETTINGS, LoaderPlan, Setting
from loaderkit.plan.sections.order import OrderSpec
from loaderkit.plan.specs import (
    DEFAULT_SEED,
    BatchSpec,
    CallableSpec,
    DatasetSpec,
    DistributedSpec,
    WorkersSpec,
)

__all__ = [
    "DEFAULT_SEED",
    "SCHEMA_VERSION",
    "SETTINGS",
    "BatchSpec",
    "CallableSpec",
    "DatasetSpec",
    "DistributedSpec",
    "LoaderPlan",
    "OrderSpec",
    "Setting",
    "WorkersSpec",
]
