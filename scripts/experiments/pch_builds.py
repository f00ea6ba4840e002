"""What a C++ ``load_inline`` extension's build costs through the evaluator's compile cache
(htam/evaluate/host/compile_cache.py): cold, with the host's precompiled torch header
(host/pch.py), and for a second candidate; and what an object cache keyed on the preprocessed
translation unit could reuse. Each build runs in a fresh process (as a candidate's does), timed
inside it; medians of ``--reps``.

    PYTHONPATH=$PWD python3 scripts/experiments/pch_builds.py [--reps 3] [--cuda]

``--cuda`` adds a CUDA source (nvcc compiles cuda.cu; the PCH applies to main.cpp only) and
times main.cpp and cuda.cu apart from ninja's log (``steps_*``); it needs a CUDA build of torch
(a CPU-only torch builds no CUDA extension, CUDA_HOME or not).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from htam.evaluate.host import pch
from htam.evaluate.sandbox.isolation import PCH_ENV

CPP = """
torch::Tensor scale_add(torch::Tensor x, double a) {{
  auto y = torch::empty_like(x);
  auto xs = x.contiguous().data_ptr<float>();
  auto ys = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) ys[i] = xs[i] * a + {variant};
  return y;
}}
"""
CU = """
#include <torch/extension.h>
__global__ void k(float* y, const float* x, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] + {variant};
}}
torch::Tensor scale_add(torch::Tensor x, double a) {{
  auto y = torch::empty_like(x); int n = x.numel();
  k<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), x.data_ptr<float>(), n); return y;
}}
"""
CHILD = """
import json, sys, time
from htam.evaluate.host.compile_cache import install_compile_cache
from torch.utils import cpp_extension
args = json.loads(sys.argv[2])
spent = install_compile_cache(sys.argv[1])
t0 = time.perf_counter()
cpp_extension.load_inline(**args)
print(json.dumps({"s": time.perf_counter() - t0, "compile_s": spent()}))
"""


def arguments(variant: int, cuda: bool) -> dict:
    if cuda:
        return {
            "name": "scale_add",
            "cpp_sources": "torch::Tensor scale_add(torch::Tensor x, double a);",
            "cuda_sources": CU.format(variant=variant),
            "functions": ["scale_add"],
            "verbose": False,
        }
    return {
        "name": "scale_add",
        "cpp_sources": CPP.format(variant=variant),
        "functions": ["scale_add"],
        "verbose": False,
    }


def _cpu() -> float:
    """CPU seconds of this process's waited-for descendants (the compilers included): unlike
    wall time, hardly changed by other work on a shared machine."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


CPU: dict[str, list[float]] = {}


def build(cache: Path, args: dict, pch_root: Path | None, label: str = "") -> float:
    env = {k: v for k, v in os.environ.items() if k != PCH_ENV}
    if pch_root is not None:
        env[PCH_ENV] = str(pch_root)
    cpu0 = _cpu()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache), json.dumps(args)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    CPU.setdefault(label, []).append(_cpu() - cpu0)
    return json.loads(done.stdout.strip().splitlines()[-1])["s"]


def step_times(cache: Path) -> dict[str, float]:
    """main.o and cuda.cuda.o seconds from the newest build's ninja log."""
    logs = sorted(cache.rglob(".ninja_log"), key=lambda p: p.stat().st_mtime)
    out = {}
    for line in logs[-1].read_text().splitlines()[1:]:
        start, end, _, target, _ = line.split("\t")
        out[target] = (int(end) - int(start)) / 1000
    return out


def preprocessed_digest(build_dir: Path) -> tuple[str, float]:
    """The digest of main.cpp's translation unit (what a TU-keyed object cache would key on)
    and the seconds the preprocessor took."""
    ninja = (build_dir / "build.ninja").read_text().splitlines()
    cflags = next(ln.split("=", 1)[1] for ln in ninja if ln.startswith("cflags ="))
    cflags = " ".join(t for t in cflags.split() if not t.startswith("-include"))
    cflags = cflags.replace("-Winvalid-pch", "").split()
    cflags = [t for t in cflags if not t.endswith("/torch/extension.h")]
    t0 = time.perf_counter()
    tu = subprocess.run(
        ["c++", "-E", "-P", *cflags, str(build_dir / "main.cpp")], capture_output=True, check=True
    ).stdout
    return hashlib.sha256(tu).hexdigest()[:12], time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cuda", action="store_true")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pch-builds-"))
    stamp = time.time_ns()  # sources no earlier run built
    variants = iter(range(stamp, stamp + 1000))
    report: dict[str, object] = {}

    cold, steps = [], []
    for _ in range(opts.reps):
        cold.append(build(work / "cold", arguments(next(variants), opts.cuda), None, "cold"))
        steps.append(step_times(work / "cold"))
    report["cold_s"] = cold
    print("cold", cold, file=sys.stderr, flush=True)

    flags = pch.host_flags(arguments(0, opts.cuda))
    if flags is None:
        sys.exit("no PCH applies to these arguments here (no CUDA home or not gcc?)")
    root = work / "pch"
    t0, cpu0 = time.perf_counter(), _cpu()
    if pch.build(root / pch.variant(flags), flags) is None:
        sys.exit(
            "the header did not precompile: " + (root / pch.variant(flags) / "failed").read_text()
        )
    report["pch_build_once_s"] = time.perf_counter() - t0
    report["pch_build_once_cpu_s"] = _cpu() - cpu0

    warm, pch_steps = [], []
    for _ in range(opts.reps):
        warm.append(
            build(work / "pch-builds", arguments(next(variants), opts.cuda), root, "with_pch")
        )
        pch_steps.append(step_times(work / "pch-builds"))
    report["with_pch_s"] = warm
    print("with pch", warm, file=sys.stderr, flush=True)

    # a second candidate with the same extension: the compile cache loads the first one's build
    same = arguments(next(variants), opts.cuda)
    build(work / "reuse", same, root)
    report["second_candidate_same_extension_s"] = [
        build(work / "reuse", same, root, "second_candidate") for _ in range(opts.reps)
    ]

    # a TU-keyed object cache: two candidates whose main.cpp text is the same (a CUDA solution
    # whose kernel changed, or a C++ one whose comment did) still differ in the TU by the
    # extension's name, which the compile cache derives from all of its arguments
    first, second = sorted((work / "pch-builds").glob("*/*"))[:2]
    digests = [preprocessed_digest(d) for d in (first, second)]
    report["tu_digests_differ"] = digests[0][0] != digests[1][0]
    report["preprocess_s"] = [d[1] for d in digests]

    for key in ("cold_s", "with_pch_s", "second_candidate_same_extension_s", "preprocess_s"):
        report[key.replace("_s", "_median_s")] = round(statistics.median(report[key]), 2)
    report["cpu_s"] = CPU
    report["cpu_median_s"] = {k: round(statistics.median(v), 2) for k, v in CPU.items()}
    report["steps_cold"] = steps
    report["steps_with_pch"] = pch_steps
    report["pch_bytes"] = sum(f.stat().st_size for f in root.rglob("*.gch"))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
