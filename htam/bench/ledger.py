"""The ledger every executor writes: each attempt's end appended to ``units.jsonl`` (fsynced),
and the tally of what a bench invocation did (``BenchOutcome``)."""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from htam.bench.bench_config import Unit

Event = Callable[[str, dict[str, Any]], None]


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

    def log(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def finished(self, record: dict[str, Any]) -> None:
        """A unit's attempt ended by itself: done, or failed with its error."""
        self.log(record)
        (self.outcome.done if record["status"] == "done" else self.outcome.failed).append(
            record["unit"]
        )
        self.on_event("unit_end", record)

    def lost(
        self, unit: Unit, attempt: int, record: dict[str, Any], max_attempts: int, pending: deque
    ) -> None:
        """The worker of an attempt died: re-queue the unit (front) or record it failed."""
        record = {"unit": unit.key, "attempt": attempt, "wall_s": None, **record}
        if attempt < max_attempts:
            record["status"] = "retry"
            pending.appendleft((unit, attempt + 1))
            self.outcome.retried.append(unit.key)
        else:
            record["status"] = "failed"
            self.outcome.failed.append(unit.key)
        self.log(record)
        self.on_event("unit_lost", record)

    def fail_pending(self, pending: deque, why: str) -> None:
        while pending:
            unit, attempt = pending.popleft()
            self.finished(
                {
                    "unit": unit.key,
                    "attempt": attempt,
                    "worker": None,
                    "device": None,
                    "pid": None,
                    "wall_s": None,
                    "status": "failed",
                    "error": why,
                }
            )
