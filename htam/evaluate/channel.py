"""The socket between the judge and a candidate: length-prefixed JSON frames, each bounded in size
before a byte of it is buffered, read under a timeout, and (from the candidate) validated against
a closed set of typed messages. Descriptors (shared CPU buffers) travel beside a frame.

Nothing here unpickles: a candidate that writes to the socket can at worst send a well-formed
message the judge then checks, or a malformed one that the judge rejects with its cause.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from htam.status import Status

_HEADER = struct.Struct("!I")
MAX_FRAME = 1 << 20  # bytes of one frame; a message that needs more is malformed
MAX_FDS = 64


class ChannelError(Exception):
    """The peer broke the protocol: a malformed, oversized or unexpected frame."""


class ChannelClosed(ChannelError):
    """The peer closed its end (it has ended, or gave up its channel)."""


class ChannelTimeout(ChannelError):
    """No frame within the time allowed."""


def send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    payload = json.dumps(message, separators=(",", ":")).encode()
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [data[:1]], fds)
        data = data[1:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
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


def recv(sock: socket.socket, timeout_s: float, with_fds: bool = False) -> tuple[dict, list[int]]:
    """One frame (a JSON object) and the descriptors sent with it."""
    deadline = time.monotonic() + timeout_s
    fds: list[int] = []
    if with_fds:
        sock.settimeout(max(timeout_s, 1e-3))
        try:
            first, fds, _, _ = socket.recv_fds(sock, 1, MAX_FDS)
        except TimeoutError:
            raise ChannelTimeout("no answer in time") from None
        if not first:
            raise ChannelClosed("the other side closed the channel")
        header = first + _recv_exact(sock, _HEADER.size - 1, deadline)
    else:
        header = _recv_exact(sock, _HEADER.size, deadline)
    (n,) = _HEADER.unpack(header)
    if n > MAX_FRAME:
        raise ChannelError(f"a frame of {n} bytes announced; at most {MAX_FRAME} allowed")
    try:
        message = json.loads(_recv_exact(sock, n, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ChannelError(f"undecodable frame ({type(exc).__name__})") from None
    if not isinstance(message, dict):
        raise ChannelError("a frame that is not an object")
    return message, fds


# --------------------------------------------------------------------------- candidate messages


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Built(_Msg):
    type: Literal["built"]
    import_s: float = Field(ge=0, le=1e6)
    compile_s: float = Field(ge=0, le=1e6)


class Ready(_Msg):
    type: Literal["ready"]


class Done(_Msg):
    """One call finished: its device time by the candidate's events (checked against the judge's
    own clock), the seal of each output as the call returned it, or why its outputs are
    unusable."""

    type: Literal["done"]
    ms: float = Field(ge=0, le=1e7)
    seals: list[Annotated[int, Field(ge=0, lt=1 << 64)]] = Field(default=[], max_length=4096)
    problem: str | None = Field(default=None, max_length=2000)


class Probed(_Msg):
    """The kernel probe's call: how many calls into its own kernels the solution's wrappers
    counted, their names, and why its outputs are not in the slots (it raised, or its outputs
    were unusable), if they are not."""

    type: Literal["probed"]
    calls: int = Field(ge=0, lt=1 << 62)
    kernels: list[Annotated[str, Field(max_length=200)]] = Field(default=[], max_length=64)
    raised: str | None = Field(default=None, max_length=2000)


class Failed(_Msg):
    type: Literal["failed"]
    status: Literal[Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.REJECTED]
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
}

CandidateMessage = Annotated[Built | Ready | Done | Probed | Failed, Field(discriminator="type")]
_ADAPTER: TypeAdapter = TypeAdapter(CandidateMessage)


def parse(message: dict) -> Built | Ready | Done | Probed | Failed:
    try:
        return _ADAPTER.validate_python(message)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ChannelError(f"malformed message ({where}: {first['msg']})") from None
