"""Outputs never alias earlier outputs (issue 37, item 3), and a buffer kept across calls earns
nothing however it is kept: the harness renews the memory of every output it handed over, so a
candidate that writes into a buffer it kept (the last call's, or one of several it rotates
through) meets fresh pages, as an honest candidate's fresh allocation does."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from htam.evaluate import Evaluator
from tests.evaluate.cases import FIXTURES
from tests.evaluate.conftest import fast_config, task_for


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rotated_out_buffers_meet_fresh_pages():
    code = (FIXTURES / "cheat_rotated_out_buffers.py").read_text()
    with Evaluator("cpu", fast_config(memory_limit_mb=4096)) as evaluator:
        result = evaluator.evaluate(task_for(FIXTURES / "relu_mmap_task.py"), code, "cpp")
    uses = [
        (int(n), int(r))
        for n, r in re.findall(r"htam-rotated use (\d+) resident (-?\d+)%", result.log)
    ]
    assert len(uses) >= 4, (result.status, result.messages, result.log[-2000:])
    # the first use of each of the two buffers faults its pages in, as any fresh output does;
    # from the third on, a buffer kept intact would be resident already. The last use is the
    # kernel probe's, whose observer copies every argument (reading its pages) before a kernel.
    kept = [r for n, r in uses[:-1] if n > 2 and r > 50]
    assert not kept, f"a kept buffer was still resident on {len(kept)} of {len(uses)} calls"


PREMISE = """
import torch
from htam.evaluate.candidate import fresh_memory

before = fresh_memory.anon_bytes()
fresh = torch.empty(1 << 24).fill_(1.0)
grown = fresh_memory.anon_bytes() - before
before = fresh_memory.anon_bytes()
fresh.fill_(2.0)  # a prepared buffer written again: no page is new
rewritten = fresh_memory.anon_bytes() - before
small = [torch.ones(1 << 20) for _ in range(16)]  # 64 MB in storages of 4 MB
slot = torch.empty(1 << 24)
outs = [fresh, fresh[: 1 << 20], *small, slot]
print(fresh.nbytes, grown, rewritten, fresh_memory.fresh_bytes(outs, [slot]))
"""


def test_resident_anonymous_memory_tells_fresh_outputs_from_prepared_ones():
    """The premise of the harness's rule that large CPU outputs are memory the call faulted
    in: a fresh 64 MB output grows the process's resident anonymous memory by its size, and a
    buffer written before does not; only storages of 32 MiB or more count, each once, the
    judge's lent slot aside. In a process of its own, as the candidate's is: the test process's
    heap may hold freed memory (or malloc settings an earlier test loaded) that a fresh tensor
    would reuse."""
    run = subprocess.run(
        [sys.executable, "-c", PREMISE], capture_output=True, text=True, check=True
    )
    size, grown, rewritten, counted = (int(v) for v in run.stdout.split())
    assert grown >= size // 2, (grown, size)
    assert rewritten < size // 2, (rewritten, size)
    assert counted == size


HEAP = """
import torch
from htam.evaluate.candidate import fresh_memory

before = fresh_memory.anon_bytes()
blocks = [torch.ones(1 << 14) for _ in range(2048)]  # 64 KB each, from the heap
keep = torch.ones(1 << 14)  # held above them: the freed ones are not the heap's top
del blocks
kept = fresh_memory.anon_bytes() - before
fresh_memory.release_free_heap()
print(kept, fresh_memory.anon_bytes() - before)
"""


def test_free_heap_memory_is_given_back_before_a_call():
    """Free blocks glibc keeps resident in its heap would let an honest allocation skip its
    page faults (and fail the rule above): 128 MB of small blocks freed below one still held
    stay resident until the harness releases them. In a process of its own, as the candidate's
    is: the test process's heap holds what earlier tests freed, which the blocks would reuse."""
    run = subprocess.run([sys.executable, "-c", HEAP], capture_output=True, text=True, check=True)
    kept, released = (int(v) for v in run.stdout.split())
    assert kept >= 96 << 20 and released <= kept - (64 << 20), (kept >> 20, released >> 20)
