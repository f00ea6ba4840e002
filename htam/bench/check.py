"""``htam tasks check``: run every reference of a suite at its real size and record, per task,
whether it runs (and why not), its eager and torch.compile times, FLOPs, bytes and roofline.

A torch.compile build is CPU work, a timing wants the GPU alone: ``jobs`` *warm-up* processes
run each reference once with torch.compile only to fill the Inductor and Triton caches (their
timings go to a throwaway cache directory), and ``measurers`` *measuring* processes (1: one
timing at a time) then run it again, timed, finding the build cached. Each process owns an
``Evaluator``, as the bench's workers do. GPU memory is shared by estimate (meta-device data
times ``MEMORY_FACTOR`` within ``gpu_share`` of the GPU); a measurement that ran out of memory
beside others is done again alone. docs/tasks.md has the whole design and the figures.

Files under OUT (resumable: a task with a record is not run again): config.json (what the
records depend on), results.jsonl (one record per task, appended as each ends), and at the end
check.json (config, per-level summary, every record) and check.md (the same as tables).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htam.bench import check_worker as cw
from htam.bench.bench_config import FIXED_ENV
from htam.bench.check_report import CheckError, check_identity, load_records
from htam.tasks.task import Task
from htam.vocab import Size

MEMORY_FACTOR = 3  # inputs + outputs + parameters -> the reference's peak, with intermediates
POLL_S = 0.5
LOOKAHEAD = 2  # warmed or warming tasks per warm-up process, at most
# Correctness trials compare candidates with the reference; checking the reference itself needs
# one run of it (a second and third only cost time, and host memory at KernelBench's sizes).
EVAL_DEFAULTS: dict[str, Any] = {"trials": 1}
Event = Callable[[str, dict[str, Any]], None]


@dataclass
class CheckConfig:
    out: Path
    target: str = "cuda"
    size: Size = "large"
    jobs: int = 0  # warm-up processes; 0 measures each task cold
    measurers: int = 1  # measuring processes; above 1, timings may overlap (see docs/tasks.md)
    eval_overrides: dict[str, Any] = field(default_factory=dict)
    retry_failed: bool = False  # a resumed check runs the failed tasks again
    gpu_share: float = 0.8  # of GPU memory, for the estimated data of running references

    def identity(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "size": self.size,
            "eval_settings": {k: str(v) for k, v in sorted(self.settings().items())},
        }

    def settings(self) -> dict[str, Any]:
        return {**EVAL_DEFAULTS, **self.eval_overrides}

    def eval_config(self, **more: Any):
        from htam.evaluate import EvalConfig

        return EvalConfig(size=self.size, **{**self.settings(), **more})


@dataclass
class CheckOutcome:
    records: list[dict[str, Any]]  # every task's last record, this invocation's tasks first
    skipped: int  # tasks with a record from an earlier invocation
    measured: int
    wall_s: float
    files: Any = None  # htam.bench.check_report.CheckFiles


def run_check(
    tasks: list[Task], config: CheckConfig, on_event: Event | None = None, write: bool = True
) -> CheckOutcome:
    started = time.monotonic()
    check_identity(config.out, config.identity())
    os.environ.update(FIXED_ENV)
    earlier = load_records(config.out)

    def done(task: Task) -> bool:
        record = earlier.get(task.id)
        return record is not None and not (config.retry_failed and record["status"] == "failed")

    todo = [t for t in tasks if not done(t)]
    emit = on_event or (lambda *_: None)
    emit("plan", {"total": len(tasks), "skipped": len(tasks) - len(todo), "todo": len(todo)})
    if todo:
        _Scheduler(config, todo, emit).run()
    records = load_records(config.out)
    ids = [t.id for t in tasks]
    ordered = [records[i] for i in ids if i in records]
    ordered += [r for i, r in records.items() if i not in set(ids)]
    outcome = CheckOutcome(ordered, len(tasks) - len(todo), len(todo), time.monotonic() - started)
    if write:
        from htam.bench.check_report import write_files

        outcome.files = write_files(config.out, ordered, config.identity())
    return outcome


class _Scheduler:
    def __init__(self, config: CheckConfig, tasks: list[Task], emit: Event):
        self.config, self.emit = config, emit
        self.pending: deque[Task] = deque(tasks)
        self.ready: deque[tuple[Task, bool]] = deque()  # (task, must run alone)
        self.warming: dict[Future, tuple[Task, int]] = {}  # -> (task, GPU bytes held)
        self.timing: dict[Future, _Timing] = {}
        self.warm_info: dict[str, dict[str, Any]] = {}
        self.estimates: dict[str, int | None] = {}
        self.blocked = False  # a measurement waits for memory: start no warm-up meanwhile
        self.jobs = config.jobs
        self.capacity = None
        if config.target == "cuda":
            total = cw.gpu_memory_bytes()
            self.capacity = int(total * config.gpu_share) if total else None
        self.finished = 0
        self.total = len(tasks)

    # ------------------------------------------------------------------ pools

    def _pool(self, workers: int, eval_config) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=cw.init_worker,
            initargs=(self.config.target, eval_config, dict(FIXED_ENV)),
        )

    def run(self) -> None:
        main = self.config.eval_config()
        with tempfile.TemporaryDirectory(prefix="htam-check-warm-") as warm_dir:
            # The warm-ups' evaluator: the measuring one's compile caches, its own reference
            # cache, and the shortest timing (only the build matters).
            cw.link_caches(Path(warm_dir), Path(main.cache_dir))
            warm_config = self.config.eval_config(
                cache_dir=Path(warm_dir),
                warmup_ms=0.0,
                timing_budget_ms=0.0,
                min_timed=1,
                max_timed=1,
                time_compile_reference=True,
            )
            self.timer = self._pool(self.config.measurers, main)
            self.warmers = self._pool(self.jobs, warm_config) if self.jobs else None
            try:
                self._loop()
            finally:
                for pool in (self.timer, self.warmers):
                    if pool is not None:
                        pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ scheduling

    def _estimate(self, task: Task) -> int:
        """GPU bytes a running reference of ``task`` holds in the accounting; unknown is all."""
        if self.capacity is None:
            return 0
        if task.id not in self.estimates:
            data = cw.gpu_estimate(task, self.config.size)
            self.estimates[task.id] = None if data is None else MEMORY_FACTOR * data
        estimate = self.estimates[task.id]
        return self.capacity if estimate is None else estimate

    def _fits(self, need: int) -> bool:
        held = [e for _, e in self.warming.values()] + [t.held for t in self.timing.values()]
        return not held or self.capacity is None or sum(held) + need <= self.capacity

    def _exclusive(self) -> bool:
        return any(t.alone for t in self.timing.values())

    def _loop(self) -> None:
        while self.pending or self.ready or self.warming or self.timing:
            if not self.warmers:
                self.ready.extend((t, False) for t in self.pending)
                self.pending.clear()
            self._start_timing()
            self._start_warmups()
            futures = [*self.warming, *self.timing]
            done, _ = wait(futures, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                if future in self.timing:
                    self._timed(future)
                elif future in self.warming:  # not when warm-ups were turned off meanwhile
                    self._warmed(future)

    def _start_timing(self) -> None:
        self.blocked = False
        while self.ready and len(self.timing) < self.config.measurers and not self._exclusive():
            task, alone = self.ready[0]
            need = self._estimate(task)
            if (alone and (self.warming or self.timing)) or not self._fits(need):
                self.blocked = True
                return
            self.ready.popleft()
            shared = bool(self.warming or self.timing)
            for other in self.timing.values():
                other.shared = True
            future = self.timer.submit(cw.measure, task)
            self.timing[future] = _Timing(task, need, shared, alone)

    def _start_warmups(self) -> None:
        if self.blocked or self._exclusive():
            return
        # Warm-ups keep just ahead of the measurements: running further ahead would only take
        # CPU from the measuring processes, which set the pace.
        while (
            self.warmers
            and self.pending
            and len(self.warming) < self.jobs
            and len(self.warming) + len(self.ready) < LOOKAHEAD * self.jobs
        ):
            need = self._estimate(self.pending[0])
            if not self._fits(need):
                return
            task = self.pending.popleft()
            self.warming[self.warmers.submit(cw.warm, task)] = (task, need)
            for other in self.timing.values():
                other.shared = True

    def _warmed(self, future: Future) -> None:
        task, _ = self.warming.pop(future)
        try:
            result = future.result()
        except BrokenProcessPool:
            result = {"fatal": "a warm-up process died"}
        # An evaluator fault in a warm-up (not the task's failure, which is a value) costs only
        # the warm-up: the measurement will meet it again and record it.
        except Exception as exc:  # noqa: BLE001
            result = {"ok": False, "cause": cw.one_line(f"{type(exc).__name__}: {exc}")}
        if "fatal" in result:
            self._warmups_off(result["fatal"])
        else:
            self.warm_info[task.id] = result
            self.emit("warm_end", {"id": task.id, **result})
        self.ready.append((task, False))

    def _warmups_off(self, why: str) -> None:
        """Without warm-ups the check still completes: the measurement builds cold."""
        if self.warmers is None:
            return
        self.emit("warmups_off", {"cause": why})
        self.warmers.shutdown(wait=False, cancel_futures=True)
        self.warmers = None
        self.ready.extend((t, False) for t, _ in self.warming.values())
        self.warming.clear()

    def _timed(self, future: Future) -> None:
        timing = self.timing.pop(future)
        task = timing.task
        try:
            record = future.result()
        except BrokenProcessPool:
            # The pool is broken for every measurement in it: count this one, re-queue the others.
            self.timer.shutdown(wait=False)
            self.timer = self._pool(self.config.measurers, self.config.eval_config())
            self.ready.extendleft((t.task, t.alone) for t in self.timing.values())
            self.timing.clear()
            record = {"status": "failed", "cause": "the measuring process died"}
        # An evaluator fault (its fork server broke, the device peaks could not be measured) is
        # recorded as this task's failure, with its cause; the check goes on with the others.
        except Exception as exc:  # noqa: BLE001
            record = {"status": "failed", "cause": cw.one_line(f"{type(exc).__name__}: {exc}")}
        if "fatal" in record:
            raise CheckError(record["fatal"])
        cause = (record.get("cause") or "").lower()
        if timing.shared and record["status"] == "failed" and "out of memory" in cause:
            self.emit("retry_alone", {"id": task.id, "cause": record["cause"]})
            self.ready.appendleft((task, True))
            return
        self._record(task, record)

    def _record(self, task: Task, record: dict[str, Any]) -> None:
        warm = self.warm_info.pop(task.id, {})
        record = {
            "id": task.id,
            "level": task.level,
            **record,
            "warm_s": warm.get("wall_s"),
            "warm_cause": warm.get("cause"),
        }
        with open(Path(self.config.out) / "results.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.finished += 1
        self.emit("task_end", {"record": record, "done": self.finished, "todo": self.total})


@dataclass
class _Timing:
    task: Task
    held: int  # GPU bytes in the accounting
    shared: bool  # another reference ran on the GPU meanwhile
    alone: bool  # a retry that must have the GPU to itself
