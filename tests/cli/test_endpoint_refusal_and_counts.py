"""Endpoint refusal and counts: a run refused for its LLM endpoint left a new memory bank behind, and counts
of one said "1 tasks"."""

from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()


def test_an_unusable_endpoint_stops_the_run_before_the_bank_is_made(tmp_path):
    bank = tmp_path / "newbank.db"
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--memory", str(bank)]
    result = runner.invoke(app, [*args, "--base-url", "http://127.0.0.1:9", "--model", "x"])
    assert result.exit_code == 3, result.output
    assert "the LLM endpoint cannot be used" in result.output
    assert not bank.exists()


def test_one_task_is_one_task():
    result = runner.invoke(app, ["tasks", "list", "builtin", "--tasks", "1_ReLU"])
    assert result.exit_code == 0
    assert "1 task from builtin" in result.output and "1 tasks" not in result.output


def test_usage_lines_name_the_arguments_in_capitals():
    result = runner.invoke(app, ["eval", "--help"])
    assert result.output.splitlines()[0].endswith("eval [OPTIONS] TASK SOLUTION_FILE")
