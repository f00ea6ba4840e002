"""--json on stdout only: ``htam optimize SUITE --json`` prints one JSON object of per-task
summaries (progress on stderr), and a usage error of ``htam`` itself or of a sub-group (a
mistyped command, an unknown option) is a JSON object too when --json is on the command line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from htam.agent.run_summary import RunSummary
from htam.cli import app
from tests.cli.tasks_src import write_suite

runner = CliRunner()


def _fake_suite_run(monkeypatch) -> None:
    """A bench whose first task ends faster than the reference (summary.json written, as the
    loop writes it) and whose second fails before its first step; progress through on_event."""
    import htam.bench
    from htam.bench.bench_config import Unit
    from htam.bench.metrics import UnitRow

    units: list = []

    def run_bench(config, tasks, resume=False, on_event=None):
        units.clear()
        for task in tasks:
            unit = Unit(config.methods[0], 0, task.id, task.level, config.steps)
            units.append(unit)
            if len(units) == 1:
                run_dir = unit.run_dir(config.out)
                run_dir.mkdir(parents=True)
                summary = {"task_id": task.id, "run_dir": str(run_dir), "steps": 1}
                summary |= {"outcome": "faster", "best_speedup": 1.5, "best_file": "best.py"}
                (run_dir / "summary.json").write_text(json.dumps(summary))
            on_event("unit_end", {"unit": unit.key, "status": "done", "device": "cpu0"})
        return SimpleNamespace(done=units[:1], failed=units[1:], skipped=[], wall_s=2.0)

    def load_rows(out):
        done, failed = units
        common = {"method": "htam", "seed": 0, "level": None, "steps_planned": 1}
        return [
            UnitRow(key=done.key, task_id=done.task_id, state="complete", correct=True,
                    speedup=1.5, **common),
            UnitRow(key=failed.key, task_id=failed.task_id, state="failed",
                    error="RuntimeError: worker died", **common),
        ]  # fmt: skip

    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    monkeypatch.setattr(htam.bench, "load_rows", load_rows)


def test_optimize_a_suite_with_json_prints_one_json_object_of_task_summaries(
    tmp_path, env, monkeypatch
):
    _fake_suite_run(monkeypatch)
    suite = write_suite(tmp_path / "suite", "a", "b")
    out = tmp_path / "batch"
    args = ["optimize", str(suite), "--target", "cpu", "--steps", "1", "--out", str(out)]
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    (line,) = result.stdout.splitlines()  # no table, no progress: one JSON object
    data = json.loads(line)
    assert data["suite"] == str(suite) and data["out"] == str(out)
    assert data["bank"] == str(out / "memory" / "htam.db") and data["errors"] == []
    assert (data["count"], data["done"], data["failed"], data["skipped"]) == (2, 1, 1, 0)
    first, second = data["tasks"]
    # the first: its summary.json, as `htam optimize TASK --json` prints it (read as today's
    # summary: the keys the file lacked are there too), and its state
    run_dir = out / "runs" / "htam" / "s0" / "suite__a"
    expected = {
        "task_id": "suite/a", "run_dir": str(run_dir), "steps": 1, "outcome": "faster",
        "best_speedup": 1.5, "best_file": "best.py", "state": "complete", "correct": True,
        "error": None,
    }  # fmt: skip
    assert {k: first[k] for k in expected} == expected
    assert set(RunSummary.from_dict(first).to_dict()) < set(first)
    assert second["task_id"] == "suite/b" and second["outcome"] is None
    assert (second["state"], second["error"]) == ("failed", "RuntimeError: worker died")
    # the progress went to stderr
    assert "htam/s0/suite/a: done" in result.stderr
    # without --json: the table on stdout, as before
    plain = runner.invoke(app, [*args[:-1], str(tmp_path / "plain")], env=env)
    assert plain.exit_code == 0 and "suite/a" in plain.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(plain.stdout)


def test_a_suite_of_bad_files_with_json_is_one_json_error(tmp_path, env):
    suite = write_suite(tmp_path / "suite", "bad", source="import not_a_module_htam_xyz\n")
    args = ["optimize", str(suite), "--target", "cpu", "--out", str(tmp_path / "b"), "--json"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    (line,) = result.stdout.splitlines()
    data = json.loads(line)
    assert data["exit_code"] == 2 and data["error"].startswith(f"no task of {suite} could be")
    (error,) = data["errors"]
    assert "bad.py" in error and "ModuleNotFoundError" in error


@pytest.mark.parametrize(
    "args, cause",
    [
        (["optimise", "level1/1_ReLU"], "No such command 'optimise'. Did you mean 'optimize'?"),
        ([], "No such option: --json"),  # `htam --json`
        (["tasks", "lsit"], "No such command 'lsit'. Did you mean 'list'?"),
        (["memory"], "No such option: --json"),  # a sub-group without --json of its own
    ],
)
def test_a_usage_error_of_htam_itself_with_json_is_one_json_object(env, args, cause):
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    (line,) = result.stdout.splitlines()
    data = json.loads(line)
    assert data.keys() == {"error", "exit_code"} and data["exit_code"] == 2
    assert data["error"].startswith(cause), data
    assert cause in " ".join(result.stderr.split()).replace("│", "")  # click's message stays
    # --json first, or after `--` (a value there, not the option)
    first = runner.invoke(app, ["--json", *args], env=env)
    assert first.exit_code == 2 and json.loads(first.stdout)["exit_code"] == 2
    if args:
        after = runner.invoke(app, [args[0], "--", "--json"], env=env)
        assert after.exit_code == 2 and after.stdout == ""
    plain = runner.invoke(app, [*args, "--no-such-option"], env=env)  # no --json: no JSON
    assert plain.exit_code == 2 and plain.stdout == ""


def test_the_suite_table_says_why_a_task_has_no_correct_candidate(tmp_path):
    """Its error cell gives the cause the task's own last line gives (the summary's reason),
    not nothing: a task the offline proposer has no template for showed "partial", "n/a", "1x"
    and an empty cell."""
    from rich.console import Console

    from htam.bench.bench_config import Unit
    from htam.bench.metrics import UnitRow
    from htam.cli.optimize_suite import _table

    out = tmp_path / "batch"
    common = {"method": "htam", "seed": 0, "level": None, "steps_planned": 2}
    stopped = UnitRow(key="u1", task_id="suite/bwd", state="partial", **common)
    run_dir = Unit("htam", 0, "suite/bwd", None, 2).run_dir(out)
    run_dir.mkdir(parents=True)
    reason = "no applicable strategy: a backward task: the templates write forward kernels only"
    summary = {"task_id": "suite/bwd", "steps": 1, "outcome": "none_correct", "reason": reason}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    died = UnitRow(key="u2", task_id="suite/x", state="failed",
                   error="RuntimeError: died\nmore", **common)  # fmt: skip
    kept = UnitRow(key="u3", task_id="suite/ok", state="complete", correct=True, speedup=1.5,
                   **common)  # fmt: skip
    screen = Console(width=400, record=True)
    screen.print(_table([stopped, died, kept], "t", out))
    text = screen.export_text()
    assert reason in text
    assert "RuntimeError: died" in text and "more" not in text
