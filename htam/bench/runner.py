"""The bench parent: plans the units, skips finished ones, feeds one worker per device, notices
dead workers and re-queues their unit once, and writes the records the reports are made from.

Files under OUT::

    bench.json        the config (a resumed bench must match its identity)
    plan.json         every unit: method, seed, task id, level, planned steps
    units.jsonl       one line per attempt's end: unit, worker, device, pid, status, wall_s, error
    runs/<method>/s<seed>/<task id, / as __>/   each unit's run directory (see htam.agent.rundir)
    memory/           the banks (see htam.bench.banks)
    workers/w<N>.json what each worker holds right now
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from htam.bench.banks import prepare_shared
from htam.bench.config import FIXED_ENV, BenchConfig, Unit, plan_units, unit_done
from htam.bench.worker import worker_main

POLL_S = 0.5
Event = Callable[[str, dict[str, Any]], None]


class BenchError(Exception):
    pass


@dataclass
class BenchOutcome:
    planned: int
    skipped: list[str] = field(default_factory=list)  # finished before this invocation
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    report: Any = None  # htam.bench.report.ReportFiles, when the report was written


@dataclass
class Slot:
    index: int
    device: str
    inbox: Any
    process: Any = None
    ready: bool = False
    current: tuple[Unit, int] | None = None  # unit and attempt number
    starts: int = 0
    given_up: bool = False


def _check_resume(config: BenchConfig, resume: bool) -> None:
    path = config.out / "bench.json"
    if not path.exists():
        return
    if not resume:
        raise BenchError(f"{config.out} already holds a bench; pass --resume to continue it "
                         "or choose another --out")
    old = json.loads(path.read_text()).get("identity", {})
    changed = [k for k, v in config.identity().items() if old.get(k) != v]
    if changed:
        raise BenchError(f"cannot resume {config.out}: {', '.join(changed)} changed")


def write_plan(config: BenchConfig, units: list[Unit]) -> None:
    from htam.agent.rundir import write_atomic

    config.out.mkdir(parents=True, exist_ok=True)
    bench = {"identity": config.identity(), "config": json.loads(config.to_json())}
    write_atomic(config.out / "bench.json", json.dumps(bench, indent=2))
    write_atomic(config.out / "plan.json", json.dumps([u.to_dict() for u in units], indent=2))


def run_bench(config: BenchConfig, tasks: list, resume: bool = False,
              on_event: Event | None = None, report: bool = True) -> BenchOutcome:
    """Run every (method, seed, task) unit of ``tasks``, then (``report``) write metrics.json,
    report.md and report.html; returns what happened this time."""
    started = time.monotonic()
    _check_resume(config, resume)
    units = plan_units(tasks, config)
    write_plan(config, units)
    os.environ.update(FIXED_ENV)  # inherited by every worker and evaluator process
    outcome = BenchOutcome(planned=len(units))
    pending: deque[tuple[Unit, int]] = deque()
    for unit in units:
        if unit_done(unit, config.out):
            outcome.skipped.append(unit.key)
        else:
            pending.append((unit, 1))
    if pending:
        prepare_shared([u for u, _ in pending], config)
        by_id = {t.id: t for t in tasks}
        _Dispatcher(config, by_id, pending, outcome, on_event or (lambda *_: None)).run()
    outcome.wall_s = time.monotonic() - started
    if report:
        from htam.bench.report import write_report

        outcome.report = write_report(config.out)
    return outcome


class _Dispatcher:
    def __init__(self, config: BenchConfig, tasks: dict, pending: deque, outcome: BenchOutcome,
                 on_event: Event):
        self.config, self.tasks, self.pending, self.outcome = config, tasks, pending, outcome
        self.on_event = on_event
        self.ctx = multiprocessing.get_context("spawn")  # the parent may hold torch/CUDA state
        self.outbox = self.ctx.Queue()
        self.slots = [Slot(i, d, self.ctx.Queue()) for i, d in enumerate(config.devices)]
        self.log_path = config.out / "units.jsonl"

    def run(self) -> None:
        for slot in self.slots:
            self._start(slot)
        try:
            while self.pending or any(s.current for s in self.slots):
                self._assign()
                self._receive(timeout=POLL_S)
                self._check_deaths()
                if self.pending and not any(self._usable(s) for s in self.slots):
                    self._fail_pending("no worker is left to run it")
        except BaseException:
            # Interrupted (Ctrl-C) or broken: end the workers now; every finished step is
            # persisted, so --resume continues from there.
            self._stop(grace_s=0)
            raise
        self._stop(grace_s=30)

    # ------------------------------------------------------------------ workers

    def _start(self, slot: Slot) -> None:
        slot.starts += 1
        slot.ready, slot.current = False, None
        slot.inbox = self.ctx.Queue()  # a dead worker may have left a message in the old one
        slot.process = self.ctx.Process(
            target=worker_main, name=f"htam-bench-w{slot.index}",
            args=(slot.index, slot.device, self.config, slot.inbox, self.outbox), daemon=True)
        slot.process.start()
        self.on_event("worker_start", {"worker": slot.index, "device": slot.device,
                                       "pid": slot.process.pid, "start": slot.starts})

    def _usable(self, slot: Slot) -> bool:
        if slot.given_up:
            return False
        return slot.process.is_alive() or slot.starts < self.config.max_worker_starts

    def _stop(self, grace_s: float) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.is_alive():
                slot.inbox.put(None)
        for slot in self.slots:
            if slot.process is not None:
                slot.process.join(timeout=grace_s)
                if slot.process.is_alive():
                    slot.process.kill()
                    slot.process.join()

    # ------------------------------------------------------------------ units

    def _assign(self) -> None:
        for slot in self.slots:
            if slot.ready and slot.current is None and self.pending:
                unit, attempt = self.pending.popleft()
                slot.current = (unit, attempt)
                slot.inbox.put((unit, self.tasks[unit.task_id], attempt))
                self.on_event("unit_start", {"unit": unit.key, "attempt": attempt,
                                             "worker": slot.index, "device": slot.device})

    def _receive(self, timeout: float) -> None:
        try:
            message = self.outbox.get(timeout=timeout)
        except queue.Empty:
            return
        self._handle(message)

    def _drain(self) -> None:
        while True:
            try:
                message = self.outbox.get_nowait()
            except queue.Empty:
                return
            self._handle(message)

    def _handle(self, message: tuple) -> None:
        kind, index, pid = message[:3]
        slot = self.slots[index]
        if slot.process is None or slot.process.pid != pid:
            return  # from a worker of this slot that has since been replaced
        if kind == "ready":
            slot.ready = True
            self.on_event("worker_ready", {"worker": index, "pid": pid, "device_name": message[3]})
        elif kind == "fatal":
            slot.given_up = True
            self.on_event("worker_fatal", {"worker": index, "pid": pid, "error": message[3]})
        elif kind == "finished":
            record = message[3]
            slot.current = None
            self._log(record)
            (self.outcome.done if record["status"] == "done" else self.outcome.failed).append(
                record["unit"])
            self.on_event("unit_end", record)

    def _check_deaths(self) -> None:
        for slot in self.slots:
            if slot.process is None or slot.process.is_alive():
                continue
            self._drain()  # its last report may still be in the pipe
            if slot.current is not None:
                self._lost(slot)
            if slot.given_up or not (self.pending or any(s.current for s in self.slots)):
                continue
            if slot.starts < self.config.max_worker_starts:
                self._start(slot)
            elif not slot.given_up:
                slot.given_up = True
                self.on_event("worker_fatal", {"worker": slot.index, "pid": slot.process.pid,
                                               "error": "worker keeps dying; slot given up"})

    def _lost(self, slot: Slot) -> None:
        unit, attempt = slot.current
        slot.current = None
        code = slot.process.exitcode
        record = {"unit": unit.key, "attempt": attempt, "worker": slot.index,
                  "device": slot.device, "pid": slot.process.pid, "wall_s": None,
                  "error": f"worker pid {slot.process.pid} died (exit code {code})"}
        if attempt < self.config.max_attempts:
            record["status"] = "retry"
            self.pending.appendleft((unit, attempt + 1))
            self.outcome.retried.append(unit.key)
        else:
            record["status"] = "failed"
            self.outcome.failed.append(unit.key)
        self._log(record)
        self.on_event("unit_lost", record)

    def _fail_pending(self, why: str) -> None:
        while self.pending:
            unit, attempt = self.pending.popleft()
            record = {"unit": unit.key, "attempt": attempt, "worker": None, "device": None,
                      "pid": None, "wall_s": None, "status": "failed", "error": why}
            self._log(record)
            self.outcome.failed.append(unit.key)
            self.on_event("unit_end", record)

    def _log(self, record: dict[str, Any]) -> None:
        with open(self.log_path, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
