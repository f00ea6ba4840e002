"""The evaluator's side of a job: start the judge (and the candidate it drives), then watch them
from outside with wall-clock limits, host-memory limits on each, and an output cap on the
candidate's log, ending every process of the job on any breach. Every breach is a cause with its
figures, never a hang and never an empty message.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from htam.evaluate.frames import (
    REPORT,
    RESULTS,
    CandidateJob,
    Cost,
    Job,
    Result,
    Stage,
    Verdict,
    split,
)
from htam.evaluate.host import folders
from htam.evaluate.host.forkserver import ForkServer, Runner
from htam.evaluate.logs import read_file_tail, read_tail
from htam.evaluate.sandbox import candidate_user
from htam.evaluate.sandbox.isolation import PRIVATE

_TICK_S = 0.05


@dataclass
class Limits:
    compile_timeout_s: float
    run_timeout_s: float
    memory_limit_mb: int
    output_limit_bytes: int
    disk_limit_mb: int = 4096  # everything the candidate writes into its job directory


@dataclass
class JobOutcome:
    frames: list[Stage | Cost | Result] = field(default_factory=list)
    killed: str | None = None  # why the watchdog ended the job, with figures
    kill_kind: str | None = None  # "timeout", "memory", "output"; "reference": not the candidate
    log: str = ""  # the candidate's (or a trusted job's) captured output, truncated
    judge_log: str = ""
    wall_s: float = 0.0
    started: float = 0.0  # time.monotonic() when the job was asked for
    result_at: float | None = None
    candidate_exit: int | None = None
    job_dir: str | None = None
    runner_dir: str | None = None

    @property
    def result(self) -> Result | None:
        """The job's result: the judge's verdict, or what a trusted job found."""
        for frame in reversed(self.frames):
            if isinstance(frame, RESULTS):
                return frame
        return None

    @property
    def verdict(self) -> Verdict | None:
        return self.result if isinstance(self.result, Verdict) else None


class _Watch:
    def __init__(self, server: ForkServer, limits: Limits, outcome: JobOutcome):
        self.server, self.limits, self.outcome = server, limits, outcome
        self.judge_pid: int | None = None
        self.cand: Runner | None = None
        self.runner: Runner | None = None  # the reference's isolated runner
        self.log_fd: int | None = None
        self.log_path: Path | None = None

    @staticmethod
    def pids(info: Runner | None) -> list[int]:
        if not info:
            return []
        if info.by_uid and info.uid is not None:
            return candidate_user.uid_pids(info.uid)
        return [info.pid]

    def breach(self, disk: bool = False) -> tuple[str, str] | None:
        lim = self.limits
        if self.log_fd is not None:
            if os.fstat(self.log_fd).st_size > lim.output_limit_bytes:
                return "output", (
                    f"output flood: the candidate printed more than {lim.output_limit_bytes} bytes"
                )
            try:  # the name, not what a link there points to
                replaced = self.log_path is None or (
                    os.lstat(self.log_path).st_ino != os.fstat(self.log_fd).st_ino
                )
            except FileNotFoundError:
                replaced = True
            if replaced:
                return "output", "the candidate removed or replaced its output log"
        if disk and self.cand:
            usage = folders.scan(self.cand.dir)
            if usage.over:
                return "output", f"disk: the candidate's job directory holds {usage.over}"
            used = usage.bytes + _unlinked_bytes(self.pids(self.cand), self.cand.dir)
            if used > lim.disk_limit_mb << 20:
                return "output", (
                    f"disk: the candidate's job directory holds {used / 2**30:.1f} GiB of the "
                    f"{lim.disk_limit_mb / 1024:.1f} GiB allowed (with files removed but open)"
                )
        cand_pids = self.pids(self.cand)
        cand_mb = candidate_user.rss_mb(cand_pids) + candidate_user.descriptors_mb(cand_pids)
        if self.cand:
            cand_mb += candidate_user.private_tmp_mb(self.cand.pid, PRIVATE)
        if cand_mb > lim.memory_limit_mb:
            return "memory", (
                f"host memory {cand_mb / 1024:.1f} GiB (resident, page tables, its /tmp and its "
                "open descriptors) of the "
                f"{lim.memory_limit_mb / 1024:.1f} GiB allowed "
                "(raise it with --memory-limit-mb)"
            )
        judge_mb = candidate_user.rss_mb(
            self.pids(self.runner) + ([self.judge_pid] if self.judge_pid else [])
        )
        if judge_mb > lim.memory_limit_mb:
            return "reference", (
                f"the reference needs more host memory than the "
                f"{lim.memory_limit_mb / 1024:.1f} GiB allowed (stopped when it held "
                f"{judge_mb / 1024:.1f} GiB; raise it with --memory-limit-mb)"
            )
        return None

    def _kernel_limit(self, info: Runner) -> None:
        """A process of the group the kernel ended at its memory limit: the job's cause, unless
        the watchdog named one first (the kernel's limit lies a little above the watchdog's)."""
        group = info.group
        if group is None or self.outcome.killed or not group.oom_kills():
            return
        limit = self.limits.memory_limit_mb / 1024
        if info is self.cand:
            kind, why = (
                "memory",
                (
                    "host memory: the kernel ended a process of the candidate's at its control "
                    f"group's limit (its pages and the kernel's memory for it; {limit:.1f} GiB "
                    "allowed, raise it with --memory-limit-mb)"
                ),
            )
        else:
            kind, why = (
                "reference",
                (
                    f"the reference needs more host memory than the {limit:.1f} GiB allowed (the "
                    "kernel ended its runner at the limit; raise it with --memory-limit-mb)"
                ),
            )
        self.outcome.kill_kind, self.outcome.killed = kind, why

    def end(self) -> None:
        """Nothing of the job may outlive it: the candidate's user, then the judge."""
        for info in (self.cand, self.runner):
            if not info:
                continue
            if info.by_uid and info.uid is not None:
                self.server.kill_uid(info.uid)
            else:
                _killpg(info.pid)
            self._kernel_limit(info)  # before the wait, which removes the group
            code = self.server.wait(info.pid, 5.0)
            if info is self.cand:
                self.outcome.candidate_exit = code
        if self.judge_pid:
            _killpg(self.judge_pid)
            self.server.release(self.judge_pid)
        if self.log_fd is not None:
            # through the descriptor opened before the candidate ran: whatever it left at the
            # log's name (a link to a secret, a FIFO, a device) is never opened
            self.outcome.log = read_tail(self.log_fd, 64 * 1024)
            os.close(self.log_fd)
            self.log_fd = None


