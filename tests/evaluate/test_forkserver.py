"""The fork server hands each job to a process made ahead of it, and copes when that one died."""

import os
import signal
import time

from htam.evaluate.forkserver import ForkServer
from htam.evaluate.sandbox import Limits, run_job

PROBE = {"kind": "probe", "device": "cpu"}
LIMITS = Limits(30.0, 30.0, 4096, 1 << 20)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                found.append(int(entry))
    return found


def _started_at(pid: int) -> float:
    """Wall-clock start of ``pid`` from /proc (clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def test_a_job_runs_in_a_process_made_before_it_was_asked_for(tmp_path):
    with ForkServer(preload_triton=False) as server:
        time.sleep(1.5)
        asked = time.time()
        child = server.spawn(PROBE, tmp_path, tmp_path / "log")
        try:
            assert _started_at(child.pid) < asked - 0.5
        finally:
            os.close(child.result_fd)
            server.wait(child.pid)


def test_a_dead_standby_is_replaced_and_jobs_still_run(tmp_path):
    with ForkServer(preload_triton=False) as server:
        time.sleep(0.5)
        standbys = _children(server.process.pid)
        assert len(standbys) == 1
        os.kill(standbys[0], signal.SIGKILL)
        time.sleep(0.2)
        for i in range(2):
            outcome = run_job(server, PROBE, tmp_path / f"job{i}", LIMITS)
            assert outcome.result == {
                "type": "result",
                "device": "cpu",
                "torch": outcome.result["torch"],
            }
