"""The `loaderkit` command: every command, every exit code, the one-line error format."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

from loaderkit import DataError, LoaderPlan, PlanError, ResumeError, WorkerError
from loaderkit.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, cli
from loaderkit.cli.app import describe_failure, one_line
from loaderkit.cli.bench import measure_split, measure_workers
from loaderkit.cli.digest import batch_digest, batch_samples, batch_tokens, stream_digest
from loaderkit.demo import (
    CORPUS_FILE,
    DATASET_NAME,
    DemoText,
    WordTokenizer,
    corpus_lines,
    demo_text,
    ensure_registered,
)
from loaderkit.runtime.loader import Loader

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_one_line_error(result: Result, code: int) -> tuple[str, str]:
    """The command failed with ``code`` and printed exactly `error:` and `hint:` on stderr."""
    assert result.exit_code == code, result.output
    lines = result.stderr.splitlines()
    progress = [line for line in lines[:-2] if "━" in line]  # the demo's progress bars
    assert len(lines) == len(progress) + 2, result.stderr
    assert lines[-2].startswith("error: ") and lines[-1].startswith("hint: ")
    assert "Traceback" not in result.output
    return lines[-2], lines[-1]


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plan files written by `loaderkit demo --save-plan`, plus edited copies."""
    folder = tmp_path_factory.mktemp("plans")
    saved = folder / "demo.toml"
    result = run("demo", "--workers", "0", "--epochs", "1", "--save-plan", str(saved))
    assert result.exit_code == EXIT_OK, result.output
    text = saved.read_text()
    variants = {
        "batch8.toml": [("batch_size = 16", "batch_size = 8")],
        "workers1.toml": [("num_workers = 0", "num_workers = 1")],
        "bad_classes.toml": [("input_ids = 195", "input_ids = 50")],
        "two_problems.toml": [("batch_size = 16", "batch_size = 0"), ("seed = 0", "seed = -1")],
        "bad_option.toml": [
            ("[dataset.source.options]", "[dataset.source.options]\nnum_samples = 0")
        ],
        "unknown_key.toml": [("batch_size = 16", "batchsize = 16")],
    }
    for name, edits in variants.items():
        edited = text
        for old, new in edits:
            assert edited.count(old) == 1, (name, old)
            edited = edited.replace(old, new)
        (folder / name).write_text(edited)
    LoaderPlan.load(saved).save(folder / "demo.json")
    (folder / "broken.toml").write_text("schema_version = 1\n[dataset\n")
    return folder


# -- the demo dataset ---------------------------------------------------------------------------


def test_the_bundled_corpus_is_small_and_tokenizes_deterministically():
    corpus = ROOT / "loaderkit" / "demo" / CORPUS_FILE
    assert corpus.stat().st_size < 200_000
    assert len(corpus_lines()) == 800
    tokenizer = WordTokenizer()
    ids = tokenizer.encode("The loader reads the next batch, again!")
    assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == "the loader reads the next batch , again !"
    assert tokenizer.encode("zyzzyva", add_special_tokens=False) == [tokenizer.unk_token_id]
    assert WordTokenizer().encode(corpus_lines()[5]) == tokenizer.encode(corpus_lines()[5])


def test_demo_text_samples_and_options():
    full = demo_text()
    assert len(full) == 800
    assert full[3] == {"input_ids": full.tokenizer.encode(corpus_lines()[3])}
    assert full.__getitems__([3, 0]) == [full[3], full[0]]
    cut = DemoText(num_samples=10, max_length=6)
    assert len(cut) == 10 and max(len(cut[i]["input_ids"]) for i in range(10)) == 6
    with pytest.raises(
        PlanError, match=r"dataset\.source\.options\.num_samples: must be >= 1 \(got 0\)"
    ):
        DemoText(num_samples=0)
    with pytest.raises(PlanError, match="must be an int or None"):
        DemoText(max_length="5")  # type: ignore[arg-type]


def test_demo_text_is_a_registered_dataset_factory(plan_dir: Path):
    from loaderkit import datasets

    ensure_registered()
    ensure_registered()  # idempotent
    assert DATASET_NAME in datasets.factories.names()
    plan = LoaderPlan.load(plan_dir / "demo.toml")  # no bindings: the factory runs again
    assert plan.bound and plan.dataset.length == 800
    # an installed loaderkit finds it in any session through its entry point
    entry_points = importlib.metadata.entry_points(group="loaderkit.datasets")
    assert {ep.name: ep.value for ep in entry_points}[DATASET_NAME] == "loaderkit.demo:demo_text"


