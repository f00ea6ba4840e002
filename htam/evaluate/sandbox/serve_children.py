"""What a process the fork server forks runs: a judge (or a trusted job), or a candidate's
isolated child, each with its output to its log and ending through ``os._exit``."""

from __future__ import annotations

import os
import socket
import sys
import traceback
from typing import TypeVar

from htam.evaluate import channel, frames
from htam.evaluate import server_frames as sf
from htam.evaluate.sandbox import isolation, syscall_filter


def _stdio_to(log: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(null)
    os.close(fd)


def finish(fn, *args) -> None:
    code = 0
    try:
        fn(*args)
    except BaseException:  # the child must always exit through os._exit, whatever happened
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _warm(warm_cuda: bool) -> None:
    if warm_cuda:
        try:
            import torch

            torch.empty(1, device="cuda")
        except Exception:  # noqa: BLE001 - the job will meet (and report) the same problem
            pass


def judge_main(control: socket.socket, warm_cuda: bool) -> None:
    _warm(warm_cuda)
    request, fds = _start(control, sf.StartJudge)
    _stdio_to(request.log)
    job = request.job
    if job.kind == "build":
        from htam.evaluate.judge import build_job, trusted_jobs

        build_job.run(job, trusted_jobs.Emitter(fds[0]), socket.socket(fileno=fds[1]))
    elif job.kind == "judge":
        from htam.evaluate.judge import judge, trusted_jobs

        cand, ref = (socket.socket(fileno=fd) for fd in fds[1:3])
        judge.run(job, trusted_jobs.Emitter(fds[0]), cand, ref)
    else:
        from htam.evaluate.judge import trusted_jobs

        trusted_jobs.run(job, fds[0])


def candidate_main(
    control: socket.socket, job_dir: str, uid: int, plan, limits, warm, group=None
) -> None:
    if group is not None:  # first: every page and process from here on is the group's
        group.join()
    try:
        _stdio_to(os.path.join(job_dir, "output.log"))
    except FileNotFoundError:  # the client removed the work root: nothing will come
        os._exit(0)
    seen_at = isolation.enter(job_dir, uid, plan, limits)
    _warm(warm)
    if plan.socket_filter:  # after CUDA has made its threads: the filter covers them too
        syscall_filter.restrict_syscalls(limits.memfd)
    request, fds = _start(control, sf.StartCandidate)
    job = request.job
    code_path = os.path.join(seen_at, "candidate.py")
    with open(code_path, "w") as f:
        f.write(job.code)
    env = {
        **job.env,
        "TRITON_CACHE_DIR": os.path.join(seen_at, "triton"),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(seen_at, "inductor"),
        "TORCH_EXTENSIONS_DIR": os.path.join(seen_at, "ext"),
        "HOME": seen_at,
    }
    where = {"code_path": code_path, "extension_dir": os.path.join(seen_at, "ext"), "env": env}
    from htam.evaluate.candidate import harness

    harness.run(job.model_copy(update=where), socket.socket(fileno=fds[0]))


S = TypeVar("S", sf.StartJudge, sf.StartCandidate)


def _start(control: socket.socket, kind: type[S]) -> tuple[S, list[int]]:
    """The job the server hands this standby (it must be a ``kind``) and the descriptors beside
    it. When the server went away or gave up on this standby, the process ends."""
    try:
        request, fds = channel.recv(
            control, None, sf.START, with_fds=True, limit=frames.MAX_TRUSTED_FRAME
        )
    except (channel.ChannelClosed, OSError):
        os._exit(0)
    control.close()
    if not isinstance(request, kind):
        raise TypeError(f"a {request.op} job handed to a {kind.__name__} standby")
    return request, fds
