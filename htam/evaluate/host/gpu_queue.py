"""The device's queue: one evaluator job on a GPU at a time, across the threads of a process and
the processes that share the GPU (a bench's lanes), so that builds run beside a timing but two
timings never overlap. Every stretch the queue is held, and every candidate's build and timed
time, is an event: kept in memory and, when ``HTAM_EVAL_EVENTS`` names a folder, appended to a
JSON-lines file of this process there (the bench's throughput figures read them)."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EVENTS_ENV = "HTAM_EVAL_EVENTS"


class GpuQueue:
    def __init__(self, cache_dir: Path, device: str):
        self._thread_lock = threading.Lock()
        self._record_lock = threading.Lock()
        self._path: Path | None = None
        if device == "cuda":
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "all").replace(",", "-") or "none"
            self._path = Path(cache_dir) / "locks" / f"gpu-{visible}.lock"
            self._path.parent.mkdir(parents=True, exist_ok=True)
        self.events: list[dict] = []
        sink = os.environ.get(EVENTS_ENV)
        self._sink = Path(sink) / f"events-{os.getpid()}.jsonl" if sink else None
        if self._sink is not None:
            self._sink.parent.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def held(self, kind: str) -> Iterator[None]:
        with self._thread_lock:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600) if self._path else None
            waited = time.time()
            try:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                start = time.time()
                try:
                    yield
                finally:
                    end = time.time()
                    self.record(
                        {
                            "event": "gpu",
                            "kind": kind,
                            "waited": start - waited,
                            "start": start,
                            "end": end,
                        }
                    )
            finally:
                if fd is not None:
                    os.close(fd)  # releases the lock

    def candidate(
        self, task_id: str, language: str, build_s: float, outcome, prebuilt: bool
    ) -> None:
        """A candidate's event: its build off the queue, its timed job (``outcome``, a
        watchdog.JobOutcome) and what that job still compiled itself."""
        verdict = outcome.verdict
        self.record(
            {
                "event": "candidate",
                "task": task_id,
                "language": language,
                "build_s": build_s,
                "gpu_s": outcome.wall_s,
                "job_compile_s": verdict.compile_s if verdict else 0.0,
                "prebuilt": prebuilt,
                "status": _legacy_status(verdict),
            }
        )

    def record(self, event: dict) -> None:
        event = {
            "pid": os.getpid(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "all"),
            "at": time.time(),
            **event,
        }
        with self._record_lock:
            self.events.append(event)
            if self._sink is not None:
                with open(self._sink, "a") as f:
                    f.write(json.dumps(event) + "\n")


def _legacy_status(verdict) -> str | None:
    """The verdict's status as the queue's log has always written it ("error": the task could
    not be judged)."""
    if verdict is None:
        return None
    return "error" if verdict.infrastructure else str(verdict.status)
