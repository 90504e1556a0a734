"""The loaders' public names, at one path that does not follow the runtime's layout.

``plan.build()`` returns a :class:`Loader`, or a :class:`StreamLoader` for an iterable
(streamed) source; this module names them and what their documentation refers to, so user
code and the docs import from here while the runtime's folders stay free to change
(``docs/architecture.md``). It imports torch, as the loaders do; ``import loaderkit`` alone
does not.
"""

from loaderkit.runtime.autotune import AutotuneReport, AutotuneResult, AutotuneTrial
from loaderkit.runtime.loader import CheckReport, Loader
from loaderkit.runtime.passes.epoch_sampler import EpochSampler
from loaderkit.runtime.passes.state import STATE_VERSION
from loaderkit.runtime.records import RESOURCE_ERRNOS
from loaderkit.runtime.stream.loader import StreamLoader
from loaderkit.runtime.stream.read import SHARD_HOOK, WORKER_SPLIT

__all__ = [
    "RESOURCE_ERRNOS",
    "SHARD_HOOK",
    "STATE_VERSION",
    "WORKER_SPLIT",
    "AutotuneReport",
    "AutotuneResult",
    "AutotuneTrial",
    "CheckReport",
    "EpochSampler",
    "Loader",
    "StreamLoader",
]
