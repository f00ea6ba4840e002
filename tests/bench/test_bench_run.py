"""A CPU bench of three built-in tasks x {htam, no-prefix} on two workers, with one worker
killed (SIGKILL) in the middle of a unit: the unit is re-run and the bench completes; then the
metrics, the reports (rendered in headless Chromium) and the report/compare commands."""

import json
import math
import os
import shutil
import signal
import threading
import time

import pytest
from typer.testing import CliRunner

from htam.bench import load_rows, run_bench
from htam.bench.local_worker import status_path
from htam.cli import app
from htam.memory import MemoryBank
from tests.bench.conftest import config, render_html, tasks

pytestmark = pytest.mark.slow
VICTIM = "htam/s0/builtin/level1/3_Sigmoid"


def _kill_when_running(out, unit_key, stop, killed):
    """Kill -9 the worker that holds ``unit_key`` on its first attempt."""
    while not stop.is_set():
        for slot in (0, 1):
            path = status_path(out, slot)
            if not path.exists():
                continue
            try:
                status = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
            if status.get("unit") == unit_key and status.get("attempt") == 1:
                os.kill(status["pid"], signal.SIGKILL)
                killed.append(status["pid"])
                return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "out"
    cfg = config(out, delay_s=0.5)
    stop, killed, events = threading.Event(), [], []
    killer = threading.Thread(target=_kill_when_running, args=(out, VICTIM, stop, killed))
    killer.start()
    started = time.monotonic()
    try:
        outcome = run_bench(cfg, tasks(), on_event=lambda kind, rec: events.append((kind, rec)))
    finally:
        stop.set()
        killer.join()
    return out, outcome, killed, events, time.monotonic() - started


def _log(out):
    return [json.loads(line) for line in (out / "units.jsonl").read_text().splitlines()]


def test_killed_worker_loses_nothing(bench):
    out, outcome, killed, events, wall = bench
    assert len(killed) == 1
    assert outcome.planned == 6 and len(outcome.done) == 6 and outcome.failed == []
    assert outcome.retried == [VICTIM]
    victim = [r for r in _log(out) if r["unit"] == VICTIM]
    assert [(r["status"], r["attempt"]) for r in victim] == [("retry", 1), ("done", 2)]
    assert victim[0]["pid"] == killed[0] and "died (exit code -9)" in victim[0]["error"]
    assert victim[1]["pid"] != killed[0]
    # a replacement worker was started for the dead one
    assert sum(kind == "worker_start" for kind, _ in events) == 3


def test_every_unit_records_its_worker_and_device(bench):
    out = bench[0]
    done = [r for r in _log(out) if r["status"] == "done"]
    assert len(done) == 6
    assert {r["device"] for r in done} <= {"cpu0", "cpu1"}
    assert all(
        isinstance(r["pid"], int) and r["worker"] in (0, 1) and r["wall_s"] > 0 for r in done
    )
    for unit in json.loads((out / "plan.json").read_text()):
        summary = json.loads(
            (
                out
                / "runs"
                / unit["method"]
                / "s0"
                / unit["task_id"].replace("/", "__")
                / "summary.json"
            ).read_text()
        )
        assert summary["steps"] == 2 and summary["method"] == unit["method"]


def test_metrics_from_the_unit_summaries(bench):
    out = bench[0]
    metrics = json.loads((out / "metrics.json").read_text())
    rows = load_rows(out)
    for method in ("htam", "no-prefix"):
        m = metrics["methods"][method]
        assert m["units"] == 3 and m["failed"] == 0
        assert m["correctness"] == pytest.approx(2 / 3)  # the Tanh kernel is wrong on purpose
        assert m["fast_p"]["0.0"] == pytest.approx(2 / 3)
        # 3 units x 2 steps x (150 tokens, $0.001) from the scripted proposer
        assert m["tokens"] == 900 and m["cost_usd"] == pytest.approx(0.006)
        speedups = [r.speedup for r in rows if r.method == method and r.correct]
        assert len(speedups) == 2
        assert m["candidate_geomean_eager_excl"] == pytest.approx(
            math.sqrt(speedups[0] * speedups[1])
        )
        assert m["candidate_geomean_eager_fail1"] == pytest.approx(
            (speedups[0] * speedups[1]) ** (1 / 3)
        )
        kept = [max(1.0, v) for v in speedups] + [1.0]  # the incorrect Tanh unit keeps 1.0
        assert m["kept_geomean_eager"] == pytest.approx((kept[0] * kept[1]) ** (1 / 3))
        assert m["kept_geomean_eager"] >= 1.0
        assert m["candidate_geomean_compile_fail1"] is None  # torch.compile is not timed on the CPU
        assert len(m["curve"]) == 2 and m["timing_meaningful"] is False
        assert m["eval_s"] > 0 and m["wall_s"] >= m["eval_s"]
    assert metrics["by_level"]["htam"]["1"]["units"] == 3
    assert any("not meaningful" in note for note in metrics["notes"])
    # newcomer round 8: a speedup at the small size was read as the task's
    (note,) = [n for n in metrics["notes"] if n.startswith("Timed at the small size")]
    # the built-in tasks have a reduced size, recorded in bench.json and named in the note
    reduced = json.loads((out / "bench.json").read_text())["reduced_size_tasks"]
    assert reduced and all(r.startswith("builtin/") for r in reduced)
    assert f"{len(reduced)} task(s) ran at their reduced size (HTAM_SMALL: {reduced[0]}" in note


