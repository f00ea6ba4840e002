"""A reference that cannot run here, found when the loop starts (not before): exit 3 and one
line, and no run directory left behind with nothing in it but its run.json."""

from __future__ import annotations

import json
from contextlib import nullcontext

from typer.testing import CliRunner

from htam.cli import app
from htam.tasks import TaskError
from tests.agent.fake_evaluator import FakeEvaluator

runner = CliRunner()
WHY = "the reference failed to run: the reference's outputs are all empty"


class _NoReference(FakeEvaluator):
    def reference(self, task, timed: bool = True):
        raise TaskError(task.id, WHY)


def test_a_run_whose_reference_cannot_run_leaves_no_empty_run_directory(tmp_path, monkeypatch):
    import htam.evaluate

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        htam.evaluate, "Evaluator", lambda target, config: nullcontext(_NoReference(config=config))
    )
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    env = {"HTAM_CACHE_DIR": str(tmp_path / "cache")}
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--size", "small", "--steps", "2"]
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 3, (result.output, result.exception)
    assert WHY in json.loads(result.stdout)["error"]
    assert not list((tmp_path / "runs").glob("*")), list((tmp_path / "runs").glob("*/*"))
    # a run directory given with --out that existed before is kept
    out = tmp_path / "mine"
    out.mkdir()
    result = runner.invoke(app, [*args, "--out", str(out)], env=env)
    assert result.exit_code == 3, (result.output, result.exception)
    assert out.is_dir()
