"""The collator registry: registration, listing, entry-point plugins, option checks."""

from __future__ import annotations

import sys
import textwrap

import pytest

import loaderkit as lk
from loaderkit import DataLoaderBuilder, register_collator
from loaderkit.collators import collators
from loaderkit.registry import Registry


def test_decorator_registration_lists_with_description_and_modality():
    @register_collator("test-listed", modality="audio", description="pads audio clips")
    def factory(*, sample_rate: int = 16_000):
        return list

    try:
        assert "test-listed" in collators.names()
        entry = collators.get("test-listed")
        assert (entry.modality, entry.description, entry.origin) == (
            "audio",
            "pads audio clips",
            "user",
        )
        assert "test-listed" in collators.describe()
        assert "pads audio clips" in collators.describe()
    finally:
        collators.unregister("test-listed")


def test_a_taken_name_needs_replace():
    with pytest.raises(ValueError, match="replace=True"):
        register_collator("default", list)


def test_the_description_defaults_to_the_docstring():
    def factory():
        """Collate nothing at all.

        More text.
        """
        return list

    register_collator("test-doc", factory)
    try:
        assert collators.get("test-doc").description == "Collate nothing at all."
    finally:
        collators.unregister("test-doc")


def test_validating_factories_refuse_bad_values_at_compile():
    def factory(*, size: int = 1):
        if size < 1:
            raise ValueError(f"size must be >= 1 (got {size})")
        return list

    register_collator("test-validate", factory, validate=True)
    try:
        with pytest.raises(lk.PlanError) as err:
            DataLoaderBuilder().with_dataset([1]).with_collator("test-validate", size=0)
        assert err.value.paths == ("collator.options",)
        assert "size must be >= 1 (got 0)" in str(err.value)
    finally:
        collators.unregister("test-validate")


def test_required_options_are_named():
    def factory(*, vocab_size: int):
        return list

    register_collator("test-required", factory)
    try:
        with pytest.raises(lk.PlanError) as err:
            DataLoaderBuilder().with_dataset([1]).with_collator("test-required")
        assert err.value.paths == ("collator.options.vocab_size",)
    finally:
        collators.unregister("test-required")


def test_entry_point_plugins_are_loaded_on_first_lookup(tmp_path, monkeypatch):
    pkg = tmp_path / "lk_fake_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            '''
            def make_audio(*, sample_rate: int = 16000):
                """Pad audio clips (a plugin)."""
                return list
            '''
        )
    )
    dist = tmp_path / "lk_fake_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lk-fake-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[loaderkit.test_collators]\nplugin-audio = lk_fake_plugin:make_audio\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry = Registry("collator", entry_point_group="loaderkit.test_collators")
    assert "lk_fake_plugin" not in sys.modules
    assert "plugin-audio" in registry
    entry = registry.get("plugin-audio")
    assert entry.origin.startswith("entry point lk_fake_plugin:make_audio")
    assert entry.description == "Pad audio clips (a plugin)."
    assert registry.names() == ["plugin-audio"]


def test_unknown_names_suggest_and_list():
    with pytest.raises(lk.LoaderkitError) as err:
        collators.get("defalt")
    assert "did you mean 'default'" in str(err.value)
    assert "register_collator" in str(err.value)


def test_registered_collators_work_under_spawn(tmp_path):
    # a user collator defined in a module, used by spawn workers
    import subprocess

    (tmp_path / "lk_user_collate.py").write_text(
        textwrap.dedent(
            """
            import torch
            import loaderkit

            @loaderkit.register_collator("user-sum")
            def make_sum(*, scale: int = 1):
                return Summer(scale)

            class Summer:
                def __init__(self, scale):
                    self.scale = scale
                def __call__(self, samples):
                    return torch.tensor([sum(samples) * self.scale])
            """
        )
    )
    code = textwrap.dedent(
        """
        import lk_user_collate, loaderkit
        plan = (loaderkit.DataLoaderBuilder().with_dataset(list(range(8))).with_batch_size(4)
                .with_collator("user-sum", scale=2).with_workers(2, start_method="spawn")
                .compile())
        with plan.build() as loader:
            print([int(b) for b in loader])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[12, 44]"
