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
