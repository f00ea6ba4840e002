"""Exit codes and resuming, each pinned by the outcome the user sees: exit codes that
agree across commands, --resume without repeating --steps, a folder with a bad file, a
candidate's exception in one line, a closed stdout, and small option checks."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest
from typer.testing import CliRunner

from htam.cli import app
from tests.cli.conftest import start_htam
from tests.cli.tasks_src import SMALL_RELU
from tests.cli.test_error_paths import NO_SMALL

RELU = "level1/1_ReLU"
runner = CliRunner()

TORCH_RELU = """
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------- 1. one exit code per cause


def test_eval_exits_3_like_optimize_when_the_reference_needs_more_memory(tmp_path):
    """`eval` said exit 2 where `optimize` said 3 for the same cause: a reference over the
    memory limit cannot run here, which README gives exit 3."""
    task = tmp_path / "relu_big.py"
    task.write_text(NO_SMALL)
    solution = tmp_path / "sol_torch.py"
    solution.write_text(TORCH_RELU)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["eval", str(task), str(solution), "--target", "cpu", "--size", "large"]
    result = runner.invoke(app, [*args, "--allow-torch", "--memory-limit-mb", "256"], env=env)
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    assert result.stdout == ""
    (line,) = _lines(result.stderr)
    assert line.startswith("error: ") and "more host memory" in line
    assert "--memory-limit-mb" in line
    assert "add a reduced size" not in line  # --size large was asked: it would not help


# ---------------------------------------------------------------- 2. --resume and --steps


class _RecordingOptimizer:
    """Starts (or resumes) the run directory as the real loop does, records one more step and
    the steps it was asked for, then stops as Ctrl-C would (exit 130, nothing else to fake)."""

    asked: list[int] = []

    def __init__(self, proposer, evaluator, bank, config, on_step=None):
        self.proposer, self.evaluator, self.config = proposer, evaluator, config

    def run(self, task, out: Path, resume: bool = False):
        from htam.agent.rundir import RunDir

        cfg = self.config
        spec = {"task_id": task.id, "task_digest": task.digest, "method": cfg.method}
        spec |= {"seed": cfg.seed, "steps": cfg.steps, "target": cfg.target}
        spec |= {"language": cfg.language, "proposer": self.proposer.name}
        spec |= {"size": self.evaluator.config.size}
        rundir = RunDir(out)
        rundir.start({**spec, "run_id": f"{cfg.method}:{task.id}:s{cfg.seed}"}, resume)
        done = len(rundir.finished_steps())
        rundir.save_step({"step": done}, None)
        _RecordingOptimizer.asked.append(cfg.steps)
        raise KeyboardInterrupt


@pytest.fixture
def recording(monkeypatch, tmp_path):
    from types import SimpleNamespace

    import htam.agent
    import htam.evaluate

    monkeypatch.chdir(tmp_path)
    _RecordingOptimizer.asked = []
    monkeypatch.setattr(htam.agent, "Optimizer", _RecordingOptimizer)
    monkeypatch.setattr(
        htam.evaluate,
        "Evaluator",
        lambda target, config: nullcontext(SimpleNamespace(config=config)),
    )
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    return {"HTAM_CACHE_DIR": str(tmp_path / "cache")}


@pytest.mark.slow
def test_resume_takes_the_steps_from_the_run_and_a_larger_steps_extends_it(tmp_path, recording):
    out = tmp_path / "run"
    args = ["optimize", RELU, "--target", "cpu", "--size", "small", "--out", str(out)]
    first = runner.invoke(app, [*args, "--steps", "3"], env=recording)
    assert first.exit_code == 130, (first.output, first.exception)
    again = runner.invoke(app, [*args, "--resume"], env=recording)  # no --steps: the run's 3
    assert again.exit_code == 130, (again.output, again.exception)
    assert f"resuming {out} at step 1" in again.stdout.splitlines()
    assert "error" not in again.stderr
    more = runner.invoke(app, [*args, "--resume", "--steps", "5"], env=recording)
    assert more.exit_code == 130, (more.output, more.exception)
    assert "error" not in more.stderr
    assert _RecordingOptimizer.asked == [3, 3, 5]
    import json

    assert json.loads((out / "run.json").read_text())["steps"] == 5
    assert len(list((out / "steps").glob("step_*.json"))) == 3


