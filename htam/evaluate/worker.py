"""What runs inside an evaluator child: the reference job, the candidate job, the peaks job.

Imported by the fork server before any candidate exists, so the functions it captures at import
(clocks, thread counter) are the real ones. Expected outputs never exist in a candidate's
process: the reference runs in a separate child and the parent compares, so neither ``gc`` walks
nor stale allocator memory can hand a candidate the answer.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

import torch

from htam.evaluate import measure
from htam.evaluate.compile_cache import CompileError, install_compile_cache
from htam.evaluate.sandbox import OUTPUTS_FILE, encode_frame
from htam.tasks.module import extra_configs, load_task_module

_active_threads = threading.active_count
_perf = measure._perf
_clock = time.monotonic  # system-wide: the parent lays these marks on its own timeline


class Emitter:
    def __init__(self, fd: int):
        self.fd = fd

    def outputs(self, outputs: list, **meta) -> None:
        """Large tensors go through a file in the job's directory (one write, one read) rather
        than through the pipe; the frame only says they are there."""
        torch.save(outputs, OUTPUTS_FILE)
        self({"type": "outputs", "in_file": True, **meta})

    def __call__(self, frame: dict) -> None:
        for part in encode_frame(frame):
            data = memoryview(part)
            while data:
                data = data[os.write(self.fd, data) :]


def run(job: dict, fd: int) -> None:
    emit = Emitter(fd)
    os.environ.update(job.get("env", {}))
    jobs = {"probe": _probe, "peaks": _peaks, "reference": _reference, "candidate": _candidate}
    jobs[job["kind"]](job, emit)


def _probe(job: dict, emit: Emitter) -> None:
    if job["device"] == "cuda":
        if not torch.cuda.is_available():
            emit(
                {"type": "result", "error": "target cuda asked for, but no CUDA device is visible"}
            )
            return
        name = torch.cuda.get_device_name()
    else:
        name = "cpu"
    emit({"type": "result", "device": name, "torch": str(torch.__version__)})


def _peaks(job: dict, emit: Emitter) -> None:
    emit({"type": "result", "peaks": measure.measure_peaks(job["device"])})


# --------------------------------------------------------------------------- shared helpers


def _sync(device: str) -> None:
    if device == "cuda":
        measure._sync()


def _configs(job: dict) -> list[tuple[int | None, list[int]]]:
    """(extra index or None for the base size, seeds to run there)."""
    seeds = job["seeds"]
    base = [(None, seeds)]
    if not job.get("extras", True):
        return base
    module = load_task_module(job["task_source"], job["size"])
    return base + [(i, seeds[:1]) for i in range(len(extra_configs(module)))]


def _module(job: dict, extra: int | None):
    return load_task_module(job["task_source"], job["size"], extra=extra, name="htam_task")


def _inputs(module, seed: int, device: str) -> list:
    """Inputs drawn on the target device (the same seed gives the same values in the reference's
    and the candidate's process), which keeps large GPU inputs off the host."""
    torch.manual_seed(seed)
    with torch.device(device):
        made = module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in made]


def _build(cls: type, module, seed: int, device: str):
    torch.manual_seed(seed)
    model = cls(*module.get_init_inputs())
    return model.to(device) if isinstance(model, torch.nn.Module) else model


def _as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _excerpt(exc: BaseException, limit: int = 3000) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-limit:]


def _result(emit: Emitter, status: str, message: str, **extra) -> None:
    emit({"type": "result", "status": status, "message": message, **extra})


# --------------------------------------------------------------------------- reference


def _reference(job: dict, emit: Emitter) -> None:
    device = job["device"]
    outputs, base_inputs, model0 = [], [], None
    for extra, seeds in _configs(job):
        module = _module(job, extra)
        model = _build(module.Model, module, job["init_seed"], device)
        for seed in seeds:
            inputs = _inputs(module, seed, device)
            out = _as_list(model(*inputs))
            _sync(device)
            outputs.append([o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in out])
            if extra is None:
                base_inputs.append(inputs)
        if extra is None:
            model0 = model
    emit.outputs(outputs, **_cost(model0, base_inputs[0], device))
    if not job.get("time"):
        _result(emit, "ok", "reference outputs computed")
        return
    compiled, compile_msg = None, ""
    if job.get("time_compile"):
        compiled, compile_msg = _compiled(model0, base_inputs)
    if compiled is None:
        (timing,) = _time([model0], base_inputs, job)
        compile_timing = None
    else:  # eager and compiled side by side: their ratio holds whatever the clocks do
        timing, compile_timing = _time([model0, compiled], base_inputs, job)
    _result(emit, "ok", compile_msg, timing=timing, compile_timing=compile_timing)


