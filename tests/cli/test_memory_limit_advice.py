"""The --memory-limit-mb a refusal advises is one that runs the task: the CPU evaluation holds
several copies of a task's tensors beside torch, so the tensors' own size is not enough (a
256 MiB ReLU failed at 1536 MB). The size timed on the CPU follows the same need."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from htam.cli import app
from htam.cli.sizes import CPU_EVAL_MULTIPLE, limit_advice, needed_limit_mb, timed_size
from htam.evaluate.peak_memory import honest
from htam.tasks import Task

from .tasks_src import relu_task

runner = CliRunner()
MIB = 2**20


def test_the_advised_limit_is_a_multiple_of_the_tensors_beside_torch_in_steps_of_256_mb():
    assert CPU_EVAL_MULTIPLE >= 5  # 4.2-4.7x measured, the buffers counted in both processes
    assert needed_limit_mb(0) == 512
    assert needed_limit_mb(64 * MIB) == 1024  # 512 + 384, rounded up
    assert needed_limit_mb(256 * MIB) == 2048  # ran at 1792, failed at 1536
    assert needed_limit_mb(256 * MIB + 1) == 2048 + 256
    assert needed_limit_mb(1 << 30) > 5 * 1024  # never the tensors' own 1024


def test_no_limit_is_advised_beyond_the_machine(monkeypatch):
    import htam.evaluate.eval_config

    monkeypatch.setattr(htam.evaluate.eval_config, "machine_memory_mb", lambda: 4096)
    assert limit_advice(256 * MIB).startswith("--memory-limit-mb 2048 ")
    assert limit_advice(1 << 30) is None  # 6.5 GB on a 4 GB machine
    assert limit_advice(None) is None


def test_cpp_on_the_cpu_times_the_large_size_only_where_the_limit_holds_its_evaluation():
    # 268 MB of tensors: under the 300 MB the CPU times at large, but its evaluation needs 2 GB
    task = Task("local/relu", "relu", relu_task("4096", "8192", small='HTAM_SMALL = {"ROWS": 8}'))
    assert timed_size("cpu", "cpp", None, task, memory_limit_mb=2048) == "large"
    assert timed_size("cpu", "cpp", None, task, memory_limit_mb=1024) == "small"
    assert timed_size("cpu", "cpp", "large", task, memory_limit_mb=1024) == "large"  # as asked


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_limit_named_when_the_reference_runs_out_of_memory_runs_it(tmp_path, env):
    """64 MiB of tensors: the reference stops at 256 MB, and the message names the limit that
    runs it, where it used to say only "raise it"."""
    task = tmp_path / "relu64.py"
    task.write_text(relu_task("4096", "2048"))  # 32 MiB in, 32 MiB out
    solution = tmp_path / "sol.py"
    solution.write_text(honest(task.read_text()))
    args = ["eval", str(task), str(solution), "--target", "cpu", "--language", "cpp"]
    args += ["--allow-torch", "--quiet"]
    result = runner.invoke(app, [*args, "--memory-limit-mb", "256"], env=env)
    assert result.exit_code == 3, (result.output, result.exception)
    advised = re.search(r"give --memory-limit-mb (\d+) ", result.stderr + result.stdout)
    assert advised, result.output
    assert int(advised[1]) == needed_limit_mb(64 * MIB) == 1024
    result = runner.invoke(app, [*args, "--memory-limit-mb", advised[1]], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stdout.startswith("ok"), result.stdout


def test_the_hint_is_for_the_cpu_memory_limit_alone():
    from htam.cli.common import memory_hint

    task = Task("local/relu", "relu", relu_task("4096", "2048"))
    stopped = "the reference needs more host memory than the 0.2 GiB allowed"
    assert memory_hint(stopped, task, "cpu", "small").startswith("; give --memory-limit-mb 1024 ")
    assert memory_hint(stopped, task, "cuda", "large") == ""
    assert memory_hint("the reference timed out", task, "cpu", "small") == ""


def test_a_task_whose_evaluation_cannot_fit_is_refused_though_its_tensors_do(tmp_path, env):
    """128 MiB of tensors under a 256 MB limit: no evaluation holds less than 3 times them, so
    it is refused at once (exit 3), where it used to run and fail at the limit."""
    task = tmp_path / "relu128.py"
    task.write_text(relu_task("4096", "4096"))
    solution = tmp_path / "sol.py"
    solution.write_text(honest(task.read_text()))
    args = ["eval", str(task), str(solution), "--target", "cpu", "--allow-torch"]
    result = runner.invoke(app, [*args, "--memory-limit-mb", "256"], env=env)
    assert result.exit_code == 3, (result.output, result.exception)
    (line,) = result.stderr.splitlines()
    assert "take 0.13 GB (inputs, outputs and parameters)" in line
    assert "an evaluation holds at least 3 times that (0.40 GB), over the 0.27 GB" in line
    assert "give --memory-limit-mb 1280 " in line  # 512 + 6 x 128
