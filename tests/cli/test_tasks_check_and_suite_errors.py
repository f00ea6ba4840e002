"""`tasks check` and suites' errors: a traceback for a bad --levels, a task file's print() before --json's
object, a bench that failed every unit on an unreachable endpoint and exited 0, a suite's
--quiet that printed everything, and exit codes and leftovers of `tasks check`."""

import json

import pytest
from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()

PRINTING_TASK = """
import torch
import torch.nn as nn

print("importing task")


class Model(nn.Module):
    def forward(self, x):
        print("in forward")
        return torch.relu(x)


def get_inputs():
    print("in get_inputs")
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("command", [["optimize"], ["bench"], ["tasks", "check"]])
def test_a_bad_levels_value_is_a_usage_error(command, tmp_path):
    args = [*command, "builtin", "--target", "cpu", "--levels", "x", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "expected comma-separated integers, got 'x'" in result.output
    assert not (tmp_path / "o").exists()


def test_a_task_files_prints_stay_out_of_the_json(tmp_path, capfd):
    (tmp_path / "printing.py").write_text(PRINTING_TASK)
    from htam.cli import main

    with pytest.raises(SystemExit) as exit_info:
        import sys

        sys.argv = ["htam", "tasks", "list", str(tmp_path), "--json"]
        main()
    out, err = capfd.readouterr()
    assert exit_info.value.code in (0, None)
    assert json.loads(out)["count"] == 1, out
    assert "importing task" in err


def test_bench_on_an_unreachable_endpoint_stops_before_any_unit(tmp_path):
    out = tmp_path / "b"
    args = ["bench", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--base-url", "http://127.0.0.1:9", "--model", "x"])
    assert result.exit_code == 3, result.output
    assert "the LLM endpoint cannot be used" in result.output
    assert not out.exists()


def test_tasks_check_refuses_a_bad_eval_before_making_out(tmp_path):
    out = tmp_path / "check"
    args = ["tasks", "check", "builtin", "--tasks", "1_ReLU", "--target", "cpu"]
    result = runner.invoke(app, [*args, "--out", str(out), "--eval", "bogus=1"])
    assert result.exit_code == 2, result.output
    assert not out.exists()


def test_a_suite_of_bad_files_exits_2_in_tasks_check(tmp_path):
    (tmp_path / "bad.py").write_text("raise RuntimeError('broken')\n")
    args = ["tasks", "check", str(tmp_path), "--target", "cpu", "--out", str(tmp_path / "o")]
    assert runner.invoke(app, args).exit_code == 2


def test_tasks_configs_with_no_match_is_a_usage_error():
    result = runner.invoke(app, ["tasks", "configs", "builtin", "--tasks", "zzz"])
    assert result.exit_code == 2
    assert "no task in builtin matches" in result.output


def test_tasks_configs_lists_the_good_files_of_a_folder_and_names_each_bad_one(tmp_path):
    """As `tasks list` does (docs/usage.md): a bad file stopped the whole table."""
    from tests.cli.tasks_src import write_suite

    suite = write_suite(tmp_path / "mine", "good")
    (suite / "broken.py").write_text("def f(:\n")
    result = runner.invoke(app, ["tasks", "configs", str(suite)])
    assert result.exit_code == 2, (result.output, result.exception)
    assert "mine/good" in result.stdout and "1 timed + 0 checked" in result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {suite / 'broken.py'}: syntax error"), line


@pytest.mark.slow  # a suite's whole loop; a suite's Ctrl-C (test_last_line) stays fast
def test_a_suite_run_with_quiet_prints_its_last_line_alone(tmp_path):
    out = tmp_path / "batch"
    args = ["optimize", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--quiet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and "1 done, 0 failed" in lines[0], result.stdout


def test_an_interrupted_bench_is_told_how_to_continue(tmp_path):
    """Ctrl-C on a bench said only "interrupted"; its resume command repeats every suite."""
    import typer.main

    from htam.cli.optimize_runs import resume_command

    bench = typer.main.get_command(app).commands["bench"]
    args = ["builtin", "more", "--steps", "3", "--target", "cpu", "--out", str(tmp_path)]
    with bench.make_context("bench", args) as ctx:
        line = resume_command(ctx, tmp_path)
    assert line == f"htam bench builtin more --steps 3 --target cpu --resume --out {tmp_path}"