def _cost(model, inputs: list, device: str) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = _as_list(model(*inputs))
    _sync(device)
    tensors = [t for t in inputs + out if isinstance(t, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    dtypes = sorted(
        {str(t.dtype).removeprefix("torch.") for t in inputs if isinstance(t, torch.Tensor)}
    )
    return {"flops": int(counter.get_total_flops()), "bytes": int(nbytes), "dtypes": dtypes}


def _time(fns: list[Callable], input_sets: list, job: dict) -> list[dict]:
    t0 = _perf()
    timings = measure.time_fns(
        fns, input_sets, job["timing"], job["device"], job.get("meaningful", True)
    )
    for timing in timings:
        timing["elapsed_s"] = _perf() - t0
    return timings


def _compiled(model, input_sets: list) -> tuple[Callable | None, str]:
    try:
        compiled = torch.compile(model)
        compiled(*input_sets[0])
        return compiled, ""
    except Exception as exc:  # noqa: BLE001 - torch.compile failing is a fact to report, not a crash
        return None, f"torch.compile reference unavailable: {type(exc).__name__}: {exc}"[:500]


# --------------------------------------------------------------------------- candidate


def _import_candidate(code: str):
    path = os.path.abspath("candidate.py")
    with open(path, "w") as f:
        f.write(code)
    spec = importlib.util.spec_from_file_location("htam_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["htam_candidate"] = module  # Triton's JIT reads the source back through it
    spec.loader.exec_module(module)
    return module


def _is_compile_failure(exc: BaseException) -> bool:
    kind = type(exc)
    return isinstance(exc, CompileError) or (
        kind.__module__.startswith("triton") and "Compil" in kind.__name__
    )


def _candidate(job: dict, emit: Emitter) -> None:
    marks = {"entered": _clock()}
    threads0 = _active_threads()
    if job["device"] == "cuda":
        torch.empty(1, device="cuda")  # the context is made here, before any candidate code
    marks["device_ready"] = _clock()
    compile_s = install_compile_cache(job["extension_dir"])
    t0 = _perf()
    try:
        module = _import_candidate(job["code"])
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its failure
        _result(emit, "compile_error", _excerpt(exc))
        return
    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type):
        _result(emit, "compile_error", "the solution defines no class ModelNew")
        return
    emit({"type": "stage", "stage": "built", "import_s": _perf() - t0, "compile_s": compile_s()})
    try:
        outputs, base_model, base_inputs, first_call_s = _candidate_trials(job, cls, threads0)
    except _Rejected as rej:
        _result(emit, "rejected", str(rej))
        return
    except BaseException as exc:  # noqa: BLE001
        status = "compile_error" if _is_compile_failure(exc) else "runtime_error"
        _result(emit, status, _excerpt(exc))
        return
    marks["trials_done"] = _clock()
    emit.outputs(outputs, compile_s=compile_s(), first_call_s=first_call_s)
    marks["outputs_sent"] = _clock()
    # The reference is timed here too, its calls interleaved with the candidate's: the speedup is
    # then a side-by-side ratio from one process, free of the drift between processes. Only now,
    # after the outputs have been sent, does this process hold the reference.
    reference_module = _module(job, None)
    reference = _build(reference_module.Model, reference_module, job["init_seed"], job["device"])
    _sync(job["device"])
    marks["reference_built"] = _clock()
    timing, paired = _time([base_model, reference], base_inputs, job)
    marks["timed"] = _clock()
    if _active_threads() > threads0:
        _result(emit, "rejected", "the solution started a background thread")
        return
    _result(
        emit, "ok", "", timing=timing, paired_reference=paired, compile_s=compile_s(), marks=marks
    )


class _Rejected(Exception):
    pass


def _candidate_trials(job: dict, cls: type, threads0: int):
    device = job["device"]
    outputs, base_model, base_inputs, first_call_s = [], None, [], None
    for extra, seeds in _configs(job):
        module = _module(job, extra)
        del module.Model  # the candidate's process never holds the reference
        model = _build(cls, module, job["init_seed"], device)
        for seed in seeds:
            inputs = _inputs(module, seed, device)
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            t0 = _perf()
            out = _as_list(model(*inputs))
            _sync(device)
            if first_call_s is None:
                first_call_s = _perf() - t0
            _check_call(out, inputs, before, threads0, device)
            outputs.append([o.detach().cpu() for o in out])
            if extra is None:
                base_inputs.append(inputs)
        if extra is None:
            base_model = model
    return outputs, base_model, base_inputs, first_call_s


def _check_call(out: list, inputs: list, before: list, threads0: int, device: str) -> None:
    if _active_threads() > threads0:
        raise _Rejected("the solution started a background thread")
    tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)]
    for o in out:
        if type(o) is not torch.Tensor:
            raise _Rejected(f"output is a {type(o).__name__}, not a plain torch.Tensor")
        if o.device.type != device:
            raise _Rejected(f"output is on {o.device.type}, expected {device}")
        for x in tensors_in:
            if _overlaps(o, x):
                raise _Rejected("output aliases an input tensor")
    for x, x0 in zip(inputs, before, strict=True):
        if isinstance(x, torch.Tensor) and not torch.equal(x, x0):
            raise _Rejected("the solution modified its inputs")


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()
