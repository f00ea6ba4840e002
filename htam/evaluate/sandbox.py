"""Run one job in a forked child under a watchdog: wall-clock limits, a memory limit on the whole
process group, an output cap, and a kill of the group on any breach.

The child reports over its result pipe in frames written with ``torch.save``; they are read back
with ``torch.load(weights_only=True)``, so a candidate that writes to the pipe can at worst send
wrong numbers, never code for this process to run.
"""

from __future__ import annotations

import io
import os
import select
import signal
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from htam.evaluate.forkserver import ForkServer

_HEADER = struct.Struct("!Q")
OUTPUTS_FILE = "outputs.pt"  # in the job's directory; an "outputs" frame with in_file points here
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK_S = 0.05
MAX_FRAME = 8 << 30


def encode_frame(obj: object) -> tuple[bytes, memoryview]:
    """Header and payload of one frame (kept apart: joining them would copy large outputs)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getbuffer()
    return _HEADER.pack(len(payload)), payload


def decode_frames(data: bytearray) -> tuple[list[dict], str | None]:
    """Decode complete frames from the front of ``data`` (consumed in place)."""
    frames: list[dict] = []
    while len(data) >= _HEADER.size:
        (n,) = _HEADER.unpack_from(data)
        if n > MAX_FRAME:
            return frames, f"result frame of {n} bytes is larger than allowed"
        if len(data) < _HEADER.size + n:
            break
        payload = bytes(data[_HEADER.size : _HEADER.size + n])
        del data[: _HEADER.size + n]
        try:
            frame = torch.load(io.BytesIO(payload), weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any undecodable frame is a forged channel
            return frames, f"undecodable result frame ({type(exc).__name__})"
        if not isinstance(frame, dict):
            return frames, "result frame is not a mapping"
        frames.append(frame)
    return frames, None


@dataclass
class Limits:
    compile_timeout_s: float
    run_timeout_s: float
    memory_limit_mb: int
    output_limit_bytes: int


@dataclass
class JobOutcome:
    frames: list[dict] = field(default_factory=list)
    exit_code: int | None = None
    killed: str | None = None  # why the watchdog killed the group, if it did
    channel_error: str | None = None
    log: str = ""
    wall_s: float = 0.0
    started: float = 0.0  # time.monotonic() when the job was asked for
    result_at: float | None = None  # ... and when its result frame arrived

    @property
    def result(self) -> dict | None:
        for frame in reversed(self.frames):
            if frame.get("type") == "result":
                return frame
        return None


def group_rss_mb(pgid: int) -> float:
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
            if int(stat[stat.rindex(b")") + 2 :].split()[2]) != pgid:
                continue
            with open(f"/proc/{entry.name}/statm", "rb") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
    return total / (1 << 20)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read_log(path: Path, limit: int) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size > limit:
                f.seek(size - limit)
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def _load_outputs(frames: list[dict], workdir: Path) -> str | None:
    """Read the tensors of "outputs" frames sent through the job's file (weights only: data,
    never code). The file is read, not mapped: the child cannot pull it from under us."""
    for frame in frames:
        if frame.get("type") == "outputs" and frame.pop("in_file", False):
            try:
                frame["outputs"] = torch.load(workdir / OUTPUTS_FILE, weights_only=True)
            except Exception as exc:  # noqa: BLE001 - a missing or forged file is a broken channel
                return f"unreadable outputs file ({type(exc).__name__})"
    return None


def run_job(
    server: ForkServer,
    job: dict,
    workdir: Path,
    limits: Limits,
    on_frame: Callable[[dict], bool] | None = None,
) -> JobOutcome:
    """Run ``job``; ``on_frame`` sees each frame as it arrives and may end the job early
    (returning True), e.g. once the outputs are known to be wrong."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "output.log"
    start = time.monotonic()
    child = server.spawn(job, workdir, log_path)
    outcome = JobOutcome(started=start)
    buffer = bytearray()
    deadline = start + limits.compile_timeout_s
    next_memory_check = 0.0
    os.set_blocking(child.result_fd, False)
    try:
        while True:
            now = time.monotonic()
            if now > deadline:
                outcome.killed = "timeout"
                break
            ready, _, _ = select.select([child.result_fd], [], [], _TICK_S)
            if ready:
                chunk = os.read(child.result_fd, 1 << 22)
                if not chunk:
                    break  # the child closed the pipe: it has ended (or gave up its channel)
                buffer.extend(chunk)
                frames, error = decode_frames(buffer)
                error = error or _load_outputs(frames, workdir)
                outcome.frames.extend(frames)
                if error:
                    outcome.channel_error = error
                    break
                if any(f.get("type") == "stage" and f.get("stage") == "built" for f in frames):
                    deadline = time.monotonic() + limits.run_timeout_s
                if on_frame and any([on_frame(f) for f in frames]):
                    outcome.killed = "stopped"
                    break
                if any(f.get("type") == "result" for f in frames):
                    outcome.result_at = time.monotonic()
                    break  # the verdict is the last frame a job sends
            if log_path.exists() and log_path.stat().st_size > limits.output_limit_bytes:
                outcome.killed = "output"
                break
            if now >= next_memory_check:
                next_memory_check = now + 0.1
                if group_rss_mb(child.pid) > limits.memory_limit_mb:
                    outcome.killed = "memory"
                    break
    finally:
        os.close(child.result_fd)
        if outcome.result is not None and not (outcome.killed or outcome.channel_error):
            # Its verdict is in: end the group now and let the server reap it in the background.
            kill_group(child.pid)
            server.release(child.pid)
        else:
            if outcome.killed or outcome.channel_error:
                kill_group(child.pid)
            outcome.exit_code = server.wait(child.pid, timeout_s=10.0)
            if outcome.exit_code is None:  # still running after closing its channel
                kill_group(child.pid)
                outcome.exit_code = server.wait(child.pid, timeout_s=10.0)
            kill_group(child.pid)  # nothing it started may outlive it
        outcome.wall_s = time.monotonic() - start
        outcome.log = _read_log(log_path, 64 * 1024)
    return outcome
