"""The judge's side of a build job (a prebuild, htam.evaluate.host.build_stage): ask the candidate
process for its build stage alone, report how it ended, and let it go. Nothing is timed and no
tensor is lent: the process only compiles."""

from __future__ import annotations

import socket

from htam.evaluate import channel, frames
from htam.evaluate.frames import Job
from htam.evaluate.judge.trusted_jobs import Emitter
from htam.status import Status


def run(job: Job, emit: Emitter, sock: socket.socket) -> None:
    try:
        channel.send(sock, channel.Build())
        reply, _ = channel.recv(sock, job.timeout_s, channel.CANDIDATE)
    except (channel.ChannelError, OSError) as exc:
        emit(frames.Built(status=Status.COMPILE_ERROR, message=str(exc)[-2000:]))
        return
    if reply.type == "built":
        emit(frames.Built(status=Status.OK, compile_s=reply.compile_s))
    else:
        emit(frames.Built(status=Status.COMPILE_ERROR, message=f"{reply.type}"))
    try:
        channel.send(sock, channel.Exit())
    except OSError:
        pass
