"""The candidate's user as its container: one stop reaches all its processes at once, and none of
them can reach the process that stops them."""

import os
import signal
import threading
import time

import pytest

from htam.evaluate.sandbox import candidate_user
from htam.evaluate.sandbox.candidate_user import UID_BASE, Stopper, private_tmp_mb, uid_pids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing user ids needs root")
UID = UID_BASE - 12_345  # below every fork server's candidate ids, and its guard id below theirs


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"  # gone, or as good as gone


def _as_candidate(body) -> int:
    """A process of the candidate's user running ``body`` (its exit code: 0 when it held)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setresgid(UID, UID, UID)
            os.setresuid(UID, UID, UID)
            code = body()
        finally:
            os._exit(code)
    return pid


def _wait_state(pid: int, state: str) -> bool:
    for _ in range(200):
        if _state(pid) == state:
            return True
        time.sleep(0.01)
    return False


def test_one_stop_reaches_every_process_and_none_can_reach_the_stopper():
    def fork_and_sleep() -> int:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
        return 0

    parent = _as_candidate(fork_and_sleep)
    stopper = Stopper(UID)
    try:
        time.sleep(0.2)
        family = uid_pids(UID)  # the stopper acts as the user, but is not one of its processes
        assert parent in family and len(family) == 2 and stopper.pid not in family
        stopper.signal(signal.SIGSTOP)
        assert all(_wait_state(p, "T") for p in family)
        stopper.signal(signal.SIGCONT)
        assert all(_wait_state(p, "S") for p in family)

        def attack() -> int:
            try:
                os.kill(stopper.pid, signal.SIGSTOP)
            except PermissionError:
                return 0
            return 1

        attacker = _as_candidate(attack)
        assert os.waitpid(attacker, 0)[1] == 0  # the candidate may not signal the stopper
        assert _state(stopper.pid) in "SR"
    finally:
        stopper.signal(signal.SIGKILL)
        stopper.close()
        os.waitpid(parent, 0)
    for _ in range(200):  # the grandchild, killed too, may linger as a zombie of init's
        if all(_state(p) == "Z" for p in uid_pids(UID)):
            break
        time.sleep(0.01)
    assert all(_state(p) == "Z" for p in uid_pids(UID))


def test_a_private_tmp_counts_as_the_candidates_memory():
    """Files in the candidate's own tmpfs are memory no resident set shows (red team 4: three
    mounts of 1 GiB beside the limit); the host's /tmp is not the candidate's."""
    import ctypes

    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.unshare(0x00020000) == 0  # CLONE_NEWNS
            assert libc.mount(None, b"/", None, (1 << 18) | 16384, None) == 0  # private, rec
            assert libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=64m") == 0
            with open("/tmp/held", "wb") as f:
                f.write(b"\1" * (24 << 20))
            os.write(ready[1], b"k")
            os.read(go[0], 1)
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.read(ready[0], 1) == b"k"
        held = private_tmp_mb(pid, ("/tmp", "/var/tmp"))  # /var/tmp: the host's, not counted
        assert 23.5 <= held <= 25, held
        assert private_tmp_mb(os.getpid(), ("/tmp",)) == 0  # the host's own /tmp
    finally:
        os.write(go[1], b"k")
        assert os.waitpid(pid, 0)[1] == 0


def test_the_final_kill_cannot_be_stopped_by_the_candidate(monkeypatch):
    """The process that ends a candidate's user took that user's ids for its ``kill(-1)``: a
    process of the candidate's sending SIGSTOP to all of its user in a loop could stop it first.
    The fork server then waited on it for good, the evaluation was lost, and the candidate's
    processes outlived the server that was replaced. Here the window between the change of user
    and the kill is widened, so that the loop meets it every time."""
    real_kill = os.kill

    def slow_kill(pid: int, sig: int) -> None:
        if pid == -1 and sig == signal.SIGKILL:  # the killer, as the candidate's user
            time.sleep(0.5)
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", slow_kill)

    def stop_everything() -> int:
        while True:
            try:
                real_kill(-1, signal.SIGSTOP)
            except ProcessLookupError:
                pass
            time.sleep(0.002)

    looper = _as_candidate(stop_everything)
    time.sleep(0.2)
    killer = threading.Thread(target=candidate_user.kill_uid, args=(UID,), daemon=True)
    killer.start()
    killer.join(10.0)
    ended = not killer.is_alive()
    if not ended:  # the killer was stopped: end everything of the user from here, as root
        for pid in uid_pids(UID) + [looper]:
            try:
                real_kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killer.join(10.0)
    os.waitpid(looper, 0)
    assert ended, "a process of the candidate's user stopped the final kill"
