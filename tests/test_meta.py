"""The repository keeps its promises: README commands match CI, files exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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


def _pyproject() -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    with (ROOT / "pyproject.toml").open("rb") as f:
        data: dict[str, Any] = tomllib.load(f)
    return data


def _names(requirements: list[str]) -> list[str]:
    """Distribution names of requirement strings (``"torch>=2.1"`` -> ``"torch"``)."""
    return [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower() for r in requirements]


def _install_comment(extra: str) -> str:
    """The comment of getting-started's ``pip install -e <target>`` line, continuations too."""
    target = "." if not extra else f"'.[{extra}]'"
    lines = (ROOT / "docs" / "getting-started.md").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"python -m pip install -e {target} "):
            comment = [line.split("#", 1)[1]]
            for after in lines[i + 1 :]:
                if not after.lstrip().startswith("#"):
                    break
                comment.append(after.split("#", 1)[1])
            return " ".join(comment).lower()
    raise AssertionError(f"docs/getting-started.md has no `pip install -e {target}` line")


def test_the_install_comments_name_what_each_install_pulls():
    project = _pyproject()["project"]
    for extra, requirements in [
        ("", project["dependencies"]),
        *((e, project["optional-dependencies"][e]) for e in ("vision", "test")),
    ]:
        comment = _install_comment(extra)
        missing = [n for n in _names(requirements) if not re.search(rf"\b{n}\b", comment)]
        assert not missing, f"the install comment of {extra or 'the package'} omits {missing}"


def test_the_vision_extra_installs_what_the_vision_guide_imports():
    import sys

    project = _pyproject()["project"]
    installed = {
        *_names(project["dependencies"]),
        *_names(project["optional-dependencies"]["vision"]),
    }
    text = (ROOT / "docs" / "vision.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.+?)\n```", text, flags=re.S))
    modules = set(re.findall(r"^\s*(?:from|import) (\w+)", code, flags=re.M))
    distributions = {"PIL": "pillow"}
    needed = {
        distributions.get(m, m).lower()
        for m in modules
        if m not in sys.stdlib_module_names and m != "loaderkit"
    }
    assert "torchvision" in needed  # the recipe's transforms: the check has something to check
    assert needed <= installed, f"[vision] lacks {sorted(needed - installed)}"


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80  # without its docstring


def _package_files() -> list[Path]:
    return sorted((ROOT / "loaderkit").rglob("*.py"))


def _function_lengths(path: Path) -> list[tuple[str, int]]:
    import ast

    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0]
            has_doc = (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and len(body) > 1
            )
            start = body[1].lineno if has_doc else first.lineno
            out.append((node.name, (node.end_lineno or start) - start + 1))
    return out


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _package_files()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long}"


def test_no_function_is_over_80_lines():
    long = [
        f"{p.relative_to(ROOT)}:{name} ({n} lines)"
        for p in _package_files()
        for name, n in _function_lengths(p)
        if n > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines without docstring: {long}"


def test_the_size_checks_can_fail(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('def f():\n    """Doc."""\n' + "    x = 1\n" * 81)
    assert _function_lengths(source) == [("f", 81)]


def _architecture_folders() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return set(re.findall(r"`(loaderkit(?:/[a-z_]+)*)/`", text))


def test_the_architecture_map_names_folders_that_exist():
    named = _architecture_folders()
    assert len(named) >= 15
    missing = sorted(f for f in named if not (ROOT / f / "__init__.py").is_file())
    assert not missing, f"docs/architecture.md names folders that are not packages: {missing}"


def test_the_architecture_map_names_every_package_folder():
    packages = {
        str(init.parent.relative_to(ROOT)) for init in (ROOT / "loaderkit").rglob("__init__.py")
    }
    unnamed = sorted(packages - _architecture_folders())
    assert not unnamed, f"docs/architecture.md does not name: {unnamed} (add a row)"


def test_the_slow_run_page_lists_every_file_with_a_slow_mark():
    """docs/test-suite.md names, in its table, exactly the test files that mark something slow."""
    marked = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"\bpytest\.mark\.slow\b", path.read_text())
    }
    page = (ROOT / "docs" / "test-suite.md").read_text()
    section = page.split("## What only the slow run covers", 1)[1]
    listed = re.findall(r"^\| `(tests/[\w/]+\.py)` \| \S", section, flags=re.M)
    assert len(listed) == len(set(listed)), "a file is listed twice"
    assert sorted(listed) == listed, "list the files in path order"
    assert set(listed) == marked, (
        f"missing from the page: {sorted(marked - set(listed))}; "
        f"listed without a slow mark: {sorted(set(listed) - marked)}"
    )
