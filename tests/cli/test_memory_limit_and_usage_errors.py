"""The memory limit and usage errors, each pinned by what the user sees: a task too large for
the memory limit refused up front, --json answering a usage error with a JSON object, --workers
with one task, and optimize's step numbers, baseline step and repeated proposals in words."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from htam.agent.run_summary import RunSummary
from htam.cli import app
from tests.cli.tasks_src import SMALL_RELU, relu_task

RELU = "level1/1_ReLU"
runner = CliRunner()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# 4 TB in and out: more than any machine has. 1.07 GB: more than 256 MB, less than a machine.
ENORMOUS = relu_task("1 << 20", "1 << 19")
GIGABYTE = relu_task("16384", "8192")
# its large size 1.07 GB, its small one 2 KB
TWO_SIZES = relu_task("16384", "8192", small='HTAM_SMALL = {"ROWS": 8, "COLS": 32}')


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


# ---------------------------------------------------------------- 1. too large for the memory


@pytest.fixture
def machine_16gb(monkeypatch):
    """A machine of 16 GB: the limit advised (6.5 GB for 1 GiB of tensors) is offered."""
    import htam.evaluate.eval_config

    monkeypatch.setattr(htam.evaluate.eval_config, "machine_memory_mb", lambda: 16384)


def test_a_task_whose_tensors_exceed_the_memory_limit_is_refused_up_front(
    tmp_path, env, machine_16gb
):
    """A full-size task took ~37 s to fail at the memory limit although its size was known: its
    signature (meta device) is refused at once, exit 3 as for a reference that cannot run."""
    task = _write(tmp_path, "huge.py", GIGABYTE)
    args = ["optimize", str(task), "--target", "cpu", "--steps", "1", "--memory-limit-mb", "256"]
    started = time.monotonic()
    result = runner.invoke(app, args, env=env)
    took = time.monotonic() - started
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    assert took < 15, took  # no evaluator started, no reference run
    assert result.stdout == ""
    (line,) = _lines(result.stderr)
    assert line == (
        "error: local/huge: the reference needs more host memory than allowed here: its tensors "
        "at the KernelBench size (the file's own shapes; it has no HTAM_SMALL) take 1.07 GB "
        "(inputs, outputs and parameters), and an evaluation holds at least 3 times that "
        "(3.22 GB), over the 0.27 GB a reference or a candidate may use "
        "(--memory-limit-mb 256); give --memory-limit-mb 6656 (the evaluation holds about 6x its "
        "tensors beside torch), or add a reduced size to the task (HTAM_SMALL, see docs/tasks.md)"
    )
    runs = tmp_path / "runs"
    assert not (runs.exists() and any(runs.iterdir()))  # the run directory it made is removed
    # --json: the same line as a JSON object on stdout
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data == {"outcome": "stopped", "error": line.removeprefix("error: "), "exit_code": 3}


def test_eval_refuses_it_too_and_offers_the_small_size_when_there_is_one(
    tmp_path, env, machine_16gb
):
    solution = _write(tmp_path, "sol.py", "class ModelNew:\n    pass\n")
    task = _write(tmp_path, "two_sizes.py", TWO_SIZES)
    args = ["eval", str(task), str(solution), "--target", "cpu", "--memory-limit-mb", "256"]
    result = runner.invoke(app, [*args, "--size", "large"], env=env)
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    (line,) = _lines(result.stderr)
    assert "its tensors at size large take 1.07 GB" in line and "(--memory-limit-mb 256)" in line
    assert line.endswith(
        "give --memory-limit-mb 6656 (the evaluation holds about 6x its tensors beside torch), "
        "or time --size small (2.05 KB)"
    )
    assert "GB" in line and "MB (" not in line  # the sizes it compares share one unit
    # more than the machine has: raising the limit is not offered
    task = _write(tmp_path, "enormous.py", ENORMOUS)
    result = runner.invoke(app, ["eval", str(task), str(solution), "--target", "cpu"], env=env)
    assert result.exit_code == 3, (result.exit_code, result.output, result.exception)
    (line,) = _lines(result.stderr)
    assert (
        "its tensors at the KernelBench size (the file's own shapes; it has no HTAM_SMALL) "
        "take 4398.05 GB" in line
    )
    assert "(the default for this machine's" in line and "give --memory-limit-mb" not in line
    assert line.endswith("add a reduced size to the task (HTAM_SMALL, see docs/tasks.md)")


def test_the_memory_check_holds_on_the_cpu_only_and_for_what_exceeds_the_limit():
    from htam.cli.sizes import over_memory_limit
    from htam.tasks import Task

    task = Task("local/huge", "huge", GIGABYTE)
    assert over_memory_limit(task, "cuda", "large", 10**12, 256) is None  # GPU memory holds it
    # an evaluation holds at least 3 times the tensors: a third of the limit is not refused
    assert over_memory_limit(task, "cpu", "small", (256 << 20) // 3, 256) is None
    assert over_memory_limit(task, "cpu", "small", None, 256) is None  # size unknown: no refusal
    assert over_memory_limit(task, "cpu", "small", (256 << 20) // 3 + 1, 256) is not None


def _fake_bench(monkeypatch, ran: list, devices: list) -> None:
    import htam.bench

    def run_bench(config, tasks, resume=False, on_event=None):
        ran.extend(task.id for task in tasks)
        devices.extend(config.devices)
        return SimpleNamespace(done=list(tasks), failed=[], skipped=[], wall_s=0.0)

    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    monkeypatch.setattr(htam.bench, "load_rows", lambda out: [])


def test_a_suite_skips_the_task_that_exceeds_the_limit_in_one_line_and_runs_the_rest(
    tmp_path, env, monkeypatch
):
    ran, devices = [], []
    _fake_bench(monkeypatch, ran, devices)
    suite = tmp_path / "suite"
    suite.mkdir()
    _write(suite, "huge.py", GIGABYTE)
    _write(suite, "relu.py", SMALL_RELU)
    args = ["optimize", str(suite), "--target", "cpu", "--steps", "1", "--out", str(tmp_path / "b")]
    result = runner.invoke(app, [*args, "--memory-limit-mb", "256"], env=env)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert ran == ["suite/relu"]
    (line,) = _lines(result.stderr)
    assert line.startswith("skipped suite/huge: the reference needs more host memory than")
    # every task too large: exit 3, as a single one
    (suite / "relu.py").unlink()
    ran.clear()
    result = runner.invoke(app, [*args, "--memory-limit-mb", "256"], env=env)
    assert result.exit_code == 3 and ran == [], (result.exit_code, result.output)
    skipped, error = _lines(result.stderr)
    assert skipped.startswith("skipped suite/huge: ")
    assert (
        error
        == f"error: no task of {suite} fits the host memory allowed here (each is skipped above)"
    )


# ---------------------------------------------------------------- 2. --json and usage errors


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, cause",
    [
        (["optimize", RELU, "--steps", "0"], "Invalid value for '--steps'"),  # click's own
        (["optimize", RELU, "--no-such-option"], "No such option: --no-such-option"),
        (["optimize"], "Missing argument"),
        (["optimize", "nothere.py", "--target", "cpu"], "nothere.py: no such task file"),
        (["optimize", RELU, "--target", "cpu", "--seed", "-1"], "--seed -1: a seed is"),
        (["eval", RELU, "nothere.py", "--target", "cpu"], "nothere.py: no such solution file"),
        (["tasks", "list", "--levels", "x"], "expected comma-separated integers, got 'x'"),
        (["tasks", "check", "nothere", "--target", "cpu"], "nothere: no such file or directory"),
        (["memory", "show", "nothere.db"], "nothere.db: no such bank"),
        (["doctor", "--no-such-option"], "No such option: --no-such-option"),
    ],
)
def test_json_answers_a_usage_error_with_one_json_object(tmp_path, env, args, cause):
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    (line,) = result.stdout.splitlines()
    data = json.loads(line)
    assert data["exit_code"] == 2 and cause in data["error"], data
    assert "\n" not in data["error"] and not data["error"].startswith("error:")
    assert cause in " ".join(result.stderr.split()).replace("│", "")  # the message stays there
    # without --json: stdout stays empty
    plain = runner.invoke(app, args, env=env)
    assert plain.exit_code == 2 and plain.stdout == "", plain.stdout


def test_json_as_an_argument_after_double_dash_is_not_the_option(tmp_path, env):
    result = runner.invoke(app, ["optimize", "--steps", "0", "--", "--json"], env=env)
    assert result.exit_code == 2 and result.stdout == ""


# ---------------------------------------------------------------- 3. --workers with one task


def test_workers_or_ray_with_one_task_is_refused_in_one_line(tmp_path, env):
    args = ["optimize", RELU, "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--workers", "2"], env=env)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == ""
    (line,) = _lines(result.stderr)
    assert line == (
        f"error: --workers 2 runs the tasks of a suite side by side, and {RELU} is one task; "
        "leave it out, or give a suite (builtin, a directory, or --tasks/--levels)"
    )
    result = runner.invoke(app, [*args, "--ray"], env=env)
    assert result.exit_code == 2
    assert _lines(result.stderr)[0].startswith("error: --ray runs the tasks of a suite")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "cache").exists()


def test_workers_beyond_the_tasks_of_a_suite_are_said_and_not_started(tmp_path, env, monkeypatch):
    ran, devices = [], []
    _fake_bench(monkeypatch, ran, devices)
    args = ["optimize", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--workers", "3", "--out", str(tmp_path / "b")], env=env)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert ran == ["builtin/level1/1_ReLU"] and devices == ["cpu0"]
    (line,) = _lines(result.stderr)
    assert line == "note: --workers 3, but only 1 task to run: starting 1 worker"
    # two tasks, two workers: nothing to say
    ran.clear(), devices.clear()
    two = [*args[:3], "1_ReLU,2_*", *args[4:], "--workers", "2", "--out", str(tmp_path / "c")]
    result = runner.invoke(app, two, env=env)
    assert len(ran) >= 2 and devices == ["cpu0", "cpu1"] and result.stderr == ""


def test_bench_counts_units_for_its_workers(tmp_path, env, monkeypatch):
    import htam.bench

    metrics = _write(tmp_path, "metrics.json", json.dumps({"methods": {}, "notes": []}))
    devices: list = []

    def run_bench(config, tasks, resume=False, on_event=None):
        devices.extend(config.devices)
        return SimpleNamespace(
            done=[], failed=[], retried=[], skipped=[], wall_s=0.0,
            report=SimpleNamespace(metrics=metrics, markdown="r.md", html="r.html"),
        )  # fmt: skip

    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    args = ["bench", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--workers", "4", "--seeds", "2"], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert devices == ["cpu0", "cpu1"]
    (line,) = _lines(result.stderr)
    assert line == (
        "note: --workers 4, but only 2 units to run (tasks x methods x seeds): starting 2 workers"
    )


# ---------------------------------------------------------------- 4. optimize's words


def _step(record: dict):
    """What the loop hands ``on_step``: an object whose to_dict() is the step file's record."""
    base = {"direction": "none", "strategy": None, "proposal": {"baseline": False}}
    base |= {"usage": {"cost_usd": 0.0}, "best_speedup": 1.0, "wall_s": 1.0}
    base |= {"feedback": {"status": "ok", "speedup": 1.0, "messages": []}}
    return SimpleNamespace(to_dict=lambda: base | record)


