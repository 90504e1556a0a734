"""Developer sessions: `nox -s tests lint typecheck`, `nox -s slow`, `nox -s bench`, ..."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck", "examples"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The default test run (hypothesis `ci` profile), as .ci/run does it."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def slow(session: nox.Session) -> None:
    """Exhaustive variants: more hypothesis examples and the tests marked slow."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-m", "slow or not slow", *session.posargs, env={"HYPOTHESIS_PROFILE": "thorough"}
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and format check) and the import-linter layer contracts."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, and the typed usage and typos of tests/typing."""
    session.install("-e", ".[dev]")
    session.run("mypy")
    session.run("mypy", "--strict", "--warn-unused-ignores", "tests/typing")


@nox.session(python=PYTHON)
def examples(session: nox.Session) -> None:
    """Run every script in examples/."""
    session.install("-e", ".[test]")
    session.run("pytest", "tests/test_examples.py")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Redraw the guide's plots, run every code block of the docs, build the site (strict)."""
    session.install("-e", ".[dev]")
    session.run("python", "docs/plots/sampling_plots.py")
    session.run("pytest", "tests/test_docs.py")
    # mkdocs.yml: warnings (broken links or anchors, pages missing from the nav, docstrings
    # mkdocstrings cannot read) fail the build; the site goes to site/ (not committed)
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """All benchmarks, with ratios against plain torch measured in the same run."""
    session.install("-e", ".[test,bench]")
    # baselines measured in the same run: StatefulDataLoader (resume) and HF's padding collator
    # (torchvision's ImageFolder comes with the [bench] extra)
    session.install("torchdata", "transformers")
    session.run("python", "benchmarks/run.py", *session.posargs)
