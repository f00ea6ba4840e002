"""The processes of ``htam tasks check``: each owns one ``Evaluator`` and runs one reference at a
time, either as a *warm-up* (fills the shared torch.compile caches; its timing is thrown away) or
as the *measurement* (the one timed run of the task, which the record is made of).

Started by a ``ProcessPoolExecutor`` with the spawn context (the parent may hold torch state).
An evaluator that cannot start is not an exception here: it would break the whole pool with a
message that no longer says why, so it is kept and returned by every call instead.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing.util
import os
import signal
import time
import warnings
from pathlib import Path
from typing import Any

from htam.bench import markdown
from htam.signals import exit_on_sigterm
from htam.tasks.task import Task, TaskError
from htam.vocab import Size

_STATE: dict[str, Any] = {}
FIELDS = (
    "status",
    "cause",
    "detail",
    "eager_ms",
    "compile_ms",
    "ratio",
    "flops",
    "bytes",
    "dtypes",
    "bound_ms",
    "bound",
    "sol_eager",
    "sol_compile",
)
DETAIL_CHARS = 4000


def one_line(text: str) -> str:
    return markdown.one_line(text) or "no message"


def init_worker(target: str, config: Any, env: dict[str, str]) -> None:
    # Ctrl-C is the parent's to handle: it stops the pools (a finished task is on disk already).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_on_sigterm()  # a pool's terminate(): the evaluator closes, its sandboxes go with it
    os.environ.update(env)
    from htam.evaluate import Evaluator, EvaluatorError

    try:
        evaluator = Evaluator(target, config)
    except EvaluatorError as exc:
        _STATE["error"] = f"the evaluator cannot start: {one_line(str(exc))}"
        return
    _STATE["evaluator"] = evaluator
    # Pool workers leave through os._exit, which skips atexit; Finalize still runs.
    multiprocessing.util.Finalize(None, evaluator.close, exitpriority=10)


def warm(task: Task) -> dict[str, Any]:
    """Run the reference with torch.compile once, so the measurement finds its build cached."""
    if "error" in _STATE:
        return {"fatal": _STATE["error"]}
    started = time.monotonic()
    try:
        _STATE["evaluator"].reference(task, timed=True)
        cause = None
    except TaskError as exc:
        cause = one_line(exc.problem)
    return {"ok": cause is None, "cause": cause, "wall_s": time.monotonic() - started}


def measure(task: Task) -> dict[str, Any]:
    """The task's record: timings, cost and roofline of the reference, or why it cannot run."""
    if "error" in _STATE:
        return {"fatal": _STATE["error"]}
    from htam.evaluate import roofline

    evaluator = _STATE["evaluator"]
    started = time.monotonic()
    # Every record has every field (None where not measured): one schema for whoever reads them.
    record: dict[str, Any] = dict.fromkeys(FIELDS)
    record.update(device=evaluator.device_name, torch=evaluator.torch_version)
    try:
        ref = evaluator.reference(task, timed=True)
    except TaskError as exc:
        record.update(
            status="failed", cause=one_line(exc.problem), detail=exc.problem[-DETAIL_CHARS:]
        )
        record["time_s"] = time.monotonic() - started
        return record
    eager = ref.timing["median_ms"] if ref.timing else None
    compiled = ref.compile_timing["median_ms"] if ref.compile_timing else None
    bound = roofline.lower_bound(ref.flops, ref.nbytes, ref.dtypes, evaluator.peaks())
    record.update(
        status="ok",
        cause=None,
        eager_ms=eager,
        compile_ms=compiled,
        ratio=eager / compiled if eager and compiled else None,
        flops=ref.flops,
        bytes=ref.nbytes,
        dtypes=list(ref.dtypes),
        bound_ms=bound.time_ms,
        bound=bound.kind,
        sol_eager=bound.time_ms / eager if eager else None,
        sol_compile=bound.time_ms / compiled if compiled else None,
    )
    wanted = evaluator.config.time_compile_reference
    if compiled is None and (evaluator.device == "cuda" if wanted is None else wanted):
        why = [m for m in ref.messages if "torch.compile" in m] or ["torch.compile was not timed"]
        record.update(status="compile_failed", cause=one_line(why[0]))
    record["time_s"] = time.monotonic() - started
    return record


def gpu_estimate(task: Task, size: Size) -> int | None:
    """Bytes of the task's inputs, outputs and parameters at ``size``, from a run on the meta
    device (no memory, no compute); None when the reference does not run there."""
    import torch

    from htam.tasks.runtime import instantiate, nbytes

    try:
        # The reference's own warnings and prints would land between the progress lines.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            model, inputs = instantiate(task, size, device="meta")
            with torch.no_grad():
                out = model(*inputs)
    # A reference is arbitrary code: an op without a meta kernel, data-dependent control flow
    # or anything else only means "size unknown", which the scheduler treats as "the whole GPU".
    except Exception:  # noqa: BLE001
        return None
    return nbytes(inputs) + nbytes(out) + nbytes([*model.parameters(), *model.buffers()])


def gpu_memory_bytes() -> int | None:
    """Total memory of the first visible GPU, asked in a throwaway process so that this one
    never holds a CUDA context."""
    import subprocess
    import sys

    code = "import torch; print(torch.cuda.get_device_properties(0).total_memory)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    try:
        return int(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def link_caches(warm_dir: Path, cache_dir: Path) -> None:
    """Make ``warm_dir`` an evaluator cache that shares the compile caches of ``cache_dir``
    (inductor and Triton builds) but not its reference timings, which a warm-up must not write."""
    for name in ("inductor", "triton"):
        (cache_dir / name).mkdir(parents=True, exist_ok=True)
        link = warm_dir / name
        if not link.exists():
            link.symlink_to((cache_dir / name).resolve(), target_is_directory=True)
