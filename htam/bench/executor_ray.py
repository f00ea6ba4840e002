"""The Ray executor: the bench's units as calls to ``UnitWorker`` actors on a Ray cluster.

One actor per slot: ``num_gpus=1`` on CUDA targets (Ray pins its GPU), ``num_cpus=1`` on CPU
targets; as many slots as ``BenchConfig.ray_slots``, else every GPU (CPU) the cluster has when
the bench starts. Ray places the actors, detects a dead worker process or node (the call's result
raises) and places a replacement elsewhere; the bench keeps the policy the local pool has: the
lost unit is re-queued (``retry`` in units.jsonl, at most ``max_attempts`` attempts, then
``failed`` with Ray's cause) and resumes from its last persisted step. Ray's own task retries are
off (``max_restarts=0``, ``max_task_retries=0``) so that every attempt is recorded and bounded
here. Finished units are never handed out again: the driver skips them by their summary.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from htam.bench.bench_config import FIXED_ENV, MEMORYLESS, BenchConfig, Unit
from htam.bench.ledger import Ledger
from htam.tasks.task import Task

POLL_S = 0.5
PLACEMENT_S = 300.0  # pending units with no worker placed for this long are recorded failed


@dataclass
class RaySlot:
    index: int
    actor: Any = None
    ready_ref: Any = None
    info: dict | None = None  # from UnitWorker.ready
    current: tuple[Unit, int, Any] | None = None  # unit, attempt, result ref
    starts: int = 0
    given_up: bool = False

    @property
    def device(self) -> str | None:
        return self.info["device"] if self.info else None


def connect(address: str) -> bool:
    """Join (or start) the cluster; True when this call initialized Ray."""
    import ray

    if ray.is_initialized():
        return False
    env = dict(FIXED_ENV)
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    ray.init(
        address=None if address == "local" else address,
        log_to_driver=False,
        runtime_env={"env_vars": env},
    )
    return True


def slot_options(config: BenchConfig) -> dict[str, Any]:
    """The resources of one worker: its GPU, or one CPU on CPU targets."""
    resources = {"num_gpus": 1, "num_cpus": 0} if config.target == "cuda" else {"num_cpus": 1}
    env = dict(FIXED_ENV)
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**resources, "max_restarts": 0, "max_task_retries": 0, "runtime_env": {"env_vars": env}}


def slot_count(config: BenchConfig, cluster_resources: dict[str, float]) -> int:
    if config.ray_slots is not None:
        return config.ray_slots
    return int(cluster_resources.get("GPU" if config.target == "cuda" else "CPU", 0))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class RayPool:
    def __init__(
        self,
        config: BenchConfig,
        tasks: dict[str, Task],
        pending: deque[tuple[Unit, int]],
        ledger: Ledger,
    ):
        if config.ray is None:
            raise ValueError("the Ray executor needs a cluster address (BenchConfig.ray)")
        self.config, self.tasks, self.pending, self.ledger = config, tasks, pending, ledger
        self.address = config.ray
        self.on_event = ledger.on_event
        self.slots: list[RaySlot] = []
        self.owner: Any = None  # the BankOwner actor when banks are shared

    def run(self) -> None:
        import ray

        started_here = connect(self.address)
        try:
            self._run()
        finally:
            self._stop()
            if started_here:
                ray.shutdown()

    def _run(self) -> None:
        import ray

        from htam.bench.banks import bank_path, frozen_source
        from htam.bench.ray_bank import BankOwner
        from htam.bench.ray_worker import UnitWorker

        self.worker_cls = ray.remote(UnitWorker)
        count = slot_count(self.config, ray.cluster_resources())
        if count < 1:
            kind = "GPU" if self.config.target == "cuda" else "CPU"
            self.ledger.fail_pending(self.pending, f"the Ray cluster has no {kind}")
            return
        paths = sorted(
            {
                str(p)
                for u, _ in self.pending
                if u.method not in MEMORYLESS and (p := bank_path(u, self.config)) is not None
            }
        )
        if paths and self.config.memory_mode != "frozen":
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()  # the banks are on this disk
            self.owner = (
                ray.remote(BankOwner)
                .options(
                    num_cpus=0,
                    max_restarts=0,
                    max_concurrency=1,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
                )
                .remote(paths)
            )
        self.frozen = ray.put(frozen_source(self.config))
        self.slots = [RaySlot(i) for i in range(min(count, len(self.pending)))]
        for slot in self.slots:
            self._start(slot)
        progress = time.monotonic()
        while self.pending or any(s.current for s in self.slots):
            self._assign()
            waiting = {s.ready_ref: s for s in self.slots if s.ready_ref is not None}
            waiting |= {s.current[2]: s for s in self.slots if s.current}
            done, _ = ray.wait(list(waiting), num_returns=1, timeout=POLL_S)
            for ref in done:
                slot = waiting[ref]
                if ref is slot.ready_ref:
                    self._ready(slot, ref)
                else:
                    self._finished(slot, ref)
                    progress = time.monotonic()
            if not self.pending:
                continue
            if not any(self._usable(s) for s in self.slots):
                self.ledger.fail_pending(self.pending, "no Ray worker is left to run it")
            elif any(s.info for s in self.slots if not s.given_up):
                progress = time.monotonic()
            elif time.monotonic() - progress > PLACEMENT_S:
                self.ledger.fail_pending(
                    self.pending,
                    f"no Ray worker could be placed in {PLACEMENT_S:.0f} s "
                    "(the cluster lacks the GPUs/CPUs)",
                )

    # ------------------------------------------------------------------ workers

    def _start(self, slot: RaySlot) -> None:
        slot.starts += 1
        slot.info, slot.current = None, None
        slot.actor = self.worker_cls.options(**slot_options(self.config)).remote(
            slot.index, self.config, self.owner, self.frozen
        )
        slot.ready_ref = slot.actor.ready.remote()
        self.on_event(
            "worker_start",
            {"worker": slot.index, "device": "ray", "pid": None, "start": slot.starts},
        )

    def _usable(self, slot: RaySlot) -> bool:
        return not slot.given_up and (
            slot.actor is not None or slot.starts < self.config.max_worker_starts
        )

    def _restart(self, slot: RaySlot, why: str) -> None:
        import ray

        ray.kill(slot.actor, no_restart=True)
        slot.actor, slot.ready_ref, slot.info = None, None, None
        if slot.starts < self.config.max_worker_starts:
            self._start(slot)
        else:
            slot.given_up = True
            self.on_event(
                "worker_fatal",
                {"worker": slot.index, "pid": None, "error": f"{why}; slot given up"},
            )

    def _ready(self, slot: RaySlot, ref) -> None:
        import ray

        slot.ready_ref = None
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self._restart(slot, f"worker died while starting: {_first_line(exc)}")
            return
        if info["fatal"]:
            slot.given_up = True
            self.on_event(
                "worker_fatal", {"worker": slot.index, "pid": info["pid"], "error": info["fatal"]}
            )
            return
        slot.info = info
        self.on_event(
            "worker_ready",
            {
                "worker": slot.index,
                "pid": info["pid"],
                "device_name": info["device_name"],
                "node": info["node"],
            },
        )

    def _stop(self) -> None:
        import ray

        refs = [s.actor.close.remote() for s in self.slots if s.info and s.actor is not None]
        try:
            ray.wait(refs, num_returns=len(refs), timeout=30)
        except ray.exceptions.RayError:
            pass
        for slot in self.slots:
            if slot.actor is not None:
                ray.kill(slot.actor, no_restart=True)
        if self.owner is not None:
            try:
                ray.get(self.owner.close.remote(), timeout=30)
            except ray.exceptions.RayError:
                pass
            ray.kill(self.owner, no_restart=True)

    # ------------------------------------------------------------------ units

    def _assign(self) -> None:
        for slot in self.slots:
            if slot.info and slot.current is None and self.pending:
                unit, attempt = self.pending.popleft()
                ref = slot.actor.run.remote(unit, self.tasks[unit.task_id], attempt)
                slot.current = (unit, attempt, ref)
                self.on_event(
                    "unit_start",
                    {
                        "unit": unit.key,
                        "attempt": attempt,
                        "worker": slot.index,
                        "device": slot.device,
                    },
                )

    def _finished(self, slot: RaySlot, ref) -> None:
        import ray

        assert slot.current is not None, "a result came from a slot that runs nothing"
        unit, attempt, _ = slot.current
        slot.current = None
        try:
            record = ray.get(ref)
        except ray.exceptions.RayError as exc:
            info = slot.info or {}
            why = (
                f"Ray worker pid {info.get('pid')} on node {str(info.get('node'))[:8]} "
                f"died ({_first_line(exc)})"
            )
            self.ledger.lost(
                unit,
                attempt,
                {
                    "worker": slot.index,
                    "device": slot.device,
                    "pid": info.get("pid"),
                    "node": info.get("node"),
                    "error": why,
                },
                self.config.max_attempts,
                self.pending,
            )
            self._restart(slot, why)
            return
        self.ledger.finished(record)
