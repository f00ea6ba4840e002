"""Sockets between the evaluator's processes: frames (``frames.py``: a length, then JSON), each
bounded in size before a byte of it is buffered, read under a timeout, and decoded into the
record it must be. Descriptors (shared CPU buffers, a candidate's log) travel beside a frame.

The judge and a runner speak in the records below: the judge's requests, and the runner's
replies, validated against a closed set of typed messages. Nothing here unpickles: a candidate
that writes to the socket can at worst send a well-formed message the judge then checks, or a
malformed one that the judge rejects with its cause.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from htam.evaluate import frames
from htam.evaluate.frames import MAX_FRAME
from htam.status import Status

MAX_FDS = 64
R = TypeVar("R")


class ChannelError(Exception):
    """The peer broke the protocol: a malformed, oversized or unexpected frame."""


class ChannelClosed(ChannelError, EOFError):
    """The peer closed its end (it has ended, or gave up its channel)."""


class ChannelTimeout(ChannelError):
    """No frame within the time allowed."""


def send(sock: socket.socket, message: BaseModel | dict, fds: list[int] | None = None) -> None:
    data = frames.encode(message)
    if fds:
        socket.send_fds(sock, [data[:1]], fds)
        data = data[1:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout("no answer in time")
            sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(n - got, 1 << 16))
        except TimeoutError:
            raise ChannelTimeout("no answer in time") from None
        except OSError as exc:
            raise ChannelClosed(f"channel broken ({exc.strerror or exc})") from None
        if not chunk:
            raise ChannelClosed("the other side closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(
    sock: socket.socket,
    timeout_s: float | None,
    kind: TypeAdapter[R],
    with_fds: bool = False,
    limit: int = MAX_FRAME,
) -> tuple[R, list[int]]:
    """One frame, as the record ``kind`` says it must be, and the descriptors sent with it
    (``timeout_s`` None: as long as it takes). A malformed frame's descriptors are closed."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    fds: list[int] = []
    if with_fds:
        sock.settimeout(None if timeout_s is None else max(timeout_s, 1e-3))
        try:
            first, fds, _, _ = socket.recv_fds(sock, 1, MAX_FDS)
        except TimeoutError:
            raise ChannelTimeout("no answer in time") from None
        except OSError as exc:
            raise ChannelClosed(f"channel broken ({exc.strerror or exc})") from None
        if not first:
            raise ChannelClosed("the other side closed the channel")
        header = first + _recv_exact(sock, frames.HEADER.size - 1, deadline)
    else:
        header = _recv_exact(sock, frames.HEADER.size, deadline)
    try:
        n = frames.announced(header, limit)
        return frames.parse(_recv_exact(sock, n, deadline), kind), fds
    except frames.FrameError as exc:
        for fd in fds:
            os.close(fd)
        raise ChannelError(str(exc)) from None


# --------------------------------------------------------------------------- the judge's requests


class _Request(frames.Record):
    pass


class Null(_Request):
    op: Literal["null"] = "null"


class Build(_Request):
    op: Literal["build"] = "build"


class Model(_Request):
    """Construct ``ModelNew`` for configuration ``config``, with the reference's arguments."""

    op: Literal["model"] = "model"
    config: int
    init_args: list[Any]
    seed: int


class Buffers(_Request):
    """The configuration's inputs (lent tensors, or plain values) and output slots; a backward
    task's last ``grad_outputs`` inputs are its grad_outputs."""

    op: Literal["buffers"] = "buffers"
    config: int
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    grad_outputs: int = 0


class Use(_Request):
    op: Literal["use"] = "use"
    config: int


class Call(_Request):
    op: Literal["call"] = "call"
    key: int  # the seal's secret for this call's outputs


class Collect(_Request):
    op: Literal["collect"] = "collect"


class Probe(_Request):
    op: Literal["probe"] = "probe"


class Cache(_Request):
    """On a large task, between calls and off the judge's clock: ``hold`` False hands what the
    process's GPU allocator caches back to the card (the other runner and the judge need it
    meanwhile); True takes as much again before the next call, so that the call does not pay
    for fresh memory inside its timing (footprint.py)."""

    op: Literal["cache"] = "cache"
    hold: bool


class Exit(_Request):
    op: Literal["exit"] = "exit"


Request = Null | Build | Model | Buffers | Use | Call | Collect | Probe | Cache | Exit
REQUEST: TypeAdapter[Request] = TypeAdapter(Annotated[Request, Field(discriminator="op")])


# --------------------------------------------------------------------------- candidate messages


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Built(_Msg):
    type: Literal["built"] = "built"
    import_s: float = Field(ge=0, le=1e6)
    compile_s: float = Field(ge=0, le=1e6)


class Ready(_Msg):
    type: Literal["ready"] = "ready"


class Done(_Msg):
    """One call finished: its device time by the candidate's events (checked against the judge's
    own clock), the seal of each output as the call returned it, or why its outputs are
    unusable."""

    type: Literal["done"] = "done"
    ms: float = Field(ge=0, le=1e7)
    seals: list[Annotated[int, Field(ge=0, lt=1 << 64)]] = Field(default=[], max_length=4096)
    problem: str | None = Field(default=None, max_length=2000)


class Probed(_Msg):
    """The kernel probe's call: how many calls into its own kernels the solution's wrappers
    counted, their names, and why its outputs are not in the slots (it raised, or its outputs
    were unusable), if they are not."""

    type: Literal["probed"] = "probed"
    calls: int = Field(ge=0, lt=1 << 62)
    kernels: list[Annotated[str, Field(max_length=200)]] = Field(default=[], max_length=64)
    raised: str | None = Field(default=None, max_length=2000)


# what a runner may say of its own failure
FailStatus = Literal[Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.REJECTED]


class Failed(_Msg):
    type: Literal["failed"] = "failed"
    status: FailStatus
    message: str = Field(max_length=8000)


# What each request of the judge must be answered with.
REPLIES = {
    "null": "done",
    "build": "built",
    "model": "ready",
    "buffers": "ready",
    "use": "ready",
    "call": "done",
    "collect": "done",
    "probe": "probed",
    "cache": "ready",
}

CandidateMessage = Built | Ready | Done | Probed | Failed
CANDIDATE: TypeAdapter[CandidateMessage] = TypeAdapter(
    Annotated[CandidateMessage, Field(discriminator="type")]
)


def parse(payload: bytes) -> CandidateMessage:
    """A candidate's frame (its payload) as one of its messages, or ``ChannelError``."""
    try:
        return frames.parse(payload, CANDIDATE)
    except frames.FrameError as exc:
        raise ChannelError(str(exc)) from None
