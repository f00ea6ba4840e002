"""The CLI's answers to bad input as a newcomer meets them: one line, no traceback, the exit code
README gives (2 for a usage error, 3 for a reference that cannot run here, 130 for Ctrl-C)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from typer.testing import CliRunner

from htam.cli import app
from tests.cli.tasks_src import relu_task

RELU = "level1/1_ReLU"
runner = CliRunner()


def _one_error_line(result) -> str:
    """The whole answer: one `error:` line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == "", result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("case", ["out_under_a_file", "out_is_a_file", "memory", "cache"])
def test_bad_out_memory_or_cache_path_is_one_line_before_anything(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    args = ["optimize", RELU, "--target", "cpu", "--steps", "1", "--size", "small"]
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args += {
        "out_under_a_file": ["--out", str(a_file / "run")],
        "out_is_a_file": ["--out", str(a_file)],
        "memory": ["--memory", str(a_file / "bank.db")],
        "cache": [],
    }[case]
    if case == "cache":
        env["HTAM_CACHE_DIR"] = str(a_file / "cache")
    line = _one_error_line(runner.invoke(app, args, env=env))
    assert str(a_file) in line
    assert not (tmp_path / "runs").exists()  # nothing started
    if case == "cache":  # eval writes to the cache too
        solution = tmp_path / "solution.py"
        solution.write_text("class ModelNew:\n    pass\n")
        evaluate = ["eval", RELU, str(solution), "--target", "cpu", "--size", "small"]
        assert str(a_file) in _one_error_line(runner.invoke(app, evaluate, env=env))


def test_bench_and_check_bad_out_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    bench = ["bench", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--steps", "1"]
    line = _one_error_line(runner.invoke(app, [*bench, "--out", str(a_file / "b")], env=env))
    assert f"--out {a_file / 'b'}" in line
    check = ["tasks", "check", "builtin", "--tasks", "1_ReLU", "--target", "cpu"]
    line = _one_error_line(runner.invoke(app, [*check, "--out", str(a_file)], env=env))
    assert f"--out {a_file}" in line


NO_SMALL = relu_task("16384", "16384")  # no HTAM_SMALL: 2.15 GB at any size


@pytest.mark.slow
def test_task_without_htam_small_on_cpu_says_so_and_exits_3(tmp_path):
    """An unmodified KernelBench file (no HTAM_SMALL): its reference cannot run under the limit;
    the error says why and where to read how to add a small size, with README's exit code 3.
    Its tensors alone exceed the limit, so it is refused before anything runs or is printed."""
    task = tmp_path / "19_ReLU.py"
    task.write_text(NO_SMALL)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env |= {"HOME": str(tmp_path), "HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["optimize", str(task), "--target", "cpu", "--steps", "1", "--memory-limit-mb", "256"]
    run = subprocess.run(
        [sys.executable, "-m", "htam.cli", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 3, (run.returncode, run.stdout, run.stderr)
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    (line,) = [line for line in run.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ") and "--memory-limit-mb" in line
    # 16384x16384 float32, in and out; "size small" would say small of a file that has one size
    assert (
        "at the KernelBench size (the file's own shapes; it has no HTAM_SMALL) take 2.15 GB" in line
    )
    assert "add a reduced size to the task (HTAM_SMALL, see docs/tasks.md)" in line


def test_usage_errors_of_every_command_are_exit_2_with_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_error_line(runner.invoke(app, ["tasks", "list", str(tmp_path / "nothing")]))
    assert "no such file or directory" in line
    line = _one_error_line(runner.invoke(app, ["tasks", "check", str(empty), "--target", "cpu"]))
    assert f"no task in {empty}" in line
    line = _one_error_line(runner.invoke(app, ["optimize", str(empty), "--target", "cpu"]))
    assert f"no task in {empty}" in line
    line = _one_error_line(runner.invoke(app, ["report", str(tmp_path / "nothing")]))
    assert "no such directory" in line and "plan.json" not in line


def test_a_checkout_with_its_tasks_under_tasks_is_refused_with_the_path(tmp_path):
    from tests.tasks.robust_fixture import write_tree

    inner = write_tree(tmp_path / "robust-kbench")
    line = _one_error_line(runner.invoke(app, ["tasks", "list", str(tmp_path / "robust-kbench")]))
    assert "no task in" in line and str(inner) in line
    assert runner.invoke(app, ["tasks", "list", str(inner)]).exit_code == 0


class _InterruptedOptimizer:
    """Step 0 finished and recorded, then Ctrl-C during step 1."""

    def __init__(self, *args, **kwargs):
        pass

    def run(self, task, out: Path, resume: bool = False):
        (out / "steps").mkdir(parents=True, exist_ok=True)
        (out / "run.json").write_text("{}")
        (out / "steps" / "step_00.json").write_text("{}")
        raise KeyboardInterrupt


@pytest.mark.slow
def test_ctrl_c_says_how_to_resume_and_resume_says_where(tmp_path, monkeypatch):
    import htam.agent
    import htam.evaluate

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(htam.agent, "Optimizer", _InterruptedOptimizer)
    monkeypatch.setattr(htam.evaluate, "Evaluator", lambda *a, **k: nullcontext())
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "run"
    args = ["optimize", RELU, "--target", "cpu", "--steps", "3", "--size", "small"]
    result = runner.invoke(app, [*args, "--out", str(out)], env=env)
    assert result.exit_code == 130, (result.output, result.exception)
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line == (
        f"interrupted at step 1; `htam optimize {RELU} --steps 3 --target cpu --size small "
        f"--resume --out {out}` continues"
    )
    again = runner.invoke(app, [*args, "--resume", "--out", str(out)], env=env)
    assert again.exit_code == 130
    assert f"resuming {out} at step 1" in again.stdout.splitlines()
