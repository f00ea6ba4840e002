"""The fork server hands each job to a process made ahead of it, copes when that one died, and
is itself replaced when it dies or stops answering."""

import os
import signal
import time

import pytest

from htam.evaluate.frames import Job, TimingSettings
from htam.evaluate.host.forkserver import ForkServer, ForkServerError, scrubbed_env
from htam.evaluate.host.watchdog import Limits, run_job

PROBE = Job(
    kind="probe",
    device="cpu",
    timing=TimingSettings(warmup_ms=0, timing_budget_ms=0, min_timed=1, max_timed=1, l2_flush_mb=0),
)
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


@pytest.fixture
def server(tmp_path):
    server = ForkServer(tmp_path)
    yield server
    server.close()


@pytest.mark.slow
def test_a_job_runs_in_a_process_made_before_it_was_asked_for(server, tmp_path):
    time.sleep(1.5)
    asked = time.time()
    read_fd, write_fd = os.pipe()
    pid = server.judge(PROBE, tmp_path / "log", write_fd, [])
    os.close(write_fd)
    try:
        assert _started_at(pid) < asked - 0.5
    finally:
        os.close(read_fd)
        server.wait(pid)


@pytest.mark.slow
def test_a_dead_standby_is_replaced_and_jobs_still_run(server, tmp_path):
    time.sleep(0.5)
    standbys = _children(server.process.pid)
    assert len(standbys) == 3  # one judge, two isolated (candidate and reference runner)
    for pid in standbys:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    for i in range(2):
        outcome = run_job(server, PROBE, tmp_path / f"job{i}", LIMITS)
        assert outcome.result.device == "cpu"


# A stopped server is found only when its wait runs out (a minute under load): SIGKILL keeps the
# report in the fast tier.
@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, pytest.param(signal.SIGSTOP, marks=pytest.mark.slow)]
)
@pytest.mark.slow
def test_a_dead_or_stopped_server_is_reported_not_waited_for(tmp_path, sig):
    server = ForkServer(tmp_path)
    try:
        os.kill(server.process.pid, sig)
        t0 = time.monotonic()
        with pytest.raises(ForkServerError, match="died|stopped answering"):
            server.wait(12345, timeout_s=0.1)
        assert time.monotonic() - t0 < 45
        assert not server.alive()
    finally:
        server.close()


def test_only_the_allowed_environment_reaches_candidates(monkeypatch):
    """An allowlist: a secret under any name (red team: DATABASE_URL, GH_PAT, SMTP_PASSWD came
    back through a candidate's log) stays out; what compilers and torch read goes in."""
    secrets = ("DATABASE_URL", "GH_PAT", "SMTP_PASSWD", "MYSQL_PWD", "AWS_SESSION_CREDENTIALS",
               "HF_AUTH", "OPENAI_API_KEY", "HTAM_API_KEY", "TORCH_HUB_TOKEN")  # fmt: skip
    kept = ("PATH", "TRITON_INTERPRET", "OMP_NUM_THREADS", "HTAM_CACHE_DIR", "CUDA_HOME", "LC_ALL")
    for name in secrets + kept:
        monkeypatch.setenv(name, "x")
    env = scrubbed_env({"PYTHONPATH": "/p"})
    assert not [name for name in secrets if name in env]
    assert all(name in env for name in kept) and env["PYTHONPATH"] == "/p"
