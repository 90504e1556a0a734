"""Issue 21: a worker that fails starting up is named with its likely cause, not as restartable.

With start method ``spawn`` or ``forkserver`` a worker imports the main module and unpickles
the loader's objects before its first batch. A script without an ``if __name__ ==
"__main__":`` guard kills every worker there, and so does an import that fails in the worker:
new workers would fail the same way, so the ``WorkerError`` must say what to fix, and must not
say that the loader stays usable.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import loaderkit
from loaderkit import DataLoaderBuilder
from loaderkit.errors import WorkerError
from loaderkit.runtime.workers.pool import main_module_unguarded

pytestmark = pytest.mark.timeout(240)

_SCRIPT = textwrap.dedent(
    """
    import json
    import torch
    from loaderkit import DataLoaderBuilder
    from loaderkit.errors import WorkerError

    class Numbers(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            return i

    loader = (
        DataLoaderBuilder()
        .with_dataset(Numbers())
        .with_batch_size(2)
        .with_workers(1, start_method=START_METHOD)
        .build()
    )
    for attempt in range(2):  # the second iteration starts new workers: they fail the same way
        try:
            list(loader)
        except WorkerError as error:
            print(json.dumps({"message": str(error), "restartable": error.restartable}))
    """
)


def _run_script(path: Path) -> subprocess.CompletedProcess[str]:
    root = str(Path(loaderkit.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=path.parent,
        env=env,
        check=False,
    )


# both start by importing the main module (one code path); forkserver's server costs ~12 s more
@pytest.mark.parametrize(
    "start_method", ["spawn", pytest.param("forkserver", marks=pytest.mark.slow)]
)
def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path: Path, start_method: str):
    script = tmp_path / "train_no_guard.py"
    script.write_text(f"START_METHOD = {start_method!r}\n" + _SCRIPT)
    done = _run_script(script)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 2, (done.stdout, done.stderr[-3000:])
    for report in reports:
        message = report["message"]
        assert report["restartable"] is False
        assert "before its first batch, while starting up" in message
        assert f"with start method {start_method!r} every worker imports the main module" in message
        assert str(script) in message
        assert 'has no `if __name__ == "__main__":` guard' in message
        assert "would start the workers the same way and fail again" in message
        assert "stays usable" not in message


class NeedsAMissingModule(torch.utils.data.Dataset[int]):
    """A dataset whose unpickling imports a module workers do not have."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        return i

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (importlib.import_module, ("lk_no_such_module_in_workers",))


class StreamNeedingAMissingModule(torch.utils.data.IterableDataset[int]):
    """The same for an iterable source."""

    def __iter__(self) -> Iterator[int]:
        return iter(range(8))

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (importlib.import_module, ("lk_no_such_module_in_workers",))


@pytest.mark.parametrize("source", [NeedsAMissingModule, StreamNeedingAMissingModule])
def test_an_import_failing_in_a_worker_is_named(source: type[Any]):
    builder = DataLoaderBuilder().with_dataset(source()).with_batch_size(2)
    loader = builder.with_workers(1, start_method="spawn").build()
    try:
        for _ in range(2):  # new workers fail the same way
            with pytest.raises(WorkerError) as error:
                list(loader)
            message = str(error.value)
            assert error.value.restartable is False
            assert error.value.worker_id == 0
            assert message.startswith(
                "worker 0 could not unpickle the loader's objects (the dataset, the collator, "
                "the transform) while starting up: ModuleNotFoundError: No module named "
                "'lk_no_such_module_in_workers'"
            )
            assert "fail again" in message and "stays usable" not in message
            assert "The worker's traceback:" in message
    finally:
        loader.close()


class ExitsInItsFirstBatch(torch.utils.data.Dataset[int]):
    """A worker that got through start-up, then exits: not a start-up failure."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if torch.utils.data.get_worker_info() is not None:
            os._exit(3)
        return i


def test_a_worker_exiting_in_its_first_batch_did_not_fail_starting_up():
    builder = DataLoaderBuilder().with_dataset(ExitsInItsFirstBatch()).with_batch_size(2)
    loader = builder.with_workers(1, start_method="spawn").build()
    with loader, pytest.raises(WorkerError, match="exit code 3") as error:
        list(loader)
    assert error.value.restartable is True
    assert "stays usable" in str(error.value)
    assert "starting up" not in str(error.value)


@pytest.mark.parametrize(
    ("source", "unguarded"),
    [
        ("print('train')\n", True),
        ("if __name__ == '__main__':\n    print('train')\n", False),
        ('if "__main__" == __name__:\n    print("train")\n', False),
        ("def main():\n    if __name__ == '__main__':\n        pass\n", True),  # not top level
    ],
)
def test_the_main_guard_is_read_from_the_main_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, unguarded: bool
):
    path = tmp_path / "script.py"
    path.write_text(source)
    main = types.ModuleType("__main__")
    main.__file__ = str(path)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert main_module_unguarded() == (str(path) if unguarded else None)
    del main.__file__  # a notebook, python -c: no file to read
    assert main_module_unguarded() is None