# -- demo ---------------------------------------------------------------------------------------


def test_demo_runs_checkpoints_resumes_and_saves_a_plan(plan_dir: Path, tmp_path: Path):
    saved = tmp_path / "plan.json"
    args = ["--workers", "1", "--epochs", "2", "--batch-size", "32", "--save-plan", str(saved)]
    result = run("demo", *args)
    assert result.exit_code == EXIT_OK, result.output
    out = result.stdout
    plan = LoaderPlan.load(saved)
    assert plan.explain() in out
    assert plan.workers.num_workers == 1 and plan.batch.batch_size == 32
    throughput = re.search(r"throughput: 50 batches, 1,600 samples, ([\d,]+) tokens", out)
    assert throughput is not None, out
    assert re.search(r"[\d,]+ samples/s, [\d,]+ tokens/s", out)
    assert re.search(
        r"resume: OK, the 38 batches after the checkpoint \(epoch 0, batch 12\) equal", out
    ), out
    assert "uninterrupted run" in result.stderr  # the progress bars


def test_demo_exits_1_when_the_resumed_stream_differs(monkeypatch: pytest.MonkeyPatch):
    real = Loader.load_state_dict

    def off_by_one(self: Loader, state: dict[str, object], *, strict: bool = True) -> None:
        shifted = dict(state, batches_delivered=int(state["batches_delivered"]) + 1)
        real(self, shifted, strict=strict)

    monkeypatch.setattr(Loader, "load_state_dict", off_by_one)
    result = run("demo", "--workers", "0", "--epochs", "1")
    error, _ = assert_one_line_error(result, EXIT_FAILED)
    assert "resume: the resumed stream differs from the uninterrupted one: batch 0 after" in error
    assert "(24 batches resumed, 25 expected)" in error
    assert "resume: OK" not in result.stdout


