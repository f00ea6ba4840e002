"""How often a candidate's verdict depends on the judge's random draw, and what the loop learns
of it (issue 39: the offline TF32 GEMM of Robust-KBench mnist_linear_relu was `incorrect` once
in 22 runs, one element off against one planted outlier, and the memory learned it).

Evaluates the offline proposer's candidate of TASK (its baseline, TF32 where K allows; and the
same GEMM with IEEE fp32 products) again and again, uncached, until SECONDS pass. Each
`incorrect` verdict reached on inputs drawn in secret is judged once more, as the loop does
(htam.agent.outcomes.after_redraw), and the line says what the loop keeps: learned (failing
again: the kernel's) or `draw` (passing: named, never learned). One JSON line per evaluation
into OUT/drawn_verdicts.jsonl, then the counts.

    python3 scripts/device/drawn_verdicts.py OUT SECONDS [TASK]   # TASK: mnist_linear_relu

TARGET=cpu runs it on the CPU (the Triton interpreter, the small size): a check of the script.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]


def shared_root(name: str) -> Path:
    places = (ROOT / ".kb" / name, ROOT.parent / "shared" / name, ROOT.parents[1] / "shared" / name)
    return next((p for p in places if p.exists()), places[0])


def candidates(task) -> dict[str, str]:
    from htam.offline.pipeline import analyze, baseline, generate

    match = analyze(task)
    params = baseline(match)
    codes = {"baseline": generate(match, "triton", params, [])}
    if hasattr(params, "tf32"):  # a GEMM: the same kernel with IEEE fp32 products
        codes["ieee"] = generate(match, "triton", dataclasses.replace(params, tf32=False), [])
    return codes


def main(out: Path, seconds: float, name: str) -> None:
    from htam.agent.outcomes import after_redraw, on_drawn_inputs
    from htam.evaluate import EvalConfig, Evaluator
    from htam.tasks import load_suite

    out.mkdir(parents=True, exist_ok=True)
    suite = shared_root("robust-kbench") / "tasks"
    task = next(t for t in load_suite(suite, pattern=name, validate=False) if t.kind != "backward")
    codes = candidates(task)
    counts: Counter = Counter()
    stop = time.time() + seconds
    target = os.environ.get("TARGET", "cuda")
    size = "large" if target == "cuda" else "small"
    config = EvalConfig(size=size, time_compile_reference=False)
    with Evaluator(target, config) as ev, (out / "drawn_verdicts.jsonl").open("a") as log:
        n = 0
        while time.time() < stop:
            which = list(codes)[n % len(codes)]
            n += 1
            first = ev.evaluate(task, codes[which], "triton")
            row = {"task": task.id, "candidate": which, "status": str(first.status)}
            row |= {"runtime_ms": first.runtime_ms, "speedup": first.speedup}
            row["message"] = (first.messages or [""])[0][:300]
            if on_drawn_inputs(first):
                kept = after_redraw(first, ev.evaluate(task, codes[which], "triton"))
                row["kept"] = "draw (not learned)" if kept.fault else "learned: incorrect"
            counts[(which, row["status"], row.get("kept", ""))] += 1
            log.write(json.dumps(row) + "\n")
            log.flush()
            if row["status"] != "ok":
                print(json.dumps(row), flush=True)
    for (which, status, kept), k in sorted(counts.items()):
        print(f"{task.id} {which}: {status} {kept} x{k}")
    for which in codes:
        rows = [
            json.loads(line) for line in (out / "drawn_verdicts.jsonl").read_text().splitlines()
        ]
        ms = sorted(r["runtime_ms"] for r in rows if r["candidate"] == which and r["runtime_ms"])
        if ms:
            print(f"{which}: median {ms[len(ms) // 2]:.4f} ms over {len(ms)} correct evaluations")


if __name__ == "__main__":
    main(
        Path(sys.argv[1]),
        float(sys.argv[2]),
        sys.argv[3] if len(sys.argv) > 3 else "mnist_linear_relu",
    )
