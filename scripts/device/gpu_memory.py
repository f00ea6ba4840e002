"""The evaluation's GPU memory on the largest KernelBench tasks: L1 34_InstanceNorm, L1 19_ReLU
and the five level 1-3 tasks with the largest tensors (scripts/device/kb_tensor_bytes.py ranked them on
the meta device: 45_Average_Pooling_2D 16.1 GiB, 38_L1Norm_ and 39_L2Norm_ 16 GiB, then
35_GroupNorm_, 34_InstanceNorm, 36_RMSNorm_ and 37_FrobeniusNorm_ at 14 GiB), each judged with
an honest candidate (the reference itself, timed with allow_torch), printing the status, the peak
GPU memory the card showed (nvidia-smi, every 50 ms), that peak as a multiple of the task's
tensor bytes against htam.evaluate.footprint's estimate, and each process's own peak (the
judge, the two runners, the fork server's standbys: nvidia-smi's compute apps). It writes
OUT/gpu_memory.json and OUT/gpu_memory.md.

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
    """The card's used memory, polled by nvidia-smi while a block runs: its maximum in bytes,
    and each process's largest (by pid)."""

    def __enter__(self) -> Peak:
        self.values: list[int] = []
        self.by_pid: dict[int, int] = {}
        self.procs = [
            subprocess.Popen(
                ["nvidia-smi", query, "--format=csv,noheader,nounits", "-lms", "50"],
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for query in ("--query-gpu=memory.used", "--query-compute-apps=pid,used_memory")
        ]
        self.threads = [
            threading.Thread(target=read, args=(proc,), daemon=True)
            for read, proc in zip((self._read, self._read_apps), self.procs, strict=True)
        ]
        for thread in self.threads:
            thread.start()
        time.sleep(0.3)
        return self

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout or ():
            if line.strip().isdigit():
                self.values.append(int(line.strip()) << 20)

    def _read_apps(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout or ():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                pid, used = int(parts[0]), int(parts[1]) << 20
                self.by_pid[pid] = max(self.by_pid.get(pid, 0), used)

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)
        for proc in self.procs:
            proc.terminate()
            proc.wait()
        for thread in self.threads:
            thread.join(timeout=2)

    @property
    def peak(self) -> int:
        return max(self.values, default=0)

    def processes_gib(self) -> list[float]:
        """Each process's peak, largest first, in GiB."""
        return sorted((round(v / GIB, 2) for v in self.by_pid.values()), reverse=True)


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
                    processes_gib=judged.processes_gib(),
                )
            except TaskError as exc:
                row.update(status="refused", message=str(exc)[:300])
            row["wall_s"] = time.monotonic() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "gpu_memory.json").write_text(json.dumps(rows, indent=2))
    table = summary(rows, ev.device_name, base)
    (out / "gpu_memory.md").write_text(table)
    print(table)


def summary(rows: list[dict], device: str, base: int) -> str:
    """The rows as a markdown table."""
    lines = [
        f"{device}, idle evaluator {base / GIB:.1f} GiB; footprint.py's model: "
        f"{footprint.NEEDED_MULTIPLE:g}x the tensors and "
        f"{footprint.FIXED_BYTES / GIB:.2f} GiB",
        "",
        "| task | tensors | status | peak | x tensors | estimate | within | processes (GiB) | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        status = r["status"] + (f" ({r['message'][:80]})" if r["status"] != "ok" else "")
        within = "yes" if r.get("peak_gib", 0) <= r.get("estimate", 0) else "no"
        lines.append(
            f"| {r['task']} | {r.get('tensor_gib', 0):.2f} GiB | {status} | "
            f"{r.get('peak_gib', 0):.1f} GiB | {r.get('multiple', 0):.2f} | "
            f"{r.get('estimate', 0):.1f} GiB | {within} | {r.get('processes_gib', [])} | "
            f"{r['wall_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:] or TASKS)
