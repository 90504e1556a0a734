"""A batch check a preset set names the preset and its options when it fails.

The loader makes its checker with ``loaderkit.checks.batch_checker(plan)``; these tests build
the loader and read its first batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from loaderkit import DataError, DataLoaderBuilder, presets
from loaderkit.checks import batch_checker

TUPLES = [(np.zeros((3, 8, 8), dtype=np.float32), i % 2) for i in range(16)]
MISSING = "make the collator return 'pixel_values', or fix the key in with_checks"
NOTE = (
    "; with_checks was set by the preset image_classification (options "
    "image_key='pixel_values', checks=True; pass image_key=None for (image, label) tuples, or "
    "checks=False for no checks)"
)


def _first_batch_error(builder: DataLoaderBuilder) -> str:
    with builder.compile().build() as loader, pytest.raises(DataError) as err:
        next(iter(loader))
    return str(err.value)


@pytest.mark.timeout(120)
def test_image_classification_on_tuples_names_the_preset_and_image_key():
    message = _first_batch_error(presets.image_classification(TUPLES, batch_size=4))
    assert message.startswith("batch check failed: 'pixel_values' (keys) in epoch 0, batch 0")
    assert message.endswith(MISSING + NOTE)
    # and the option the message names is the fix
    report = presets.image_classification(TUPLES, batch_size=4, image_key=None).compile().check()
    assert "keys       0: present" in str(report)


@pytest.mark.timeout(120)
def test_checks_the_user_gave_keep_their_message():
    chain = (
        DataLoaderBuilder()
        .with_dataset(TUPLES)
        .with_batch_size(4)
        .with_checks(keys=["pixel_values"])
    )
    assert _first_batch_error(chain).endswith(MISSING)
    # a preset's builder whose checks the user replaced: the checks are the user's
    replaced = presets.image_classification(TUPLES, batch_size=4).with_checks(keys=["pixel_values"])
    assert _first_batch_error(replaced).endswith(MISSING)


def test_a_plan_without_checks_has_no_checker():
    plan = presets.image_classification(TUPLES, batch_size=4).without("checks").compile()
    assert batch_checker(plan) is None
