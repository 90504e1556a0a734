"""The documentation's code runs, and prints what the documentation says it prints.

For README.md and every Markdown file in docs/:

- Every ```python block runs. The blocks of one file run in order in one namespace (a fresh
  ``__main__`` module, as in a script or a notebook), in a child process whose working
  directory is a temporary directory. That directory holds a copy of the non-Markdown files of
  docs/ under ``docs/`` (so ``"docs/example-plan.toml"`` resolves as from the repository root).
  The first block that raises stops the file: the blocks after it usually depend on it.
- A ```python block followed directly (only blank lines between) by a ```text, ```json or
  ```toml block must print exactly that block. Normalization, applied to both sides: trailing
  whitespace is ignored (per line and at the end), and memory addresses in default reprs
  (``<object at 0x7f3a...>``) compare equal. Nothing else varies: doc examples are
  deterministic, and fingerprints are sha256 over plan data, so they are compared exactly.
- A block directly preceded by the line ``<!-- no-run -->`` is not run (nor is its output
  compared). Use it only for code that cannot run here, such as a torchrun launch.
- Every ```toml / ```json block that holds a plan (a ``schema_version`` key), and every plan
  file in docs/, loads with ``require_bindings=False``.

Speed: torch is imported once per test session, by a server process that forks one child per
Markdown file (where ``os.fork`` is missing, each file gets a fresh interpreter instead). Each
file has a time limit; a file that exceeds it is killed with its worker processes, and the
failure names the block that was running.

To regenerate the outputs after a change, run each block and paste what it prints; failures
show a diff (``--- doc`` / ``+++ printed``) naming the file and line.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from loaderkit import LoaderPlan
from loaderkit.plan.sections import with_fingerprint_table
from loaderkit.testing.conformance import with_conformance_tables

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_FILES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
FILE_TIME_LIMIT = 120.0
"""Seconds one Markdown file's blocks may take, all together."""
START_TIME_LIMIT = 120.0
"""Seconds the server may take to import torch and loaderkit."""

