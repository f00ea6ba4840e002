"""``htam tasks check`` on the CPU: real references of the built-in suite and task files written
here, through the CLI (typer's CliRunner) and the evaluator's own processes."""

import json

import pytest
from typer.testing import CliRunner

from htam.bench.check_report import stats
from htam.cli import app

from .helpers import write

runner = CliRunner()

# Runs at the small size (the loader validates there) and fails at the large one.
FAILS_LARGE = """
import torch
import torch.nn as nn

ROWS = 64
HTAM_SMALL = {"ROWS": 4}


class Model(nn.Module):
    def forward(self, x):
        if x.shape[0] > 8:
            raise ValueError("more than 8 rows are not supported here")
        return x * 2.0


def get_inputs():
    return [torch.randn(ROWS, 4)]


def get_init_inputs():
    return []
"""


def check(*args: str):
    return runner.invoke(app, ["tasks", "check", *args], env={"COLUMNS": "200"})


@pytest.mark.slow  # references timed in the evaluator; a failing one stays fast
def test_builtin_references_are_measured_and_resumed(tmp_path):
    out = tmp_path / "check"
    args = ["builtin", "--target", "cpu", "--size", "small", "--levels", "1"]
    args += ["--tasks", "1_ReLU,14_Matmul", "--out", str(out)]
    result = check(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    records = {r["id"]: r for r in data["tasks"]}
    assert list(records) == ["builtin/level1/1_ReLU", "builtin/level1/14_Matmul"]
    matmul = records["builtin/level1/14_Matmul"]
    # f32[33x65] @ f32[65x47]: 2*M*K*N FLOPs; inputs + output, 4 bytes each
    assert matmul["flops"] == 2 * 33 * 65 * 47
    assert matmul["bytes"] == 4 * (33 * 65 + 65 * 47 + 33 * 47)
    for r in records.values():
        assert r["status"] == "ok" and r["cause"] is None and r["eager_ms"] > 0
        assert r["bound"] in ("memory", "compute") and r["bound_ms"] > 0
        assert r["sol_eager"] == pytest.approx(r["bound_ms"] / r["eager_ms"])
        assert r["compile_ms"] is None and r["ratio"] is None  # not timed on the CPU by default
    assert data["summary"]["all"]["tasks"] == 2 and data["summary"]["levels"]["1"]["ok"] == 2
    assert data["config"]["eval_settings"] == {"trials": "1"}
    # progress off a terminal: one plain line per task on stderr
    assert "[1/2] builtin/level1/" in result.stderr and "[2/2]" in result.stderr
    assert (out / "check.md").read_text().count("| builtin/level1/") == 2

    again = check(*args, "--json")
    assert again.exit_code == 0, again.output
    assert "2 tasks: 2 already checked, 0 to run" in again.stderr
    assert json.loads(again.stdout)["tasks"] == data["tasks"]  # nothing measured again
    assert len((out / "results.jsonl").read_text().splitlines()) == 2

    other = check(*args[:-2], "--out", str(out), "--eval", "warmup_ms=50")
    assert other.exit_code == 2  # a usage error, as everywhere else (newcomer round 6)
    assert "holds a check with another eval_settings; choose another --out" in other.stderr


@pytest.mark.slow
def test_a_reference_that_fails_is_named_with_its_cause_on_one_line(tmp_path):
    write(tmp_path / "suite" / "fails_large.py", FAILS_LARGE)
    out = tmp_path / "check"
    result = check(str(tmp_path / "suite"), "--target", "cpu", "--out", str(out))
    assert result.exit_code == 1, result.output
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] == "failed" and record["eager_ms"] is None
    assert "\n" not in record["cause"]
    assert "ValueError: more than 8 rows are not supported here" in record["cause"]
    assert "more than 8 rows" in record["detail"]  # the full text stays in the files
    assert "failed: " in result.stderr and "more than 8 rows" in result.stderr
    rows = [line for line in (out / "check.md").read_text().splitlines() if "fails_large" in line]
    assert len(rows) == 1 and rows[0].endswith(" |") and "| failed |" in rows[0]
    summary = json.loads((out / "check.json").read_text())["summary"]["all"]
    assert (summary["tasks"], summary["ok"], summary["failed"]) == (1, 0, 1)


def test_bad_options_are_refused_in_one_line(tmp_path):
    result = check("builtin", "--target", "cpu", "--eval", "nonsense=1", "--out", str(tmp_path))
    assert result.exit_code == 2 and "--eval 'nonsense=1': give KEY=VALUE" in result.stderr
    result = check("builtin", "--target", "tpu", "--out", str(tmp_path))
    assert result.exit_code == 2 and "unknown target 'tpu'" in result.stderr
    result = check("builtin", "--target", "cpu", "--tasks", "nothing*", "--out", str(tmp_path))
    assert result.exit_code == 2 and "no task in builtin matches" in result.stderr


def test_summary_geomeans_by_hand():
    records = [
        {"status": "ok", "ratio": 2.0, "sol_eager": 0.5, "eager_ms": 1.0, "time_s": 3.0},
        {"status": "ok", "ratio": 0.5, "sol_eager": 0.125, "eager_ms": 2.0, "time_s": 4.0},
        {"status": "compile_failed", "ratio": None, "sol_eager": 0.5, "eager_ms": 1.0},
        {"status": "failed", "ratio": None, "time_s": 1.0},
    ]
    s = stats(records)
    assert (s["tasks"], s["ok"], s["compile_failed"], s["failed"]) == (4, 2, 1, 1)
    assert s["geomean_eager_over_compile"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert s["compile_faster"] == 1
    assert s["geomean_sol_eager"] == pytest.approx((0.5 * 0.125 * 0.5) ** (1 / 3))
    assert s["eager_ms_total"] == 4.0 and s["measure_s_total"] == 8.0


@pytest.mark.slow
def test_torch_compile_is_warmed_then_timed_beside_eager(tmp_path):
    """One warm-up process builds torch.compile; the measurement times eager and compiled."""
    out = tmp_path / "check"
    result = check(
        "builtin",
        "--target",
        "cpu",
        "--size",
        "small",
        "--levels",
        "1",
        "--tasks",
        "1_ReLU",
        "--out",
        str(out),
        "--jobs",
        "1",
        "--eval",
        "time_compile_reference=true",
        "--json",
    )
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["tasks"]
    assert record["status"] == "ok" and record["compile_ms"] > 0
    assert record["ratio"] == pytest.approx(record["eager_ms"] / record["compile_ms"])
    assert record["sol_compile"] == pytest.approx(record["bound_ms"] / record["compile_ms"])
    assert record["warm_s"] > 0 and record["warm_cause"] is None


@pytest.mark.slow  # references timed in the evaluator; a failing one stays fast
def test_a_bad_task_file_is_a_usage_error_after_the_others_are_checked(tmp_path):
    """Newcomer round 8: exit 1 with no line saying why (the README says 2, as optimize)."""
    from tests.cli.tasks_src import write_suite

    suite = write_suite(tmp_path / "suite", "good")
    (suite / "broken.py").write_text("def (:\n")
    out = tmp_path / "check"
    result = check(str(suite), "--target", "cpu", "--out", str(out))
    assert result.exit_code == 2, result.output
    assert "broken.py" in result.stderr and "1 task file could not be loaded" in result.stderr
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["id"] == "suite/good" and record["status"] == "ok"
