"""The records between the evaluator (``host/forkserver.py``) and its fork server
(``sandbox/serve.py``), and from the server to the child it hands a job. Framed like every hop
(``frames.py``); only trusted processes hold these sockets, never a candidate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from htam.evaluate.frames import CandidateJob, Job, Record
from htam.evaluate.sandbox.cgroups import Group
from htam.evaluate.sandbox.isolation import Limits, Plan


class Config(Record):
    """The server's first frame: where job directories go, and what every candidate gets."""

    workroot: str
    warm_cuda: bool = False
    limits: Limits = Limits()


# --------------------------------------------------------------------------- requests


class StartJudge(Record):
    """A trusted child for ``job``, its output to ``log``; its result pipe and its runners'
    sockets travel beside the frame."""

    op: Literal["judge"] = "judge"
    job: Job
    log: str


class StartCandidate(Record):
    """An isolated runner for ``job``; its channel to the judge travels beside the frame."""

    op: Literal["candidate"] = "candidate"
    job: CandidateJob


class Wait(Record):
    op: Literal["wait"] = "wait"
    pid: int
    timeout: float


class Release(Record):
    op: Literal["release"] = "release"
    pid: int


class KillUid(Record):
    op: Literal["kill_uid"] = "kill_uid"
    uid: int


class Ping(Record):
    op: Literal["ping"] = "ping"


class Exit(Record):
    op: Literal["exit"] = "exit"


Start = StartJudge | StartCandidate
Request = StartJudge | StartCandidate | Wait | Release | KillUid | Ping | Exit
REQUEST: TypeAdapter[Request] = TypeAdapter(Annotated[Request, Field(discriminator="op")])
START: TypeAdapter[Start] = TypeAdapter(Annotated[Start, Field(discriminator="op")])
CONFIG: TypeAdapter[Config] = TypeAdapter(Config)


# --------------------------------------------------------------------------- replies


class Ready(Record):
    """The server has imported what children need: the isolation every candidate will get."""

    op: Literal["ready"] = "ready"
    plan: Plan


class Started(Record):
    """A child that took its job (``pid``), or why none could (``error``). A runner's: its user
    id (``by_uid``: its own, which the judge stops it by), job directory and control group;
    its output log's descriptor travels beside the frame."""

    op: Literal["started"] = "started"
    pid: int | None = None
    error: str = ""
    uid: int | None = None
    dir: str | None = None
    by_uid: bool = False
    group: Group | None = None


class Waited(Record):
    """How a reaped child ended (its exit code, or minus its signal); None: not yet."""

    op: Literal["waited"] = "waited"
    status: int | None


class Done(Record):
    op: Literal["done"] = "done"


class Pong(Record):
    op: Literal["pong"] = "pong"


Reply = Ready | Started | Waited | Done | Pong
REPLY: TypeAdapter[Reply] = TypeAdapter(Annotated[Reply, Field(discriminator="op")])
