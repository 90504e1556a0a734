"""The repository keeps its promises: README commands match CI, files exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = _readme_commands()
    assert len(commands) >= 2
    test_command = commands[1].strip()
    assert "pytest" in test_command
    assert test_command in [line.strip() for line in ci]


def test_ci_script_is_executable_and_strict():
    ci = ROOT / ".ci" / "run"
    assert ci.stat().st_mode & 0o111
    assert "set -euo pipefail" in ci.read_text()


def test_package_is_typed():
    assert (ROOT / "loaderkit" / "py.typed").exists()


def _modules() -> list[str]:
    import pkgutil

    import loaderkit

    names = ["loaderkit"]
    names += [m.name for m in pkgutil.walk_packages(loaderkit.__path__, "loaderkit.")]
    return names


def test_every_module_declares_its_public_names():
    """``__all__`` in every module, each name defined: what IDEs and ``import *`` offer."""
    import ast

    for name in _modules():
        path = ROOT / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = ROOT / name.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text())
        declared = [
            node
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
        ]
        assert declared, f"{name} has no __all__"
        assert len(declared) == 1, f"{name} assigns __all__ {len(declared)} times (one wins)"


def test_no_public_name_shadows_a_common_package():
    """``from loaderkit.x import *`` (or one name) never hides stdlib or an installed package."""
    import importlib
    import importlib.metadata
    import sys

    common = set(sys.stdlib_module_names) | set(importlib.metadata.packages_distributions())
    common |= {"torch", "numpy", "datasets", "transformers", "accelerate", "lightning", "PIL"}
    for name in _modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        public = list(getattr(module, "__all__", ()))
        missing = [n for n in public if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it does not define: {missing}"
        assert not [n for n in public if n in common], f"{name} shadows {common & set(public)}"