def _unlinked_bytes(pids: list[int], folder: str) -> int:
    """The blocks of files on ``folder``'s filesystem that are removed but still open or mapped:
    in no folder, yet on the host's disk until closed (8 GiB past a 4 GiB limit)."""
    try:
        dev = os.stat(folder).st_dev
    except OSError:
        return 0
    seen: dict[int, int] = {}
    for pid in pids:
        for kind in ("fd", "map_files"):  # held open, or mapped after its descriptor closed
            try:
                names = os.listdir(f"/proc/{pid}/{kind}")
            except OSError:
                continue
            for name in names:
                try:
                    st = os.stat(f"/proc/{pid}/{kind}/{name}")
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and st.st_dev == dev:
                    seen[st.st_ino] = st.st_blocks * 512
    return sum(seen.values())


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_job(
    server: ForkServer,
    job: Job,
    workdir: Path,
    limits: Limits,
    candidate: CandidateJob | None = None,
    runner: CandidateJob | None = None,
) -> JobOutcome:
    """Run a trusted job, or (``candidate`` and the reference's ``runner`` given) a judged
    evaluation."""
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    outcome = JobOutcome(started=start)
    watch = _Watch(server, limits, outcome)
    read_fd, pipe_write = os.pipe()
    write_fd: int | None = pipe_write
    judge_ends: list[socket.socket] = []
    try:
        if candidate is not None:
            for role, spec in (("candidate", candidate), ("runner", runner)):
                if spec is None:  # a build job: the candidate's process alone
                    continue
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                judge_ends.append(ours)
                info = server.candidate(spec, theirs.fileno())
                theirs.close()
                if role == "candidate":
                    watch.cand, watch.log_fd = info, info.log_fd
                else:
                    watch.runner = info
                    os.close(info.log_fd)  # the reference's runner: trusted code's output
                job = job.model_copy(update={role: info.identity()})
            assert watch.cand is not None  # the candidate's role comes first
            outcome.job_dir = watch.cand.dir
            outcome.runner_dir = watch.runner.dir if watch.runner else None
            watch.log_path = Path(watch.cand.dir) / "output.log"
        watch.judge_pid = server.judge(
            job, workdir / "judge.log", pipe_write, [s.fileno() for s in judge_ends]
        )
        os.close(pipe_write)
        write_fd = None
        for s in judge_ends:
            s.close()
        judge_ends = []
        _loop(watch, read_fd, start)
    finally:
        os.close(read_fd)
        if write_fd is not None:
            os.close(write_fd)
        for s in judge_ends:
            s.close()
        watch.end()  # reads the candidate's log
        outcome.wall_s = time.monotonic() - start
        outcome.judge_log = read_file_tail(workdir / "judge.log", 16 * 1024)
        if not outcome.job_dir:
            outcome.log = outcome.judge_log
    return outcome


