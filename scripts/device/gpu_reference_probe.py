"""One task's offline baseline through the evaluator at its real size, every message printed
whole (the offline check keeps 300 characters), with the escape figures of its timing. A task is
a KernelBench file under its level (``level2/90_...``) or a Robust-KBench task
(``robust-kbench/NAME``); ``--repeat N`` judges it N times (the cache is not consulted).

    python3 scripts/device/gpu_reference_probe.py [--repeat 3] level2/90_Conv3d_LeakyReLU_Sum_Clamp_GELU ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from htam.evaluate import EvalConfig, Evaluator
from htam.offline.pipeline import analyze, baseline, generate
from htam.tasks import load_suite

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
from kb_common import kb_task, kernelbench_root  # noqa: E402

ROBUST = Path(__file__).resolve().parents[2] / ".kb" / "robust-kbench" / "tasks"


def task_of(name: str):
    if name.startswith("robust-kbench/"):
        suite = ROBUST if ROBUST.exists() else kernelbench_root().parents[1] / "robust-kbench/tasks"
        stem = name.split("/", 1)[1]
        return next(t for t in load_suite(suite, pattern=stem, validate=False) if t.id == name)
    return kb_task(kernelbench_root() / f"{name}.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    config = EvalConfig(size="large", time_compile_reference=False)
    print("memory limit (MB):", config.memory_limit(), flush=True)
    with Evaluator("cuda", config) as ev:
        for name in args.tasks:
            task = task_of(name)
            m = analyze(task)
            code = generate(m, "triton", baseline(m), [])
            for _ in range(args.repeat):
                r = ev.evaluate(task, code, "triton")
                print(name, r.status, r.speedup, r.runtime_ms, r.ref_runtime_ms, flush=True)
                for line in r.messages + r.flags:
                    print("  ", line, flush=True)


if __name__ == "__main__":
    main()
