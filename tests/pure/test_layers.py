"""The layering: the plan layer works without torch; the public surface is what __all__ says."""

from __future__ import annotations

import subprocess
import sys
import typing

import loaderkit


def test_building_and_saving_a_plan_never_imports_torch(tmp_path):
    code = f"""
import sys
import loaderkit
plan = (loaderkit.DataLoaderBuilder().with_dataset({{"x": [1.0, 2.0, 3.0]}}, name="t")
        .with_batch_size(2).with_shuffle().with_workers(2).compile())
plan.save({str(tmp_path / "p.toml")!r})
again = loaderkit.LoaderPlan.load(
    {str(tmp_path / "p.toml")!r}, bindings={{"t": {{"x": [1.0, 2.0, 3.0]}}}}
)
assert again == plan
plan.explain(); plan.diff(again)
print(sorted(m for m in ("torch", "datasets") if m in sys.modules))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_planners_and_the_shared_records_never_import_torch():
    # the planners read plans (batch lists, lengths, schedules); torch is for the fetchers
    code = (
        "import sys\n"
        "import loaderkit.runtime.planners, loaderkit.runtime.records\n"
        "print(sorted(m for m in ('torch', 'datasets') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


def test_public_names_are_exported_and_documented():
    for name in loaderkit.__all__:
        obj = getattr(loaderkit, name)
        if typing.get_origin(obj) is typing.Literal:  # a type alias: documented in the docs
            continue
        if callable(obj) and not isinstance(obj, str):
            assert obj.__doc__, f"loaderkit.{name} has no docstring"


def test_the_assert_helpers_import_without_hypothesis():
    code = (
        "import sys\n"
        "sys.modules['hypothesis'] = None  # as if it were not installed\n"
        "from loaderkit.testing import assert_batches_equal, assert_resumable\n"
        "try:\n"
        "    from loaderkit.testing import plans\n"
        "except ImportError as exc:\n"
        "    print('hint' if 'loaderkit[test]' in str(exc) else exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "hint"
