"""A test kit for loaderkit plans: hypothesis strategies and ``assert_*`` helpers.

loaderkit's own tests use it, and so can yours::

    from hypothesis import given
    from loaderkit.testing import builders

    @given(builders())
    def test_my_plans_compile(builder):
        builder.compile()

Strategies: :func:`builders` and :func:`plans` draw loaderkit configurations;
:func:`sample_datasets` draws map-style datasets of token sequences, images or tabular rows
(torch or HF) to run your plans on. Assertions: :func:`assert_reproducible`,
:func:`assert_resumable`, :func:`assert_worker_invariant` and :func:`assert_elastic` check the
properties every plan should have, and fail with the first differing batch, key and position,
both values shown.

The strategies need ``hypothesis`` (``pip install 'loaderkit[test]'``): importing one without
it raises an ``ImportError`` saying so. The ``assert_*`` helpers work without it.
"""

from loaderkit.testing.assertions import (
    assert_batches_equal,
    assert_elastic,
    assert_reproducible,
    assert_resumable,
    assert_worker_invariant,
    batches_differ,
    collect,
    global_batches,
)

_STRATEGIES = ("builder_calls", "builders", "plans")
_SAMPLES = ("image_datasets", "sample_datasets", "tabular_datasets", "token_datasets")


def __getattr__(name: str) -> object:
    # the strategies need hypothesis (the test extra); the assert_* helpers do not, so they
    # import without it and the strategies load on first use
    if name in _STRATEGIES:
        from loaderkit.testing import strategies

        return getattr(strategies, name)
    if name in _SAMPLES:
        from loaderkit.testing import dataset_strategies

        return getattr(dataset_strategies, name)
    if name == "datasets":
        # a name a test file also imports from HF (`import datasets`): one would shadow the
        # other. ImportError, not AttributeError: `from ... import` replaces the latter's text
        raise ImportError(
            "loaderkit.testing.datasets was renamed sample_datasets, so that it does not shadow "
            "Hugging Face's `datasets` package in a test file: "
            "`from loaderkit.testing import sample_datasets`"
        )
    raise AttributeError(f"module 'loaderkit.testing' has no attribute {name!r}")


__all__ = [
    "assert_batches_equal",
    "assert_elastic",
    "assert_reproducible",
    "assert_resumable",
    "assert_worker_invariant",
    "batches_differ",
    "builder_calls",
    "builders",
    "collect",
    "global_batches",
    "image_datasets",
    "plans",
    "sample_datasets",
    "tabular_datasets",
    "token_datasets",
]
