"""``htam optimize SUITE --tasks ...``: many tasks through the bench's executor, one table."""

import json

import pytest
from typer.testing import CliRunner

from htam.bench.banks import learn_into
from htam.cli import app
from htam.memory import MemoryBank

pytestmark = pytest.mark.slow


def test_optimize_over_a_suite_runs_every_task_and_prints_one_table(tmp_path):
    memory, out = tmp_path / "mine.db", tmp_path / "batch"
    MemoryBank.open(memory, create=True).close()
    result = CliRunner().invoke(app, [
        "optimize", "builtin", "--levels", "1", "--tasks", "[13]_*", "--steps", "2",
        "--target", "cpu", "--language", "triton", "--workers", "2", "--memory", str(memory),
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "builtin/level1/1_ReLU" in result.output and "builtin/level1/3_Sigmoid" in result.output
    assert "2 done, 0 failed" in result.output
    plan = json.loads((out / "plan.json").read_text())
    assert [(u["method"], u["task_id"]) for u in plan] == [
        ("htam", "builtin/level1/1_ReLU"), ("htam", "builtin/level1/3_Sigmoid")]
    # the batch's workers learn into a shared copy; the given bank learns it all at the end, as
    # one task's run teaches it (newcomer round 5: it stayed as it was)
    with MemoryBank.open(out / "memory" / "htam.db") as bank:  # step 0 may be the baseline
        learned = bank.step_count()
        assert learned >= 1
    with MemoryBank.open(memory) as bank:
        assert bank.step_count() == learned
    assert f"memory {memory} learned {learned} new step" in result.output
    runs = sorted((out / "runs").glob("htam/s0/*"))
    assert len(runs) == 2 and learn_into(memory, "htam", runs) == 0  # each step learned once
    assert json.loads((out / "bench.json").read_text())["identity"]["memory_mode"] == "accumulate"
