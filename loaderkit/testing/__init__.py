"""A test kit for loaderkit plans: hypothesis strategies and ``assert_*`` helpers.

loaderkit's own tests use it, and so can yours::

    from hypothesis import given
    from loaderkit.testing import builders

    @given(builders())
    def test_my_plans_compile(builder):
        builder.compile()

The strategies need ``hypothesis`` (``pip install 'loaderkit[test]'``).
"""

from loaderkit.testing.assertions import (
    assert_batches_equal,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    batches_differ,
    collect,
)
from loaderkit.testing.strategies import builder_calls, builders, plans

__all__ = [
    "assert_batches_equal",
    "assert_reproducible",
    "assert_resumable",
    "assert_worker_invariant",
    "batches_differ",
    "builder_calls",
    "builders",
    "collect",
    "plans",
]
