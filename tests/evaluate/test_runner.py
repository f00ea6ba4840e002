"""The judge's handle on a runner: a stop that a process of the runner's user undoes is seen."""

import os
import signal
import socket
import time

import pytest

from htam.evaluate.frames import RunnerInfo
from htam.evaluate.judge.runner import Runner, Verdict
from htam.evaluate.sandbox.candidate_user import UID_BASE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing user ids needs root")
UID = UID_BASE - 23_456  # below every fork server's candidate ids


def _as_candidate(body) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(UID, UID, UID)
            os.setresuid(UID, UID, UID)
            body()
        finally:
            os._exit(0)
    return pid


def _spin() -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pass


def test_a_process_that_runs_while_stopped_is_rejected():
    worker = _as_candidate(_spin)
    ours, _ = socket.socketpair()
    runner = Runner(ours, RunnerInfo(uid=UID, pid=worker, by_uid=True), trusted=False)
    try:
        time.sleep(0.1)
        runner.freeze(True)  # a busy process stops, and its time holds still
        time.sleep(0.05)
        runner.check_still()
        runner.freeze(False)
        runner.freeze(True)
        os.kill(worker, signal.SIGCONT)  # what its own timer or a sibling could send
        time.sleep(0.05)
        with pytest.raises(Verdict) as caught:
            runner.check_still()
        assert caught.value.status == "rejected"
        assert "ran while the judge had it stopped" in caught.value.message
    finally:
        os.kill(worker, signal.SIGKILL)
        os.waitpid(worker, 0)
        runner.close()
