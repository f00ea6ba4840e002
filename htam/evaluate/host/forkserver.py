"""A fork server: one clean-environment process that has imported torch (but not initialized
CUDA) and forks a fresh child per role and job, so every process starts in well under a second.

Two roles. A *judge* child is trusted: it holds the reference and forms verdicts (or runs a
trusted job alone: probe, peaks, reference). A *candidate* child is hostile: before any of its
code exists it is isolated (``isolation.enter``: namespaces, read-only filesystem, its own user
id, rlimits) and then only runs the harness. For each role the server keeps one *standby* child
forked ahead of the next job, its CUDA context made (as its final user, for a candidate), so a
GPU job does not wait for it; a standby still runs one job only.

The server runs with a scrubbed environment and is not dumpable. Every read the client makes
from it has a timeout; a server that died or stopped answering is reported and replaced.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TypeVar

from htam.evaluate import channel, frames
from htam.evaluate import server_frames as sf
from htam.evaluate.eval_config import env_allowed
from htam.evaluate.host import folders
from htam.evaluate.sandbox import candidate_user, isolation

PRELOAD = (
    "torch",
    "htam.evaluate.judge.trusted_jobs",
    "htam.evaluate.judge.judge",
    "htam.evaluate.candidate.harness",
)
OPTIONAL_PRELOAD = ("triton", "triton.language")
R = TypeVar("R")
CONTROL_TIMEOUT_S = 60.0  # no control answer takes longer unless the server is dead or stopped


class ForkServerError(RuntimeError):
    """The fork server died or stopped answering."""


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if env_allowed(k)}
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    # OpenMP threads that spin after a parallel region (libgomp's default) steal the core the
    # call's reply and the judge need: on a loaded 2-core machine an honest OpenMP kernel showed
    # 9.7 ms "outside its events" per call. Passive waiting leaves the clock to the call itself.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


class ForkServer:
    """Client side: starts the server process and asks it for children. Only trusted code
    (the evaluator) talks to it; candidates never hold its socket."""

    def __init__(
        self,
        workroot: Path,
        env: dict[str, str] | None = None,
        warm_cuda: bool = False,
        limits: isolation.Limits | None = None,
    ):
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._home = tempfile.mkdtemp(prefix="htam-forkserver-", dir=workroot)
        self._workroot = workroot
        config = sf.Config(
            workroot=str(workroot), warm_cuda=warm_cuda, limits=limits or isolation.Limits()
        )
        # The server runs this very htam, whichever one an installed path would find.
        root = str(Path(__file__).resolve().parents[3])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "htam.evaluate.sandbox.serve", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=scrubbed_env({**(env or {}), "PYTHONPATH": path}),
            cwd=self._home,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        try:
            channel.send(ours, config)
            ready = self._ask(None, sf.Ready, timeout_s=300.0)
        except BaseException:
            # Ctrl-C while it imports torch: it leads a session of its own, so nothing else
            # stops it, and its home is removed next; it must be gone first
            self.kill()
            raise
        self.plan: isolation.Plan = ready.plan

    def _ask(
        self,
        request: sf.Request | None,
        kind: type[R],
        fds: list[int] | None = None,
        timeout_s: float = CONTROL_TIMEOUT_S,
        fds_back: list[int] | None = None,
    ) -> R:
        """Send ``request`` (with ``fds``) and return the reply, which must be a ``kind``;
        descriptors that came with the reply are appended to ``fds_back`` (given: they are the
        caller's to close)."""
        with self._lock:
            try:
                if request is not None:
                    channel.send(self._sock, request, fds)
                reply, back = channel.recv(
                    self._sock, timeout_s, sf.REPLY, with_fds=True, limit=frames.MAX_TRUSTED_FRAME
                )
            except (OSError, channel.ChannelError) as exc:
                raise ForkServerError(self._why(exc)) from None
        if fds_back is None:
            for fd in back:
                os.close(fd)
        else:
            fds_back.extend(back)
        if not isinstance(reply, kind):
            for fd in back:
                os.close(fd)
            raise ForkServerError(f"the fork server answered {reply.op!r}, not {kind.__name__}")
        return reply

    def _why(self, exc: BaseException) -> str:
        try:
            code = self.process.wait(timeout=1.0)  # a broken channel: has it died?
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            return f"the evaluator's fork server died ({how})"
        if isinstance(exc, (TimeoutError, channel.ChannelTimeout)):
            return "the evaluator's fork server stopped answering"
        return f"the evaluator's fork server broke its channel ({type(exc).__name__})"

    def judge(self, job: frames.Job, log: Path, result_fd: int, sock_fds: list[int]) -> int:
        fds = [result_fd, *sock_fds]
        started = _started(self._ask(sf.StartJudge(job=job, log=str(log)), sf.Started, fds))
        assert started.pid is not None  # _started refuses a reply without one
        return started.pid

    def candidate(self, job: frames.CandidateJob, sock_fd: int) -> Runner:
        """Hand ``job`` to the candidate standby: its pid, user id, job directory and a
        descriptor of its output log opened before it ran (the caller's to close)."""
        back: list[int] = []
        reply = self._ask(sf.StartCandidate(job=job), sf.Started, [sock_fd], fds_back=back)
        try:
            started = _started(reply)
            if len(back) != 1:
                raise ForkServerError("the fork server sent no descriptor of the candidate's log")
        except ForkServerError:
            for fd in back:
                os.close(fd)
            raise
        return Runner(started, back[0])

    def wait(self, pid: int, timeout_s: float = 5.0) -> int | None:
        """Reap ``pid``: its exit code, or minus the signal number that ended it."""
        request = sf.Wait(pid=pid, timeout=timeout_s)
        return self._ask(request, sf.Waited, timeout_s=timeout_s + 30).status

    def release(self, pid: int) -> None:
        """Leave ``pid`` (already killed) for the server to reap in the background."""
        self._ask(sf.Release(pid=pid), sf.Done)

    def kill_uid(self, uid: int) -> None:
        self._ask(sf.KillUid(uid=uid), sf.Done)

    def alive(self) -> bool:
        if self.process.poll() is not None:
            return False
        try:
            self._ask(sf.Ping(), sf.Pong, timeout_s=10.0)
            return True
        except ForkServerError:
            return False

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                with self._lock:
                    channel.send(self._sock, sf.Exit())
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """The server and every process of its session gone (a stopped server too), now, and
        the job directories it mounted with it (a server killed could not unmount them), and
        every process left of its candidates' users: a candidate's helpers lead sessions of
        their own and outlive the server that died mid-job, which would have ended them."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self._sock.close()
        if os.geteuid() == 0:
            folders.unmount_all(self._workroot)
            for slot in range(candidate_user.SLOTS):
                candidate_user.kill_uid(candidate_user.candidate_uid(self.process.pid, slot))


class Runner:
    """An isolated runner the fork server started: how it started (``info``: pid, user id, job
    directory, control group) and the descriptor of its output log, opened before it ran."""

    def __init__(self, info: sf.Started, log_fd: int):
        if info.pid is None or info.dir is None or info.uid is None:
            raise ForkServerError(
                "the fork server started a runner without its pid, user or folder"
            )
        self.info, self.log_fd = info, log_fd
        self.pid, self.uid, self.dir, self.by_uid = info.pid, info.uid, info.dir, info.by_uid
        self.group = info.group

    def identity(self) -> frames.RunnerInfo:
        """What the judge needs of it: which processes to stop, and how."""
        return frames.RunnerInfo(uid=self.uid, pid=self.pid, by_uid=self.by_uid)


def _started(reply: sf.Started) -> sf.Started:
    if reply.pid is None:
        raise ForkServerError(reply.error or "a child could not start")
    return reply