@pytest.mark.timeout(120)
def test_the_console_script_runs_the_demo_in_a_real_process(tmp_path: Path):
    script = Path(sys.executable).with_name("loaderkit")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "loaderkit"]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run(
        [*command, "demo", "--workers", "2", "--epochs", "2"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert "resume: OK, the 75 batches after the checkpoint (epoch 0, batch 25)" in done.stdout
    assert "throughput: 100 batches, 1,600 samples" in done.stdout


@pytest.mark.timeout(60)
def test_explain_and_diff_do_not_import_torch(plan_dir: Path):
    a, b = str(plan_dir / "demo.toml"), str(plan_dir / "demo.json")
    code = (
        "import sys; from loaderkit.cli import cli\n"
        f"for args in (['explain', {a!r}], ['diff', {a!r}, {b!r}]):\n"
        "    assert cli.main(args, standalone_mode=False) == 0\n"
        "print(sorted(m for m in ('torch', 'datasets') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


def test_python_dash_m_loaderkit_is_the_command(monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setattr(sys, "argv", ["loaderkit", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("loaderkit", run_name="__main__")
    assert exit_info.value.code == EXIT_OK
    assert "Commands:" in capsys.readouterr().out


# -- explain, validate, diff --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["demo.toml", "demo.json"])
def test_explain_prints_the_plans_explanation(plan_dir: Path, name: str):
    result = run("explain", str(plan_dir / name))
    assert result.exit_code == EXIT_OK, result.output
    inspected = LoaderPlan.load(plan_dir / name, require_bindings=False)
    assert result.stdout == inspected.explain() + "\n"


def test_validate_reads_the_file_only_and_data_runs_the_batch_checks(plan_dir: Path):
    static = run("validate", str(plan_dir / "demo.toml"))
    assert static.exit_code == EXIT_OK, static.output
    assert re.fullmatch(
        r"demo\.toml: valid \(fields, bounds and rules; fingerprint [0-9a-f]{16}\); "
        r"`loaderkit validate --data` also checks its first batch\n",
        static.stdout,
    )
    # a failing batch check is found only with the data
    assert run("validate", str(plan_dir / "bad_classes.toml")).exit_code == EXIT_OK
    result = run("validate", "--data", str(plan_dir / "demo.toml"))
    assert result.exit_code == EXIT_OK, result.output
    assert "batch checks passed on epoch 0, batch 0" in result.stdout
    assert "classes    input_ids in [0, 195)" in result.stdout
    assert re.search(r"demo\.toml: valid \(fingerprint [0-9a-f]{16}\)", result.stdout)


def test_a_failed_check_exits_1_in_one_line_and_debug_shows_the_traceback(plan_dir: Path):
    result = run("validate", "--data", str(plan_dir / "bad_classes.toml"))
    error, hint = assert_one_line_error(result, EXIT_FAILED)
    assert error.startswith("error: batch check failed: 'input_ids' (classes) in epoch 0")
    assert "with_checks" in hint
    for args in (("--debug", "validate", "--data"), ("validate", "--data", "--debug")):
        debug = run(*args, str(plan_dir / "bad_classes.toml"))
        assert debug.exit_code == EXIT_FAILED
        assert "Traceback (most recent call last)" in debug.stderr
        assert "loaderkit.errors.DataError" in debug.stderr
        assert debug.stderr.rstrip().splitlines()[-2] == error


def test_diff_exits_0_for_equal_plans_and_1_for_different_ones(plan_dir: Path):
    same = run("diff", str(plan_dir / "demo.toml"), str(plan_dir / "demo.json"))
    assert same.exit_code == EXIT_OK, same.output
    assert re.fullmatch(
        r"demo\.toml and demo\.json are equal \(fingerprint [0-9a-f]{16}\)\n", same.stdout
    )
    other = run("diff", str(plan_dir / "demo.toml"), str(plan_dir / "batch8.toml"))
    assert other.exit_code == EXIT_FAILED
    assert other.stdout.splitlines() == [
        "batch.batch_size: 16 -> 8",
        "1 field differs; the plans give different batches (the stream fingerprints differ)",
    ]
    assert other.stderr == ""
    workers = run("diff", str(plan_dir / "demo.toml"), str(plan_dir / "workers1.toml"))
    assert workers.exit_code == EXIT_FAILED
    assert workers.stdout.splitlines() == [
        "workers.num_workers: 0 -> 1",
        "1 field differs; the plans give the same batches (equal stream fingerprints)",
    ]


# -- bench --------------------------------------------------------------------------------------


def test_bench_reports_each_worker_count_the_split_and_the_fastest(plan_dir: Path):
    result = run("bench", str(plan_dir / "demo.toml"), "--batches", "4", "--workers", "0,1")
    assert result.exit_code == EXIT_OK, result.output
    out = result.stdout
    assert "bench: 'demo_text', 4 batches per worker count, device cpu" in out
    rows = re.findall(r"│\s+(\d)\s+│\s+([\d,]+)\s+│\s+([\d.]+) ms\s+│\s+([\d.]+) ms\s+│", out)
    assert [r[0] for r in rows] == ["0", "1"], out
    for part in ("fetch", "collate", "other", "transfer"):
        assert re.search(rf"│ {part}\s+│\s+[\d.]+ ms\s+│\s+\d+%", out), (part, out)
    assert "none: the plan delivers on the CPU" in out
    assert re.search(r"fastest: [01] workers?, [\d,]+ samples/s", out)


@pytest.mark.parametrize(
    ("cpus", "counts"), [(1, (0, 1)), (2, (0, 1, 2)), (6, (0, 1, 2, 4)), (8, (0, 1, 2, 4, 8))]
)
def test_bench_compares_worker_counts_up_to_the_cpus_by_default(cpus: int, counts: tuple):
    from loaderkit.cli.bench import default_worker_counts

    assert default_worker_counts(cpus) == counts


def test_bench_says_once_that_workers_exceed_the_cpus(plan_dir: Path):
    from loaderkit.plan.workers import usable_cpus

    cpus = usable_cpus()[0]
    if cpus > 8:
        pytest.skip("spawning more workers than CPUs is too many here")
    more = cpus + 1  # torch warns about this count (twice per loader) on its own
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run("bench", str(plan_dir / "demo.toml"), "--batches", "2", "--workers", f"{more}")
    assert result.exit_code == EXIT_OK, result.output
    assert result.stderr.count(f"{more} workers is more than the {cpus} CPU") == 1, result.stderr
    assert "This DataLoader will create" not in result.output
    assert not [w for w in caught if "This DataLoader will create" in str(w.message)]


def test_bench_measurements_count_what_they_time(plan_dir: Path):
    plan = LoaderPlan.load(plan_dir / "demo.toml")
    result = measure_workers(plan, 0, 5)
    assert result.batches == 4 and len(result.latencies) == 4  # the first batch is apart
    assert result.samples == 4 * 16 and result.first_batch > 0
    assert result.latency(50) <= result.latency(99)
    split = measure_split(plan, 6)
    assert split.batches == 6 and not split.gathered
    assert split.fetch > 0 and split.collate > 0 and split.transfer == 0
    # the collator's share is real: padding 16 sequences costs more than listing them
    assert split.collate > split.fetch


def test_bench_of_a_streamed_source_reports_the_batch_time_whole():
    from loaderkit import DataLoaderBuilder

    class Count(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(40))

    plan = DataLoaderBuilder().with_dataset(Count()).with_batch_size(4).compile()
    split = measure_split(plan, 12)  # more than an epoch: iteration goes on into the next
    assert split.batches == 12 and not split.separable and split.other > 0
    assert split.total == split.other
    result = measure_workers(plan, 0, 3)
    assert result.batches == 2 and result.samples == 8


# -- usage errors and failures ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("explain", "missing.toml"), "Invalid value for 'PLAN': File 'missing.toml' does not"),
        (("explain", "{dir}/demo.yaml"), "is not a plan file: plan files end in .toml or .json"),
        (("validate", "--bogus", "{dir}/demo.toml"), "No such option '--bogus'"),
        (("diff", "{dir}/demo.toml"), "Missing argument 'B'"),
        (("bench", "{dir}/demo.toml", "--workers", "1,x"), "give worker counts >= 0"),
        (("bench", "{dir}/demo.toml", "--batches", "1"), "--batches"),
        (("demo", "--workers", "-1"), "--workers"),
        (("demo", "--batch-size", "401"), "--batch-size"),
        (("demo", "--save-plan", "out.yaml"), "plan files end in .toml or .json"),
        (("demo", "--save-plan", "no/such/dir/p.toml"), "is not a directory"),
        (("frobnicate",), "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2_in_one_line(plan_dir: Path, args: tuple[str, ...], message: str):
    (plan_dir / "demo.yaml").write_text("")
    result = run(*(a.format(dir=plan_dir) for a in args))
    error, hint = assert_one_line_error(result, EXIT_USAGE)
    assert message in error
    assert re.fullmatch(r"hint: run 'loaderkit( \w+)? --help' for .+", hint), hint


def test_version():
    result = run("--version")
    assert result.exit_code == EXIT_OK
    assert result.stdout == f"loaderkit, version {importlib.metadata.version('loaderkit')}\n"


def test_no_command_prints_the_help_and_exits_2():
    result = run()
    assert result.exit_code == EXIT_USAGE
    assert "Commands:" in result.stderr and "validate" in result.stderr


@pytest.mark.parametrize("command", [("validate", "--data"), ("bench",)])
def test_a_plan_with_a_bare_binding_gives_the_missing_binding_error(
    tmp_path: Path, command: tuple[str, ...]
):
    from loaderkit import DataLoaderBuilder

    path = tmp_path / "bound.toml"
    DataLoaderBuilder().with_dataset(list(range(10)), name="train").compile().save(path)
    error, hint = assert_one_line_error(run(*command, str(path)), EXIT_FAILED)
    assert "bound.toml: the plan's dataset is a live object given at run time (bound as " in error
    assert "'train'" in error
    assert "loaderkit.register_dataset" in hint and "loaderkit.datasets.from_files" in hint


def test_a_plan_with_a_bare_binding_is_inspected_without_its_data(tmp_path: Path):
    from loaderkit import DataLoaderBuilder

    path = tmp_path / "bound.toml"
    plan = DataLoaderBuilder().with_dataset(list(range(10)), name="train").compile()
    plan.save(path)
    explained = run("explain", str(path))
    assert explained.exit_code == EXIT_OK, explained.output
    assert "(unbound: load with bindings to build)" in explained.stdout
    assert plan.fingerprint in explained.stdout
    assert run("validate", str(path)).exit_code == EXIT_OK
    same = run("diff", str(path), str(path))
    assert same.exit_code == EXIT_OK and "are equal" in same.stdout


def test_plan_errors_exit_1_in_one_line(plan_dir: Path):
    broken = plan_dir / "broken.toml"
    error, hint = assert_one_line_error(run("explain", str(broken)), 1)
    assert error.startswith(f"error: {broken}: file: is not valid TOML")
    assert hint == "hint: fix the file so that it parses, or pass another plan"
    two = plan_dir / "two_problems.toml"
    error, _ = assert_one_line_error(run("validate", str(two)), 1)
    # inspecting calls no factory: the factory's own refusal shows only with the data
    assert error.startswith(f"error: {two}: 2 problems in the plan: batch.batch_size: must be >=")
    assert "; order.seed: must be >= 0 (got -1)" in error
    unknown = plan_dir / "unknown_key.toml"
    for command in ("explain", "validate"):
        error, _ = assert_one_line_error(run(command, str(unknown)), 1)
        assert error == (
            f"error: {unknown}: batch.batchsize: unknown key 'batchsize'; did you mean "
            f"'batch_size'?"
        )
    # the dataset factory refuses an option: not mistaken for a missing binding
    assert run("explain", str(plan_dir / "bad_option.toml")).exit_code == EXIT_OK
    error, hint = assert_one_line_error(
        run("validate", "--data", str(plan_dir / "bad_option.toml")), 1
    )
    assert error == (
        f"error: {plan_dir / 'bad_option.toml'}: dataset.source.options.num_samples: must be "
        f">= 1 (got 0); drop it to keep everything"
    )
    assert "docs/plan-format.md" in hint


def test_every_failure_has_an_error_line_and_a_hint():
    failures = [
        PlanError.single("workers.prefetch_factor", "must be unset\nwhen num_workers == 0"),
        PlanError.single("device", "'cuda' was requested but CUDA is not available"),
        DataError("sample 3 failed\n\nOriginal traceback in worker 0:\nTraceback ..."),
        WorkerError("worker process (pid 7) was killed by SIGKILL"),
        ResumeError("the state is from another plan", ["batch.batch_size: 8 -> 16"]),
        CliError("the resumed stream differs", "report it"),
        KeyError("boom"),
    ]
    for exc in failures:
        message, hint = describe_failure(exc)
        assert "\n" not in message and "\n" not in hint and hint, exc
    assert describe_failure(failures[2])[0] == "sample 3 failed"
    assert describe_failure(failures[0])[0] == (
        "workers.prefetch_factor: must be unset when num_workers == 0"
    )
    assert "with_device('auto')" in describe_failure(failures[1])[1]
    assert describe_failure(failures[-1])[0] == "unexpected KeyError: 'boom'"
    assert one_line("a\n  b\n\nrest") == "a b"


def test_a_worker_failure_inside_a_command_exits_1(plan_dir: Path, monkeypatch: pytest.MonkeyPatch):
    def dead(self: Loader) -> None:
        raise WorkerError("worker process (pid 99) was killed by SIGKILL; the batches it held")

    monkeypatch.setattr(Loader, "__iter__", dead)
    error, hint = assert_one_line_error(run("validate", "--data", str(plan_dir / "demo.toml")), 1)
    assert "was killed by SIGKILL" in error and "--workers 0" in hint


# -- digests ------------------------------------------------------------------------------------


def test_batch_digests_see_values_dtypes_shapes_and_keys():
    ids = torch.arange(6).reshape(2, 3)
    batch = {"input_ids": ids, "attention_mask": torch.ones(2, 3, dtype=torch.int64)}
    same = {"attention_mask": torch.ones(2, 3, dtype=torch.int64), "input_ids": ids.clone()}
    assert batch_digest(batch) == batch_digest(same)
    changed = [
        {**batch, "input_ids": ids + (torch.arange(6).reshape(2, 3) == 5)},
        {**batch, "input_ids": ids.to(torch.int32)},
        {**batch, "input_ids": ids.reshape(3, 2)},
        {"ids": ids, "attention_mask": batch["attention_mask"]},
        (ids, batch["attention_mask"]),
    ]
    digests = {batch_digest(b) for b in changed}
    assert len(digests) == len(changed) and batch_digest(batch) not in digests
    assert batch_digest([np.arange(3), "a"]) != batch_digest([np.arange(3), "b"])
    assert batch_digest(torch.tensor(2.5, dtype=torch.bfloat16)) != batch_digest(torch.tensor(2.5))
    assert stream_digest(["a", "b"]) != stream_digest(["b", "a"])
    assert batch_samples(batch) == 2 and batch_samples({"s": "x"}) == 0
    assert batch_tokens(batch) == 6 and batch_tokens((ids,)) is None
    assert batch_tokens({"input_ids": ids}) == 6


def test_the_saved_demo_plan_is_plain_data(plan_dir: Path):
    data = json.loads((plan_dir / "demo.json").read_text())
    assert data["dataset"]["source"]["name"] == "demo_text"
    assert data["collator"] == {"name": "causal_lm", "options": {"pad_token_id": 0}}
