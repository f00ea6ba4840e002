"""The bench on a real 3-node Ray cluster on this host (head without CPUs, 2 worker nodes with one
slot each): the scripted bench of test_bench_run with a shared (accumulate) bank, the raylet of
the node that runs one unit killed with SIGKILL mid-unit, compared with a local run of the same
plan; the driver killed mid-run and the bench resumed on the local pool; a local bench resumed on
Ray."""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from htam.bench import bench_metrics, run_bench
from htam.memory import MemoryBank
from tests.bench.conftest import cli_env, config, htam_cli, tasks
from tests.bench.ray_cluster import (  # skips the module where Ray is not installed
    add_worker,
    kill_raylet_when_running,
    node_of,
    start_cluster,
    stop_cluster,
)

pytestmark = pytest.mark.slow
VICTIM = "htam/s0/builtin/level1/3_Sigmoid"
MEMORY_METHODS = ("htam", "no-prefix")


def _log(out):
    return [json.loads(line) for line in (out / "units.jsonl").read_text().splitlines()]


def _complete(out):
    return {p.parent: p.stat().st_mtime_ns for p in (out / "runs").glob("*/s0/*/summary.json")
            if json.loads(p.read_text())["steps"] == 2}


def _step_files(out, method):
    return len(list((out / "runs" / method).glob("s0/*/steps/step_*.json")))


def _bank_steps(out, method):
    with MemoryBank.open(out / "memory" / f"{method}.db") as bank:
        assert bank.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return bank.step_count()


def _structure(value):
    """The shape of a metrics document: keys (recursively) and value types, not the numbers."""
    if isinstance(value, dict):
        return {k: _structure(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list):
        return ["list"]
    return type(value).__name__ if value is not None else "None"


@pytest.fixture(scope="module")
def cluster():
    cluster = start_cluster(workers=2)
    yield cluster
    stop_cluster(cluster)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "out"
    cfg = dataclasses.replace(config(out), memory_mode="accumulate")
    return out, run_bench(cfg, tasks())


@pytest.fixture(scope="module")
def killed(cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("ray") / "out"
    cfg = dataclasses.replace(config(out, delay_s=0.5), memory_mode="accumulate", ray="auto")
    stop, killed_nodes, events = threading.Event(), [], []
    killer = threading.Thread(target=kill_raylet_when_running,
                              args=(cluster, out, VICTIM, stop, killed_nodes))
    killer.start()
    try:
        outcome = run_bench(cfg, tasks(), on_event=lambda kind, rec: events.append((kind, rec)))
    finally:
        stop.set()
        killer.join()
    for node_id in killed_nodes:  # clean up what is left of the dead node, start a fresh one
        cluster.remove_node(node_of(cluster, node_id), allow_graceful=False)
    add_worker(cluster)
    cluster.wait_for_nodes()
    return out, outcome, killed_nodes, events


def test_a_killed_node_reruns_its_unit_elsewhere(killed):
    out, outcome, killed_nodes, events = killed
    assert len(killed_nodes) == 1
    assert outcome.planned == 6 and len(outcome.done) == 6 and outcome.failed == []
    # the killer fires while VICTIM runs; on a loaded machine the node may have finished it and
    # taken the next unit by the time the raylet dies: the retried unit is whichever it ran
    assert len(outcome.retried) == 1
    lost = outcome.retried[0]
    log = _log(out)
    victim = [r for r in log if r["unit"] == lost]
    assert [(r["status"], r["attempt"]) for r in victim] == [("retry", 1), ("done", 2)]
    assert victim[0]["node"] == killed_nodes[0] and "died" in victim[0]["error"]
    assert victim[1]["node"] != killed_nodes[0]
    # no other unit ran twice: one record each, done at the first attempt
    others = [r for r in log if r["unit"] != lost]
    assert sorted((r["status"], r["attempt"]) for r in others) == [("done", 1)] * 5
    assert len({r["unit"] for r in others}) == 5
    assert all(r["device"].startswith("ray:") and r["wall_s"] > 0 for r in log if r["wall_s"])
    # the two nodes both ran units (one slot each), plus the replacement after the kill
    assert len({r["node"] for r in log}) == 2


def test_the_shared_bank_counts_every_step_once_like_a_local_run(killed, local):
    out, local_out = killed[0], local[0]
    for method in MEMORY_METHODS:
        steps = _bank_steps(out, method)
        assert steps == 6 == _step_files(out, method)  # 3 tasks x 2 steps, the replay not twice
        assert _bank_steps(local_out, method) == steps


def test_metrics_equal_the_local_run_in_structure(killed, local):
    ray_metrics, local_metrics = bench_metrics(killed[0]), bench_metrics(local[0])
    assert _structure(ray_metrics) == _structure(local_metrics)
    for method in MEMORY_METHODS:
        r, loc = ray_metrics["methods"][method], local_metrics["methods"][method]
        assert r["units"] == loc["units"] == 3
        assert r["correctness"] == loc["correctness"] == pytest.approx(2 / 3)
        assert r["tokens"] == loc["tokens"] == 900


def test_killed_driver_resumes_on_the_local_pool(cluster, tmp_path):
    from typer.testing import CliRunner

    from htam.cli import app

    out = tmp_path / "out"
    args = ["bench", "builtin", "--levels", "1", "--tasks", "[134]_*", "--methods",
            "htam,no-prefix", "--steps", "2", "--target", "cpu", "--language", "triton",
            "--memory-mode", "accumulate", "--proposer", "tests.bench.helpers:StaggeredProposer"]
    env = cli_env() | {"RAY_ADDRESS": cluster.address}
    driver = subprocess.Popen(htam_cli() + args + ["--out", str(out), "--ray", "--ray-address",
                                                   "auto"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and driver.poll() is None:
        if (out / "runs").exists() and len(_complete(out)) >= 2:
            break
        time.sleep(0.1)
    assert driver.poll() is None, driver.stdout.read().decode()[-3000:]
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    time.sleep(2.0)  # Ray ends the dead driver's actors
    finished, lines = _complete(out), len(_log(out))
    assert 2 <= len(finished) < 6
    for method in MEMORY_METHODS:  # intact after its owner died (WAL), no step lost
        assert _bank_steps(out, method) >= _step_files(out, method)

    result = CliRunner().invoke(app, args + ["--out", str(out), "--resume", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert f"{len(finished)} already finished" in result.output
    assert {p: _complete(out)[p] for p in finished} == finished  # not recomputed
    new = _log(out)[lines:]
    assert not {r["unit"] for r in new} & {f"{p.parts[-3]}/s0/{p.name.replace('__', '/')}" for p in finished}
    assert len(_complete(out)) == 6
    for method in MEMORY_METHODS:
        assert _bank_steps(out, method) == 6 == _step_files(out, method)


def test_local_bench_resumed_on_ray_with_one_more_method(cluster, local, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(local[0], out)
    before, lines = _complete(out), len(_log(out))
    cfg = dataclasses.replace(config(out, methods=("htam", "no-prefix", "random")),
                              memory_mode="accumulate", ray="auto")
    outcome = run_bench(cfg, tasks(), resume=True, report=False)
    assert len(outcome.skipped) == 6 and len(outcome.done) == 3 and outcome.failed == []
    assert {p: _complete(out)[p] for p in before} == before
    new = _log(out)[lines:]
    assert sorted(r["unit"].split("/")[0] for r in new) == ["random"] * 3
    assert all(r["device"].startswith("ray:") for r in new)
