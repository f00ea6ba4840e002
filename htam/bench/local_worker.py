"""A bench worker of the local executor (htam.bench.executor_local): one process per GPU (or CPU
slot) with its own evaluator and proposer. ``run_unit``, what a worker does with one unit, is
shared with the Ray actor (htam.bench.ray_worker).

Started with the ``spawn`` context; the first thing it does is to pin its device through
``CUDA_VISIBLE_DEVICES`` (before any CUDA call: importing torch, which the parent's main module
may do, does not initialize CUDA; the evaluator's processes inherit the variable). Then it takes units from its inbox one at
a time and reports each outcome to the parent. A unit that raises is reported as failed with its
traceback; only the death of the process itself is left to the parent to notice.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htam.bench.bench_config import FIXED_ENV, BenchConfig, Unit
from htam.bench.ledger import UnitRecord, UnitStatus
from htam.signals import exit_on_sigterm

PARENT_POLL_S = 1.0
EXIT_GRACE_S = 10.0  # for the main thread to close its evaluator, once told to exit


def device_env(target: str, device: str) -> dict[str, str]:
    env = dict(FIXED_ENV)
    if target == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = device.removeprefix("cuda:")
    return env


def status_path(out: Path, slot: int) -> Path:
    return Path(out) / "workers" / f"w{slot}.json"


def _write_status(out: Path, slot: int, data: dict[str, Any]) -> None:
    from htam.agent.rundir import write_atomic

    write_atomic(status_path(out, slot), json.dumps(data))


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone (killed with SIGKILL it cannot tell us): an orphaned worker
    would otherwise keep running units nobody records."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)  # the main thread exits through its evaluator's close
    time.sleep(EXIT_GRACE_S)
    os._exit(3)


def worker_main(slot: int, device: str, config: BenchConfig, inbox, outbox) -> None:
    # a terminal's Ctrl-C reaches the whole group: the parent reports it and ends the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_on_sigterm()  # the parent's terminate(): the evaluator closes, its sandboxes go with it
    os.environ.update(device_env(config.target, device))
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    from htam.evaluate import EvalConfig, Evaluator, EvaluatorError
    from htam.evaluate.host.gpu_queue import EVENTS_ENV

    # the evaluator's build and GPU events, for the bench's throughput figures
    os.environ.setdefault(EVENTS_ENV, str(Path(config.out) / "events"))

    pid = os.getpid()
    try:
        evaluator = Evaluator(config.target, EvalConfig(size=config.size, **config.eval_overrides))
    except EvaluatorError as exc:
        outbox.put(("fatal", slot, pid, f"the evaluator on {device} cannot start: {exc}"))
        return
    with evaluator:
        from htam.bench.banks import frozen_source, open_bank
        from htam.llm.errors import LLMError

        try:
            proposer = config.proposer.build(config.target, config.language)
        except (ImportError, AttributeError, TypeError, ValueError, LLMError) as exc:
            outbox.put(("fatal", slot, pid, f"cannot build the proposer: {exc}"))
            return
        frozen = frozen_source(config)
        outbox.put(("ready", slot, pid, evaluator.device_name))
        while (message := inbox.get()) is not None:
            unit, task, attempt = message
            _write_status(
                config.out,
                slot,
                {"slot": slot, "pid": pid, "device": device, "unit": unit.key, "attempt": attempt},
            )
            record = run_unit(
                unit,
                task,
                attempt,
                config,
                evaluator,
                proposer,
                lambda u: open_bank(u, config, frozen),
            )
            record.worker, record.pid, record.device = slot, pid, device
            record.device_name = evaluator.device_name
            outbox.put(("finished", slot, pid, record))
            _write_status(
                config.out, slot, {"slot": slot, "pid": pid, "device": device, "unit": None}
            )


def run_unit(
    unit: Unit,
    task,
    attempt: int,
    config: BenchConfig,
    evaluator,
    proposer,
    open_unit_bank: Callable[[Unit], Any],
) -> UnitRecord:
    """Run (or continue) one unit in its run directory with the bank ``open_unit_bank(unit)``
    gives (None for memoryless methods; closed here); the record of how it ended."""
    from htam.agent import Optimizer
    from htam.evaluate import CachedEvaluator

    started = time.monotonic()
    record = UnitRecord(unit.key, attempt, UnitStatus.FAILED)
    try:
        bank = open_unit_bank(unit)
        try:
            opt_config = config.optimize_config(unit)
            optimizer = Optimizer(proposer, CachedEvaluator(evaluator), bank, opt_config)
            # Always resume: a retried or resumed unit continues from its last persisted step.
            summary = optimizer.run(task, unit.run_dir(config.out), resume=True)
        finally:
            if bank is not None:
                bank.close()
        record.status = UnitStatus.DONE
        record.best_status, record.best_speedup = summary.best_status, summary.best_speedup
    # Any error of one unit (a broken task, an evaluator fault, a bad reply) must not end the
    # worker: it is recorded, with its traceback, as the unit's failure.
    except Exception as exc:  # noqa: BLE001
        record.error = f"{type(exc).__name__}: {exc}"
        record.traceback = traceback.format_exc(limit=8)
    record.wall_s = time.monotonic() - started
    return record
