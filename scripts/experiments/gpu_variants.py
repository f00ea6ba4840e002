"""Offline candidates of KernelBench tasks side by side at their real size, outside the
evaluator (a quick comparison of template variants before an evaluator run): each variant's
relative L2 error against the reference and its time against eager, interleaved in one process
(CUDA events, an L2 flush before each call, median of 20 rounds after 3 warm-up rounds), and on
the GPU its share of memory speed of light: the bytes of the inputs, parameters and output at
the bandwidth of a 1 GiB copy measured in the same process.

    python3 scripts/experiments/gpu_variants.py OUT.jsonl SECONDS 'GLOB,GLOB' 'STRATEGY+STRATEGY' ...

A variant is '+'-joined strategy ids applied to the baseline ('' is the baseline itself),
``file:PATH`` (a solution file; ``{stem}`` in PATH is the task file's stem), or ``compile``:
torch.compile of the reference, timed in the same rounds.
"""

from __future__ import annotations

import fnmatch
import statistics
import sys
import time
from pathlib import Path

import torch

from htam.evaluate.judge.trusted_jobs import build, inputs_for
from htam.offline.pipeline import NoMatch, analyze, apply_strategy, baseline, generate
from htam.tasks.module import load_task_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
from kb_common import kb_paths, kb_task, load_solution, timer, write_row  # noqa: E402

# On the CPU (interpreter, KernelBench's sizes unless KB_ROOT names smaller copies): a smoke test.
DEV = "cuda" if torch.cuda.is_available() else "cpu"
SIZE = "large" if DEV == "cuda" else "small"


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _tensors(v)] if isinstance(value, (list, tuple)) else []


def copy_bandwidth(once) -> float | None:
    """Bytes a millisecond of a 1 GiB device-to-device copy (read and write), median of 10."""
    if DEV != "cuda":
        return None
    src = torch.empty(1 << 28, device=DEV)
    dst = torch.empty_like(src)
    ms = statistics.median(once(torch.Tensor.copy_, [dst, src]) for _ in range(10))
    return 2 * (1 << 30) / ms


def main(out: Path, seconds: float, pattern: str, variants: list[str]) -> None:
    t_end = time.time() + seconds
    once = timer(DEV)
    bandwidth = copy_bandwidth(once)

    with out.open("a") as f:
        for path in kb_paths():
            tid = f"{path.parent.name}/{path.stem}"
            if not any(fnmatch.fnmatch(tid, g) for g in pattern.split(",")) or time.time() > t_end:
                continue
            task = kb_task(path)
            try:
                m = analyze(task)
            except NoMatch:
                continue
            row: dict = {"task": tid}
            try:
                module = load_task_module(task.source, SIZE)
                init = list(module.get_init_inputs())
                ref = build(module.Model, init, 0, DEV)
                inputs = inputs_for(module, 1, DEV)
                fns = {"eager": ref}
                with torch.no_grad():
                    expected = ref(*inputs)
                    tensors = [*inputs, *ref.parameters(), *ref.buffers(), *_tensors(expected)]
                    nbytes = sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))
                    for v in variants:
                        ids = [s for s in v.split("+") if s]
                        if v == "compile":
                            fns[v] = torch.compile(ref)
                            continue
                        try:
                            if v.startswith("file:"):  # a solution written beforehand
                                code = Path(v[5:].format(stem=path.stem)).read_text()
                            else:
                                params = baseline(m)
                                for s in ids:
                                    params = apply_strategy(s, params, m, "triton")
                                code = generate(m, "triton", params, ids)
                            cand = load_solution(code)
                            new = build(cand.ModelNew, init, 0, DEV)
                            got = new(*inputs)
                            rel = (
                                (got.double() - expected.double()).norm()
                                / expected.double().norm().clamp_min(1e-30)
                            ).item()
                            row[f"{v or 'baseline'}:rel_l2"] = rel
                            fns[v or "baseline"] = new
                            del got
                        except Exception as exc:  # noqa: BLE001 - the row says why
                            row[f"{v or 'baseline'}:error"] = (
                                f"{type(exc).__name__}: {str(exc)[:160]}"
                            )
                    del expected
                    names = list(fns)
                    for k in names:
                        for _ in range(3):
                            fns[k](*inputs)
                    times = {k: [] for k in names}
                    for i in range(20):
                        for k in names if i % 2 == 0 else reversed(names):
                            times[k].append(once(fns[k], inputs))
                eager = statistics.median(times["eager"])
                row["eager_ms"] = eager
                for k in names:
                    ms = statistics.median(times[k])
                    row[f"{k}:x"] = eager / ms
                    if bandwidth:
                        row[f"{k}:sol"] = nbytes / bandwidth / ms
            except Exception as exc:  # noqa: BLE001
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            if DEV == "cuda":
                torch.cuda.empty_cache()
            write_row(f, row)


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
