"""The size a task is timed at on this machine, and whether its tensors fit the host memory a
candidate or the reference may use (the CPU refuses what cannot fit before anything runs)."""

from __future__ import annotations

import math

from htam.cli.common import fail
from htam.cli.fmt import fmt_bytes_alike
from htam.tasks.module import has_small_size, size_label
from htam.vocab import SIZES, Size, size_named

CPU_LARGE_MAX_BYTES = 300_000_000


def timed_size(
    target: str, language: str, size: str | None, task, memory_limit_mb: int | None = None
) -> Size:
    """The size to time ``task`` at: as asked, large on a GPU, and on the CPU large for C++ when
    it fits ``CPU_LARGE_MAX_BYTES`` and the memory limit (``--memory-limit-mb``). Triton on the
    CPU runs in its interpreter, whose timings mean nothing at any size: small keeps it quick."""
    if size is not None or target != "cpu" or language != "cpp":
        return default_size(target, size)
    from htam.tasks import signature

    fits = min(CPU_LARGE_MAX_BYTES, memory_limit_bytes(memory_limit_mb))
    return "large" if signature(task, "large").bytes <= fits else "small"


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
    """On the CPU, why ``task`` cannot run here when its tensors at ``size`` (``nbytes``, known
    from its signature before anything runs) exceed the host memory a candidate or the reference
    may use; else None. The reference alone holds them all, so it would only fail, tens of
    seconds later, at the evaluator's memory limit: the commands refuse it up front with this
    one line and ``INFRASTRUCTURE_EXIT`` (3), the status of that later failure ("its reference
    cannot run here": the task is fine, this machine cannot judge it), or skip it in a suite.
    On a GPU the tensors live in GPU memory, and nothing is refused."""
    if target != "cpu" or nbytes is None:
        return None
    from htam.evaluate.eval_config import machine_memory_mb

    limit = memory_limit_bytes(memory_limit_mb)
    if nbytes <= limit:
        return None
    machine = machine_memory_mb() << 20
    need, allowed, has = fmt_bytes_alike(nbytes, limit, machine)
    origin = (
        f"--memory-limit-mb {memory_limit_mb}"
        if memory_limit_mb
        else f"the default for this machine's {has}"
    )
    message = (
        f"{task.id}: the reference needs more host memory than allowed here: its tensors at "
        f"{size_words(task, size)} take {need} (inputs, outputs and parameters), over the "
        f"{allowed} a reference or a candidate may use ({origin})"
    )
    remedies = []
    if nbytes < machine:
        remedies.append(f"raise --memory-limit-mb above {math.ceil(nbytes / 2**20)}")
    small = tensor_bytes(task, "small") if size == "large" else None
    if small is not None and small < nbytes and small <= limit:
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
