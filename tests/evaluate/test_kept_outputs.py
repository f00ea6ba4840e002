"""Outputs never alias earlier outputs (issue 37, item 3), and a buffer kept across calls earns
nothing however it is kept: the harness renews the memory of every output it handed over, so a
candidate that writes into a buffer it kept (the last call's, or one of several it rotates
through) meets fresh pages, as an honest candidate's fresh allocation does."""

from __future__ import annotations

import re

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
    uses = [(int(n), int(r)) for n, r in re.findall(r"htam-rotated use (\d+) resident (-?\d+)%",
                                                    result.log)]
    assert len(uses) >= 4, (result.status, result.messages, result.log[-2000:])
    # the first use of each of the two buffers faults its pages in, as any fresh output does;
    # from the third on, a buffer kept intact would be resident already. The last use is the
    # kernel probe's, whose observer copies every argument (reading its pages) before a kernel.
    kept = [r for n, r in uses[:-1] if n > 2 and r > 50]
    assert not kept, f"a kept buffer was still resident on {len(kept)} of {len(uses)} calls"
