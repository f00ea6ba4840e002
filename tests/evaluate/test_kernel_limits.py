"""Limits the kernel enforces on a candidate (issue 37, item 2), each hole the red team found
reproduced at a small scale through the evaluator: what the candidate held, by its own count,
never passes the limit, whatever the status. The watchdog's /proc accounting missed all three
(the status was ok): only the kernel's limits (a memory group, a sized job directory, the
syscall filter) stop them."""

from __future__ import annotations

import re

import pytest

from htam.evaluate import Evaluator
from htam.evaluate.host import evaluator
from tests.evaluate.cases import FIXTURES, RELU
from tests.evaluate.conftest import fast_config, task_for

MEMORY_MB = 512
DISK_MB = 96


@pytest.fixture(scope="module")
def limited():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluator, "DISK_LIMIT_MB", DISK_MB)
        with Evaluator("cpu", fast_config(memory_limit_mb=MEMORY_MB)) as ev:
            if "no cgroup" in ev.isolation or "no sized job directory" in ev.isolation:
                pytest.skip(ev.isolation)
            # the device's peaks and the reference, measured by trusted jobs once, with room
            ev.config.memory_limit_mb = 4096
            ev.peaks()
            ev.reference(task_for(RELU))
            ev.config.memory_limit_mb = MEMORY_MB
            yield ev


def _run(ev: Evaluator, fixture: str, **constants: int):
    code = (FIXTURES / fixture).read_text()
    for name, value in constants.items():
        code = re.sub(rf"^{name} = .*$", f"{name} = {value}", code, count=1, flags=re.M)
    return ev.evaluate(task_for(RELU), code, "triton")


def _held(result, pattern: str) -> int:
    found = re.search(pattern, result.log)
    return int(found.group(1)) if found else 0


def _vma_bytes() -> int:
    """The size of one mapping's kernel object here."""
    with open("/proc/slabinfo") as f:
        for line in f:
            if line.startswith("vm_area_struct "):
                return int(line.split()[3])
    return 176


@pytest.mark.slow
def test_an_honest_candidate_runs_under_the_kernel_limits(limited):
    result = limited.evaluate(
        task_for(RELU), (FIXTURES / "honest_relu_triton.py").read_text(), "triton"
    )
    assert result.status == "ok", (result.messages, result.log[-1500:])
    assert "cgroup v" in limited.isolation and "job directory of" in limited.isolation


@pytest.mark.slow
def test_kernel_memory_of_many_mappings_stops_at_the_limit(limited):
    result = _run(limited, "attack_mmap_slabs.py", HELPERS=64)
    held = _held(result, r"htam-slabs held (\d+) mappings") * _vma_bytes()
    assert held <= (MEMORY_MB + evaluator.CGROUP_HEADROOM_MB) << 20, (
        f"{held >> 20} MB of mappings held under {MEMORY_MB} MB: {result.status}"
    )


@pytest.mark.slow
def test_pipes_pin_no_pages(limited):
    """Pinned pages are charged to the group that faulted them in, but the pipe keeps them past
    the process's own accounting: vmsplice is refused outright. (Without transparent huge pages,
    as on the CI machine, the user's pipe allowance caps this at 64 MB: only its refusal shows
    here; on a machine with them 24 pipes pin 768 MB.)"""
    result = _run(limited, "attack_vmsplice_thp.py", PIPES=24)
    pinned = _held(result, r"htam-vmsplice pinned (\d+) bytes")
    assert "htam-vmsplice pinned" in result.log or result.status != "ok", result.log[-500:]
    assert pinned == 0, f"{pinned >> 20} MB pinned: {result.status}"


@pytest.mark.slow
def test_a_disk_burst_stops_at_the_job_directory_size(limited):
    result = _run(limited, "attack_fallocate_burst.py", FILES=4, SIZE=48 << 20)
    reserved = _held(result, r"htam-burst reserved (\d+) bytes")
    assert 0 < reserved <= DISK_MB << 20, f"{reserved >> 20} MB reserved: {result.status}"


@pytest.mark.gpu
def test_an_honest_cuda_candidate_runs_under_the_kernel_limits():
    """On the GPU machine: the control group (its CUDA context's host memory included) and the
    sized job directory are in place, and an honest CUDA candidate still builds and runs."""
    from tests.evaluate.conftest import gpu_config

    with Evaluator("cuda", gpu_config()) as ev:
        assert "cgroup v" in ev.isolation and "job directory of" in ev.isolation, ev.isolation
        code = (FIXTURES / "honest_relu_cuda.py").read_text()
        result = ev.evaluate(task_for(RELU), code, "cuda")
        assert result.status == "ok", (result.messages, result.log[-1500:])
