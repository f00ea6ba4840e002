"""Whether a call's large CPU outputs are memory the call faulted in, as a fresh output's is.

A solution that prepares its outputs ahead (a pool allocated and written before the calls, or
buffers it keeps while glibc is told to keep freed blocks resident) hands over memory no call
paid for: the page faults of a fresh 64 MB output are most of a CPU ReLU's time. The harness
reads the process's resident anonymous memory between calls and again when it collects a
call's outputs; the growth must cover at least half of the outputs' large storages.

Free memory glibc keeps resident in its heap would let an honest allocation of that size take
pages no call faulted in, so before each call such memory is given back to the kernel when
there is enough of it to matter (``release_free_heap``): the honest allocation then faults its
pages as a fresh mapping does. Memory in use is never touched.
"""

from __future__ import annotations

import ctypes
import functools

import torch

# Outputs at least this large come from a fresh mapping of glibc's (its largest mmap threshold),
# whose pages a call faults in; smaller ones may legitimately reuse resident heap memory.
FRESH_MIN_BYTES = 32 << 20


def anon_bytes(pid: int | str = "self") -> int | None:
    """A process's resident anonymous memory (huge pages included): this one's by default."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) << 10
    except OSError:
        return None
    return None


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the storages of ``a`` and ``b`` share any byte (on one device)."""
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def fresh_bytes(outs: list, slots: list) -> int:
    """The bytes of the outputs' distinct storages of at least FRESH_MIN_BYTES each, the judge's
    lent slots aside (several smaller ones may all come from resident heap memory)."""
    sizes: dict[int, int] = {}
    for o in outs:
        if type(o) is torch.Tensor and o.numel() and not any(overlaps(o, s) for s in slots):
            storage = o.untyped_storage()
            if storage.nbytes() >= FRESH_MIN_BYTES:
                sizes[storage.data_ptr()] = storage.nbytes()
    return sum(sizes.values())


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@functools.cache
def _libc():
    libc = ctypes.CDLL(None)  # this process's own symbols: glibc's, where it is glibc
    if not hasattr(libc, "mallinfo2") or not hasattr(libc, "malloc_trim"):
        return None  # not glibc 2.33 or later: nothing to release
    libc.mallinfo2.restype = _Mallinfo2
    return libc


def release_free_heap() -> None:
    """Give the pages of glibc's free heap memory back to the kernel when it holds at least
    FRESH_MIN_BYTES of it (the blocks stay the allocator's, their pages fault in afresh)."""
    libc = _libc()
    if libc is not None and libc.mallinfo2().fordblks >= FRESH_MIN_BYTES:
        libc.malloc_trim(0)
