"""The judge's own check that a candidate's call faulted in memory for its large CPU outputs
(judge/fresh_pages.py): the harness's check lives in the candidate's process, where red team
18 switched it off (attack_cpu_kept_patched.py) or met none (the lent slot returned,
attack_cpu_slot_resident.py); the attacks themselves run in test_attacks.py."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from htam.evaluate.judge import fresh_pages
from htam.evaluate.judge.runner import Verdict

MIB = 1 << 20


def _slots(*mib: int) -> list[torch.Tensor]:
    return [torch.empty(m * MIB, dtype=torch.uint8) for m in mib]


def test_large_slots_need_half_of_what_the_reference_faulted_in():
    slots = _slots(64)
    assert fresh_pages.needed(slots, 64 * MIB) == 32 * MIB
    # the reference's outputs came from resident memory (a view, glibc's heap): nothing asked
    assert fresh_pages.needed(slots, 0) == 0
    assert fresh_pages.needed(slots, None) == 0
    # small slots may come from resident heap memory, as they do for every candidate
    assert fresh_pages.needed(_slots(16, 16), 32 * MIB) == 0
    # capped by the large slots: the reference's own working memory asks nothing more
    assert fresh_pages.needed(_slots(64, 1), 512 * MIB) == 32 * MIB


def test_a_call_that_faulted_in_too_little_is_rejected():
    slots = _slots(64)
    fresh_pages.check(slots, 64 * MIB, 64 * MIB, "timed call 3")
    fresh_pages.check(slots, 0, 0, "timed call 3")  # nothing was asked of it
    with pytest.raises(Verdict) as got:
        fresh_pages.check(slots, 0, 64 * MIB, "timed call 3")
    assert got.value.status == "rejected"
    assert "timed call 3: the call's outputs (64 MiB) were memory resident before" in str(
        got.value.message
    )
    with pytest.raises(Verdict) as got:  # nothing read: nothing shown
        fresh_pages.check(slots, None, 64 * MIB, "timed call 3")
    assert "could not be read" in str(got.value.message)


# A process whose leader ended by pthread_exit while another thread (holding 48 MB) lives on
ZOMBIE_LEADER = """
import ctypes, sys, threading, time
def hold():
    block = bytearray(48 << 20)
    time.sleep(30)
threading.Thread(target=hold, daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_leader_that_ended_by_itself_still_shows_its_memory():
    """A zombie leader's own status shows no memory: the check read nothing and let the call
    pass (red team 18); its threads' status shows the process's."""
    child = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        status = Path(f"/proc/{child.pid}/status")
        deadline = time.monotonic() + 10
        while "State:\tZ" not in status.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "RssAnon" not in status.read_text()
        held = fresh_pages.before(child.pid, "cpu")
        assert held is not None and held >= 40 * MIB
    finally:
        child.kill()
        child.wait()


def test_growth_is_read_from_the_process_by_its_pid():
    start = fresh_pages.before(os.getpid(), "cpu")
    assert start is not None and fresh_pages.before(os.getpid(), "cuda") is None
    block = torch.ones(48 * MIB, dtype=torch.uint8)  # written: its pages are resident
    grew = fresh_pages.grew(os.getpid(), start)
    assert grew is not None and grew >= 40 * MIB
    assert fresh_pages.grew(os.getpid(), None) is None
    del block
