"""The bench parent: plans the units, skips finished ones, hands the rest to an executor (the
local pool, or Ray with ``--ray``: htam.bench.executor) and writes the reports.

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
import time
from collections import deque

from htam.bench.banks import prepare_shared
from htam.bench.bench_config import (
    BenchConfig,
    BenchError,
    Unit,
    plan_units,
    read_json,
    unit_done,
)
from htam.bench.executor import executor_for
from htam.bench.ledger import BenchOutcome, Event, Ledger
from htam.tasks.module import has_small_size

__all__ = ["BenchError", "BenchOutcome", "run_bench", "write_plan"]


def _check_resume(config: BenchConfig, resume: bool) -> None:
    path = config.out / "bench.json"
    if not path.exists():
        return
    if not resume:
        raise BenchError(
            f"{config.out} already holds a bench; pass --resume to continue it "
            "or choose another --out"
        )
    old = read_json(path).get("identity", {})
    changed = [k for k, v in config.identity().items() if old.get(k) != v]
    if changed:
        raise BenchError(f"cannot resume {config.out}: {', '.join(changed)} changed")


def _check_plan(config: BenchConfig, units: list[Unit]) -> None:
    """A resumed bench keeps every unit it planned: one resumed with fewer tasks, methods or
    seeds rewrote its plan and its report lost the units left out."""
    path = config.out / "plan.json"
    if not path.exists():
        return
    planned = {u["key"] for u in read_json(path)}
    left_out = planned - {u.key for u in units}
    if left_out:
        raise BenchError(
            f"cannot resume {config.out}: {len(left_out)} of its {len(planned)} planned units "
            f"are not in this one (e.g. {min(left_out)}); give the tasks, methods and seeds "
            "it was started with (more are fine), or another --out"
        )


def write_plan(config: BenchConfig, units: list[Unit], reduced: list[str] | None = None) -> None:
    """bench.json (its identity, its config and ``reduced``: the ids of its tasks that have a
    reduced size, which the report's note on the small size names) and plan.json."""
    from htam.agent.rundir import write_atomic

    config.out.mkdir(parents=True, exist_ok=True)
    bench = {"identity": config.identity(), "config": json.loads(config.to_json())}
    if reduced is not None:
        bench["reduced_size_tasks"] = reduced
    write_atomic(config.out / "bench.json", json.dumps(bench, indent=2))
    write_atomic(config.out / "plan.json", json.dumps([u.to_dict() for u in units], indent=2))


def run_bench(
    config: BenchConfig,
    tasks: list,
    resume: bool = False,
    on_event: Event | None = None,
    report: bool = True,
) -> BenchOutcome:
    """Run every (method, seed, task) unit of ``tasks``, then (``report``) write metrics.json,
    report.md and report.html; returns what happened this time."""
    started = time.monotonic()
    _check_resume(config, resume)
    units = plan_units(tasks, config)
    _check_plan(config, units)
    write_plan(config, units, [t.id for t in tasks if has_small_size(t.source)])
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
        # The executor's workers set FIXED_ENV themselves (htam.bench.local_worker.device_env):
        # the caller's environment is left as it was.
        ledger = Ledger(config.out, outcome, on_event or (lambda *_: None))
        executor_for(config, by_id, pending, ledger).run()
    outcome.wall_s = time.monotonic() - started
    if report:
        from htam.bench.report import write_report

        outcome.report = write_report(config.out)
    return outcome
