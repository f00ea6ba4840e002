"""The local pool: one worker process per GPU (or CPU slot) of this host, each with its own
inbox; the parent notices a dead worker by its exit, re-queues its unit once and starts a new one.
The embedded default executor (no Ray needed)."""

from __future__ import annotations

import multiprocessing
import queue
from collections import deque
from dataclasses import dataclass
from typing import Any

from htam.bench.bench_config import BenchConfig, Unit
from htam.bench.ledger import Ledger
from htam.bench.local_worker import worker_main
from htam.tasks.task import Task

POLL_S = 0.5
TERM_GRACE_S = 15.0  # for a worker told to exit (SIGTERM) to close its evaluator


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


class LocalPool:
    def __init__(
        self,
        config: BenchConfig,
        tasks: dict[str, Task],
        pending: deque[tuple[Unit, int]],
        ledger: Ledger,
    ):
        self.config, self.tasks, self.pending, self.ledger = config, tasks, pending, ledger
        self.on_event = ledger.on_event
        self.ctx = multiprocessing.get_context("spawn")  # the parent may hold torch/CUDA state
        self.outbox = self.ctx.Queue()
        self.slots = [Slot(i, d, self.ctx.Queue()) for i, d in enumerate(config.devices)]

    def run(self) -> None:
        for slot in self.slots:
            self._start(slot)
        try:
            while self.pending or any(s.current for s in self.slots):
                self._assign()
                self._receive(timeout=POLL_S)
                self._check_deaths()
                if self.pending and not any(self._usable(s) for s in self.slots):
                    self.ledger.fail_pending(self.pending, "no worker is left to run it")
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
            target=worker_main,
            name=f"htam-bench-w{slot.index}",
            args=(slot.index, slot.device, self.config, slot.inbox, self.outbox),
            daemon=True,
        )
        slot.process.start()
        self.on_event(
            "worker_start",
            {
                "worker": slot.index,
                "device": slot.device,
                "pid": slot.process.pid,
                "start": slot.starts,
            },
        )

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
                    # SIGTERM first: the worker closes its evaluator, whose sandboxed processes
                    # a SIGKILL left stopped behind it (seen: 550 MB a Ctrl-C)
                    slot.process.terminate()
                    slot.process.join(timeout=TERM_GRACE_S)
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
                self.on_event(
                    "unit_start",
                    {
                        "unit": unit.key,
                        "attempt": attempt,
                        "worker": slot.index,
                        "device": slot.device,
                    },
                )

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
            slot.current = None
            self.ledger.finished(message[3])

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
                self.on_event(
                    "worker_fatal",
                    {
                        "worker": slot.index,
                        "pid": slot.process.pid,
                        "error": "worker keeps dying; slot given up",
                    },
                )

    def _lost(self, slot: Slot) -> None:
        assert slot.current is not None, "only a slot running a unit can lose it"
        unit, attempt = slot.current
        slot.current = None
        code = slot.process.exitcode
        self.ledger.lost(
            unit,
            attempt,
            {
                "worker": slot.index,
                "device": slot.device,
                "pid": slot.process.pid,
                "error": f"worker pid {slot.process.pid} died (exit code {code})",
            },
            self.config.max_attempts,
            self.pending,
        )