# The phase a job is in after each stage the judge reports: a timeout names it.
_PHASES = {
    "built": "after the build (constructing ModelNew, the first calls)",
    "reference": "in the run phase (the trials and the timed calls)",
}


def _over_time(waited: float, phase: str, built: bool, build_s: float, run_s: float) -> str:
    """Which limit a job ran over, and in which phase: the build's (fixed; ``--timeout-s`` does
    not change it), or the run's after the build (``--timeout-s``, or what the reference's time
    raised it to)."""
    if not built:
        return f"time limit {phase}: the build ran over its {build_s:.0f} s ({waited:.0f} s)"
    return (
        f"time limit {phase}: {waited:.0f} s (the run after the build: {run_s:.0f} s; "
        "raise with --timeout-s)"
    )


def _loop(watch: _Watch, read_fd: int, start: float) -> None:
    outcome, limits = watch.outcome, watch.limits
    buffer = bytearray()
    deadline = start + limits.compile_timeout_s + (0 if watch.cand else limits.run_timeout_s)
    run_s = limits.run_timeout_s  # raised with the reference's own time once the build is over
    next_check = next_disk = 0.0
    built = False
    phase = "during the build (importing the solution, compiling its extensions)"
    while True:
        now = time.monotonic()
        if now > deadline:
            outcome.kill_kind = "timeout"
            # the limits applied: --timeout-s, or what the reference's time raised it to
            # ("run 5 s" was printed where 30 s applied)
            if not watch.cand:  # no build of its own: one limit for the whole job
                outcome.killed = f"time limit: {now - start:.0f} s (raise with --timeout-s)"
            else:
                outcome.killed = _over_time(
                    now - start, phase, built, limits.compile_timeout_s, run_s
                )
            return
        ready, _, _ = select.select([read_fd], [], [], _TICK_S)
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                return  # the judge ended
            buffer.extend(chunk)
            for frame in split(buffer, REPORT):
                outcome.frames.append(frame)
                if isinstance(frame, Stage):  # the build is over: the run's limit from now
                    run_s = max(limits.run_timeout_s, frame.run_s)
                    deadline = time.monotonic() + run_s
                    built = True
                    phase = _PHASES.get(frame.stage, phase)
                if isinstance(frame, RESULTS):
                    outcome.result_at = time.monotonic()
                    return
        if now >= next_check:
            next_check = now + 0.1
            disk = now >= next_disk
            next_disk = now + 1.0 if disk else next_disk
            breach = watch.breach(disk)
            if breach:
                outcome.kill_kind, outcome.killed = breach
                return
