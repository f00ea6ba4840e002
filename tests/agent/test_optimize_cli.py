"""`htam optimize`, `htam eval` and the CLI's output as a user meets them: real processes, off a
terminal, with HOME and HTAM_CACHE_DIR of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from htam.tasks import builtin_suite


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # as a user's pipe has it
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), "HTAM_CACHE_DIR": str(tmp_path / "cache")}


def _htam(tmp_path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "htam.cli", *args],
        cwd=work,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


@pytest.mark.slow
def test_version_and_ids_whole_in_a_pipe(tmp_path):
    assert _htam(tmp_path, "--version").stdout.strip().startswith("htam ")
    listed = _htam(tmp_path, "tasks", "list").stdout
    assert all(task.id in listed for task in builtin_suite())
    assert "…" not in listed


@pytest.mark.slow
def test_quickstart_twice_each_run_its_own_directory_nothing_written_elsewhere(tmp_path):
    site = Path(sysconfig.get_paths()["purelib"])
    before = _files(site)
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--steps", "2", "--size", "small"]
    bank = tmp_path / "cache" / "memory.db"
    run = _htam(tmp_path, *args, "--json")
    assert run.returncode in (0, 1), run.stderr
    assert run.stdout.count("\n") == 1  # one JSON object, nothing else on stdout
    first = json.loads(run.stdout)
    assert first["timed_inputs"] == ["33x257 float32"] and first["size"] == "small"
    assert first["bank"] == str(bank)
    # The same command again, as a user reads it: the timed shape, the bank, its own directory.
    run = _htam(tmp_path, *args)
    assert run.returncode in (0, 1), run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("timing at size small: 33x257 float32 (")
    assert lines[1] == f"memory bank: {bank}"
    assert lines[2].startswith("run directory: runs/1_ReLU-htam-s0-")
    # each step once, as its line: no table of the same steps after them
    assert [x.split(":")[0] for x in lines if x.startswith("step ")] == ["step 0", "step 1"]
    assert not any("best speedup" in x for x in lines)
    second_dir = lines[2].removeprefix("run directory: ")
    assert second_dir != first["run_dir"]
    second = json.loads((tmp_path / "work" / second_dir / "summary.json").read_text())
    summaries = [first, second]
    for summary in summaries:
        run_dir = tmp_path / "work" / summary["run_dir"]
        records = [json.loads(p.read_text()) for p in (run_dir / "steps").glob("step_*.json")]
        repeats = [r["step"] for r in records if r["repeats_step"] is not None]
        assert all(r["memory_updated"] is False for r in records if r["step"] in repeats)
        codes = [p.read_text() for p in (run_dir / "steps").glob("step_*.py")]
        assert len(codes) == len(set(codes)) == len(records) - len(repeats)  # none twice
        kept = summary["best_file"]
        assert (kept is None) == (summary["outcome"] == "none_correct")
        assert sorted(p.name for p in run_dir.glob("best*.py")) == ([kept] if kept else [])
    # The run directories, the bank and the caches are all it wrote.
    assert _files(site) == before
    assert not any((tmp_path / "home").iterdir())
    assert {p.name for p in (tmp_path / "work").iterdir()} == {"runs"}


@pytest.mark.slow
def test_eval_takes_the_same_task_ids_as_optimize(tmp_path):
    solution = tmp_path / "work" / "broken.py"
    solution.parent.mkdir()
    solution.write_text(
        "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n"
    )
    args = ["eval", "level1/1_ReLU", str(solution), "--target", "cpu", "--size", "small"]
    run = _htam(tmp_path, *args, "--json", timeout=300)
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["status"] in ("rejected", "compile_error")
    missing = _htam(tmp_path, "eval", "level9/nothing", str(solution), "--target", "cpu")
    assert missing.returncode == 2 and "no built-in task has that id" in missing.stderr


def test_run_directories_are_new_and_resume_finds_the_newest(tmp_path):
    from htam.agent.rundir import latest_run_dir, new_run_dir

    stem = tmp_path / "runs" / "1_ReLU-htam-s0"
    assert latest_run_dir(stem) is None
    made = []
    for _ in range(3):  # within one second: suffixes keep them apart
        path = new_run_dir(stem)
        (path / "run.json").parent.mkdir(parents=True)
        (path / "run.json").write_text("{}")
        made.append(path)
    assert len(set(made)) == 3 and all(p.name.startswith(stem.name + "-") for p in made)
    os.utime(made[1] / "run.json", (2e9, 2e9))  # the most recently started run
    assert latest_run_dir(stem) == made[1]
    other = tmp_path / "runs" / "1_ReLU-htam-s01"  # another seed's runs are not this stem's
    assert latest_run_dir(other) is None


def test_the_last_line_says_what_the_user_keeps():
    from htam.cli.optimize_view import final_line

    out = Path("runs/x")
    base = {"best_speedup_vs_compile": None, "best_sol_fraction": None, "statuses": []}
    slower = {**base, "outcome": "reference_stands", "best_speedup": 0.0712}
    slower["best_file"] = "best_slower_than_reference.py"
    assert final_line(slower, out) == (
        "no faster candidate: the reference stands; best candidate 0.071x "
        "(runs/x/best_slower_than_reference.py)"
    )
    faster = {**base, "outcome": "faster", "best_speedup": 4.71, "best_sol_fraction": 0.225}
    assert (
        final_line(faster, out) == "best: 4.71x vs eager, 22.5% of speed of light → runs/x/best.py"
    )
    interpreted = {**faster, "timing_meaningful": False}
    assert final_line(interpreted, out) == (
        "best: 4.71x vs eager, 22.5% of speed of light, timed by the Triton interpreter: not "
        "meaningful → runs/x/best.py"
    )
    none = {**base, "outcome": "none_correct", "best_speedup": None}
    none["statuses"] = ["rejected", "incorrect"]
    assert final_line(none, out).startswith("no correct candidate: the reference stands (rejected")


@pytest.mark.slow
@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="a GPU is visible")
def test_target_cuda_without_a_gpu_is_one_line_before_anything_else(tmp_path):
    run = _htam(tmp_path, "optimize", "level1/1_ReLU", "--target", "cuda", timeout=120)
    assert run.returncode == 2
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "no CUDA device is visible" in lines[0], lines
    assert not (tmp_path / "work" / "runs").exists()


def test_the_stats_line_names_repeats_only_when_there_were_some():
    from htam.cli.optimize_view import stats_line

    summary = {"steps": 6, "duplicates": 0, "cost_usd": 0.0, "wall_s": 118.52}
    assert stats_line(summary) == "6 steps · $0.0000 · 118.5 s"
    # the command's own time too: the evaluator's start and the reference's timing (newcomer:
    # the line said 60 s of a 222 s run)
    assert stats_line({**summary, "total_s": 222.04}) == (
        "6 steps · $0.0000 · 222.0 s in all (118.5 s in the steps)"
    )
    assert stats_line({**summary, "duplicates": 2}) == (
        "6 steps (2 proposals repeated code already evaluated: not evaluated again) · $0.0000 · "
        "118.5 s"
    )


def test_off_a_terminal_each_step_is_one_line_and_said_once():
    from types import SimpleNamespace

    from htam.cli.common import console
    from htam.cli.optimize_view import StepsView

    def step(n: int, status: str, speedup: float | None) -> SimpleNamespace:
        fb = {"status": status, "speedup": speedup, "messages": ["why"]}
        record = {"feedback": fb, "usage": {"cost_usd": 0.0}, "step": n, "wall_s": 2.0,
                  "direction": "memory_access", "strategy": "memory_access.vectorize",
                  "best_speedup": 1.5}  # fmt: skip
        return SimpleNamespace(to_dict=lambda: record)

    view = StepsView("1_ReLU", steps=2)
    with console.capture() as captured, view.display():
        view(step(1, "ok", 1.5))
        view(step(2, "incorrect", None))
    lines = captured.get().splitlines()
    assert lines == [
        "step 1: memory_access / memory_access.vectorize: ok 1.50x (best 1.50x, 2 s)",
        "step 2: memory_access / memory_access.vectorize: incorrect (best 1.50x, 2 s)",
    ]
