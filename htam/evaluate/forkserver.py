"""A fork server: one clean-environment process that has imported torch (but not initialized
CUDA) and forks a fresh child per job, so every candidate starts in well under a second.

The server is started with a scrubbed environment, so not even /proc/self/environ of a child
holds a secret. Each child runs in its own session (its process group is killed as a whole), in
its own working directory, with stdout/stderr sent to a log file and every inherited descriptor
closed except the result pipe, which only the parent reads.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from htam.evaluate.config import SECRET_MARKERS

PRELOAD = ("torch", "htam.evaluate.worker")
OPTIONAL_PRELOAD = ("triton", "triton.language")
_HEADER = struct.Struct("!Q")


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not any(marker in k.upper() for marker in SECRET_MARKERS)
    }
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    return env


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("fork server connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    (n,) = _HEADER.unpack(recv_exact(sock, _HEADER.size))
    return recv_exact(sock, n)


@dataclass
class Child:
    pid: int
    result_fd: int


class ForkServer:
    """Client side: starts the server process and asks it for children."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        preload_triton: bool = True,
        warm_cuda: bool = False,
    ):
        self._lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._home = tempfile.mkdtemp(prefix="htam-forkserver-")
        args = [sys.executable, "-m", "htam.evaluate.serve", str(theirs.fileno())]
        if preload_triton:
            args.append("--triton")
        if warm_cuda:
            args.append("--warm-cuda")
        self.process = subprocess.Popen(
            args,
            pass_fds=[theirs.fileno()],
            env=scrubbed_env(env),
            cwd=self._home,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        ready = pickle.loads(recv_frame(self._sock))
        if ready.get("op") != "ready":
            raise RuntimeError(f"fork server failed to start: {ready}")
        self.preloaded: list[str] = ready["preloaded"]

    def spawn(self, job: dict, workdir: Path, log_path: Path) -> Child:
        read_fd, write_fd = os.pipe()
        try:
            with self._lock:
                send_frame(
                    self._sock,
                    pickle.dumps(
                        {"op": "fork", "job": job, "workdir": str(workdir), "log": str(log_path)}
                    ),
                )
                socket.send_fds(self._sock, [b"F"], [write_fd])
                reply = pickle.loads(recv_frame(self._sock))
        finally:
            os.close(write_fd)
        return Child(pid=reply["pid"], result_fd=read_fd)

    def wait(self, pid: int, timeout_s: float = 5.0) -> int | None:
        """Reap ``pid``: its exit code, or minus the signal number that ended it."""
        with self._lock:
            send_frame(self._sock, pickle.dumps({"op": "wait", "pid": pid, "timeout": timeout_s}))
            return pickle.loads(recv_frame(self._sock))["status"]

    def release(self, pid: int) -> None:
        """Leave ``pid`` (already sent SIGKILL) for the server to reap in the background: a GPU
        process's teardown then overlaps the next job instead of delaying this one."""
        with self._lock:
            send_frame(self._sock, pickle.dumps({"op": "release", "pid": pid}))

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.alive():
            try:
                with self._lock:
                    send_frame(self._sock, pickle.dumps({"op": "exit"}))
                self.process.wait(timeout=5)
            except (OSError, EOFError, subprocess.TimeoutExpired):
                self.process.kill()
        self._sock.close()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- server side


def _waitpid(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def _detach(server_sock: socket.socket, keep: int) -> None:
    """In a freshly forked child: its own process group (killed as one), default SIGINT, and no
    descriptor inherited from the server but ``keep``."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    server_sock.close()
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)


def _child_main(sock: socket.socket, request: dict, result_fd: int) -> None:
    _detach(sock, result_fd)
    _run_child(request, result_fd)


def _run_child(request: dict, result_fd: int) -> None:
    """Run the job with stdout/stderr in its log; the result pipe is the only other descriptor
    inherited from the server."""
    os.chdir(request["workdir"])
    log_fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null_fd)
    os.close(log_fd)
    code = 0
    try:
        from htam.evaluate import worker

        worker.run(request["job"], result_fd)
    except BaseException:  # the child must always exit through os._exit, whatever happened
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class Standby:
    """A child forked ahead of its job, its CUDA context already made: the next job is handed to
    it, so a GPU job does not wait for the context. It is still one fresh process per job."""

    pid: int
    control: socket.socket

    @classmethod
    def start(cls, server_sock: socket.socket, warm_cuda: bool) -> Standby:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _standby_main(server_sock, theirs, warm_cuda)
        theirs.close()
        return cls(pid, ours)

    def hand_over(self, request: dict, result_fd: int) -> bool:
        """Give it the job; False when it is gone (then it has been reaped)."""
        try:
            send_frame(self.control, pickle.dumps(request))
            socket.send_fds(self.control, [b"F"], [result_fd])
            return True
        except OSError:
            self.discard()
            return False
        finally:
            self.control.close()

    def discard(self) -> None:
        self.control.close()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _waitpid(self.pid, 5.0)


def _standby_main(server_sock: socket.socket, control: socket.socket, warm_cuda: bool) -> None:
    _detach(server_sock, control.fileno())  # before CUDA opens descriptors that must stay open
    if warm_cuda:
        try:
            import torch

            torch.empty(1, device="cuda")
        except Exception:  # noqa: BLE001 - the job will meet (and report) the same problem
            pass
    try:
        request = pickle.loads(recv_frame(control))
        _, fds, _, _ = socket.recv_fds(control, 1, 1)
    except (EOFError, OSError, pickle.UnpicklingError):
        os._exit(0)  # the server went away or gave up on this standby
    control.close()
    _run_child(request, fds[0])


def serve(fd: int, triton: bool, warm_cuda: bool = False) -> None:
    sock = socket.socket(fileno=fd)
    preloaded = []
    for name in PRELOAD + (OPTIONAL_PRELOAD if triton else ()):
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except ImportError:
            if name in PRELOAD:
                raise
    standby = Standby.start(sock, warm_cuda)
    send_frame(sock, pickle.dumps({"op": "ready", "preloaded": preloaded}))
    released: set[int] = set()
    try:
        while True:
            try:
                request = pickle.loads(recv_frame(sock))
            except EOFError:
                return
            released = {pid for pid in released if _waitpid(pid, 0.0) is None}
            if request["op"] == "exit":
                return
            if request["op"] == "release":
                released.add(request["pid"])
                continue
            if request["op"] == "wait":
                status = _waitpid(request["pid"], request["timeout"])
                send_frame(sock, pickle.dumps({"status": status}))
                continue
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
            if standby.hand_over(request, fds[0]):
                pid = standby.pid
            else:  # the standby died: fork as usual
                pid = os.fork()
                if pid == 0:
                    _child_main(sock, request, fds[0])
            os.close(fds[0])
            standby = Standby.start(sock, warm_cuda)  # the next job's process readies meanwhile
            send_frame(sock, pickle.dumps({"pid": pid}))
    finally:
        standby.discard()
