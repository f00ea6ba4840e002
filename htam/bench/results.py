"""Read a bench directory back into unit rows: the plan, each unit's summary and step records,
and the attempt log. Used by the bench at its end and by ``htam report`` / ``htam compare``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from htam.bench.bench_config import ResultsError, Unit, read_json, read_summary
from htam.bench.ledger import UnitRecord, UnitStatus
from htam.bench.metrics import UnitRow, compute_metrics

__all__ = ["ResultsError", "bench_metrics", "load_plan", "load_rows"]

# Size small is a task's reduced size only where it has one: an unmodified KernelBench file
# (no HTAM_SMALL) runs at its own shapes at either size, and its speedups are its full size's.
_LARGE = "`htam eval TASK RUN_DIR/best.py --size large` times a unit's best.py there"


def small_size_note(reduced: list[str] | None) -> str:
    """The note of a bench timed small, from the ids of its tasks that have a reduced size
    (bench.json's ``reduced_size_tasks``; None for a bench written before it was recorded)."""
    head = "Timed at the small size (a bench's default on the CPU): "
    if reduced is None:
        return (
            f"{head}a task with a reduced size (HTAM_SMALL, as every built-in task has) ran at "
            f"it, and its speedup need not hold at its full size ({_LARGE}); a task file "
            "without HTAM_SMALL (an unmodified KernelBench file) ran at its own shapes."
        )
    if not reduced:
        return (
            f"{head}no task here has a reduced size (HTAM_SMALL), so each ran at its own shapes, "
            "its full size."
        )
    named = ", ".join(reduced[:3]) + (f" and {len(reduced) - 3} more" if len(reduced) > 3 else "")
    return (
        f"{head}{len(reduced)} task(s) ran at their reduced size (HTAM_SMALL: {named}), where a "
        f"speedup need not hold at the full size ({_LARGE}); any other task ran at its own "
        "shapes."
    )


def load_plan(out: Path) -> list[Unit]:
    path = Path(out) / "plan.json"
    if not path.exists():
        raise ResultsError(f"{out}: not a bench directory (no plan.json)")
    return [
        Unit(d["method"], d["seed"], d["task_id"], d["level"], d["steps"]) for d in read_json(path)
    ]


def load_log(out: Path) -> dict[str, UnitRecord]:
    """The last attempt record of every unit in units.jsonl."""
    path = Path(out) / "units.jsonl"
    last: dict[str, UnitRecord] = {}
    if path.exists():
        lines = path.read_text().splitlines()
        for k, line in enumerate(lines):
            try:
                record = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                if k == len(lines) - 1:  # an append cut short by a crash: that attempt is lost
                    break
                raise ResultsError(f"{path}: line {k + 1} is damaged, not JSON") from None
            if record is not None:
                last[record["unit"]] = UnitRecord.from_dict(record)
    return last


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    return [read_json(p) for p in sorted((run_dir / "steps").glob("step_*.json"))]


def unit_row(unit: Unit, out: Path, last: UnitRecord | None) -> UnitRow | None:
    """The row of ``unit``, or None when it never ran."""
    run_dir = unit.run_dir(out)
    row = UnitRow(
        key=unit.key,
        method=unit.method,
        seed=unit.seed,
        task_id=unit.task_id,
        level=unit.level,
        steps_planned=unit.steps,
        state="failed",
        device=last.device if last else None,
        error=last.error if last else None,
    )
    s = read_summary(unit, out)
    if s is None:
        return row if last and last.status == UnitStatus.FAILED else None
    steps = _steps(run_dir)
    # A result served by the evaluation cache carries its original cost: cap each evaluation by
    # its step's wall time so cached re-evaluations are not counted as device time again.
    walls = [
        min(w, st["wall_s"])
        for st in steps
        if (w := st["feedback"].get("breakdown_s", {}).get("wall")) is not None
    ]
    row.state = "complete" if s.steps == unit.steps else "partial"
    row.correct = s.best_status == "ok"
    row.speedup = s.best_speedup if row.correct else None
    row.speedup_vs_compile = s.best_speedup_vs_compile if row.correct else None
    row.curve = list(s.curve)
    row.cost_usd = s.cost_usd
    row.tokens = s.total_tokens
    # The summary's wall time covers only the last invocation of a resumed unit; the steps'
    # times cover every step but not the reference timing: take the larger.
    row.wall_s = max(s.wall_s, sum(st["wall_s"] for st in steps))
    row.eval_s = sum(walls) if walls else row.wall_s
    row.timing_meaningful = s.timing_meaningful
    row.no_strategy = missing_family(steps)
    if row.state == "complete":
        row.error = None
    return row


def missing_family(steps: list[dict[str, Any]]) -> str | None:
    """The family a unit lacked a template for, when every step says no_strategy."""
    if not steps or any(st["feedback"].get("status") != "no_strategy" for st in steps):
        return None
    message = " ".join(steps[0]["feedback"].get("messages") or [])
    _, found, rest = message.partition("(missing family: ")
    return rest.split(" (")[0].rstrip(")") if found else "unknown"


def load_rows(out: Path) -> list[UnitRow]:
    out = Path(out)
    log = load_log(out)
    rows = [unit_row(u, out, log.get(u.key)) for u in load_plan(out)]
    return [r for r in rows if r is not None]


def bench_metrics(out: Path) -> dict[str, Any]:
    """Metrics of the bench in ``out``, with the unit counts of its plan."""
    out = Path(out)
    plan = load_plan(out)
    rows = load_rows(out)
    metrics = compute_metrics(rows)
    metrics["planned_units"] = len(plan)
    metrics["not_run"] = len(plan) - len(rows)
    bench = out / "bench.json"
    recorded = read_json(bench) if bench.exists() else {}
    metrics["bench"] = recorded.get("identity", {})
    if metrics["bench"].get("size") == "small":  # seen: 2.43x here, 0.71x in full
        metrics["notes"].append(small_size_note(recorded.get("reduced_size_tasks")))
    return metrics
