"""Trusted jobs of the evaluator's children (probe, peaks, the reference alone) and the helpers
the judge shares with them: load a task at a size and configuration, build a model, draw inputs.

Imported by the fork server before any candidate exists. Frames to the parent are JSON over the
child's result pipe; only trusted children (never a candidate) hold such a pipe.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import torch

from htam.evaluate import frames, measure
from htam.evaluate.frames import Job
from htam.evaluate.judge import gradients
from htam.status import Status
from htam.tasks.module import extra_configs, load_task_module


class Emitter:
    """Records to the parent over the result pipe, framed (``frames.encode``)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, record: frames.Record) -> None:
        data = memoryview(frames.encode(record))
        while data:
            data = data[os.write(self.fd, data) :]


def run(job: Job, fd: int) -> None:
    emit = Emitter(fd)
    os.environ.update(job.env)
    jobs = {"probe": _probe, "peaks": _peaks, "reference": _reference, "warm": _warm}
    jobs[job.kind](job, emit)


def _probe(job: Job, emit: Emitter) -> None:
    if job.device == "cuda":
        if not torch.cuda.is_available():
            emit(frames.Probed(error="target cuda asked for, but no CUDA device is visible"))
            return
        name = torch.cuda.get_device_name()
        free, total = torch.cuda.mem_get_info()
        capability = "{}.{}".format(*torch.cuda.get_device_capability())
    else:
        name, free, total, capability = "cpu", 0, 0, None
    emit(
        frames.Probed(
            device=name,
            torch=str(torch.__version__),
            gpu_free=free,
            gpu_total=total,
            capability=capability,
        )
    )


def _peaks(job: Job, emit: Emitter) -> None:
    emit(frames.Peaks(peaks=measure.measure_peaks(job.device)))


# --------------------------------------------------------------------------- shared helpers


def sync(device: str) -> None:
    if device == "cuda":
        measure._sync()


def configs(job: Job) -> list[tuple[int | None, list[int]]]:
    """(extra index or None for the base size, seeds to run there)."""
    seeds = job.seeds
    base: list[tuple[int | None, list[int]]] = [(None, seeds)]
    if not job.extras:
        return base
    module = load_task_module(_source(job), job.size)
    return base + [(i, seeds[:1]) for i in range(len(extra_configs(module)))]


def task_module(job: Job, extra: int | None):
    return load_task_module(_source(job), job.size, extra=extra, name="htam_task")


def _source(job: Job) -> str:
    if job.task_source is None:
        raise ValueError(f"a {job.kind} job without its task")
    return job.task_source


def inputs_for(module, seed: int, device: str) -> list:
    """Inputs drawn on the target device (the same seed gives the same values), which keeps
    large GPU inputs off the host."""
    torch.manual_seed(seed)
    with torch.device(device):
        made = module.get_inputs()
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in made]


def build(cls: type, init_args: list, seed: int, device: str):
    torch.manual_seed(seed)
    model = cls(*init_args)
    return model.to(device) if isinstance(model, torch.nn.Module) else model


def as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def unjudgeable(outs: list) -> str | None:
    """Why the reference's outputs ``outs`` cannot judge a candidate, or None: each must be a
    tensor (a float passed the task's check and then failed every candidate, blamed on it), and
    not all of them empty (any candidate's empty tensor would be correct)."""
    others = sorted({type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)})
    if others:
        return (
            f"the reference returns {' and '.join(others)}, not only tensors: HTAM compares "
            "tensors (return torch.tensor(...))"
        )
    if all(o.numel() == 0 for o in outs):
        return "the reference's outputs are all empty: any candidate would match them"
    return None


def one_line(exc: BaseException) -> str:
    """The exception's own last line (what a user acts on), never empty."""
    text = str(exc).strip().splitlines()
    last = text[-1].strip() if text else ""
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        free, total = torch.cuda.mem_get_info()
        return (
            f"GPU out of memory ({free / 2**30:.1f} of {total / 2**30:.1f} GiB free): "
            f"{last.split('. ')[0]}"
        )
    return f"{type(exc).__name__}: {last}" if last else type(exc).__name__


# --------------------------------------------------------------------------- reference


