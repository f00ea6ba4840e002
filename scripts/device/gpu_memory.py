"""The evaluation's GPU memory on the largest KernelBench tasks: L1 34_InstanceNorm, L1 19_ReLU
and the five level 1-3 tasks with the largest tensors (scripts/device/kb_tensor_bytes.py ranked them on
the meta device: 45_Average_Pooling_2D 16.1 GiB, 38_L1Norm_ and 39_L2Norm_ 16 GiB, then
35_GroupNorm_, 34_InstanceNorm, 36_RMSNorm_ and 37_FrobeniusNorm_ at 14 GiB), each judged with
an honest candidate (the reference itself, timed with allow_torch), printing the status, the peak
GPU memory the card showed (nvidia-smi, every 50 ms) and that peak as a multiple of the task's
tensor bytes, against htam.evaluate.footprint's estimate.

    python3 scripts/device/gpu_memory.py OUT [TASK_STEM ...]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kb_common import kb_task, kernelbench_root  # noqa: E402

from htam.evaluate import EvalConfig, Evaluator, footprint  # noqa: E402
from htam.tasks.task import TaskError  # noqa: E402

TASKS = [
    "level1/34_InstanceNorm",
    "level1/19_ReLU",
    "level1/45_Average_Pooling_2D",
    "level1/38_L1Norm_",
    "level1/39_L2Norm_",
    "level1/35_GroupNorm_",
    "level1/36_RMSNorm_",
]
GIB = 2**30


class Peak:
    """The card's used memory, polled by nvidia-smi while a block runs: its maximum in bytes."""

    def __enter__(self) -> Peak:
        self.values: list[int] = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
             "-lms", "50"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        time.sleep(0.3)
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.values.append(int(line.strip()) << 20)

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)
        self.proc.terminate()
        self.proc.wait()
        self.thread.join(timeout=2)

    @property
    def peak(self) -> int:
        return max(self.values, default=0)


def passthrough(source: str) -> str:
    return re.sub(r"\bModel\b", "ModelNew", source)


def main(out: Path, stems: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    root = kernelbench_root()
    config = EvalConfig(
        size="large",
        cache_dir=out / "cache",
        time_compile_reference=False,
        timing_budget_ms=200.0,
        min_timed=3,
        max_timed=8,
    )
    rows = []
    with Evaluator("cuda", config) as ev:
        with Peak() as idle:
            time.sleep(0.5)
        base = idle.peak
        print(
            f"{ev.device_name}: {ev.gpu_total / GIB:.1f} GiB, idle evaluator {base / GIB:.1f} GiB"
        )
        for stem in stems:
            task = kb_task(root / f"{stem}.py")
            t0 = time.monotonic()
            row = {"task": stem}
            try:
                with Peak() as ref_peak:
                    ref = ev.reference(task)
                row["tensor_gib"] = ref.nbytes / GIB
                row["reference_peak_gib"] = ref_peak.peak / GIB
                with Peak() as judged:
                    result = ev.evaluate(task, passthrough(task.source), "cuda", allow_torch=True)
                row.update(
                    status=str(result.status),
                    message=(result.messages or [""])[0][:300],
                    infrastructure=result.infrastructure,
                    peak_gib=judged.peak / GIB,
                    multiple=(judged.peak - base) / ref.nbytes,
                    estimate=footprint.needed_bytes(ref.nbytes) / GIB,
                )
            except TaskError as exc:
                row.update(status="refused", message=str(exc)[:300])
            row["wall_s"] = time.monotonic() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "gpu_memory.json").write_text(json.dumps(rows, indent=2))
    print(f"{'task':32} {'tensors':>8} {'status':>10} {'peak':>8} {'x tensors':>9} {'estimate':>8}")
    for r in rows:
        print(
            f"{r['task']:32} {r.get('tensor_gib', 0):7.1f}G {r['status']:>10} "
            f"{r.get('peak_gib', 0):7.1f}G {r.get('multiple', 0):9.2f} {r.get('estimate', 0):7.1f}G"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] or TASKS)
