"""Shared test configuration: hypothesis profiles and small dataset fixtures."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# moto_server, fault_proxy, aws_env: a real S3 server on 127.0.0.1 and faults on the wire
pytest_plugins = ("s3_server",)

# `ci` is bounded for a 2-core machine; `dev` is the everyday local run; `thorough` is what
# `nox -s slow` uses. CI=true selects `ci` unless HYPOTHESIS_PROFILE says otherwise.
settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what the imports made, so that a full garbage collection skips it.

    Collecting imports torch, transformers, Lightning, ...: some 670,000 objects that live as
    long as the process. Every full collection (each ``gc.collect()`` a test makes to finalize
    a loader, and the interpreter's own) traversed all of them, a second or two each in the
    whole run. Objects made afterwards, by the tests, are collected as before.
    """
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run only when ``-m`` names them (``nox -s slow`` does)."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow (nox -s slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_accelerate_state_left_behind() -> Iterator[None]:
    """Forget Accelerate's process-wide state after each test that made it.

    A loader's pass joins Accelerate's ``GradientState`` whenever an ``Accelerator`` made it
    in the process (issue 21), so a test that made one (a transformers ``Trainer`` does) must
    not leave it to the tests after it. Costs nothing where Accelerate was never imported.
    """
    yield
    state = sys.modules.get("accelerate.state")
    if state is not None:
        state.AcceleratorState._reset_state(True)
        state.GradientState._reset_state()
