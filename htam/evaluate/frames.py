"""The one framing of every hop between the evaluator's processes, and the typed records of the
trusted hops.

A frame is a 4-byte big-endian length, then that many bytes of JSON; ``encode`` writes one and
``decode`` reads one back into the record it must be, or raises ``FrameError`` with its cause.
The hops and what crosses them:

- host <-> fork server (``host/forkserver.py``, ``sandbox/serve.py``): ``server_frames``;
- fork server -> judge or trusted child: a ``Job`` (``server_frames.Start``);
- judge or trusted child -> host (the result pipe, ``host/watchdog.py``): ``Stage``, ``Cost``,
  the results of each trusted job and the judge's ``Verdict`` (``Report``);
- judge <-> runners (``judge/runner.py``, ``candidate/harness.py``): ``channel`` (requests,
  and the candidate's replies, validated against a closed set).

Only trusted processes hold the host's pipe and the fork server's socket: a candidate can write
nothing but its channel's replies, which the judge checks, so no candidate can send a
``Verdict``. Nothing here unpickles.
"""

from __future__ import annotations

import json
import struct
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from htam.evaluate.eval_config import Tolerance
from htam.status import Status
from htam.vocab import Size, Target

HEADER = struct.Struct("!I")
MAX_FRAME = 1 << 20  # bytes of a candidate's frame; a message that needs more is malformed
# trusted hops carry a solution (at most 1 MiB, escaped) and the task's source
MAX_TRUSTED_FRAME = 1 << 26

R = TypeVar("R")


class FrameError(Exception):
    """A frame that is not the record it must be: oversized, cut, undecodable or invalid."""


class Record(BaseModel):
    """A frame's record: no field beyond those declared, none of another type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def get(self, name: str, default: object = None) -> object:
        """A field by name: the bridge for the one reader still written against dict frames
        (``host/build_stage.py``, ``res.get("status")``), until it reads the attribute."""
        return getattr(self, name, default) if name in type(self).model_fields else default


def encode(record: BaseModel | dict, limit: int = MAX_TRUSTED_FRAME) -> bytes:
    """A record framed; or a plain JSON object, which is what a candidate's process sends (its
    replies are typed where they are trusted: on the judge's side, by ``decode``)."""
    if isinstance(record, BaseModel):
        payload = record.model_dump_json().encode()
    else:
        payload = json.dumps(record, separators=(",", ":")).encode()
    if len(payload) > limit:
        raise FrameError(f"a frame of {len(payload)} bytes; at most {limit} allowed")
    return HEADER.pack(len(payload)) + payload


def announced(header: bytes, limit: int) -> int:
    """The payload's length a frame's header announces, refused beyond ``limit``."""
    (n,) = HEADER.unpack(header)
    if n > limit:
        raise FrameError(f"a frame of {n} bytes announced; at most {limit} allowed")
    return n


