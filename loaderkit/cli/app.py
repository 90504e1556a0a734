"""The ``loaderkit`` command: its commands, its exit codes and its one-line errors.

Exit codes: 0 success; 1 the plan or its data failed (``PlanError``, ``DataError``, a failed
batch check, a resumed stream that differs, plans that differ in ``diff``); 2 a usage error
(unknown option, bad value, missing file). A failure prints one ``error:`` line and one
``hint:`` line on stderr; ``--debug`` (anywhere on the command line) adds the traceback.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from loaderkit._text import LINE_CHARS, MESSAGE_CHARS, inert_lines
from loaderkit.errors import DataError, LoaderkitError, PlanError, ResumeError, WorkerError

if TYPE_CHECKING:
    from loaderkit.plan import LoaderPlan

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "cli",
    "inspect_plan",
    "load_plan",
    "main",
]

EXIT_OK = 0
"""The command did what it was asked and everything checked out."""
EXIT_FAILED = 1
"""The plan or its data failed: a ``PlanError``, a ``DataError``, a failed check or compare."""
EXIT_USAGE = 2
"""The command line is wrong: an unknown option, a bad value, a missing file."""

PLAN_SUFFIXES = (".toml", ".json")

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """A failure the command reports itself: one message line, one hint line, an exit code."""

    def __init__(self, message: str, hint: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


def one_line(text: str) -> str:
    """``text`` on one line: the part before a blank line (a traceback, a diff), joined."""
    head = text.strip().split("\n\n", 1)[0]
    return re.sub(r"\s*\n\s*", " ", head).strip()


def _plan_error_line(exc: PlanError) -> str:
    """The error on one line, starting with the plan file it was found in (when it was).

    At most 50 problems, then a count of the rest (``PlanError.listed``).
    """
    if len(exc.problems) == 1:
        return exc.where + one_line(str(exc.problems[0]))
    problems = "; ".join(one_line(line) for line in exc.listed())
    return f"{exc.where}{len(exc.problems):,} problems in the plan: {problems}"


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """The ``error:`` and ``hint:`` lines for an exception a command raised."""
    if isinstance(exc, CliError):
        return exc.message, exc.hint
    if isinstance(exc, PlanError):
        paths = exc.paths
        if paths == ("file",):
            return _plan_error_line(exc), "fix the file so that it parses, or pass another plan"
        if "device" in paths:
            return _plan_error_line(exc), "save the plan with with_device('auto') to run anywhere"
        return (
            _plan_error_line(exc),
            "fix the field named before the colon (docs/plan-format.md lists every field)",
        )
    if isinstance(exc, DataError):
        return (
            one_line(exc.message),
            "fix the samples named above or the plan's with_checks contract; --debug shows "
            "the traceback",
        )
    if isinstance(exc, WorkerError):
        return one_line(str(exc)), "rerun with --workers 0 to see the error in this process"
    if isinstance(exc, ResumeError):
        return one_line(str(exc)), "resume with the plan the state was saved from"
    if isinstance(exc, LoaderkitError):
        return one_line(str(exc)), "--debug shows the traceback"
    detail = one_line(str(exc)) or "no message"
    return (
        f"unexpected {type(exc).__name__}: {detail}",
        "this is a bug in loaderkit or in code the plan runs; --debug shows the traceback",
    )


def echo(text: str = "", *, err: bool = False, limit: int = LINE_CHARS) -> None:
    """Print ``text`` as every command prints: made inert (``loaderkit._text.inert_lines``).

    A command's output can hold text from a plan file or a dataset (a key, a name, a label,
    a sample's repr): control characters are escaped and each line is bounded (``limit``
    characters), whatever the code that made the text did.
    """
    click.echo(inert_lines(text, limit), err=err)


def _report(message: str, hint: str) -> None:
    # one line: up to 50 problems of a plan, each bounded, then a count of the rest
    echo(f"error: {message}", err=True, limit=MESSAGE_CHARS)
    echo(f"hint: {hint}", err=True)


def _usage_hint(exc: click.UsageError) -> str:
    ctx = exc.ctx
    if ctx is None:
        return "run 'loaderkit --help' for the commands"
    return f"run '{ctx.command_path} --help' for its arguments and options"


class _LoaderkitGroup(click.Group):
    """A group whose failures become exit codes and one-line errors, not tracebacks."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
        code = EXIT_OK
        try:
            result = super().main(
                argv,
                prog_name or "loaderkit",
                complete_var,
                standalone_mode=False,
                **extra,
            )
            code = result if isinstance(result, int) else EXIT_OK
        except click.exceptions.NoArgsIsHelpError as exc:
            echo(exc.format_message(), err=True)
            code = EXIT_USAGE
        except click.UsageError as exc:
            _report(one_line(exc.format_message()), _usage_hint(exc))
            code = EXIT_USAGE
        except click.ClickException as exc:  # e.g. a file click could not open
            _report(one_line(exc.format_message()), "check the path and its permissions")
            code = EXIT_USAGE
        except click.Abort:  # Ctrl-C (click turns KeyboardInterrupt into Abort)
            _report("interrupted", "the command was stopped before it finished; run it again")
            code = 130
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line and a code
            if debug:
                echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)
            message, hint = describe_failure(exc)
            _report(message, hint)
            code = exc.code if isinstance(exc, CliError) else EXIT_FAILED
        if standalone_mode:
            sys.exit(code)
        return code


