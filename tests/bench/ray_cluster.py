"""A real multi-node Ray cluster on this host for the Ray bench tests: a head node with no CPU
(the driver and the bank owner live there) and worker nodes with one CPU slot and one fake GPU
each, on loopback addresses. Node failure is detected within seconds (short health checks)."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.bench.conftest import ROOT

ray = pytest.importorskip("ray", reason="pip install 'htam[ray]' to run the Ray tests")

LOOPBACK = "127.0.0.1"
HEAD = {"num_cpus": 0, "num_gpus": 0, "include_dashboard": False,
        "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                           "health_check_failure_threshold": 3}}
WORKER = {"num_cpus": 1, "num_gpus": 1}
START_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def agent_ports() -> dict[str, int]:
    """Fixed agent ports: with port 0 the raylet waits a fixed 30 s for the agents to publish
    theirs, which a busy host exceeds."""
    return {name: _free_port() for name in ("metrics_agent_port", "dashboard_agent_listen_port",
                                            "runtime_env_agent_port", "metrics_export_port")}


def add_worker(cluster):
    return cluster.add_node(**WORKER, **agent_ports())


def start_cluster(workers: int = 2):
    from ray.cluster_utils import Cluster

    # The worker processes import the scripted proposer from the repository.
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    # The host is shared with other jobs: Ray's memory monitor would kill this cluster's
    # workers for memory that other processes use.
    os.environ["RAY_memory_monitor_refresh_ms"] = "0"
    # ... and its agents start slowly when the host is busy.
    os.environ["RAY_agent_register_timeout_ms"] = "180000"
    os.environ["RAY_raylet_start_wait_time_s"] = "180"
    # Minimal agents (as with `pip install ray`): the full dashboard agent imports aiohttp,
    # grpc and OpenTelemetry, which on a busy 2-core host outlasts the raylet's fixed wait.
    ray._private.utils.get_dashboard_dependency_error = lambda: "minimal agents for the tests"
    for attempt in range(1, START_ATTEMPTS + 1):
        # A raylet waits a fixed 15 s for its agents' ports: on a busy host their imports can
        # take longer, and the raylet aborts. A later attempt finds the imports warm.
        cluster = Cluster()
        try:
            cluster.add_node(**HEAD, **agent_ports())
            for _ in range(workers):
                add_worker(cluster)
            break
        except Exception:  # noqa: BLE001  (Ray raises a bare Exception on a node timeout)
            cluster.shutdown()
            if attempt == START_ATTEMPTS:
                raise
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster


def stop_cluster(cluster) -> None:
    ray.shutdown()
    cluster.shutdown()


def node_of(cluster, node_id: str):
    return next(n for n in cluster.worker_nodes if n.node_id == node_id)


def raylet_pid(node) -> int:
    return node.all_processes["raylet"][0].process.pid


def kill_raylet_when_running(cluster, out: Path, unit_key: str, stop, killed: list) -> None:
    """kill -9 the raylet of the node whose worker runs ``unit_key`` (first attempt), once the
    unit has persisted a step."""
    while not stop.is_set():
        for path in (out / "workers").glob("w*.json") if (out / "workers").exists() else []:
            try:
                status = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
            method, seed, task = unit_key.split("/", 2)
            run_dir = out / "runs" / method / seed / task.replace("/", "__")
            stepped = any((run_dir / "steps").glob("step_*.json"))
            if status.get("unit") == unit_key and status.get("attempt") == 1 and stepped:
                node = node_of(cluster, status["node"])
                os.kill(raylet_pid(node), signal.SIGKILL)
                killed.append(status["node"])
                return
        time.sleep(0.05)