def parse(payload: bytes, kind: TypeAdapter[R]) -> R:
    """A frame's payload as the record ``kind`` says it must be."""
    try:
        return kind.validate_json(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise FrameError("undecodable frame (not JSON)") from None
        where = ".".join(str(p) for p in first["loc"])
        raise FrameError(f"malformed message ({where}: {first['msg']})") from None


def decode(frame: bytes, kind: TypeAdapter[R], limit: int = MAX_TRUSTED_FRAME) -> R:
    """One whole frame (header and payload) as a record of ``kind``."""
    if len(frame) < HEADER.size:
        raise FrameError("a frame shorter than its header")
    n = announced(frame[: HEADER.size], limit)
    if len(frame) != HEADER.size + n:
        raise FrameError(f"a frame of {len(frame) - HEADER.size} bytes announced as {n}")
    return parse(frame[HEADER.size :], kind)


def split(data: bytearray, kind: TypeAdapter[R], limit: int = MAX_TRUSTED_FRAME) -> list[R]:
    """The complete frames at the front of a stream's ``data`` (consumed in place)."""
    records = []
    while len(data) >= HEADER.size:
        n = announced(bytes(data[: HEADER.size]), limit)
        if len(data) < HEADER.size + n:
            break
        records.append(parse(bytes(data[HEADER.size : HEADER.size + n]), kind))
        del data[: HEADER.size + n]
    return records


# --------------------------------------------------------------------------- a job


class TimingSettings(Record):
    warmup_ms: float
    timing_budget_ms: float
    min_timed: int
    max_timed: int
    l2_flush_mb: int


class RunnerInfo(Record):
    """Which processes a runner is: the judge stops them by user id where they have their own."""

    uid: int
    pid: int
    by_uid: bool


class Job(Record):
    """What a trusted child is asked to do: probe the device, measure its peaks, run the
    reference alone (or compile it ahead: ``warm``), drive a build, or judge a candidate (the
    fields of its kind)."""

    kind: Literal["probe", "peaks", "reference", "warm", "build", "judge"]
    device: Target
    env: dict[str, str] = {}
    size: Size = "small"
    seeds: list[int] = [0]
    init_seed: int = 0
    timing: TimingSettings
    task_source: str | None = None
    extras: bool = True  # the task's extra configurations too
    # the reference alone
    time: bool = False
    time_compile: bool = False
    # a build
    timeout_s: float = 600.0
    # a judged evaluation
    meaningful: bool = True
    memory_limit_mb: int | None = None
    kernel_required: bool = False
    compile_timeout_s: float = 600.0
    run_timeout_s: float = 600.0
    call_timeout_s: float = 60.0
    escape_ratio: float = 0.5
    escape_slack_ms: float = 0.05
    busy_probe_ms: float = 2.0
    tolerances: dict[str, Tolerance] = {}
    candidate: RunnerInfo | None = None
    runner: RunnerInfo | None = None


class CandidateJob(Record):
    """What an isolated runner's harness runs: the code (a candidate's, or the reference as
    ``ModelNew``), and where its process puts what it builds."""

    code: str
    language: str
    device: Target
    l2_flush_mb: int = 0
    env: dict[str, str] = {}
    preload: str | None = None  # verified builds copied into the job directory first
    nice: int = 0
    # keep each call's outputs until the next (a caller that holds its last result): a kept
    # buffer is then seen; the reference's runner (trusted torch) holds none
    hold_outputs: bool = True
    code_path: str = ""  # set inside the isolated process
    extension_dir: str = ""


# --------------------------------------------------------------------------- to the host


class TimingFigures(Record):
    """Runtime statistics of one implementation, in milliseconds (``result.Timing``'s fields).
    The reference timed alone adds ``elapsed_s`` (how long its timing took) and, on a GPU,
    ``wall_median_ms`` (host time to the synchronize after each call, ``measure.time_fns``)."""

    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    trials: int
    method: str
    meaningful: bool = True
    elapsed_s: float | None = None
    wall_median_ms: float | None = None


class Escape(Record):
    """The judge's clock against the candidate's own: what ran outside its events."""

    clock_ms: float
    reported_ms: float  # by its own events
    escaped_ms: float
    paired_excess_ms: float  # hidden beyond the reference's, round by round (median)
    candidate_hidden_ms: float
    reference_hidden_ms: float
    hidden_medians_ms: tuple[float, float]  # the candidate's, the reference's
    slack_ms: float
    # what the judge's clock tells apart beyond the slack (escape_charge.resolution_ms)
    resolution_ms: float = 0.0
    busy_probes: int
    rounds: int
    baselines_ms: tuple[float, float] = (0.0, 0.0)
    copy_ms: float = 0.0
    first_pass: str | None = None  # the charge of a first pass timed again
    uncharged: str | None = None  # an escape within the clock's resolution, as a flag


class Stage(Record):
    """The build is over (``built``), or the reference's own time says what the run may take."""

    type: Literal["stage"] = "stage"
    stage: Literal["built", "reference"]
    run_s: float = 0.0


class Cost(Record):
    type: Literal["cost"] = "cost"
    flops: int
    bytes: int
    dtypes: list[str]


class Probed(Record):
    type: Literal["probed"] = "probed"
    device: str = ""
    torch: str = ""
    gpu_free: int = 0
    gpu_total: int = 0
    capability: str | None = None
    error: str | None = None  # why the device asked for cannot be used


class Peaks(Record):
    """The device's copy bandwidth and matmul rates (``measure.measure_peaks``), by name."""

    type: Literal["peaks"] = "peaks"
    peaks: dict[str, float | str]


class ReferenceRan(Record):
    """The reference alone: whether it ran (an ``ok``; ``runtime_error`` with its cause), and
    its eager and torch.compile times where asked."""

    type: Literal["reference"] = "reference"
    status: Status
    message: str = ""
    timing: TimingFigures | None = None
    compile_timing: TimingFigures | None = None


class Built(Record):
    type: Literal["built"] = "built"
    status: Status
    message: str = ""
    compile_s: float = 0.0


class Verdict(Record):
    """The judge's verdict. ``ok`` comes with the figures; any other with its cause.
    ``infrastructure``: the task, not the candidate, could not be judged here."""

    type: Literal["verdict"] = "verdict"
    status: Status
    message: str = ""
    infrastructure: bool = False
    timing: TimingFigures | None = None
    paired_reference: TimingFigures | None = None
    escape: Escape | None = None
    compile_s: float = 0.0
    import_s: float = 0.0
    first_call_s: float | None = None
    marks: dict[str, float] = {}
    notes: list[str] = []


Result = Probed | Peaks | ReferenceRan | Built | Verdict
Report = Annotated[Stage | Cost | Result, Field(discriminator="type")]
REPORT: TypeAdapter[Stage | Cost | Result] = TypeAdapter(Report)
RESULTS = (Probed, Peaks, ReferenceRan, Built, Verdict)
