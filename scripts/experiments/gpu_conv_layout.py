"""Why torch.compile beats eager on KernelBench's convolution tasks: each level-2 task with a
convolution, timed at its real size as eager (NCHW, the reference), as eager in channels-last
memory (inputs converted inside the timed call, parameters once), and torch.compile where asked.
One JSON line per task; CUDA events, median of 15 after 3 warm-ups, an L2 flush before each.

    python3 scripts/experiments/gpu_conv_layout.py OUT.jsonl SECONDS [--compile]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn.modules.conv import _ConvNd

from htam.evaluate.judge.trusted_jobs import build, inputs_for
from htam.tasks.module import load_task_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/, for kb_common
from kb_common import kb_paths, timer, write_row  # noqa: E402

ONCE = timer("cuda")


def timed(fn, args, n=15):
    for _ in range(3):
        fn(*args)
    return statistics.median(ONCE(fn, args) for _ in range(n))


def _weights(convs: list, fmt) -> None:
    for m in convs:
        m.weight.data = m.weight.data.contiguous(memory_format=fmt)


def _to(fmt):
    return lambda x: x.contiguous(memory_format=fmt)


def _channels_last_call(model, fmt):
    """The model on inputs converted inside the call (4-d or 5-d ones, as ``fmt`` takes)."""
    rank = 4 if fmt == torch.channels_last else 5
    return lambda *xs: model(
        *[x.contiguous(memory_format=fmt) if x.dim() == rank else x for x in xs]
    )


def main(out: Path, seconds: float, compile_too: bool) -> None:
    t_end = time.time() + seconds
    done = (
        {json.loads(line)["task"] for line in out.read_text().splitlines()}
        if out.exists()
        else set()
    )
    with out.open("a") as f:
        for p in kb_paths(levels=(2,)):
            if "conv" not in p.stem.lower() or p.stem in done or time.time() > t_end:
                continue
            row = {"task": p.stem}
            try:
                with torch.no_grad():
                    module = load_task_module(p.read_text(), "large")
                    model = build(module.Model, list(module.get_init_inputs()), 0, "cuda")
                    inputs = inputs_for(module, 1, "cuda")
                    torch.cuda.reset_peak_memory_stats()
                    row["eager_ms"] = timed(model, inputs)
                    row["peak_gib_no_grad"] = torch.cuda.max_memory_allocated() / 2**30
                    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(inputs[0].dim())
                    if fmt is not None:
                        convs = [m for m in model.modules() if isinstance(m, _ConvNd)]
                        _weights(convs, fmt)
                        row["cl_ms"] = timed(_channels_last_call(model, fmt), inputs)
                        xc = inputs[0].contiguous(memory_format=fmt)
                        row["conv_cl_ms"] = timed(convs[0], [xc])
                        _weights(convs, torch.contiguous_format)
                        row["conv_ms"] = timed(convs[0], [inputs[0]])
                        row["to_cl_ms"] = timed(_to(fmt), [inputs[0]])
                    if compile_too:
                        row["compile_ms"] = timed(torch.compile(model), inputs)
                torch.cuda.reset_peak_memory_stats()
                y = model(*inputs)
                row["peak_gib_grad"] = torch.cuda.max_memory_allocated() / 2**30
                del y
            except Exception as exc:  # noqa: BLE001 - a row says why
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            torch.cuda.empty_cache()
            write_row(f, row, 3)


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]), "--compile" in sys.argv)