def _debug_option(fn: F) -> F:
    """``--debug``: show tracebacks (read by the group from the raw command line)."""
    return click.option(
        "--debug",
        is_flag=True,
        expose_value=False,
        help="Print the traceback of a failure after the one-line error.",
    )(fn)


def _check_plan_path(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    if value.suffix.lower() not in PLAN_SUFFIXES:
        raise click.BadParameter(
            f"{str(value)!r} is not a plan file: plan files end in .toml or .json",
            ctx=ctx,
            param=param,
        )
    return value


def _plan_argument(name: str) -> Callable[[F], F]:
    return click.argument(
        name,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        callback=_check_plan_path,
    )


def _save_path(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is None:
        return None
    _check_plan_path(ctx, param, value)
    if not value.parent.is_dir():
        raise click.BadParameter(
            f"{str(value.parent)!r} is not a directory; create it first", ctx=ctx, param=param
        )
    return value


def inspect_plan(path: Path, *, allow_external_paths: bool = False) -> LoaderPlan:
    """Read the plan file ``path`` for inspection: the file and nothing else.

    ``LoaderPlan.load(path, require_bindings=False)``: every field, bound and rule is
    checked, but no dataset factory is called, no untrusted module imported, no data file
    read and nothing written (``docs/security.md``). A plan whose dataset is a live binding
    inspects like any other.
    """
    from loaderkit.plan import LoaderPlan

    return LoaderPlan.load(path, require_bindings=False, allow_external_paths=allow_external_paths)


def load_plan(path: Path, *, allow_external_paths: bool = False) -> LoaderPlan:
    """Load the plan file ``path`` to run it: its recorded dataset is made again.

    Only a *registered* dataset factory is called (``[dataset.source] name = ...``). A plan
    whose dataset is a live object (a binding) cannot be rebuilt from the file: that is
    reported as a :class:`CliError` naming the binding, with the way out as the hint.
    """
    from loaderkit.demo import ensure_registered
    from loaderkit.plan import LoaderPlan

    ensure_registered()  # plans saved by `loaderkit demo` name the demo dataset
    try:
        return LoaderPlan.load(path, allow_external_paths=allow_external_paths)
    except PlanError as exc:
        names = sorted(set(re.findall(r"bound as '([^']+)' and none was given", str(exc))))
        if not names:
            raise
        try:  # is the missing binding the only problem?
            inspect_plan(path, allow_external_paths=allow_external_paths)
        except LoaderkitError:
            raise exc from None
        shown = ", ".join(repr(n) for n in names)
        raise CliError(
            f"{path.name}: the plan's dataset is a live object given at run time (bound as "
            f"{shown}), which a plan file does not hold, so the command line cannot load it",
            "a plan file rebuilds only datasets it records: register a dataset factory "
            "(loaderkit.register_dataset) or use a file source (loaderkit.datasets.from_files) "
            "and save the plan again; `loaderkit explain` and `validate` (without --data) "
            "work on it as it is",
        ) from exc


def _external_paths_option(fn: F) -> F:
    """``--allow-external-paths``: trust the file's paths that leave its folder."""
    return click.option(
        "--allow-external-paths",
        is_flag=True,
        default=False,
        help="Accept data files and cache folders outside the plan file's folder (only for "
        "a plan file you trust).",
    )(fn)


@click.group(
    name="loaderkit",
    cls=_LoaderkitGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="loaderkit", prog_name="loaderkit")
@_debug_option
def cli() -> None:
    """Inspect, check and benchmark loaderkit plan files, or run the demo.

    PLAN is a plan file (.toml or .json) written by LoaderPlan.save() or by
    `loaderkit demo --save-plan FILE`. Exit codes: 0 ok, 1 the plan or its data failed,
    2 a usage error.
    """


@cli.command(short_help="Run the main job on the bundled corpus, with an exact resume.")
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Worker processes.",
)
@click.option(
    "--epochs", type=click.IntRange(min=1), default=2, show_default=True, help="Epochs to run."
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=400),
    default=16,
    show_default=True,
    help="Samples per batch (at most 400, so that an epoch of the 800 documents has a middle).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The seed of the shuffle and the length buckets.",
)
@click.option(
    "--save-plan",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_save_path,
    default=None,
    help="Also write the demo's plan to this .toml or .json file.",
)
@_debug_option
def demo(workers: int, epochs: int, batch_size: int, seed: int, save_plan: Path | None) -> int:
    """Load the bundled corpus for some epochs, checkpoint mid-epoch, resume, compare.

    Builds a plan over the text corpus that ships with loaderkit (a word tokenizer, length
    bucketing, shuffling, the causal_lm collator, batch checks), prints explain(), runs the
    epochs with a progress bar, saves the loader state halfway through the first epoch,
    resumes a new loader from it and checks that every batch after the checkpoint equals the
    uninterrupted run's (sha256 of the tensors). Exit 1 if they differ.
    """
    from loaderkit.cli.demo import run_demo

    return run_demo(
        workers=workers, epochs=epochs, batch_size=batch_size, seed=seed, save_plan=save_plan
    )


