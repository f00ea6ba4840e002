"""The fork server hands each job to a process made ahead of it, copes when that one died, and
is itself replaced when it dies or stops answering."""

import os
import signal
import threading
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


HELPER_LEFT = """
import time

import torch
import torch.nn as nn

_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_imp = _B["__im" + "port__"]
subprocess, sys = _imp("sub" + "process"), _imp("sys")
subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)", "htam-helper-left"],
    start_new_session=True,
)
time.sleep(120)  # the server dies meanwhile


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def _helpers() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"htam-helper-left" in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(os.geteuid() != 0, reason="candidates have users of their own only as root")
def test_a_candidates_helpers_end_with_a_server_that_died_mid_job():
    """The final kill is the server's: a server killed mid-job (the out-of-memory killer, a
    crash) left a candidate's helpers, in sessions of their own, running on the host for good
    under a user id no later server would end."""
    from htam.evaluate import Evaluator
    from tests.evaluate.conftest import fast_config, task_for

    results = []
    try:
        with Evaluator("cpu", fast_config()) as evaluator:
            server_pid = evaluator.server.process.pid
            job = threading.Thread(
                target=lambda: results.append(
                    evaluator.evaluate(task_for("level1/1_ReLU.py"), HELPER_LEFT, "cpp", True)
                ),
                daemon=True,
            )
            job.start()
            for _ in range(600):
                if _helpers():
                    break
                time.sleep(0.1)
            assert _helpers(), "the candidate's helper never started"
            os.kill(server_pid, signal.SIGKILL)
            job.join(120)
        time.sleep(0.5)
        left = _helpers()
    finally:
        for pid in _helpers():
            os.kill(pid, signal.SIGKILL)
    assert results and results[0].status == "lost", results
    assert not left, "the candidate's helper outlived its server"
