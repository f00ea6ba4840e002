"""--workers N is honoured everywhere a suite runs: on a GPU (one worker per GPU, N of them), on
Ray (N Ray workers) and by ``htam transfer``, never beyond the units to run, and every limit that
starts fewer workers than asked is one line on stderr."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from htam.cli import app
from tests.cli.tasks_src import write_suite

runner = CliRunner()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def bench_runs(monkeypatch) -> list:
    """The BenchConfig of every bench the command runs (it runs none)."""
    import htam.bench

    configs: list = []

    def run_bench(config, tasks, resume=False, on_event=None):
        configs.append(config)
        return SimpleNamespace(
            done=list(tasks), failed=[], retried=[], skipped=[], wall_s=0.0,
            report=SimpleNamespace(metrics=config.out / "metrics.json", markdown="r.md",
                                   html="r.html"),
        )  # fmt: skip

    monkeypatch.setattr(htam.bench, "run_bench", run_bench)
    monkeypatch.setattr(htam.bench, "load_rows", lambda out: [])
    monkeypatch.setattr("htam.cli.bench_cmd.print_metrics", lambda path: None)
    return configs


@pytest.fixture
def two_gpus(env, monkeypatch) -> dict:
    """A machine that sees two GPUs, 3 and 5 (no GPU is used: the bench is not run)."""
    monkeypatch.setattr("htam.cli.common.default_target", lambda: "cuda")
    return env | {"CUDA_VISIBLE_DEVICES": "3,5"}


def test_optimize_a_suite_on_a_gpu_runs_workers_on_that_many_gpus(tmp_path, two_gpus, bench_runs):
    suite = write_suite(tmp_path / "suite", "a", "b", "c")
    args = ["optimize", str(suite), "--target", "cuda", "--steps", "1"]
    result = runner.invoke(
        app, [*args, "--workers", "1", "--out", str(tmp_path / "one")], env=two_gpus
    )
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert bench_runs[-1].devices == ["cuda:3"] and result.stderr == ""
    # not given: every visible GPU, as before
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "all")], env=two_gpus)
    assert bench_runs[-1].devices == ["cuda:3", "cuda:5"] and result.stderr == ""
    # more than the GPUs: one worker per GPU, said in one line
    result = runner.invoke(
        app, [*args, "--workers", "4", "--out", str(tmp_path / "b")], env=two_gpus
    )
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert bench_runs[-1].devices == ["cuda:3", "cuda:5"]
    (line,) = _lines(result.stderr)
    assert line == (
        "note: --workers 4, but only 2 GPUs visible (one worker per GPU): starting 2 workers"
    )
    # more than the tasks: one GPU per task
    (suite / "b.py").unlink(), (suite / "c.py").unlink()
    result = runner.invoke(
        app, [*args, "--workers", "2", "--out", str(tmp_path / "c")], env=two_gpus
    )
    assert bench_runs[-1].devices == ["cuda:3"]
    assert _lines(result.stderr) == ["note: --workers 2, but only 1 task to run: starting 1 worker"]


def test_bench_on_a_gpu_takes_workers_among_its_gpus(tmp_path, two_gpus, bench_runs):
    write_suite(tmp_path / "suite", "a", "b")
    args = ["bench", str(tmp_path / "suite"), "--target", "cuda", "--steps", "1"]
    result = runner.invoke(app, [*args, "--gpus", "1,0", "--workers", "1"], env=two_gpus)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert bench_runs[-1].devices == ["cuda:5"]
    result = runner.invoke(
        app, [*args, "--gpus", "1", "--workers", "2", "--out", "b"], env=two_gpus
    )
    assert bench_runs[-1].devices == ["cuda:5"]
    assert _lines(result.stderr) == [
        "note: --workers 2, but only 1 GPU in --gpus 1 (one worker per GPU): starting 1 worker"
    ]


def test_optimize_a_suite_on_ray_runs_that_many_ray_workers(tmp_path, env, bench_runs):
    suite = write_suite(tmp_path / "suite", "a", "b", "c")
    args = ["optimize", str(suite), "--target", "cpu", "--steps", "1", "--ray"]
    result = runner.invoke(app, [*args, "--workers", "2", "--out", str(tmp_path / "a")], env=env)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    config = bench_runs[-1]
    assert (config.devices, config.ray, config.ray_slots) == (["ray"], "local", 2)
    assert result.stderr == ""
    # not given: as many as the cluster has, as before; more than the tasks: one per task
    runner.invoke(app, [*args, "--out", str(tmp_path / "b")], env=env)
    assert bench_runs[-1].ray_slots is None
    result = runner.invoke(app, [*args, "--workers", "8", "--out", str(tmp_path / "c")], env=env)
    assert bench_runs[-1].ray_slots == 3
    assert _lines(result.stderr) == [
        "note: --workers 8, but only 3 tasks to run: starting 3 workers"
    ]


def test_bench_on_ray_takes_workers_as_ray_slots_and_refuses_both(tmp_path, env, bench_runs):
    write_suite(tmp_path / "suite", "a")
    args = ["bench", str(tmp_path / "suite"), "--target", "cpu", "--steps", "1", "--ray"]
    result = runner.invoke(app, [*args, "--workers", "2", "--seeds", "2"], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert (bench_runs[-1].devices, bench_runs[-1].ray_slots) == (["ray"], 2)
    result = runner.invoke(app, [*args, "--workers", "2", "--ray-slots", "3"], env=env)
    assert result.exit_code == 2 and result.stdout == ""
    assert _lines(result.stderr) == [
        "error: --workers and --ray-slots both give the number of Ray workers: give one of them"
    ]


def test_transfer_caps_its_workers_as_a_bench_does(tmp_path, env, monkeypatch):
    import htam.bench.transfer

    bases: list = []

    def run_transfer(base, source, target, resume=False, on_phase=None, on_event=None):
        bases.append(base)
        (tmp_path / "transfer.md").write_text("# transfer\n")
        return SimpleNamespace(markdown=tmp_path / "transfer.md", json="transfer.json")

    monkeypatch.setattr(htam.bench.transfer, "run_transfer", run_transfer)
    source = write_suite(tmp_path / "source", "a", "b", "c")
    target = write_suite(tmp_path / "target", "d")
    args = ["transfer", str(source), str(target), "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--seeds", "1", "--workers", "8"], env=env)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    assert bases[-1].devices == ["cpu0", "cpu1", "cpu2"]  # its largest phase: 3 source tasks
    assert _lines(result.stderr) == [
        "note: --workers 8, but only 3 units to run (tasks x seeds, in its largest phase): "
        "starting 3 workers"
    ]
    result = runner.invoke(app, [*args, "--seeds", "2", "--workers", "4", "--out", "b"], env=env)
    assert bases[-1].devices == ["cpu0", "cpu1", "cpu2", "cpu3"] and result.stderr == ""


def test_lanes_share_each_gpu_never_beyond_the_units(tmp_path, two_gpus, bench_runs):
    suite = write_suite(tmp_path / "suite", "a", "b", "c")
    args = ["optimize", str(suite), "--target", "cuda", "--steps", "1"]
    runner.invoke(app, [*args, "--out", str(tmp_path / "l")], env=two_gpus | {"HTAM_LANES": "2"})
    # three tasks: three workers, the GPUs taking turns
    assert bench_runs[-1].devices == ["cuda:3", "cuda:5", "cuda:3"]
