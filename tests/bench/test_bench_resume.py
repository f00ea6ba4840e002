"""The whole bench killed (SIGKILL to its process group) midway, then ``--resume``: no finished
unit is recomputed, half-done units continue from their last step, and the bench completes.
Also: a unit whose worker dies on both attempts is recorded failed and the bench still ends."""

import json
import os
import signal
import subprocess
import time

import pytest
from typer.testing import CliRunner

from htam.bench import run_bench
from htam.cli import app
from tests.bench.conftest import cli_env, config, htam_cli, render_html, tasks

pytestmark = pytest.mark.slow
ARGS = [
    "bench",
    "builtin",
    "--levels",
    "1",
    "--tasks",
    "[134]_*",
    "--methods",
    "htam,no-prefix",
    "--steps",
    "2",
    "--target",
    "cpu",
    "--language",
    "triton",
    "--workers",
    "2",
    "--proposer",
    "tests.bench.helpers:FixedProposer",
]


def _complete(out):
    done = {}
    for summary in (out / "runs").glob("*/s0/*/summary.json"):
        if json.loads(summary.read_text())["steps"] == 2:
            done[summary.parent] = summary.stat().st_mtime_ns
    return done


def _step_mtimes(out):
    return {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/s0/*/steps/step_*.json")}


def test_killed_bench_resumes_without_recomputing(tmp_path):
    out = tmp_path / "out"
    bench = subprocess.Popen(
        htam_cli() + ARGS + ["--out", str(out)],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and bench.poll() is None:
        if (out / "runs").exists() and len(_complete(out)) >= 2:
            break
        time.sleep(0.1)
    assert bench.poll() is None, bench.stdout.read().decode()[-3000:]
    os.killpg(bench.pid, signal.SIGKILL)
    bench.wait()
    time.sleep(1.0)  # let orphaned evaluator jobs, if any, end
    finished, steps = _complete(out), _step_mtimes(out)
    assert 2 <= len(finished) < 6
    log_lines = (out / "units.jsonl").read_text().splitlines()

    runner = CliRunner()
    refused = runner.invoke(app, ARGS + ["--out", str(out)])
    assert refused.exit_code == 2 and "--resume" in refused.output
    three = [("3" if ARGS[i - 1] == "--steps" else a) for i, a in enumerate(ARGS)]
    changed = runner.invoke(app, three + ["--out", str(out), "--resume"])
    assert changed.exit_code == 2 and "steps changed" in changed.output

    resumed = subprocess.run(
        htam_cli() + ARGS + ["--out", str(out), "--resume"],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"{len(finished)} already finished" in resumed.stdout
    after = _complete(out)
    assert len(after) == 6
    assert all(after[d] == mtime for d, mtime in finished.items())  # never rewritten
    assert all(p.stat().st_mtime_ns == m for p, m in steps.items())  # no step redone
    new_lines = [
        json.loads(x) for x in (out / "units.jsonl").read_text().splitlines()[len(log_lines) :]
    ]
    finished_keys = {f"{d.parts[-3]}/s0/{d.name.replace('__', '/')}" for d in finished}
    assert {r["unit"] for r in new_lines}.isdisjoint(finished_keys)
    assert len([r for r in new_lines if r["status"] == "done"]) == 6 - len(finished)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["methods"]["htam"]["units"] == 3 and metrics["not_run"] == 0


def test_unit_that_kills_its_worker_twice_is_recorded_failed(tmp_path):
    out = tmp_path / "out"
    cfg = config(out, methods=("refine",), workers=1, steps=1, die_on=("1_ReLU",))
    outcome = run_bench(cfg, tasks(["builtin/level1/1_ReLU"]))
    key = "refine/s0/builtin/level1/1_ReLU"
    assert outcome.failed == [key] and outcome.retried == [key] and outcome.done == []
    log = [json.loads(x) for x in (out / "units.jsonl").read_text().splitlines()]
    assert [(r["status"], r["attempt"]) for r in log] == [("retry", 1), ("failed", 2)]
    metrics = json.loads((out / "metrics.json").read_text())
    m = metrics["methods"]["refine"]
    assert (m["units"], m["failed"], m["correctness"], m["fast_1"]) == (1, 1, 0.0, 0.0)
    assert m["candidate_geomean_eager_fail1"] is None and m["curve"] == [1.0]
    assert m["kept_geomean_eager"] == 1.0  # the reference stands
    assert "died (exit code -9)" in (out / "report.md").read_text()
    title, console = render_html(out / "report.html", tmp_path)
    assert title == "IMAGES 3 BROKEN 0" and console == ""  # no bank: refine has no memory


def test_a_resume_with_fewer_units_is_refused_before_it_rewrites_the_plan(tmp_path):
    """Newcomer round 8: a bench resumed with fewer tasks rewrote plan.json, and its report
    lost the units left out (their runs still on disk)."""
    from htam.bench import BenchError
    from htam.bench.bench_config import plan_units
    from htam.bench.runner import write_plan

    cfg = config(tmp_path / "out", methods=("htam",), workers=1)
    both = tasks()[:2]
    write_plan(cfg, plan_units(both, cfg))
    before = (cfg.out / "plan.json").read_text()
    with pytest.raises(BenchError, match="1 of its 2 planned units are not in this one"):
        run_bench(cfg, both[:1], resume=True)
    assert (cfg.out / "plan.json").read_text() == before
