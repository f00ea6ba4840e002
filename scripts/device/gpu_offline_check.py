"""The offline proposer's baseline candidate for every KernelBench level 1-2 task its templates
match, evaluated at the task's real size on the GPU (issue 12's coverage bar: each matched task
with a correct candidate on the GPU). One JSON line per task into OUT/offline_check.jsonl;
tasks already in that file (or in a carried copy given as PREVIOUS) are skipped, so a later call
resumes. Stops starting new tasks after SECONDS. RECHECK (comma-separated parts of task ids)
names tasks done before that are checked again, first, their earlier speedup kept as "before"
(a task the time left no recheck for keeps its earlier row).

    [RECHECK=level1/47_,level1/4_] [KB_TASKS=GLOB,GLOB] python3 scripts/device/gpu_offline_check.py OUT SECONDS [PREVIOUS.jsonl]

KB_TASKS (fnmatch globs on task ids, as gpu_run.sh's kbbench takes) checks only those tasks;
KB_LEVELS (default 1,2) the levels; SHARD=i/n only every n-th task from the i-th (one process per
GPU: scripts/device/gpu_kb_offline.sh). ``--summary FILE.jsonl`` prints the tables of a finished check.

The reference is timed eagerly only (torch.compile of 120 references would take the whole
device budget); speedups are the baseline's, before any strategy of an optimization run.
"""

from __future__ import annotations

import fnmatch
import json
import os
import statistics
import sys
import time
from pathlib import Path

from htam.evaluate import EvalConfig, Evaluator
from htam.offline.pipeline import NoMatch, analyze, baseline, generate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
from kb_common import kb_paths, kb_task  # noqa: E402


def main(out: Path, seconds: float, previous: Path | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    log = out / "offline_check.jsonl"
    done: dict[str, dict] = {}
    for source in (previous, log):
        if source and source.exists():
            for line in source.read_text().splitlines():
                row = json.loads(line)
                done[row["task"]] = row
    again = [part for part in os.environ.get("RECHECK", "").split(",") if part]
    before = {t: done.pop(t) for t in list(done) if any(part in t for part in again)}
    if before or (previous and previous.exists() and previous != log):
        log.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
    t_end = time.time() + seconds
    config = EvalConfig(size="large", time_compile_reference=False)
    levels = tuple(int(v) for v in os.environ.get("KB_LEVELS", "1,2").split(","))
    paths = sorted(kb_paths(levels), key=lambda p: kb_task(p).id not in before)  # stable: in order
    shard, shards = (int(v) for v in os.environ.get("SHARD", "0/1").split("/"))
    paths = paths[shard::shards]
    globs = [g for g in os.environ.get("KB_TASKS", "").split(",") if g]
    if globs:
        paths = [p for p in paths if any(fnmatch.fnmatch(kb_task(p).id, g) for g in globs)]
    with Evaluator("cuda", config) as ev, log.open("a") as f:
        for path in paths:
            task = kb_task(path)
            if task.id in done or time.time() > t_end:
                continue
            try:
                m = analyze(task)
            except NoMatch as err:  # counted apart: the family it lacks is in the message
                row = {"task": task.id, "kind": "none", "status": "no-match", "message": str(err)}
                done[task.id] = row
                f.write(json.dumps(row) + "\n")
                continue
            t0 = time.time()
            kind = f"library+{m.family}" if m.library else m.family
            try:
                r = ev.evaluate(task, generate(m, "triton", baseline(m), []), "triton")
                row = {"task": task.id, "kind": kind, "status": str(r.status),
                       "speedup": r.speedup, "runtime_ms": r.runtime_ms,
                       "ref_ms": r.ref_runtime_ms, "sol_pct": None if r.sol_fraction is None
                       else round(100 * r.sol_fraction, 1),
                       "message": " ".join(r.messages)[:300]}  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - a task the evaluator cannot take is a row
                row = {
                    "task": task.id,
                    "kind": kind,
                    "status": "error",
                    "message": str(exc)[:300],
                }
            row["s"] = round(time.time() - t0, 1)
            if task.id in before:
                row["before"] = before[task.id].get("speedup")
            done[task.id] = row
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row), flush=True)
        for tid, row in before.items():  # out of time before its recheck: the earlier row stays
            if tid not in done:
                done[tid] = row
                f.write(json.dumps(row) + "\n")
    summarize(list(done.values()))


def summarize(rows: list[dict]) -> None:
    ok = [r for r in rows if r["status"] == "ok" and r.get("speedup")]
    print(f"checked {len(rows)}; correct {len(ok)}; statuses "
          f"{ {s: sum(r['status'] == s for r in rows) for s in sorted({r['status'] for r in rows})} }")  # fmt: skip
    for level in ("level1", "level2", "level3"):
        _line(level, [r for r in rows if f"/{level}/" in r["task"]])
    for kind in sorted({r["kind"] for r in rows}):
        _line(kind, [r for r in rows if r["kind"] == kind])
    for r in sorted(rows, key=lambda r: r["task"]):
        if r["status"] not in ("ok", "no-match"):
            print(f"  {r['task']}: {r['status']} {r.get('message', '')[:200]}")


def _line(label: str, rows: list[dict]) -> None:
    sp = [r["speedup"] for r in rows if r["status"] == "ok" and r.get("speedup")]
    mean = f"{statistics.geometric_mean(sp):.3f}" if sp else "-"
    print(f"{label}: {len(sp)} of {len(rows)} checked correct, geomean baseline speedup vs "
          f"eager {mean}, faster than eager {sum(s >= 1 for s in sp)}")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        # shards resumed from one PREVIOUS file each carry its rows: one row per task, the last
        rows = [json.loads(line) for line in Path(sys.argv[2]).read_text().splitlines()]
        summarize(list({r["task"]: r for r in rows}.values()))
        sys.exit(0)
    main(Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
