"""`htam bench --json`: one JSON object on stdout (the units and the metrics), the lines and the
table on stderr, so that `htam bench ... --json | python -m json.tool` reads it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from typer.testing import CliRunner

from htam.cli import app

from .tasks_src import write_suite

runner = CliRunner()


def _fake_bench(monkeypatch, tmp_path: Path) -> None:
    import htam.bench

    def run_bench(config, tasks, resume=False, on_event=None):
        metrics = tmp_path / "metrics.json"
        metrics.write_text(json.dumps({"methods": {"htam": {"units": len(tasks)}}, "notes": []}))
        report = SimpleNamespace(
            metrics=metrics, markdown=tmp_path / "r.md", html=tmp_path / "r.html"
        )
        done = [t.id for t in tasks]
        return SimpleNamespace(planned=len(done), done=done, failed=[], retried=[], skipped=[],
                               wall_s=1.5, report=report)  # fmt: skip

    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    monkeypatch.setattr("htam.cli.bench_cmd.print_metrics", lambda metrics: print("a table"))


def test_bench_json_is_one_object_on_stdout(tmp_path, env, monkeypatch):
    _fake_bench(monkeypatch, tmp_path)
    suite = write_suite(tmp_path / "suite", "a", "b")
    args = ["bench", str(suite), "--target", "cpu", "--steps", "1", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, (result.output, result.exception)
    data = json.loads(result.stdout)  # nothing else on stdout
    assert data["planned"] == data["done"] == 2 and data["failed"] == 0
    assert data["metrics"]["methods"]["htam"]["units"] == 2
    assert data["report"]["markdown"].endswith("r.md")
    assert "a table" in result.stderr and "2 tasks x 1 method x 1 seed" in result.stderr
    # a usage error: the JSON object of the error, exit 2
    result = runner.invoke(app, ["bench", str(tmp_path / "nope"), "--json"], env=env)
    assert result.exit_code == 2
    assert json.loads(result.stdout)["exit_code"] == 2
