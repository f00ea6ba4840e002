"""The fork server process (``python -m htam.evaluate.sandbox.serve FD``): imports torch and the
evaluator's child code once, then forks judge and isolated children on request, keeping a
standby of each role ready. ``htam.evaluate.host.forkserver`` is the client side and says why.
"""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, replace

from htam.evaluate import channel, frames
from htam.evaluate import server_frames as sf
from htam.evaluate.host import folders
from htam.evaluate.host.forkserver import OPTIONAL_PRELOAD, PRELOAD
from htam.evaluate.logs import read_tail
from htam.evaluate.sandbox import candidate_user, cgroups, isolation
from htam.evaluate.sandbox.serve_children import candidate_main, finish, judge_main


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


# What the server meets when its client went away: the channel closed, Ctrl-C.
_GONE = (EOFError, channel.ChannelClosed, BrokenPipeError, ConnectionError, KeyboardInterrupt)


def _abandoned(exc: BaseException, *folders: str) -> bool:
    """Whether ``exc`` only says that the client went away (closed its end, was interrupted, or
    removed the folders it gave: the work root, the server's home) rather than a fault worth a
    traceback. Such an end is quiet: the client reports its own interruption."""
    return isinstance(exc, _GONE) or any(not os.path.isdir(folder) for folder in folders)


@dataclass
class Standby:
    """A child forked ahead of its job, isolated (a candidate) and with its CUDA context made."""

    pid: int
    control: socket.socket
    uid: int | None = None
    job_dir: str | None = None
    # the candidate's output log, opened before any code of the candidate existed: everything
    # read of it later goes through this descriptor, never its path, which the candidate owns
    log_fd: int | None = None
    group: cgroups.Group | None = None  # the kernel's limits on it and all it starts

    def hand_over(self, request: sf.Start, fds: list[int]) -> bool:
        try:
            channel.send(self.control, request, fds)
            return True
        except OSError:
            self.discard(keep_log=True)  # its last words are read from its log
            return False
        finally:
            self.control.close()

    def close_log(self) -> None:
        if self.log_fd is not None:
            os.close(self.log_fd)
            self.log_fd = None

    def discard(self, keep_log: bool = False) -> None:
        self.control.close()
        if not keep_log:
            self.close_log()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _waitpid(self.pid, 5.0)