NO_RUN = "<!-- no-run -->"
OUTPUT_LANGS = ("text", "json", "toml")
_FENCE = re.compile(r"^(?P<indent> *)(?P<ticks>`{3,})(?P<info>[^`]*)$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


# -- Markdown ----------------------------------------------------------------------------------


@dataclass
class Block:
    """One fenced code block of a Markdown file."""

    lang: str
    code: str
    line: int
    """1-based line number of the opening fence."""
    end: int
    """1-based line number of the closing fence."""
    no_run: bool = False
    output: Block | None = field(default=None, repr=False)
    """The output block that directly follows a python block, if any."""


def parse_blocks(text: str) -> list[Block]:
    """The fenced code blocks of ``text``, with python blocks paired to their output block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, ticks = len(opening["indent"]), opening["ticks"]
        lang = opening["info"].strip().split(" ")[0].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing and closing["ticks"].startswith(ticks) and not closing["info"].strip():
                break
            text = lines[j]
            body.append(text[indent:] if text[:indent] == " " * indent else text.lstrip(" "))
            j += 1
        else:
            raise ValueError(f"line {i + 1}: code block is never closed")
        before = [line.strip() for line in lines[:i] if line.strip()]
        no_run = bool(before) and before[-1] == NO_RUN
        blocks.append(Block(lang, "\n".join(body), i + 1, j + 1, no_run))
        i = j + 1
    for first, second in itertools.pairwise(blocks):
        between = lines[first.end : second.line - 1]
        if (
            first.lang == "python"
            and second.lang in OUTPUT_LANGS
            and not any(line.strip() for line in between)
        ):
            first.output = second
    return blocks


def normalize(text: str) -> str:
    """Output as compared: no trailing whitespace, memory addresses blanked."""
    text = _ADDRESS.sub(" at 0x...", text)
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- running blocks ----------------------------------------------------------------------------

# The code of the child process. It serves jobs (one Markdown file each) read as JSON lines
# from stdin, forking a child per job so that torch is imported once; `--job FILE` runs one job
# in this process instead (where there is no fork). A job's child appends one JSON line per
# event to the job's results file: {"start": line} before a block, then {"line": ..., "out":
# ..., "error": ...} after it.
_SERVER = r"""
import contextlib, io, json, os, signal, sys, time, traceback, types

def run_job(job):
    os.chdir(job["cwd"])
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    namespace = main.__dict__
    with open(job["results"], "a", encoding="utf-8") as results:
        def emit(event):
            results.write(json.dumps(event) + "\n")
            results.flush()
        for block in job["blocks"]:
            emit({"start": block["line"]})
            source = "\n" * block["line"] + block["code"]
            out = io.StringIO()
            error = None
            with contextlib.redirect_stdout(out):
                try:
                    exec(compile(source, job["filename"], "exec"), namespace)
                except BaseException as exc:
                    error = "".join(
                        traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
                    )
            emit({"line": block["line"], "out": out.getvalue(), "error": error})
            if error is not None:
                break

def serve():
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # stray prints must not reach the protocol
    for name in ("torch", "numpy", "datasets", "loaderkit"):
        with contextlib.suppress(ImportError):
            __import__(name)
    protocol.write("ready\n")
    protocol.flush()
    for request in sys.stdin:
        job = json.loads(request)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.setpgid(0, 0)
                log = os.open(job["results"] + ".log", os.O_WRONLY | os.O_CREAT)
                os.dup2(log, 1)
                os.dup2(log, 2)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                sys.stdout.flush()
                run_job(job)
                sys.stdout.flush()
                sys.stderr.flush()
                status = 0
            finally:
                os._exit(status)
        deadline = time.monotonic() + job["time_limit"]
        timed_out = False
        while True:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code = 0
                break
            time.sleep(0.01)
        protocol.write(json.dumps({"timed_out": timed_out, "status": code}) + "\n")
        protocol.flush()

if sys.argv[1:2] == ["--job"]:
    with open(sys.argv[2], encoding="utf-8") as f:
        run_job(json.load(f))
else:
    serve()
"""


@dataclass
class Outcome:
    """What running the python blocks of one file gave."""

    results: dict[int, dict[str, object]]
    """By block line: ``out`` (stdout) and ``error`` (a traceback, or None)."""
    timed_out: bool
    log: str


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)  # the docs describe a single process
    env["PYTHONUNBUFFERED"] = "1"
    return env


class DocRunner:
    """Runs the python blocks of Markdown files in isolated child processes."""

    def __init__(self, scratch: Path) -> None:
        self._server: subprocess.Popen[str] | None = None
        if hasattr(os, "fork"):
            log = scratch / "server.log"
            with log.open("w") as stderr:
                self._server = subprocess.Popen(
                    [sys.executable, "-c", _SERVER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                    env=_child_env(),
                    start_new_session=True,
                )
            reply = self._read_line(START_TIME_LIMIT)
            if reply != "ready":
                self.close()
                raise RuntimeError(
                    f"the doc server did not start (got {reply!r}):\n{log.read_text()[-3000:]}"
                )

    def _read_line(self, timeout: float) -> str:
        assert self._server is not None and self._server.stdout is not None
        ready, _, _ = select.select([self._server.stdout], [], [], timeout)
        if not ready:
            return ""
        return self._server.stdout.readline().strip()

    def run(self, path: Path, blocks: list[Block], workdir: Path) -> Outcome:
        """Run ``blocks`` of the Markdown file ``path`` with ``workdir`` as the cwd."""
        results_file = workdir.parent / f"{workdir.name}-results.jsonl"
        results_file.write_text("")
        job = {
            "blocks": [{"line": b.line, "code": b.code} for b in blocks],
            "cwd": str(workdir),
            "filename": str(path),
            "results": str(results_file),
            "time_limit": FILE_TIME_LIMIT,
        }
        timed_out = False
        if self._server is not None:
            assert self._server.stdin is not None
            self._server.stdin.write(json.dumps(job) + "\n")
            self._server.stdin.flush()
            reply = self._read_line(FILE_TIME_LIMIT + 30)
            if not reply:
                raise RuntimeError(f"the doc server stopped answering while running {path}")
            timed_out = json.loads(reply)["timed_out"]
        else:  # pragma: no cover - platforms without fork
            job_file = workdir.parent / f"{workdir.name}-job.json"
            job_file.write_text(json.dumps(job))
            try:
                subprocess.run(
                    [sys.executable, "-c", _SERVER, "--job", str(job_file)],
                    timeout=FILE_TIME_LIMIT,
                    capture_output=True,
                    env=_child_env(),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                timed_out = True
        results: dict[int, dict[str, object]] = {}
        for line in results_file.read_text().splitlines():
            event = json.loads(line)
            if "start" not in event:
                results[event["line"]] = event
        log_file = Path(f"{results_file}.log")
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        return Outcome(results, timed_out, log)

    def close(self) -> None:
        """Stop the server (it exits when its stdin closes)."""
        server, self._server = self._server, None
        if server is None:
            return
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="session")
def doc_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocRunner]:
    runner = DocRunner(tmp_path_factory.mktemp("doc-server"))
    yield runner
    runner.close()


# -- the tests ---------------------------------------------------------------------------------


def _prepare(tmp_path: Path) -> Path:
    workdir = tmp_path / "cwd"
    (workdir / "docs").mkdir(parents=True)
    for item in DOCS.iterdir():
        if item.is_file() and item.suffix != ".md":
            (workdir / "docs" / item.name).write_bytes(item.read_bytes())
    return workdir


def _problems(path: Path, blocks: list[Block], outcome: Outcome) -> list[str]:
    name = _relative(path)
    problems = []
    stopped_at = None
    for index, block in enumerate(blocks):
        where = f"{name}:{block.line}"
        result = outcome.results.get(block.line)
        if result is None:
            if outcome.timed_out:
                problems.append(
                    f"{where}: the block did not finish: the blocks of {name} took longer than "
                    f"{FILE_TIME_LIMIT:g} s and were stopped"
                )
            else:
                problems.append(
                    f"{where}: the block did not finish: the process running it died\n"
                    f"{outcome.log[-3000:]}"
                )
            stopped_at = index
            break
        if result["error"] is not None:
            problems.append(f"{where}: the block raised\n{result['error']}")
            stopped_at = index
            break
        if block.output is None:
            continue
        printed, documented = normalize(str(result["out"])), normalize(block.output.code)
        if printed != documented:
            diff = difflib.unified_diff(
                documented.splitlines(),
                printed.splitlines(),
                f"doc ({name}:{block.output.line})",
                "printed",
                lineterm="",
            )
            problems.append(f"{where}: the block prints something else\n" + "\n".join(diff))
    if stopped_at is not None and stopped_at + 1 < len(blocks):
        later = len(blocks) - stopped_at - 1
        problems.append(f"({later} later block(s) of {name} were not run)")
    return problems


@pytest.mark.parametrize("path", DOC_FILES, ids=[_relative(p) for p in DOC_FILES])
def test_python_blocks_run_and_print_what_the_doc_shows(
    path: Path, tmp_path: Path, doc_runner: DocRunner
) -> None:
    blocks = [b for b in parse_blocks(path.read_text(encoding="utf-8")) if b.lang == "python"]
    runnable = [b for b in blocks if not b.no_run]
    if not runnable:
        pytest.skip(f"{_relative(path)} has no python block to run")
    started = time.monotonic()
    outcome = doc_runner.run(path, runnable, _prepare(tmp_path))
    problems = _problems(path, runnable, outcome)
    if problems:
        took = time.monotonic() - started
        pytest.fail("\n\n".join([*problems, f"(ran for {took:.1f} s)"]), pytrace=False)


def _plan_documents() -> list[tuple[str, str, str]]:
    documents = []
    for path in DOC_FILES:
        for block in parse_blocks(path.read_text(encoding="utf-8")):
            if block.lang in ("toml", "json") and "schema_version" in block.code:
                documents.append((f"{_relative(path)}:{block.line}", block.lang, block.code))
    for path in sorted(DOCS.glob("*.toml")) + sorted(DOCS.glob("*.json")):
        documents.append((_relative(path), path.suffix[1:], path.read_text(encoding="utf-8")))
    return documents


PLAN_DOCUMENTS = _plan_documents()


@pytest.mark.parametrize(
    ("where", "suffix", "text"), PLAN_DOCUMENTS, ids=[d[0] for d in PLAN_DOCUMENTS]
)
def test_plan_documents_load(where: str, suffix: str, text: str, tmp_path: Path) -> None:
    plan_file = tmp_path / f"plan.{suffix}"
    plan_file.write_text(text, encoding="utf-8")
    try:
        plan = LoaderPlan.load(plan_file, require_bindings=False)
    except Exception as exc:  # noqa: BLE001 - any failure is reported with the doc's place
        pytest.fail(f"{where}: the plan does not load: {type(exc).__name__}: {exc}", pytrace=False)
    assert LoaderPlan.from_dict(plan.to_dict(), require_bindings=False) == plan


GENERATED_TABLES = [
    pytest.param(
        "docs/plan-format.md",
        with_fingerprint_table,
        "the fingerprint table differs from loaderkit.plan.sections' declarations; paste "
        "fingerprint_table() in its place",
        id="fingerprint",
    ),
    pytest.param(
        "docs/loader.md",
        with_conformance_tables,
        "the habits or differences table differs from loaderkit.testing.conformance (the data "
        "tests/conformance checks); paste habits_table() / differences_table() in its place",
        id="conformance",
    ),
]


@pytest.mark.parametrize(("page", "make", "fix"), GENERATED_TABLES)
def test_the_generated_tables_are_the_ones_the_data_make(
    page: str, make: Callable[[str], str], fix: str
) -> None:
    """Tables made from data (section declarations, conformance data) are committed as made."""
    text = (ROOT / page).read_text(encoding="utf-8")
    expected = make(text)
    if text != expected:
        diff = "\n".join(
            difflib.unified_diff(text.splitlines(), expected.splitlines(), lineterm="")
        )
        pytest.fail(f"{page}: {fix}:\n{diff}", pytrace=False)


def test_the_parser_pairs_blocks_and_honours_no_run() -> None:
    text = "\n".join(
        [
            "```python",  # 1
            "print(1)",
            "```",
            "",
            "```text",  # 5
            "1",
            "```",
            "<!-- no-run -->",
            "",
            "```python",  # 10
            "launch()",
            "```",
            "prose",
            "```text",  # 14
            "not an output: prose comes first",
            "```",
            "````python",  # 17
            "s = '```'",
            "````",
        ]
    )
    blocks = parse_blocks(text)
    assert [(b.lang, b.line, b.end, b.no_run) for b in blocks] == [
        ("python", 1, 3, False),
        ("text", 5, 7, False),
        ("python", 10, 12, True),
        ("text", 14, 16, False),
        ("python", 17, 19, False),
    ]
    assert blocks[0].output is blocks[1]
    assert blocks[2].output is None
    assert blocks[4].code == "s = '```'"
    assert normalize("<f at 0x7f3a2b1c>  \nx\n\n") == normalize("<f at 0x55d0>\nx")


def test_the_docs_have_checked_examples() -> None:
    blocks = [b for p in DOC_FILES for b in parse_blocks(p.read_text(encoding="utf-8"))]
    python = [b for b in blocks if b.lang == "python"]
    assert len(python) >= 30
    assert sum(b.output is not None for b in python) >= 20
    assert len(PLAN_DOCUMENTS) >= 2
