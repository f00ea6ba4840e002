"""What `htam eval` prints while it works: the shapes it times come first, before the
evaluation (a KernelBench file at its own size took ten minutes on 2 cores with nothing shown)."""

from __future__ import annotations

from typer.testing import CliRunner

import htam.evaluate
from htam.cli import app
from htam.evaluate import EvaluatorError

from .tasks_src import SMALL_RELU

runner = CliRunner()


class _Stopping:
    """An evaluator that stops at once: whatever eval printed by then was printed before."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        raise EvaluatorError("stopped where the evaluation starts")

    def __exit__(self, *exc):
        return False


def test_eval_says_what_it_times_before_it_evaluates(tmp_path, env, monkeypatch):
    monkeypatch.setattr(htam.evaluate, "Evaluator", _Stopping)
    task = tmp_path / "relu.py"
    task.write_text(SMALL_RELU)
    solution = tmp_path / "sol.py"
    solution.write_text("class ModelNew:\n    pass\n")
    args = ["eval", str(task), str(solution), "--target", "cpu"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout.startswith("timing at the KernelBench size (the file's own shapes; it ")
    assert "8x16 float32" in result.stdout
    assert "stopped where the evaluation starts" in result.stderr
    # --json and --quiet print their one answer alone
    for quiet in ("--json", "--quiet"):
        result = runner.invoke(app, [*args, quiet], env=env)
        assert result.exit_code == 2 and "timing at" not in result.stdout, result.stdout
