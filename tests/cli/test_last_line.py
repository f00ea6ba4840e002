"""The last line: a run that stops says why on its last line and in --json (not only with
-v); Ctrl-C on a suite prints the --resume command that continues the batch; --quiet prints the
last line alone."""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import nullcontext
from pathlib import Path

import pytest
from typer.testing import CliRunner

from htam.agent.run_summary import RunSummary
from htam.cli import app
from tests.cli.conftest import start_htam
from tests.cli.tasks_src import write_suite

runner = CliRunner()

# A reference whose output is int32: no candidate can be made for it, and the run stops after
# its first step.
INT32_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x > 0).to(torch.int32)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


def _first_message(out: Path) -> str:
    """The first line of the first message of the run's last step: what -v shows of it."""
    last = sorted((out / "steps").glob("step_*.json"))[-1]
    feedback = json.loads(last.read_text())["feedback"]
    assert feedback["status"] != "ok", feedback
    return feedback["messages"][0].strip().splitlines()[0]


# ---------------------------------------------------------------- 1. why a run stopped


@pytest.mark.slow
def test_a_run_that_stops_early_says_why_on_its_last_line_and_in_json(tmp_path, env):
    task = tmp_path / "int_out.py"
    task.write_text(INT32_TASK)
    args = ["optimize", str(task), "--target", "cpu", "--steps", "3"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "plain")], env=env)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    cause = _first_message(tmp_path / "plain")
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("no correct candidate: the reference stands ("), last
    assert f"stopped after 1 of 3 steps: {cause}" in last, last

    result = runner.invoke(app, [*args, "--json", "--out", str(tmp_path / "json")], env=env)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    summary = json.loads(result.stdout)
    assert summary["stopped_early"] is True
    assert summary["reason"] == _first_message(tmp_path / "json")
    assert summary["steps"] == 1 and summary["steps_planned"] == 3


def test_the_last_line_names_the_last_failure_and_an_early_stop(tmp_path):
    from htam.agent.state import Progress
    from htam.agent.view import PathStep
    from htam.cli.optimize_view import final_line
    from htam.evaluate.result import EvalResult, Status

    progress = Progress(ref_ms=1.0)
    for status, message in [
        (Status.INCORRECT, "max abs error 3.0\nat [0, 1]"),
        (Status.REJECTED, "produces torch.int32; only float32\n"),
    ]:
        step = PathStep("fusion", None, str(status))
        progress.observe(EvalResult(status, [message]), None, "fusion", step)
    reason = progress.last_failure
    assert reason == "produces torch.int32; only float32"

    out = tmp_path / "run"
    base = {"best_speedup_vs_compile": None, "best_sol_fraction": None, "best_speedup": None}
    none = {**base, "outcome": "none_correct", "statuses": ["incorrect", "rejected"]}
    full = {**none, "steps": 2, "steps_planned": 2, "stopped_early": False, "reason": reason}
    assert final_line(full, out) == (
        "no correct candidate: the reference stands (incorrect, rejected); last failure: "
        f"produces torch.int32; only float32; see {out}/steps/"
    )
    early = {**full, "steps_planned": 5, "stopped_early": True}
    assert final_line(early, out) == (
        "no correct candidate: the reference stands (incorrect, rejected); stopped after 2 of 5 "
        f"steps: produces torch.int32; only float32; see {out}/steps/"
    )
    # a run that kept a faster candidate and ran all its steps: nothing to explain
    faster = {**base, "outcome": "faster", "best_speedup": 2.0, "reason": None}
    assert final_line(faster, out) == f"best: 2.00x vs eager → {out / 'best.py'}"


# ---------------------------------------------------------------- 3. --quiet


class _FlaggedOptimizer:
    """One correct step whose best candidate the evaluator doubts (best_flags)."""

    def __init__(self, proposer, evaluator, bank, config, on_step=None):
        self.on_step = on_step

    def run(self, task, out: Path, resume: bool = False):
        (out / "best_slower_than_reference.py").write_text("")
        return RunSummary.from_dict({
            "outcome": "reference_stands", "statuses": ["ok"], "best_speedup": 0.9,
            "best_flags": ["calls of 0.001 ms are within 2x of the judge's clock resolution"],
            "best_file": "best_slower_than_reference.py", "best_speedup_vs_compile": None,
            "best_sol_fraction": None, "steps": 1, "steps_planned": 1, "duplicates": 0,
            "wall_s": 1.0, "cost_usd": 0.0,
        })  # fmt: skip


@pytest.mark.slow
def test_quiet_prints_the_last_line_alone_even_with_flags(tmp_path, env, monkeypatch):
    import htam.agent
    import htam.evaluate

    monkeypatch.setattr(htam.agent, "Optimizer", _FlaggedOptimizer)
    monkeypatch.setattr(htam.evaluate, "Evaluator", lambda *a, **k: nullcontext())
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--steps", "1", "--size", "small"]
    out = tmp_path / "run"
    quiet = runner.invoke(app, [*args, "-q", "--out", str(out)], env=env)
    assert quiet.exit_code == 0, (quiet.exit_code, quiet.output, quiet.exception)
    assert quiet.stdout.splitlines() == [
        "no faster candidate: the reference stands; best candidate 0.90x "
        f"({out / 'best_slower_than_reference.py'})"
    ]
    assert "check the best candidate" not in quiet.stderr
    # without --quiet the doubts are still said
    loud = runner.invoke(app, [*args, "--out", str(tmp_path / "loud")], env=env)
    assert loud.exit_code == 0, (loud.exit_code, loud.output, loud.exception)
    assert "check the best candidate: calls of 0.001 ms" in loud.stdout


# ---------------------------------------------------------------- 2. Ctrl-C on a suite


@pytest.mark.slow
def test_ctrl_c_on_a_suite_prints_the_resume_command_of_its_batch(tmp_path):
    write_suite(tmp_path / "suite", "a", "b")
    proc = start_htam(tmp_path, ["optimize", "suite", "--target", "cpu", "--steps", "3"])
    deadline = time.monotonic() + 120
    runs = tmp_path / "runs"
    while not any(runs.glob("batch-htam-*/plan.json")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no batch directory was created"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    (batch,) = [p.parent for p in runs.glob("batch-htam-*/plan.json")]
    time.sleep(0.5)
    # SIGINT to htam alone: what it prints is under test. (A terminal's Ctrl-C reaches the
    # workers too, and a worker still starting then prints its own traceback: htam.bench's.)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    out = f"runs/{batch.name}"
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted; `htam optimize suite --steps 3 --target cpu --resume --out {out}` "
        f"continues the batch in {out}"
    ), stderr
