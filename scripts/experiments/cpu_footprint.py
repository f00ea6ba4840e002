"""The evaluation's memory as a multiple of the task's tensor bytes T, measured on the CPU: an
honest candidate judged on ReLU tasks of two sizes, the evaluator's processes sampled every
20 ms (htam/evaluate/peak_memory.py); the multiple is the slope of the peak between the two
sizes, so the processes' own memory (interpreters, torch) drops out.

    PYTHONPATH=$PWD python3 scripts/experiments/cpu_footprint.py [MIB_PER_TENSOR ...]   (default: 64 256)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from htam.evaluate import EvalConfig, Evaluator
from htam.evaluate.peak_memory import PeakSampler, honest, relu_task_source
from htam.tasks import load_task

MIB = 1 << 20


def measure(mib_per_tensor: list[int], memory_limit_mb: int = 6144) -> list[dict]:
    config = EvalConfig(
        memory_limit_mb=memory_limit_mb,
        run_timeout_s=120.0,
        warmup_ms=10.0,
        timing_budget_ms=10.0,
        min_timed=3,
        max_timed=3,
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Evaluator("cpu", config) as ev:
        for mib in mib_per_tensor:
            path = Path(tmp) / f"relu_{mib}mib.py"
            path.write_text(relu_task_source(mib * MIB // 4))
            task = load_task(path)
            ref = ev.reference(task)
            t0 = time.monotonic()
            with PeakSampler() as peak:
                result = ev.evaluate(task, honest(task.source), "cpp", allow_torch=True)
            rows.append(
                {
                    "mib_per_tensor": mib,
                    "tensor_bytes": ref.nbytes,
                    "status": str(result.status),
                    "message": (result.messages or [""])[0][:200],
                    "start_bytes": peak.start,
                    "peak_bytes": peak.peak,
                    "wall_s": time.monotonic() - t0,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def slope(rows: list[dict]) -> float:
    """The peak's growth per byte of tensors between the smallest and the largest task."""
    lo, hi = rows[0], rows[-1]
    return (hi["peak_bytes"] - lo["peak_bytes"]) / (hi["tensor_bytes"] - lo["tensor_bytes"])


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [64, 256]
    rows = measure(sizes)
    print(f"peak per byte of tensors (slope): {slope(rows):.2f}x")
