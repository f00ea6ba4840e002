"""The ledger every executor writes: each attempt's end (a ``UnitRecord``) appended to
``units.jsonl`` (fsynced), and the tally of what a bench invocation did (``BenchOutcome``)."""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

from htam.bench.bench_config import Unit

Event = Callable[[str, dict[str, Any]], None]


class UnitStatus(StrEnum):
    """How one attempt at a unit ended."""

    DONE = "done"  # the unit ran its steps (its own outcome is in its summary.json)
    FAILED = "failed"  # an error of the unit, or its last attempt's worker died
    RETRY = "retry"  # its worker died; the unit runs again


@dataclass
class UnitRecord:
    """One attempt's end, as a line of ``units.jsonl`` holds it."""

    unit: str  # the unit's key
    attempt: int
    status: str  # a UnitStatus
    wall_s: float | None = None  # None: the worker died, no time was taken
    worker: int | None = None
    pid: int | None = None
    device: str | None = None
    node: str | None = None  # a Ray node id
    device_name: str | None = None
    best_status: str | None = None  # of a unit done: its summary's best status and speedup
    best_speedup: float | None = None
    error: str | None = None
    traceback: str | None = None

    @property
    def done(self) -> bool:
        return self.status == UnitStatus.DONE

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnitRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{"attempt": 1} | {k: v for k, v in data.items() if k in known})


@dataclass
class BenchOutcome:
    planned: int
    skipped: list[str] = field(default_factory=list)  # finished before this invocation
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    report: Any = None  # htam.bench.report.ReportFiles, when the report was written


class Ledger:
    """Appends each attempt's end to ``units.jsonl`` (fsynced) and tallies the outcome."""

    def __init__(self, out: Path, outcome: BenchOutcome, on_event: Event):
        self.path = Path(out) / "units.jsonl"
        self.outcome, self.on_event = outcome, on_event

    def log(self, record: UnitRecord) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record.to_dict(), default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def finished(self, record: UnitRecord) -> None:
        """A unit's attempt ended by itself: done, or failed with its error."""
        self.log(record)
        (self.outcome.done if record.done else self.outcome.failed).append(record.unit)
        self.on_event("unit_end", record.to_dict())

    def lost(
        self,
        unit: Unit,
        attempt: int,
        died: dict[str, Any],
        max_attempts: int,
        pending: deque[tuple[Unit, int]],
    ) -> None:
        """The worker of an attempt died (``died``: its worker, device, pid, node and error):
        re-queue the unit (front) or record it failed."""
        retry = attempt < max_attempts
        status = UnitStatus.RETRY if retry else UnitStatus.FAILED
        record = UnitRecord(unit=unit.key, attempt=attempt, status=status, **died)
        if retry:
            pending.appendleft((unit, attempt + 1))
            self.outcome.retried.append(unit.key)
        else:
            self.outcome.failed.append(unit.key)
        self.log(record)
        self.on_event("unit_lost", record.to_dict())

    def fail_pending(self, pending: deque[tuple[Unit, int]], why: str) -> None:
        while pending:
            unit, attempt = pending.popleft()
            self.finished(UnitRecord(unit.key, attempt, UnitStatus.FAILED, error=why))
