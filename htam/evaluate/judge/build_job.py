"""The judge's side of a build job (a prebuild, htam.evaluate.host.build_stage): ask the candidate
process for its build stage alone, report how it ended, and let it go. Nothing is timed and no
tensor is lent: the process only compiles."""

from __future__ import annotations

import socket

from htam.evaluate import channel
from htam.evaluate.judge.trusted_jobs import Emitter


def run(job: dict, emit: Emitter, sock: socket.socket) -> None:
    try:
        channel.send(sock, {"op": "build"})
        message, _ = channel.recv(sock, float(job["timeout_s"]))
        reply = channel.parse(message)
    except (channel.ChannelError, OSError) as exc:
        emit({"type": "result", "status": "compile_error", "message": str(exc)[-2000:]})
        return
    if reply.type == "built":
        emit({"type": "result", "status": "ok", "compile_s": reply.compile_s})
    else:
        emit({"type": "result", "status": "compile_error", "message": f"{reply.type}"})
    try:
        channel.send(sock, {"op": "exit"})
    except OSError:
        pass
