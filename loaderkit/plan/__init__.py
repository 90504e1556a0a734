"""The plan layer: pure data describing a loader. Never imports torch.

``LoaderPlan`` is made by ``DataLoaderBuilder.compile()`` or ``LoaderPlan.load()``; the specs it
holds are in the modules of its sections (:mod:`loaderkit.plan.sections`) and, for the pieces
several sections share, :mod:`loaderkit.plan.specs`.
"""

from loaderkit.plan.plan import SCHEMA_VERSION, SETTINGS, LoaderPlan, Setting
from loaderkit.plan.sections.batch import BatchSpec
from loaderkit.plan.sections.distributed import DistributedSpec
from loaderkit.plan.sections.order import DEFAULT_SEED, OrderSpec
from loaderkit.plan.sections.workers import WorkersSpec
from loaderkit.plan.specs import CallableSpec, DatasetSpec

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