class _TwoStepOptimizer:
    """Step 0 the baseline (no strategy), step 1 a strategy after two repeated proposals."""

    def __init__(self, proposer, evaluator, bank, config, on_step=None):
        self.on_step = on_step

    def run(self, task, out: Path, resume: bool = False):
        self.on_step(_step({"step": 0, "proposal": {"baseline": True}}))
        self.on_step(_step({"step": 1, "direction": "fusion", "strategy": "fusion.x"}))
        (out / "best_slower_than_reference.py").write_text("")
        return RunSummary.from_dict({
            "outcome": "reference_stands", "best_flags": [], "statuses": ["ok", "ok"],
            "best_speedup": 1.0, "best_file": "best_slower_than_reference.py",
            "best_speedup_vs_compile": None, "best_sol_fraction": None,
            "steps": 2, "duplicates": 2, "wall_s": 2.0, "cost_usd": 0.0,
        })  # fmt: skip


def test_optimize_names_the_baseline_step_and_counts_repeated_proposals(tmp_path, env, monkeypatch):
    import htam.agent
    import htam.evaluate

    monkeypatch.setattr(htam.agent, "Optimizer", _TwoStepOptimizer)
    monkeypatch.setattr(htam.evaluate, "Evaluator", lambda *a, **k: nullcontext())
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    args = ["optimize", RELU, "--target", "cpu", "--steps", "2", "--size", "small"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    lines = result.stdout.splitlines()
    steps = [line for line in lines if line.startswith("step ")]
    assert steps == [
        "step 0: none / baseline (the operator in our kernels, no strategy yet): ok 1.00x (best 1.00x, 1 s)",
        "step 1: fusion / fusion.x: ok 1.00x (best 1.00x, 1 s)",
    ]
    (stats,) = [line for line in lines if line.startswith("2 steps")]
    assert stats.startswith("2 steps (2 proposals repeated code already evaluated: not ")


def test_the_running_line_numbers_steps_as_the_table_and_the_step_files():
    from rich.console import Console

    from htam.cli.optimize_view import StepsView

    def running(view: StepsView) -> str:
        console = Console(width=200, record=True)
        console.print(view)
        return next(line for line in console.export_text().splitlines() if "running" in line)

    view = StepsView("t", 3, quiet=True)
    assert "step 0 running (1 of 3)" in running(view)
    view(_step({"step": 0}))
    assert "step 1 running (2 of 3)" in running(view)
    resumed = StepsView("t", 3, quiet=True, first=2)  # --resume after steps 0 and 1
    assert "step 2 running (3 of 3)" in running(resumed)


def test_a_task_with_one_size_offers_no_other_size_in_the_timing_line(tmp_path, env, monkeypatch):
    """Kept from the test the up-front memory refusal changed: a KernelBench file without
    HTAM_SMALL has one size, so the timing line offers no other."""
    import htam.agent
    import htam.evaluate

    monkeypatch.setattr(htam.agent, "Optimizer", _TwoStepOptimizer)
    monkeypatch.setattr(htam.evaluate, "Evaluator", lambda *a, **k: nullcontext())
    monkeypatch.setattr(htam.evaluate, "CachedEvaluator", lambda evaluator: evaluator)
    task = _write(tmp_path, "relu.py", SMALL_RELU)
    args = ["optimize", str(task), "--target", "cpu", "--steps", "2", "--size", "small"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "r")], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert result.stdout.splitlines()[0] == (  # not "size small": the file has one size
        "timing at the KernelBench size (the file's own shapes; it has no HTAM_SMALL): "
        "8x16 float32 (1.02 KB in and out)"
    )
