"""Whether the candidate's call faulted in memory for its large CPU outputs, as a fresh output
does, judged from the judge's side: the candidate's process's resident anonymous memory, which
the judge reads from ``/proc`` while the process is stopped before the call and once it has
answered, grew by at least half of what its outputs need.

The harness checks the same (candidate/fresh_memory.py), but in the candidate's process, where
the solution may switch it off: wrapping ``Harness.collect`` and replacing ``_faulted_in`` and
``_renew`` through ``__builtins__``' setattr, a buffer kept across calls got ``ok`` at 5.4x
against the honest kernel's 1.0x on a 64 MB ReLU (red team 18, attack_cpu_kept_patched.py);
and the judge's own lent slot, which the harness leaves alone, is memory the judge keeps
resident: written in place and returned on every call, 4.9x (attack_cpu_slot_resident.py).
Neither grows the process's anonymous memory (the slot is shared memory), whatever the harness
reports.

What an output needs is taken from the reference's runner in the same round, its own growth
over its call, capped by the slots of at least ``FRESH_MIN_BYTES``: where the reference's
outputs come from resident heap memory (smaller than glibc's largest mmap threshold) or are
views, no fresh pages are asked of the candidate either.
"""

from __future__ import annotations

import os

import torch

from htam.evaluate.candidate.fresh_memory import FRESH_MIN_BYTES, anon_bytes
from htam.evaluate.judge.runner import Verdict
from htam.status import Status


def _anon(pid: int) -> int | None:
    """The process's resident anonymous memory, from any of its threads (they share it): a
    leader that ended by itself (``pthread_exit``) while another thread serves the judge is a
    zombie whose own status shows no memory at all, and the check read nothing."""
    found = anon_bytes(pid)
    if found is not None:
        return found
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        found = anon_bytes(f"{pid}/task/{tid}")
        if found is not None:
            return found
    return None


def before(pid: int, device: str) -> int | None:
    """The process's resident anonymous memory before a call (CPU only; None elsewhere)."""
    return _anon(pid) if device == "cpu" else None


def grew(pid: int, start: int | None) -> int | None:
    """What it gained since ``start`` (None where nothing was read)."""
    if start is None:
        return None
    now = _anon(pid)
    return None if now is None else now - start


def needed(slots: list[torch.Tensor], ref_grew: int | None) -> int:
    """The bytes the candidate's call must have faulted in: half of its large output slots,
    no more than half of what the reference's runner faulted in beside it."""
    large = sum(s.nbytes for s in slots if s.device.type == "cpu" and s.nbytes >= FRESH_MIN_BYTES)
    if not large or ref_grew is None:
        return 0
    need = min(large, ref_grew) // 2
    return need if need >= FRESH_MIN_BYTES // 2 else 0


def check(
    slots: list[torch.Tensor], cand_grew: int | None, ref_grew: int | None, where: str
) -> None:
    """Raise the verdict on a candidate's call whose large outputs were resident before it."""
    need = needed(slots, ref_grew)
    if not need or (cand_grew is not None and cand_grew >= need):
        return
    large = sum(s.nbytes for s in slots if s.nbytes >= FRESH_MIN_BYTES)
    if cand_grew is None:
        raise Verdict(
            Status.REJECTED,
            f"{where}: the memory of the solution's process could not be read, so nothing "
            f"shows that its call faulted in memory for its outputs ({large >> 20} MiB)",
        )
    raise Verdict(
        Status.REJECTED,
        f"{where}: the call's outputs ({large >> 20} MiB) were memory resident before the call "
        f"(its process faulted in {max(cand_grew, 0) >> 20} MiB, the reference's runner "
        f"{max(ref_grew or 0, 0) >> 20} MiB): an output kept across calls, or the judge's lent "
        "slot written in place, skips what a fresh output pays for its pages",
    )
