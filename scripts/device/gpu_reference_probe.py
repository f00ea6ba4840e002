"""One task's offline baseline through the evaluator at its real size, every message printed
whole (the offline check keeps 300 characters).

    python3 scripts/device/gpu_reference_probe.py level2/90_Conv3d_LeakyReLU_Sum_Clamp_GELU ...
"""

from __future__ import annotations

import sys
from pathlib import Path

from htam.evaluate import EvalConfig, Evaluator
from htam.offline.pipeline import analyze, baseline, generate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
from kb_common import kb_task, kernelbench_root  # noqa: E402

config = EvalConfig(size="large", time_compile_reference=False)
print("memory limit (MB):", config.memory_limit(), flush=True)
with Evaluator("cuda", config) as ev:
    for name in sys.argv[1:]:
        task = kb_task(kernelbench_root() / f"{name}.py")
        m = analyze(task)
        r = ev.evaluate(task, generate(m, "triton", baseline(m), []), "triton")
        print(name, r.status, r.speedup, flush=True)
        for line in r.messages:
            print("  ", line, flush=True)
