"""loaderkit: PyTorch data loading that is correct, reproducible and fast by construction.

Chain an immutable :class:`DataLoaderBuilder`, ``compile()`` it into a frozen, validated,
serializable :class:`LoaderPlan`, and ``build()`` the plan into a loader::

    plan = (DataLoaderBuilder().with_dataset(ds).with_batch_size(32).with_shuffle()
            .with_workers(2).compile())
    loader = plan.build()
"""

from loaderkit.builder import DataLoaderBuilder
from loaderkit.collators import collators, register_collator
from loaderkit.datamodule import DataModule
from loaderkit.datasets import register as register_dataset
from loaderkit.errors import (
    DataError,
    LoaderkitError,
    NotBuiltYetError,
    PlanError,
    PlanTypeError,
    Problem,
    ResumeError,
    WorkerError,
)

# Accelerate's gradient state is told of every pass by a runtime pass hook that this import
# registers (it never imports Accelerate, and costs nothing until an Accelerator exists)
from loaderkit.integrations import gradient_state as _gradient_state  # noqa: F401
from loaderkit.plan import DEFAULT_SEED, SCHEMA_VERSION, SETTINGS, LoaderPlan, Setting
from loaderkit.registry import trust_modules
from loaderkit.transforms import register_transform, transforms

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Loader lives in the runtime layer, which imports torch: export it lazily so that
    # `import loaderkit` (and everything plans do) stays free of torch
    if name == "Loader":
        from loaderkit.runtime.loader import Loader

        return Loader
    raise AttributeError(f"module 'loaderkit' has no attribute {name!r}")


__all__ = [
    "DEFAULT_SEED",
    "SCHEMA_VERSION",
    "SETTINGS",
    "DataError",
    "DataLoaderBuilder",
    "DataModule",
    "Loader",
    "LoaderPlan",
    "LoaderkitError",
    "NotBuiltYetError",
    "PlanError",
    "PlanTypeError",
    "Problem",
    "ResumeError",
    "Setting",
    "WorkerError",
    "__version__",
    "collators",
    "register_collator",
    "register_dataset",
    "register_transform",
    "transforms",
    "trust_modules",
]