class Server:
    def __init__(self, sock: socket.socket, config: sf.Config):
        self.sock = sock
        self.workroot = config.workroot
        self.warm_cuda = config.warm_cuda
        self.limits: isolation.Limits = config.limits
        self.plan = isolation.probe()
        self.cgroups, why = (
            cgroups.probe(str(os.getpid())) if self.limits.memory_bytes else (None, "")
        )
        if self.cgroups:
            self.plan = replace(self.plan, cgroup=self.cgroups.summary)
        elif why:
            self.plan = replace(self.plan, missing=self.plan.missing + (why,))
        self.groups: dict[int, cgroups.Group] = {}  # by the pid of the child that joined it
        # job directories are tmpfs mounts of a fixed size where this process may mount (root)
        self.sized_dirs: list[str] = []
        if os.geteuid() == 0 and self.plan.namespaces:
            self.plan = replace(self.plan, sized_dir=self.limits.disk_bytes)
        else:
            self.plan = replace(
                self.plan, missing=self.plan.missing + ("no sized job directory (not root)",)
            )
        self.jobs = 0
        if self.warm_cuda and self.plan.drop_uid:
            self._check_cuda_as_candidate()
        self.judge_standby = self._fork_judge()
        # A job takes two isolated processes (the candidate and the reference's runner).
        self.cand_standbys = [self._fork_candidate(), self._fork_candidate()]

    def _check_cuda_as_candidate(self) -> None:
        """A candidate's own user must be able to use the GPU; where it cannot, candidates keep
        the server's user and the result says so."""
        uid = candidate_user.candidate_uid(os.getpid(), 3)
        pid = os.fork()
        if pid == 0:
            ok = 1
            try:
                isolation.enter(
                    self.workroot, uid, replace(self.plan, namespaces=False), self.limits
                )
                import torch

                torch.empty(1, device="cuda")
                ok = 0
            finally:
                os._exit(ok)
        if _waitpid(pid, 120.0) != 0:
            self.plan = replace(
                self.plan,
                drop_uid=False,
                missing=self.plan.missing
                + ("no own user id: the GPU cannot be used by an unprivileged user here",),
            )

    def _fork(self, main, *args) -> Standby:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            isolation.die_with_parent()
            ours.close()
            self.sock.close()
            os.setsid()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            keep = theirs.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, 65536)
            finish(main, theirs, *args)
        theirs.close()
        return Standby(pid, ours)

    def _fork_judge(self) -> Standby:
        return self._fork(judge_main, self.warm_cuda)

    def _fork_candidate(self) -> Standby:
        self.jobs += 1
        uid = candidate_user.candidate_uid(os.getpid(), self.jobs)
        # named by this server's pid too: a server started after one died shares its workroot
        job_dir = os.path.join(self.workroot, f"job{os.getpid()}.{self.jobs}")
        os.makedirs(job_dir)
        if self.plan.sized_dir:
            self.sized_dirs.append(job_dir)
            folders.mount_sized(job_dir, self.limits.disk_bytes, uid if self.plan.drop_uid else 0)
        log = os.path.join(job_dir, "output.log")
        log_fd = os.open(log, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        if self.plan.drop_uid:
            os.chown(job_dir, uid, uid)
            os.fchown(log_fd, uid, uid)
        group = None
        if self.cgroups and self.limits.memory_bytes is not None:
            group = cgroups.create(
                self.cgroups, f"job{self.jobs}", self.limits.memory_bytes, self.limits.nproc + 64
            )
        standby = self._fork(
            candidate_main, job_dir, uid, self.plan, self.limits, self.warm_cuda, group
        )
        standby.uid, standby.job_dir, standby.log_fd = uid, job_dir, log_fd
        if group:
            standby.group = self.groups[standby.pid] = group
        return standby

    def _reaped(self, pid: int) -> None:
        """The group of a child that was reaped, removed once its last process is gone."""
        group = self.groups.get(pid)
        if group and group.remove():
            del self.groups[pid]

    def serve(self) -> None:
        released: set[int] = set()
        try:
            # inside the cleanup: a client gone before "ready" left the standbys' sized job
            # directories mounted on the host (a test's closed channel leaked two a run)
            channel.send(self.sock, sf.Ready(plan=self.plan))
            while True:
                try:
                    request, fds = channel.recv(
                        self.sock, None, sf.REQUEST, with_fds=True, limit=frames.MAX_TRUSTED_FRAME
                    )
                except channel.ChannelClosed:
                    return
                released = {pid for pid in released if _waitpid(pid, 0.0) is None}
                if isinstance(request, sf.Exit):
                    return
                reply, back = self._answer(request, fds, released)
                channel.send(self.sock, reply, back)
                for fd in back:
                    os.close(fd)
        finally:
            for standby in [self.judge_standby, *self.cand_standbys]:
                standby.discard()
            for group in self.groups.values():
                group.remove()
            if self.cgroups:
                cgroups.remove_base(self.cgroups)
            for folder in self.sized_dirs:  # those the client has not removed yet
                folders.unmount_all(folder)

    def _answer(
        self, request: sf.Request, fds: list[int], released: set[int]
    ) -> tuple[sf.Reply, list[int]]:
        """The reply to ``request``, and the descriptors that go with it."""
        if isinstance(request, (sf.StartJudge, sf.StartCandidate)):
            return self._start(request, fds)
        if isinstance(request, sf.Release):
            released.add(request.pid)
        elif isinstance(request, sf.Wait):
            status = _waitpid(request.pid, request.timeout)
            if status is not None:
                self._reaped(request.pid)
            return sf.Waited(status=status), []
        elif isinstance(request, sf.KillUid):
            candidate_user.kill_uid(request.uid)
        elif isinstance(request, sf.Ping):
            return sf.Pong(), []
        return sf.Done(), []

    def _start(self, request: sf.Start, fds: list[int]) -> tuple[sf.Started, list[int]]:
        """Hand a job to a standby: the reply, and the descriptors that go with it (a
        candidate's output log, opened before it ran)."""
        op = request.op
        standby = self.judge_standby if op == "judge" else self.cand_standbys.pop(0)
        if isinstance(request, sf.StartCandidate) and request.job.preload:
            self._preload(request.job.preload, standby)
        handed = standby.hand_over(request, fds)
        fresh = self._fork_judge() if op == "judge" else self._fork_candidate()
        if not handed:  # the standby died: hand the job to the fresh one and fork another
            standby.close_log()
            standby = fresh
            handed = standby.hand_over(request, fds)
            fresh = self._fork_judge() if op == "judge" else self._fork_candidate()
        if op == "judge":
            self.judge_standby = fresh
        else:
            self.cand_standbys.append(fresh)
        for fd in fds:
            os.close(fd)
        if not handed:
            last = (_tail(standby.log_fd) if standby.log_fd is not None else "") or "no output"
            standby.close_log()
            return sf.Started(error=f"a new {op} process could not start: {last}"), []
        reply = sf.Started(
            pid=standby.pid,
            uid=standby.uid,
            dir=standby.job_dir,
            by_uid=self.plan.drop_uid,
            group=standby.group,
        )
        return reply, [] if standby.log_fd is None else [standby.log_fd]

    def _preload(self, source: str, standby: Standby) -> None:
        """Verified builds of the same code, copied into the job directory (which the standby
        sees as its own) before it may run anything."""
        job_dir, uid = standby.job_dir, standby.uid
        if job_dir is None or uid is None:
            raise RuntimeError("a standby without its job directory or its user")
        shutil.copytree(source, job_dir, dirs_exist_ok=True, symlinks=True)
        if self.plan.drop_uid:
            for folder, dirs, files in os.walk(job_dir):
                for name in dirs + files:
                    os.lchown(os.path.join(folder, name), uid, uid)


def _tail(fd: int) -> str:
    """The last line a standby that died before its job wrote into its log."""
    text = read_tail(fd, 4000)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def serve(fd: int) -> None:
    """Serve the client on ``fd`` until it says exit or goes away. A client that goes away early
    (Ctrl-C while this process still imports torch: it closes its end, or removes the folders it
    gave) ends it quietly, exit status 0; any other failure keeps its traceback on stderr."""
    try:
        home = os.getcwd()
    except FileNotFoundError:  # the client removed it before this process even started
        os._exit(0)
    workroot: list[str] = []  # known once the config came
    try:
        isolation.not_dumpable()
        sock = socket.socket(fileno=fd)
        config, _ = channel.recv(sock, None, sf.CONFIG, limit=frames.MAX_TRUSTED_FRAME)
        workroot.append(config.workroot)
        for name in PRELOAD + OPTIONAL_PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                if name in PRELOAD:
                    raise
        Server(sock, config).serve()
    except BaseException as exc:
        if isinstance(exc, SystemExit) or not _abandoned(exc, home, *workroot):
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