@cli.command(short_help="Print what PLAN loads and how (reads the file only).")
@_plan_argument("plan")
@_external_paths_option
@_debug_option
def explain(plan: Path, allow_external_paths: bool) -> int:
    """Print what PLAN loads and how (LoaderPlan.explain()).

    Reads the plan file and nothing else: no dataset is made, no module imported, no data
    read, nothing written. Plans whose dataset is a live binding explain too.
    """
    echo(inspect_plan(plan, allow_external_paths=allow_external_paths).explain())
    return EXIT_OK


@cli.command(short_help="Check PLAN's fields and rules; with --data, its first batch too.")
@_plan_argument("plan")
@click.option(
    "--data",
    is_flag=True,
    default=False,
    help="Also make the dataset from its registered factory, build the loader and run the "
    "plan's batch checks on the first batch (plan.check()). Reads the data; writes only what "
    "its factory writes (hf_files: HF's Arrow cache, docs/security.md).",
)
@_external_paths_option
@_debug_option
def validate(plan: Path, data: bool, allow_external_paths: bool) -> int:
    """Check every field, bound and rule of PLAN (the file only); --data checks a batch too.

    Without --data nothing but the file is read: no dataset is made, no module imported,
    nothing written. With --data the dataset is made again (registered factories only: an
    ``hf_files`` source writes HF's Arrow cache), the loader is built without its cache (so
    no cache folder is created) and the first batch is checked against the plan's
    with_checks contract. Exit 0 when everything passes, 1 otherwise.
    """
    if not data:
        inspected = inspect_plan(plan, allow_external_paths=allow_external_paths)
        echo(
            f"{plan.name}: valid (fields, bounds and rules; fingerprint "
            f"{inspected.fingerprint[:16]}); `loaderkit validate --data` also checks its "
            f"first batch"
        )
        return EXIT_OK
    import attrs

    loaded = load_plan(plan, allow_external_paths=allow_external_paths)
    report = attrs.evolve(loaded, cache=None).check()  # the cache changes no batch
    echo(str(report))
    echo(f"{plan.name}: valid (fingerprint {loaded.fingerprint[:16]})")
    return EXIT_OK


