"""The size a task is timed at on this machine, and whether its tensors fit the host memory a
candidate or the reference may use (the CPU refuses what cannot fit before anything runs)."""

from __future__ import annotations

import math

from htam.cli.common import fail
from htam.cli.fmt import fmt_bytes_alike
from htam.tasks.module import has_small_size, size_label
from htam.vocab import SIZES, Size, size_named

CPU_LARGE_MAX_BYTES = 300_000_000

# What the CPU evaluation's processes hold, as the watchdog counts it (resident anonymous and
# shared pages, each process its own: the judge and the reference's runner both count the
# buffers they share), for T bytes of tensors: some 330 MB of torch in the judge and the runner,
# then 4.2-4.7T measured on an honest ReLU of 64-512 MiB (footprint.py's copies, with the lent
# buffers counted in both processes). A 256 MiB task failed at 1536 MB and ran at 1792 MB: the
# advice leaves room above that, in steps of 256 MB.
CPU_EVAL_MULTIPLE = 6
# What no evaluation holds less than (the measured 4.2x, less a margin): a task over the limit by
# this much is refused before anything runs, where it would only fail minutes later.
LEAST_EVAL_MULTIPLE = 3
CPU_EVAL_BASE_MB = 512
LIMIT_STEP_MB = 256


def timed_size(
    target: str, language: str, size: str | None, task, memory_limit_mb: int | None = None
) -> Size:
    """The size to time ``task`` at: as asked, large on a GPU, and on the CPU large for C++ when
    it fits ``CPU_LARGE_MAX_BYTES`` and the memory limit (``--memory-limit-mb``). Triton on the
    CPU runs in its interpreter, whose timings mean nothing at any size: small keeps it quick."""
    if size is not None or target != "cpu" or language != "cpp":
        return default_size(target, size)
    from htam.tasks import signature

    nbytes = signature(task, "large").bytes
    fits = nbytes <= CPU_LARGE_MAX_BYTES and needed_limit_mb(nbytes) << 20 <= memory_limit_bytes(
        memory_limit_mb
    )
    return "large" if fits else "small"


def needed_limit_mb(nbytes: int) -> int:
    """A ``--memory-limit-mb`` under which a task of ``nbytes`` of tensors runs on the CPU: the
    evaluation holds several copies of them beside torch itself (``CPU_EVAL_MULTIPLE``)."""
    mb = CPU_EVAL_BASE_MB + CPU_EVAL_MULTIPLE * nbytes / 2**20
    return math.ceil(mb / LIMIT_STEP_MB) * LIMIT_STEP_MB


def limit_advice(nbytes: int | None) -> str | None:
    """``--memory-limit-mb N`` that lets a task of ``nbytes`` run here, or None when even the
    whole machine is too little (or the size is unknown)."""
    from htam.evaluate.eval_config import machine_memory_mb

    if nbytes is None:
        return None
    need = needed_limit_mb(nbytes)
    if need > machine_memory_mb():
        return None
    return (
        f"--memory-limit-mb {need} (the evaluation holds about {CPU_EVAL_MULTIPLE}x its tensors "
        "beside torch)"
    )


def memory_limit_bytes(memory_limit_mb: int | None) -> int:
    """The host memory a candidate or the reference may use (``EvalConfig.memory_limit``)."""
    from htam.evaluate.eval_config import EvalConfig

    return EvalConfig(memory_limit_mb=memory_limit_mb).memory_limit() << 20


def tensor_bytes(task, size: Size) -> int | None:
    """What ``task``'s tensors take at ``size`` (inputs, outputs, parameters and buffers), from
    its signature on the meta device: no data, no time, whatever the size. None when the
    reference cannot run there (an op without a meta kernel, code that reads its data)."""
    from htam.tasks.signatures import meta_signature

    sig = meta_signature(task, size)
    return None if sig is None else sig.bytes


def over_memory_limit(
    task, target: str, size: Size, nbytes: int | None, memory_limit_mb: int | None
) -> str | None:
    """On the CPU, why ``task`` cannot run here when ``LEAST_EVAL_MULTIPLE`` times its tensors at
    ``size`` (``nbytes``, known from its signature before anything runs) exceed the host memory a
    candidate or the reference may use; else None. The reference and the judge hold at least as
    many copies of them, so it would only fail, tens of seconds or minutes later, at the
    evaluator's memory limit: the commands refuse it up front with this
    one line and ``INFRASTRUCTURE_EXIT`` (3), the status of that later failure ("its reference
    cannot run here": the task is fine, this machine cannot judge it), or skip it in a suite.
    On a GPU the tensors live in GPU memory, and nothing is refused."""
    if target != "cpu" or nbytes is None:
        return None
    from htam.evaluate.eval_config import machine_memory_mb

    limit = memory_limit_bytes(memory_limit_mb)
    held = LEAST_EVAL_MULTIPLE * nbytes
    if held <= limit:
        return None
    machine = machine_memory_mb() << 20
    need, least, allowed, has = fmt_bytes_alike(nbytes, held, limit, machine)
    origin = (
        f"--memory-limit-mb {memory_limit_mb}"
        if memory_limit_mb
        else f"the default for this machine's {has}"
    )
    message = (
        f"{task.id}: the reference needs more host memory than allowed here: its tensors at "
        f"{size_words(task, size)} take {need} (inputs, outputs and parameters), and an "
        f"evaluation holds at least {LEAST_EVAL_MULTIPLE} times that ({least}), over the "
        f"{allowed} a reference or a candidate may use ({origin})"
    )
    remedies = []
    if advice := limit_advice(nbytes):
        remedies.append(f"give {advice}")
    small = tensor_bytes(task, "small") if size == "large" else None
    if small is not None and small < nbytes and LEAST_EVAL_MULTIPLE * small <= limit:
        remedies.append(f"time --size small ({fmt_bytes_alike(nbytes, small)[1]})")
    elif not has_small_size(task.source) and size != "large":
        remedies.append("add a reduced size to the task (HTAM_SMALL, see docs/tasks.md)")
    else:
        remedies.append("time a smaller copy of the task (smaller shapes in its file)")
    return f"{message}; {', or '.join(remedies)}"


def size_words(task, size: Size) -> str:
    """``size small``; for a file without HTAM_SMALL, whose sizes are one and the same, ``the
    KernelBench size (...)``: where its shapes come from, not a "small" they are not."""
    return f"size {size}" if has_small_size(task.source) else size_label(task.source, size)


def check_size(size: str | None) -> None:
    """A ``--size`` value, checked before anything is created (a run directory included)."""
    if size is not None and size not in SIZES:
        fail(f"--size {size}: unknown size; choose {' or '.join(SIZES)}")


def default_size(target: str, size: str | None) -> Size:
    check_size(size)
    return size_named(size or ("large" if target == "cuda" else "small"))
