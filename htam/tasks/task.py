"""The task: one KernelBench-format reference operator with a stable identity."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


class TaskError(Exception):
    """A task file that cannot be used, with the file and the problem in one line."""

    def __init__(self, where: str | Path, problem: str):
        super().__init__(f"{where}: {problem}")
        self.where = str(where)
        self.problem = problem


@dataclass(frozen=True)
class Task:
    id: str  # stable across runs and machines: "<suite>/<relative path without .py>"
    name: str
    source: str
    path: Path | None = None
    level: int | None = None
    # "backward" for a Robust-KBench func_backward.py task: its gradients are what counts (a call
    # is a training step, htam/evaluate/judge/gradients.py); everything else is "forward".
    kind: str = "forward"

    @property
    def digest(self) -> str:
        """Content hash: caches keyed by it go stale when the reference changes."""
        return hashlib.sha256(self.source.encode()).hexdigest()[:12]
