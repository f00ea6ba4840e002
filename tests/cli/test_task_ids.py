"""One task, one name: every command that selects tasks takes the ids ``optimize`` takes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()


@pytest.mark.parametrize("spec", ["level1/1_ReLU", "builtin/level1/1_ReLU", "1_ReLU", "level1/1_*"])
def test_tasks_list_takes_optimize_s_ids(spec):
    result = runner.invoke(app, ["tasks", "list", "builtin", "--tasks", spec, "--json"])
    assert result.exit_code == 0, result.output
    assert '"builtin/level1/1_ReLU"' in result.stdout
    assert "level1/2_GELU" not in result.stdout


def test_bench_takes_optimize_s_ids(monkeypatch, tmp_path):
    """Up to the tasks it would run: the bench itself is stopped where the units start."""
    from htam.cli import bench_cmd

    chosen = []

    def stop(tasks, *args, **kwargs):
        chosen.extend(t.id for t in tasks)
        raise SystemExit(0)

    monkeypatch.setattr(bench_cmd, "fitting_tasks", stop)
    args = ["bench", "builtin", "--tasks", "level1/1_ReLU,level2/5_Elementwise_Chain"]
    result = runner.invoke(app, [*args, "--target", "cpu", "--out", str(tmp_path / "b")])
    assert "no task in builtin" not in result.output
    assert chosen == ["builtin/level1/1_ReLU", "builtin/level2/5_Elementwise_Chain"]


def test_a_folder_of_one_task_is_that_task_and_of_several_names_their_files(tmp_path):
    """A Robust-KBench task folder was refused as "a directory" with no word of the files it
    holds (its forward and backward tasks)."""
    from htam.cli.common import resolve_task
    from tests.cli.tasks_src import SMALL_RELU, write_suite

    assert resolve_task(str(write_suite(tmp_path / "one", "a"))).id == "one/a"
    suite = write_suite(tmp_path / "suite", "a", "b", source=SMALL_RELU)
    solution = tmp_path / "sol.py"
    solution.write_text("class ModelNew:\n    pass\n")
    result = runner.invoke(app, ["eval", str(suite), str(solution), "--target", "cpu"])
    assert result.exit_code == 2, (result.output, result.exception)
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {suite}: is a directory; give one task file")
    assert f"it holds 2 tasks: {suite / 'a.py'} (suite/a), {suite / 'b.py'} (suite/b)" in line
