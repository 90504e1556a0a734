"""The example notebook is stored clean and runs top to bottom in a fresh kernel.

The kernel is the ``python3`` kernelspec that ipykernel (in the ``test`` extra) provides; it
runs this interpreter (jupyter_client starts kernelspecs whose command is ``python`` with
``sys.executable``), so it sees the loaderkit under test.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

from loaderkit.plan.display import MONOSPACE

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
CELL_TIMEOUT = 120
"""Seconds one cell may run."""


def _read(path: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_there_is_a_notebook():
    assert [p.name for p in NOTEBOOKS] == ["quickstart.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_are_stored_without_outputs(path):
    code = [c for c in _read(path).cells if c.cell_type == "code"]
    assert code
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, (
        f"{path.name}: code cells {dirty} hold outputs or execution counts; strip them "
        f"(`jupyter nbconvert --clear-output --inplace {path.name}`) before committing"
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_run_in_a_fresh_kernel(path, tmp_path):
    notebook = _read(path)
    name = notebook.metadata.kernelspec.name
    try:
        KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        pytest.fail(f"no {name!r} kernel: install ipykernel (pip install -e '.[test]')")
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name=name,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o.data["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    # the builder (twice: compiling, then not), the plan and the loader show their HTML view
    assert len(html) == 4
    assert sum('class="loaderkit-settings"' in h for h in html) == 3
    assert sum('class="loaderkit-problems"' in h for h in html) == 1
    # monospace named on the elements: nbconvert's and JupyterLab's stylesheets cannot undo it
    assert all(MONOSPACE in h for h in html)
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "resumed: the remaining 13 batches are identical" in printed