def test_fresh_memory_learned_each_step_exactly_once(bench):
    out = bench[0]
    for method in ("htam", "no-prefix"):
        with MemoryBank.open(out / "memory" / f"{method}-s0.db") as bank:
            assert bank.step_count() == 6  # the killed unit's replay did not count twice


def test_reports_are_written_and_render(bench, tmp_path):
    out = bench[0]
    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # self-contained
    assert html.count('src="data:image/png;base64,') == 5  # 3 plots + 2 memory graphs
    markdown = (out / "report.md").read_text()
    assert "| htam | 3 | 0 | 66.7% |" in markdown and "plots/discovery_curves.png" in markdown
    assert all(
        (out / "plots" / f"{n}.png").stat().st_size > 1000
        for n in ("speedup_distribution", "levels", "discovery_curves", "memory_htam-s0")
    )
    title, console = render_html(out / "report.html", tmp_path)
    assert title == "IMAGES 5 BROKEN 0"
    assert console == ""


def test_report_and_compare_commands(bench):
    out = bench[0]
    before = json.loads((out / "metrics.json").read_text())
    (out / "metrics.json").unlink()
    (out / "report.html").unlink()
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text()) == before
    assert (out / "report.html").exists()
    result = runner.invoke(app, ["compare", str(out), str(out)])
    assert result.exit_code == 0, result.output
    assert "no-prefix" in result.output and "66.7% / 66.7%" in result.output
    assert "differ" not in result.output
    result = runner.invoke(app, ["report", str(out / "runs")])
    assert result.exit_code == 2 and "not a bench directory" in result.output


def test_compare_names_what_two_benches_ran_differently(bench, tmp_path):
    """Newcomer round 7: two benches of other steps and tasks were compared without a word."""
    other = tmp_path / "other"
    shutil.copytree(bench[0], other)
    record = json.loads((other / "bench.json").read_text())
    record["identity"]["steps"] += 2
    (other / "bench.json").write_text(json.dumps(record))
    plan = json.loads((other / "plan.json").read_text())
    gone = plan[0]["task_id"]
    (other / "plan.json").write_text(json.dumps([u for u in plan if u["task_id"] != gone]))
    result = CliRunner().invoke(app, ["compare", str(bench[0]), str(other)])
    assert result.exit_code == 0, result.output
    steps = record["identity"]["steps"]
    assert f"steps differs: A {steps - 2}, B {steps}" in result.output
    assert "the tasks differ: 1 only in A, 0 only in B, 2 in both" in result.output


def test_a_damaged_results_file_is_named_in_one_line(bench, tmp_path):
    """Newcomer round 8: a summary.json or units.jsonl cut short gave `report` and `--resume` a
    JSONDecodeError traceback. A last log line cut short is an append a crash interrupted."""
    copy = tmp_path / "copy"
    shutil.copytree(bench[0], copy)
    log = copy / "units.jsonl"
    log.write_bytes(log.read_bytes()[:-40])
    assert CliRunner().invoke(app, ["report", str(copy)]).exit_code == 0
    summary = next((copy / "runs").glob("*/s0/*/summary.json"))
    summary.write_bytes(summary.read_bytes()[:-40])
    result = CliRunner().invoke(app, ["report", str(copy)])
    assert result.exit_code == 2, result.output
    assert f"{summary}: damaged, not JSON" in result.output and "Traceback" not in result.output
