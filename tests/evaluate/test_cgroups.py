"""The kernel's limits on an isolated process (cgroups.py): a group per process, on whichever
cgroup version the machine mounts, whose memory limit counts the kernel's own objects and whose
process limit counts every thread. Each test runs its load in a child that joins a fresh group."""

from __future__ import annotations

import ctypes
import os

import pytest

from htam.evaluate.sandbox import cgroups


@pytest.fixture(scope="module")
def plan():
    found, why = cgroups.probe(f"test{os.getpid()}")
    if found is None:
        pytest.skip(why)
    yield found
    cgroups.remove_base(found)


def _in_group(group: cgroups.Group, body) -> int:
    """The exit code of a child that joins ``group`` and runs ``body`` (minus a signal)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            group.join()
            code = body()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_probe_names_a_version(plan):
    assert plan.version in (1, 2) and plan.summary.startswith(f"cgroup v{plan.version}")
    assert all(os.path.isdir(b) for b in plan.bases)


def test_memory_past_the_limit_is_ended_by_the_kernel(plan):
    group = cgroups.create(plan, "memory", 64 << 20, 64)

    def body() -> int:
        held = [bytearray(16 << 20) for _ in range(16)]  # 256 MiB, touched
        return 0 if held else 1

    try:
        assert _in_group(group, body) == -9
        assert group.oom_kills() >= 1
        assert group.memory_peak() <= 64 << 20
    finally:
        assert group.remove()


def test_processes_past_the_limit_are_refused(plan):
    group = cgroups.create(plan, "pids", 1 << 30, 8)

    def body() -> int:
        made = 0
        for _ in range(20):
            try:
                pid = os.fork()
            except BlockingIOError:
                break
            if pid == 0:
                os._exit(0)
            made += 1
            # never reaped until the end: every child holds its slot
        return min(made, 50)

    try:
        assert _in_group(group, body) < 8
    finally:
        assert group.remove()


def test_kernel_memory_of_mappings_is_charged(plan):
    """Mappings are kernel objects in no resident set; a fork copies them all (issue 37: 2.2 GB
    of them under a 512 MB limit). Charged to the group, they stop at its limit."""
    limit = 48 << 20
    group = cgroups.create(plan, "slabs", limit, 256)

    def body() -> int:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = (
            [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]
        )
        for i in range(60000):
            if libc.mmap(None, 4096, 1 if i % 2 else 3, 0x22, -1, 0) in (None, 2**64 - 1):
                return 2  # refused already: the mappings alone passed the limit
        forks = 0
        for _ in range(40):  # 40 x 60,000 mappings: some 400 MB of kernel memory unlimited
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.kill(os.getpid(), 19)  # stop: hold the copies until the group ends
                os._exit(0)
            forks += 1
        return 3 if forks == 40 else 0

    try:
        code = _in_group(group, body)
        assert code != 3, "every copy was made: the kernel memory went uncharged"
        assert group.memory_peak() <= limit
    finally:
        _kill_group(group)
        assert group.remove(5.0)


def _kill_group(group: cgroups.Group) -> None:
    with open(os.path.join(group.pids, "cgroup.procs")) as f:
        for pid in f.read().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                continue
