"""``htam optimize TASK --json``: the JSON object alone on stdout (a pipe into ``python -m
json.tool`` reads it), and the progress a plain run prints on stdout on stderr instead, as a
suite's --json does: a run of minutes shows what it is doing."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()


ARGS = ["optimize", "level1/1_ReLU", "--target", "cpu", "--size", "small", "--steps", "2"]


def test_json_keeps_stdout_for_its_object_and_shows_progress_on_stderr(fake_evaluator, monkeypatch):
    from htam.cli.common import err_console

    monkeypatch.setattr(err_console, "width", 40)  # lines are not wrapped at the width
    result = runner.invoke(app, [*ARGS, "--json"], env=fake_evaluator)
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads(result.stdout)  # the object and nothing else
    assert summary["outcome"] == "faster" and summary["steps"] == 2
    lines = result.stderr.splitlines()
    assert any(line.startswith("timing at size small: ") for line in lines), lines
    assert f"run directory: {summary['run_dir']}" in lines
    assert [line.split(":")[0] for line in lines if line.startswith("step ")] == [
        "step 0",
        "step 1",
    ]
    assert lines[-1].startswith("best: ") and lines[-1].endswith("best.py"), lines
    # each line whole, as in a log: the stats line was cut after its 80th column on stderr
    (stats,) = [line for line in lines if " · $0.0000 · " in line]
    assert stats.startswith("2 steps") and stats.endswith(" in the steps)"), stats


def test_without_json_the_same_lines_go_to_stdout(fake_evaluator):
    result = runner.invoke(app, ARGS, env=fake_evaluator)
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("step ")] == [
        "step 0",
        "step 1",
    ]
    assert lines[-1].startswith("best: ")
