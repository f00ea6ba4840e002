"""The offline proposer's table from a bench directory (issue: Offline proposer): per task, the
best candidate of method ``htam`` (each seed; finished units only), its speedup vs eager and vs
torch.compile and its % of speed of light; geometric means over the tasks it handles; the share
faster than compile.

    python3 scripts/device/offline_table.py BENCH_DIR [METHOD]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from htam.bench.bench_config import read_summary, unit_done
from htam.bench.metrics import geomean
from htam.bench.results import load_plan


def fmt(v: float | None, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def main(out: Path, method: str) -> None:
    rows: dict[str, list[dict]] = {}
    unfinished = []
    for unit in load_plan(out):
        if unit.method != method:
            continue
        if unit_done(unit, out):
            rows.setdefault(unit.task_id, []).append(read_summary(unit, out))
        elif read_summary(unit, out) is not None:
            unfinished.append(unit.key)
    print(f"method {method}; each value is the mean over seeds of the best correct candidate")
    print(f"{'task':36s} {'seeds':>5s} {'status':>8s} {'x eager':>8s} {'x compile':>9s} {'% SOL':>6s}")
    eager, compiled, sol_rows = [], [], []
    for task_id, summaries in sorted(rows.items()):
        ok = [s for s in summaries if s["best_status"] == "ok" and s["best_speedup"]]
        if not ok:
            print(f"{task_id:36s} {len(summaries):5d} {summaries[0]['best_status']:>8s}")
            continue
        e = statistics.mean(s["best_speedup"] for s in ok)
        c_values = [s["best_speedup_vs_compile"] for s in ok if s["best_speedup_vs_compile"]]
        c = statistics.mean(c_values) if c_values else None
        sol = statistics.mean(100 * s["best_sol_fraction"] for s in ok if s["best_sol_fraction"])
        eager.append(e)
        if c is not None:
            compiled.append(c)
        sol_rows.append((task_id, sol))
        print(f"{task_id:36s} {len(ok):5d} {'ok':>8s} {e:8.2f} {fmt(c):>9s} {sol:6.1f}")
    faster = sum(c > 1 for c in compiled)
    print(f"geomean vs eager {fmt(geomean(eager))} over {len(eager)} tasks; "
          f"vs torch.compile {fmt(geomean(compiled))} over {len(compiled)}; "
          f"faster than torch.compile on {faster}/{len(compiled)}")
    if unfinished:
        print(f"left out, unfinished: {', '.join(unfinished)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "htam")