def _reference(job: Job, emit: Emitter) -> None:
    """Run the reference on every trial and configuration; its cost; and, when asked, its eager
    and torch.compile times side by side. A failure is reported in one line."""
    device = job.device
    try:
        model0, n_grads = None, 0
        inputs0: list = []  # the first trial's, kept with model0 for the cost and the times
        for extra, seeds in configs(job):
            module = task_module(job, extra)
            model = build(module.Model, list(module.get_init_inputs()), job.init_seed, device)
            for seed in seeds:
                inputs = inputs_for(module, seed, device)
                if gradients.is_backward(module):  # timed and costed as the judge calls it
                    specs = gradients.output_specs(model, inputs)
                    n_grads = len(specs)
                    inputs += gradients.draw_grad_outputs(specs, seed + 1, device)
                outs = as_list(_stepper(model, n_grads)(*inputs))
                sync(device)
                if why := unjudgeable(outs):
                    emit(_failed(why))
                    return
                del outs
                if model0 is None:
                    model0, inputs0 = model, inputs
                del inputs
        cost = _cost(model0, inputs0, device, n_grads)
    except Exception as exc:  # noqa: BLE001 - the reference failing is a fact to report
        traceback.print_exc()
        emit(_failed(one_line(exc)))
        return
    emit(cost)
    if not job.time:
        emit(frames.ReferenceRan(status=Status.OK, message="reference ran"))
        return
    compiled, compile_msg = None, ""
    if job.time_compile:
        compiled, compile_msg = _compiled(model0, inputs0, n_grads)
    eager = _stepper(model0, n_grads)
    if compiled is None:
        (timing,) = _time([eager], [inputs0], job)
        compile_timing = None
    else:  # eager and compiled side by side: their ratio holds whatever the clocks do
        timing, compile_timing = _time([eager, compiled], [inputs0], job)
    emit(
        frames.ReferenceRan(
            status=Status.OK, message=compile_msg, timing=timing, compile_timing=compile_timing
        )
    )


def _failed(message: str) -> frames.ReferenceRan:
    """The reference failed to run: the task cannot be judged here."""
    return frames.ReferenceRan(status=Status.RUNTIME_ERROR, message=message)


# A warm-up runs the reference once beside whatever the device's queue is timing: only a task
# whose tensors are small enough that this cannot crowd the card or move a median.
WARM_MAX_BYTES = 1 << 30


def _meta_bytes(module) -> int | None:
    """The inputs' and parameters' bytes, found on the meta device (nothing allocated), or None
    when the task cannot be built there."""
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
    except Exception:  # noqa: BLE001 - a task that needs real tensors to build is not warmed
        return None
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def _warm(job: Job, emit: Emitter) -> None:
    """torch.compile the reference once, off the device's queue, so that the timed reference job
    finds its graph and kernels in the shared inductor and Triton caches: the compile's CPU time
    (10-20 s cold) no longer holds the GPU while candidates wait. Skipped for a large or a
    backward task (compiled inside the timed job, as before)."""
    module = task_module(job, None)
    nbytes = _meta_bytes(module)
    if gradients.is_backward(module) or nbytes is None or nbytes > WARM_MAX_BYTES:
        emit(frames.ReferenceRan(status=Status.OK, message="not warmed"))
        return
    model = build(module.Model, list(module.get_init_inputs()), job.init_seed, job.device)
    _, message = _compiled(model, inputs_for(module, job.seeds[0], job.device))
    sync(job.device)
    emit(frames.ReferenceRan(status=Status.OK, message=message or "warmed"))


def _stepper(model, n_grads: int) -> Callable:
    """What one call runs: the model, or for a backward task (``n_grads`` grad_outputs at the end
    of the inputs) its training step."""
    if not n_grads:
        return model

    def step(*args):
        k = len(args) - n_grads
        return gradients.training_step(model, list(args[:k]), list(args[k:]))

    return step


def _cost(model, inputs: list, device: str, n_grads: int = 0) -> frames.Cost:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = as_list(_stepper(model, n_grads)(*inputs))
    sync(device)
    tensors = [t for t in inputs + out if isinstance(t, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        tensors += list(model.parameters()) + list(model.buffers())
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    dtypes = sorted(
        {str(t.dtype).removeprefix("torch.") for t in inputs if isinstance(t, torch.Tensor)}
    )
    return frames.Cost(flops=int(counter.get_total_flops()), bytes=int(nbytes), dtypes=dtypes)


def _time(fns: list[Callable], input_sets: list, job: Job) -> list[frames.TimingFigures]:
    t0 = measure._perf()
    timings = measure.time_fns(fns, input_sets, job.timing.model_dump(), job.device)
    elapsed = measure._perf() - t0
    return [frames.TimingFigures(**timing, elapsed_s=elapsed) for timing in timings]


def _compiled(model, input_sets: list, n_grads: int = 0) -> tuple[Callable | None, str]:
    try:
        compiled = _stepper(torch.compile(model), n_grads)
        compiled(*input_sets)
        return compiled, ""
    except Exception as exc:  # noqa: BLE001 - torch.compile failing is a fact to report, not a crash
        return None, f"torch.compile reference unavailable: {one_line(exc)}"[:500]