@pytest.mark.slow
def test_resume_with_fewer_steps_or_another_seed_is_one_line_before_resuming(tmp_path, recording):
    out = tmp_path / "run"
    args = ["optimize", RELU, "--target", "cpu", "--size", "small", "--out", str(out)]
    assert runner.invoke(app, [*args, "--steps", "3"], env=recording).exit_code == 130
    fewer = runner.invoke(app, [*args, "--resume", "--steps", "2"], env=recording)
    assert fewer.exit_code == 2, (fewer.output, fewer.exception)
    assert "resuming" not in fewer.stdout
    (line,) = _lines(fewer.stderr)
    assert line.startswith(f"error: cannot resume {out}: --steps 2 is fewer than the run's 3")
    seed = runner.invoke(app, [*args, "--resume", "--seed", "1"], env=recording)
    assert seed.exit_code == 2 and "resuming" not in seed.stdout
    (line,) = _lines(seed.stderr)
    assert line == f"error: cannot resume {out}: --seed was 0, now 1"
    assert _RecordingOptimizer.asked == [3]


# ---------------------------------------------------------------- 3. a folder with a bad file


def test_optimize_a_folder_reports_a_bad_file_on_one_line_and_runs_the_rest(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import htam.bench

    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "good.py").write_text(SMALL_RELU)
    (suite / "importerr.py").write_text("import not_a_module_htam_xyz\n" + SMALL_RELU)
    ran: list[str] = []

    def run_bench(config, tasks, resume=False, on_event=None):
        ran.extend(task.id for task in tasks)
        return SimpleNamespace(done=list(tasks), failed=[], skipped=[], wall_s=0.0)

    row = SimpleNamespace(
        task_id="suite/good", state="done", correct=True, speedup=1.5, kept_speedup=1.5,
        error=None, method="htam", seed=0, level=None, steps_planned=1,
    )  # fmt: skip
    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    monkeypatch.setattr(htam.bench, "load_rows", lambda out: [row])
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["optimize", str(suite), "--target", "cpu", "--steps", "1", "--out", str(tmp_path / "b")]
    result = runner.invoke(app, args, env=env)
    assert ran == ["suite/good"]  # the good file ran
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    errors = [line for line in _lines(result.stderr) if line.startswith("error: ")]
    (line,) = errors
    assert "importerr.py" in line and "ModuleNotFoundError" in line
    assert "suite/good" in result.stdout  # its row is in the table
    assert "1 task file could not be loaded" in result.stderr
    # every file bad: each reported, exit 2, nothing run
    (suite / "good.py").unlink()
    ran.clear()
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2 and ran == []
    assert len([ln for ln in _lines(result.stderr) if ln.startswith("error: ")]) == 1


# ---------------------------------------------------------------- 4. a candidate's exception

BOOM = """import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise ValueError("sol boom")
"""

HARNESS_TRACE = """Traceback (most recent call last):
  File "/work/main/htam/evaluate/candidate/harness.py", line 197, in serve
    self.call(int(msg["key"]))
  File "/work/main/htam/evaluate/measure.py", line 69, in _cpu_call
    fn(*args)
  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1789, in _call_impl
    return forward_call(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/tmp/job/candidate.py", line 6, in forward
    raise ValueError("sol boom")
ValueError: sol boom
"""


def test_failure_line_keeps_the_exception_and_the_candidates_line():
    from htam.cli.fmt import failure_line

    assert failure_line(HARNESS_TRACE) == "ValueError: sol boom (candidate.py:6)"
    assert failure_line("one line") == "one line"
    assert failure_line("compile failed:\nfoo.cpp:3: note\nfoo.cpp:4: error: x") == (
        "compile failed: foo.cpp:4: error: x"
    )


@pytest.mark.slow
def test_eval_shows_a_candidates_exception_in_one_line_and_keeps_the_trace(tmp_path):
    from htam.cli.eval_cmd import render
    from htam.evaluate.result import EvalResult
    from htam.status import Status

    solution = tmp_path / "candidate.py"
    solution.write_text(BOOM)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["eval", RELU, str(solution), "--target", "cpu", "--size", "small", "--allow-torch"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 1, (result.output, result.exception)
    notes = [line for line in result.stdout.splitlines() if "note" in line]
    assert len(notes) == 1 and "ValueError: sol boom (candidate.py:6)" in notes[0], notes
    assert "Traceback" not in result.stdout and "harness.py" not in result.stdout
    # the full trace: --verbose shows it in the table (and --json keeps it)
    failed = EvalResult(status=Status.RUNTIME_ERROR, messages=[HARNESS_TRACE])
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render(failed, verbose=True))
    assert "harness.py" in console.export_text()
    console = Console(width=200, record=True)
    console.print(render(failed))
    text = console.export_text()
    assert "harness.py" not in text and "ValueError: sol boom (candidate.py:6)" in text


