"""The evaluator's GPU bars in one run: isolation, honest and cheating candidates, overhead per
candidate with a cached build, timing stability, the reference against itself, and KernelBench's
19_ReLU at its real size (6.4 GB in, 6.4 GB out) with the evaluator's peak host memory.

    python3 scripts/device/gpu_evaluator.py OUT_DIR
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import psutil

from htam.evaluate import EvalConfig, Evaluator
from htam.tasks import load_task

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "evaluate" / "fixtures"
BUILTIN = ROOT / "htam" / "tasks" / "builtin"
KB = next(p for p in (ROOT / ".kb" / "kernelbench" / "KernelBench", ROOT.parent / "shared" / "kernelbench" / "KernelBench") if p.exists())


class PeakRSS:
    """Largest summed resident memory of this process and all its descendants."""

    def __init__(self):
        self.peak, self._stop = 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = psutil.Process()
        while not self._stop.wait(0.05):
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def line(name, r, wall):
    return (
        f"{name:34s} {r.status:13s} speedup={r.speedup or 0:.3f} "
        f"runtime={r.runtime_ms or 0:.4f}ms ref={r.ref_runtime_ms or 0:.4f}ms wall={wall:.2f}s "
        f"{(' | '.join(r.messages))[:150]}"
    )


def main(out: Path) -> None:
    report: dict = {}
    cfg = EvalConfig(size="large", timing_budget_ms=300.0, min_timed=10)
    with Evaluator("cuda", cfg) as ev:
        print(ev.isolation)
        report["isolation"] = ev.isolation
        relu = load_task(BUILTIN / "level1" / "1_ReLU.py")
        for name, lang in [("honest_relu_cuda.py", "cuda"), ("honest_relu_triton.py", "triton")]:
            code = (FIX / name).read_text()
            runs = []
            for i in range(5):
                t0 = time.time()
                r = ev.evaluate(relu, code, lang)
                runs.append((r, time.time() - t0))
                print(line(f"{name}#{i}", r, runs[-1][1]), flush=True)
            last = runs[-1][0]
            print("  breakdown (cached build):", {k: round(v, 3) for k, v in last.breakdown_s.items()})
            medians = [r.runtime_ms for r, _ in runs if r.runtime_ms]
            report[name] = {
                "statuses": [str(r.status) for r, _ in runs],
                "medians_ms": medians,
                "spread": max(medians) / min(medians) if medians else None,
                "speedups": [r.speedup for r, _ in runs],
                "walls_s": [w for _, w in runs],
                "breakdown": last.breakdown_s,
            }
            print(f"  spread of medians {report[name]['spread']}")
        for name in ("cheat_side_stream.py", "fault_illegal_memory.py", "wrong_last_element_triton.py"):
            lang = "triton" if "triton" in name else "cuda"
            t0 = time.time()
            r = ev.evaluate(relu, (FIX / name).read_text(), lang)
            print(line(name, r, time.time() - t0), flush=True)
            report[name] = {"status": str(r.status), "messages": r.messages}
        selfs = {}
        for task_path in ("level1/1_ReLU.py", "level1/6_Softmax.py", "level2/5_Elementwise_Chain.py", "level1/14_Matmul.py"):
            task = load_task(BUILTIN / task_path)
            code = re.sub(r"\bModel\b", "ModelNew", task.source)
            sp = [ev.evaluate(task, code, "cuda", allow_torch=True).speedup for _ in range(3)]
            selfs[task_path] = sp
            print(f"reference vs itself {task_path}: {[round(s or 0, 4) for s in sp]}", flush=True)
        report["self"] = selfs
    big = EvalConfig(size="large", timing_budget_ms=300.0, min_timed=10)
    with Evaluator("cuda", big) as ev:
        kb = load_task(KB / "level1" / "19_ReLU.py")
        with PeakRSS() as peak:
            t0 = time.time()
            ref = ev.reference(kb)
            print(f"19_ReLU reference: eager {ref.timing['median_ms']:.3f} ms, compile "
                  f"{(ref.compile_timing or {}).get('median_ms', 0):.3f} ms ({time.time() - t0:.1f} s)")
            rows = []
            for name in ("honest_relu_triton.py", "honest_relu_triton.py", "wrong_last_element_triton.py"):
                t0 = time.time()
                r = ev.evaluate(kb, (FIX / name).read_text(), "triton")
                rows.append((name, str(r.status), r.speedup, time.time() - t0, r.messages))
                print(line("19_ReLU " + name, r, time.time() - t0), flush=True)
        print(f"19_ReLU peak host RSS of the evaluator's processes: {peak.peak / 2**30:.2f} GiB")
        report["kb19"] = {"rows": rows, "peak_rss_gib": peak.peak / 2**30,
                          "ref_eager_ms": ref.timing["median_ms"]}
    (out / "gpu_evaluator.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