@cli.command(short_help="Compare plans A and B field by field (exit 1 if they differ).")
@_plan_argument("a")
@_plan_argument("b")
@_external_paths_option
@_debug_option
def diff(a: Path, b: Path, allow_external_paths: bool) -> int:
    """Print the fields where plan B differs from plan A, as `path: A -> B` lines.

    Exit 0 when the plans are equal, 1 when they differ. The last line says whether the
    stream fingerprints differ too (whether the batches differ). Reads the two files only.
    """
    first, second = (
        inspect_plan(a, allow_external_paths=allow_external_paths),
        inspect_plan(b, allow_external_paths=allow_external_paths),
    )
    lines = first.diff(second)
    if not lines:
        echo(f"{a.name} and {b.name} are equal (fingerprint {first.fingerprint[:16]})")
        return EXIT_OK
    for line in lines:
        echo(line)
    noun = "field differs" if len(lines) == 1 else "fields differ"
    if first.fingerprint == second.fingerprint:
        stream = "the same batches (equal stream fingerprints)"
    else:
        stream = "different batches (the stream fingerprints differ)"
    echo(f"{len(lines):,} {noun}; the plans give {stream}")
    return EXIT_FAILED


def _worker_counts(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...]:
    if value is None:  # the default: 0, then powers of two up to the CPUs this process may use
        from loaderkit.cli.bench import default_worker_counts

        return default_worker_counts()
    counts: list[int] = []
    for part in value.split(","):
        text = part.strip()
        if not text.isdigit():
            raise click.BadParameter(
                f"{value!r}: give worker counts >= 0 separated by commas, e.g. 0,1,2,4",
                ctx=ctx,
                param=param,
            )
        if int(text) not in counts:
            counts.append(int(text))
    return tuple(counts)


@cli.command(short_help="Time PLAN's loader per worker count; split fetch/collate/transfer.")
@_plan_argument("plan")
@click.option(
    "--batches",
    type=click.IntRange(min=2),
    default=50,
    show_default=True,
    help="Batches to time per worker setting.",
)
@click.option(
    "--workers",
    "workers",
    default=None,
    callback=_worker_counts,
    help="Worker counts to compare, separated by commas. Default: 0, 1, 2, 4, ... up to the "
    "CPUs this process may use (0,1,2 on 2 CPUs).",
)
@_external_paths_option
@_debug_option
def bench(plan: Path, batches: int, workers: tuple[int, ...], allow_external_paths: bool) -> int:
    """Time PLAN's loader for each worker count; split the time into fetch, collate, transfer.

    Per worker count: samples/s, batch latency p50 and p99, and the time to the first batch.
    The split is measured in this process with 0 workers (docs/cli.md explains the method).
    Ends with the fastest worker count found.
    """
    from loaderkit.cli.bench import run_bench

    run_bench(
        load_plan(plan, allow_external_paths=allow_external_paths),
        batches=batches,
        worker_counts=workers,
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the ``loaderkit`` command with ``argv`` (default: ``sys.argv[1:]``) and exit."""
    cli.main(argv, prog_name="loaderkit")
    raise AssertionError("unreachable: click exits")  # pragma: no cover
