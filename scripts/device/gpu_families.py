"""The offline families of issue 40 (scan, pool, losses, einsum, a float argument, a view of an
input) on their KernelBench tasks at the real size, on a GPU: correct, and how fast against
eager PyTorch and torch.compile. For each task: the Triton baseline and the Triton code with
every applicable strategy, compared by the evaluator's comparison (htam.evaluate.judge.compare), timed
with triton.testing.do_bench (median ms). One JSON line per task into OUT/families.jsonl and a
markdown table OUT/families.md; stops starting tasks after SECONDS.

    python3 scripts/device/gpu_families.py OUT SECONDS [GLOB,GLOB...|level2]

GLOBs (fnmatch on ``level1/<stem>``, ``level2/<stem>``) default to the level-1 tasks of the
families, in task order; ``level2`` names the level-2 tasks the run-time constructor values
opened (``LEVEL2``).
Not the evaluator's timing protocol (no L2 flush between calls): a screen, quoted as such.
"""

from __future__ import annotations

import fnmatch
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository, for htam
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common

from kb_common import kb_paths, kb_task  # noqa: E402

from htam.evaluate.eval_config import TOLERANCES  # noqa: E402
from htam.evaluate.judge.compare import compare_tensor  # noqa: E402
from htam.offline.check import load_solution  # noqa: E402
from htam.offline.pipeline import analyze, applicable, apply_strategy, baseline, generate  # noqa: E402
from htam.tasks.module import load_task_module  # noqa: E402

DEFAULT = (
    "level1/5_*,level1/12_*,level1/96_*,level1/94_*,level1/4[1-6]_*,level1/89_*,level1/9[0-3]_*,"
    "level1/3[35]_*,level1/11_*"
)
# level 2 tasks the run-time constructor values opened to the library path (a second run)
LEVEL2 = "level2/8_*,level2/13_*,level2/35_*,level2/38_*,level2/44_*,level2/96_*"


def _code(m, strategies: list[str]) -> str:
    params = baseline(m, "triton")
    for s in strategies:
        params = apply_strategy(s, params, m, "triton")
    return generate(m, "triton", params, strategies)


def _cuda(x):
    return x.cuda() if isinstance(x, torch.Tensor) else x


def run_task(path: Path) -> dict:
    import triton.testing

    task = kb_task(path)
    m = analyze(task)
    module = load_task_module(task.source, "large")
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).cuda()
    torch.manual_seed(1)
    inputs = [_cuda(x) for x in module.get_inputs()]
    row = {"task": f"{path.parent.name}/{path.stem}", "family": m.family}
    with torch.no_grad():
        expected = ref(*inputs)
        row["eager_ms"] = triton.testing.do_bench(lambda: ref(*inputs))
        compiled = torch.compile(ref)
        compiled(*inputs)
        row["compile_ms"] = triton.testing.do_bench(lambda: compiled(*inputs))
        everything = [
            s for s in applicable(m, "triton") if s != "parallel_mapping.block_size_tuning"
        ]
        for label, strategies in (("base", []), ("all", everything)):
            sol = load_solution(_code(m, strategies))
            torch.manual_seed(0)
            new = sol.ModelNew(*init).cuda()
            got = new(*inputs)
            why = compare_tensor(got, expected, TOLERANCES)
            row[f"{label}_ok"] = why is None
            row[f"{label}_why"] = why or ""
            row[f"{label}_ms"] = triton.testing.do_bench(lambda new=new: new(*inputs))
    best = (
        min(row[f"{k}_ms"] for k in ("base", "all") if row[f"{k}_ok"])
        if (row["base_ok"] or row["all_ok"])
        else math.inf
    )
    row["vs_eager"] = row["eager_ms"] / best
    row["vs_compile"] = row["compile_ms"] / best
    return row


def table(rows: list[dict]) -> str:
    head = "| task | family | eager ms | compile ms | base ms | all ms | correct | vs eager | vs compile |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['task']} | - | - | - | - | - | ERROR {r['error'][:60]} | - | - |")
            continue
        ok = f"{'y' if r['base_ok'] else 'N'}/{'y' if r['all_ok'] else 'N'}"
        lines.append(
            f"| {r['task']} | {r['family']} | {r['eager_ms']:.3f} | {r['compile_ms']:.3f} | "
            f"{r['base_ms']:.3f} | {r['all_ms']:.3f} | {ok} | {r['vs_eager']:.2f}x | "
            f"{r['vs_compile']:.2f}x |"
        )
    good = [r for r in rows if "error" not in r and math.isfinite(r["vs_eager"])]
    if good:
        ge = math.exp(sum(math.log(r["vs_eager"]) for r in good) / len(good))
        gc = math.exp(sum(math.log(r["vs_compile"]) for r in good) / len(good))
        wins = sum(r["vs_compile"] >= 1.0 for r in good)
        lines.append(
            f"\ngeomean {ge:.2f}x vs eager, {gc:.2f}x vs torch.compile; at or above compile on "
            f"{wins} of {len(good)}; correct (some candidate) on {len(good)} of {len(rows)}"
        )
    return "\n".join(lines) + "\n"


def main(out: Path, seconds: float, globs: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    start, rows = time.time(), []
    patterns = globs.split(",")
    paths = [
        p
        for p in kb_paths((1, 2))
        if any(fnmatch.fnmatch(f"{p.parent.name}/{p.stem}", g) for g in patterns)
    ]
    with open(out / "families.jsonl", "a") as f:
        for path in paths:
            if time.time() - start > seconds:
                print(f"time is up: {path.stem} and later not run", flush=True)
                break
            try:
                row = run_task(path)
            except Exception as err:  # report and go on: one broken task must not hide others
                row = {
                    "task": f"{path.parent.name}/{path.stem}",
                    "error": f"{type(err).__name__}: {err}",
                }
            torch.cuda.empty_cache()
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps(row), flush=True)
    text = table(rows)
    (out / "families.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    globs = sys.argv[3] if len(sys.argv) > 3 else DEFAULT
    sys.exit(main(Path(sys.argv[1]), float(sys.argv[2]), LEVEL2 if globs == "level2" else globs))