# ---------------------------------------------------------------- 5. a closed stdout


@pytest.mark.slow
def test_a_closed_stdout_exits_141_quietly_and_leaves_no_empty_run_dir(tmp_path):
    """`htam optimize ... | head -1`: the reader goes away; exit 141 (as for SIGPIPE), not 1
    ("no correct candidate"), no traceback, and no run directory without a step."""
    args = ["optimize", RELU, "--target", "cpu", "--steps", "3", "--size", "small"]
    proc = start_htam(tmp_path, args, group=False)
    first = proc.stdout.readline()  # as `head -1`: one line, then the pipe is closed
    proc.stdout.close()
    stderr = proc.stderr.read()
    code = proc.wait(timeout=300)
    assert first.startswith("timing at size small"), (first, stderr)
    assert code == 141, (code, stderr)
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    # stdout is block-buffered in a pipe: the write that finds it closed may come after step 0
    # (then the directory stays, to be resumed) or before (then nothing of it is left)
    runs = tmp_path / "runs"
    for run in runs.iterdir() if runs.exists() else []:
        assert list(run.glob("steps/step_*.json")), list(run.rglob("*"))


# ---------------------------------------------------------------- 6. --tasks with a task id


def test_tasks_filter_with_a_builtin_id_is_refused_as_the_help_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    helptext = " ".join(runner.invoke(app, ["optimize", "--help"], env=env).stdout.split())
    helptext = helptext.replace("│", "").replace("  ", " ")
    assert "or any TASK with --tasks" not in helptext
    args = ["optimize", RELU, "--target", "cpu", "--steps", "1", "--tasks", "*"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = _lines(result.stderr)
    assert line.startswith(f"error: {RELU}: --tasks/--levels filter a suite")
    assert "builtin --tasks 1_ReLU" in line
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- 7. small ones


def test_negative_seed_and_a_memory_bank_in_a_missing_folder_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["optimize", RELU, "--target", "cpu", "--steps", "1", "--size", "small"]
    result = runner.invoke(app, [*args, "--seed", "-1"], env=env)
    assert result.exit_code == 2 and result.stdout == "", (result.output, result.exception)
    (line,) = _lines(result.stderr)
    assert line.startswith("error: --seed -1:")
    missing = tmp_path / "nonexistent" / "dir" / "m.db"
    result = runner.invoke(app, [*args, "--memory", str(missing)], env=env)
    assert result.exit_code == 2 and result.stdout == "", (result.output, result.exception)
    (line,) = _lines(result.stderr)
    assert line == f"error: --memory {missing}: its folder {missing.parent} does not exist"
    assert not (tmp_path / "nonexistent").exists()
    assert not (tmp_path / "runs").exists()


def test_the_timing_line_says_what_the_other_size_is():
    from htam.cli.optimize_view import timed_line

    two_sizes = "N = 4096\nHTAM_SMALL = {'N': 33}\n"
    line = timed_line("small", ["33x257 float32"], 67_800, two_sizes)
    assert line == (
        "timing at size small: 33x257 float32 (67.8 KB in and out; the reduced size "
        "(HTAM_SMALL)); --size large times the full size"
    )
    line = timed_line("large", ["4096x8192 float32"], 268_435_456, two_sizes)
    assert line == "timing at size large: 4096x8192 float32 (268 MB in and out; the full size)"


def test_a_run_directory_without_a_finished_step_is_removed_one_with_a_step_is_kept(tmp_path):
    from htam.cli.optimize_runs import remove_if_nothing_ran

    empty, started = tmp_path / "empty", tmp_path / "started"
    for run in (empty, started):
        (run / "steps").mkdir(parents=True)
        (run / "run.json").write_text("{}")
    (started / "steps" / "step_00.json").write_text("{}")
    remove_if_nothing_ran(empty)
    remove_if_nothing_ran(started)
    assert not empty.exists()
    assert (started / "run.json").exists() and (started / "steps" / "step_00.json").exists()


def test_quiet_and_verbose_together_are_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["optimize", RELU, "--target", "cpu", "--steps", "1", "--quiet", "--verbose"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "--quiet and --verbose: give one of them" in result.output
    assert not (tmp_path / "runs").exists()
