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
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from htam.evaluate.eval_config import env_allowed
from htam.evaluate.host import folders
from htam.evaluate.sandbox import isolation

PRELOAD = (
    "torch",
    "htam.evaluate.judge.trusted_jobs",
    "htam.evaluate.judge.judge",
    "htam.evaluate.candidate.harness",
)
OPTIONAL_PRELOAD = ("triton", "triton.language")
_HEADER = struct.Struct("!Q")
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


def send_frame(sock: socket.socket, obj: object, fds: list[int] | None = None) -> None:
    payload = pickle.dumps(obj)
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [data[:1]], fds)
        data = data[1:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("fork server connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, with_fds: bool = False) -> tuple[Any, list[int]]:
    fds: list[int] = []
    if with_fds:
        first, fds, _, _ = socket.recv_fds(sock, 1, 8)
        if not first:
            raise EOFError("fork server connection closed")
        head = first + _recv_exact(sock, _HEADER.size - 1)
    else:
        head = _recv_exact(sock, _HEADER.size)
    (n,) = _HEADER.unpack(head)
    return pickle.loads(_recv_exact(sock, n)), fds


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
        config = {
            "workroot": str(workroot),
            "warm_cuda": warm_cuda,
            "limits": limits or isolation.Limits(),
        }
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
            send_frame(ours, config)
            ready = self._ask(None, timeout_s=300.0)
        except BaseException:
            # Ctrl-C while it imports torch: it leads a session of its own, so nothing else
            # stops it, and its home is removed next; it must be gone first
            self.kill()
            raise
        if ready.get("op") != "ready":
            self.kill()
            raise ForkServerError(f"fork server failed to start: {ready}")
        self.plan: isolation.Plan = ready["plan"]

    def _ask(
        self,
        request: dict | None,
        fds: list[int] | None = None,
        timeout_s: float = CONTROL_TIMEOUT_S,
        fds_back: list[int] | None = None,
    ) -> dict:
        """Send ``request`` (with ``fds``) and return the reply; descriptors that came with the
        reply are appended to ``fds_back`` (given: they are the caller's to close)."""
        with self._lock:
            try:
                if request is not None:
                    send_frame(self._sock, request, fds)
                self._sock.settimeout(timeout_s)
                reply, back = recv_frame(self._sock, with_fds=True)
                if fds_back is None:
                    for fd in back:
                        os.close(fd)
                else:
                    fds_back.extend(back)
                return reply
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                raise ForkServerError(self._why(exc)) from None

    def _why(self, exc: BaseException) -> str:
        try:
            code = self.process.wait(timeout=1.0)  # a broken channel: has it died?
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            return f"the evaluator's fork server died ({how})"
        if isinstance(exc, TimeoutError):
            return "the evaluator's fork server stopped answering"
        return f"the evaluator's fork server broke its channel ({type(exc).__name__})"

    def judge(self, job: dict, log: Path, result_fd: int, sock_fds: list[int]) -> int:
        fds = [result_fd, *sock_fds]
        return self._started(self._ask({"op": "judge", "job": job, "log": str(log)}, fds))["pid"]

    def candidate(self, job: dict, sock_fd: int) -> dict:
        """Hand ``job`` to the candidate standby: its pid, user id, job directory and
        ``log_fd``, a descriptor of its output log opened before it ran (the caller's to
        close)."""
        back: list[int] = []
        reply = self._ask({"op": "candidate", "job": job}, [sock_fd], fds_back=back)
        try:
            started = self._started(reply)
        except ForkServerError:
            for fd in back:
                os.close(fd)
            raise
        if len(back) != 1:
            for fd in back:
                os.close(fd)
            raise ForkServerError("the fork server sent no descriptor of the candidate's log")
        return {**started, "log_fd": back[0]}

    @staticmethod
    def _started(reply: dict) -> dict:
        if reply.get("pid") is None:
            raise ForkServerError(reply.get("error", "a child could not start"))
        return reply

    def wait(self, pid: int, timeout_s: float = 5.0) -> int | None:
        """Reap ``pid``: its exit code, or minus the signal number that ended it."""
        reply = self._ask(
            {"op": "wait", "pid": pid, "timeout": timeout_s}, timeout_s=timeout_s + 30
        )
        return reply["status"]

    def release(self, pid: int) -> None:
        """Leave ``pid`` (already killed) for the server to reap in the background."""
        self._ask({"op": "release", "pid": pid})

    def kill_uid(self, uid: int) -> None:
        self._ask({"op": "kill_uid", "uid": uid})

    def alive(self) -> bool:
        if self.process.poll() is not None:
            return False
        try:
            return self._ask({"op": "ping"}, timeout_s=10.0).get("op") == "pong"
        except ForkServerError:
            return False

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                with self._lock:
                    send_frame(self._sock, {"op": "exit"})
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """The server and every process of its session gone (a stopped server too), now, and
        the job directories it mounted with it (a server killed could not unmount them)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self._sock.close()
        if os.geteuid() == 0:
            folders.unmount_all(self._workroot)
