"""The public signatures, as type checkers see them: mypy --strict on tests/typing/.

``usage.py`` must type-check, and each ``reveal_type`` must reveal the type written after
``# revealed:``; ``typos.py`` holds misspelt choices, each silenced by ``# type:
ignore[arg-type]`` and checked with ``--warn-unused-ignores``, so a typo the signatures stop
catching fails this test.
"""

from __future__ import annotations

import re
from pathlib import Path

import mypy.api as mypy_api  # the test extra installs mypy: never skipped
import pytest

HERE = Path(__file__).parent / "typing"
FILES = [HERE / "usage.py", HERE / "typos.py"]
REVEALED = re.compile(r'^(?P<file>[^:]+):(?P<line>\d+): note: Revealed type is "(?P<type>.*)"$')


def _expected() -> dict[int, str]:
    lines = (HERE / "usage.py").read_text().splitlines()
    return {
        number: line.split("# revealed: ", 1)[1].strip()
        for number, line in enumerate(lines, start=1)
        if "# revealed: " in line
    }


@pytest.mark.timeout(300)
def test_mypy_strict_accepts_the_usage_reveals_its_types_and_catches_the_typos(tmp_path):
    typos = (HERE / "typos.py").read_text().splitlines()
    assert sum("# type: ignore[arg-type]" in line for line in typos) >= 10
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--warn-unused-ignores",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            *map(str, FILES),
        ]
    )
    revealed = {}
    others = []
    for line in out.splitlines():
        found = REVEALED.match(line)
        if found and found["file"].endswith("usage.py"):
            revealed[int(found["line"])] = found["type"]
        else:
            others.append(line)
    assert not others, "\n".join(others)  # errors, or a typo that no longer is one
    assert not err, err
    assert status in (0, 1)  # 1: the reveal_type notes
    assert revealed == _expected()
