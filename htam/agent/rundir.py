"""A run directory: every step persisted as it ends, so a crashed run resumes where it stopped.

Layout::

    run.json            what was asked (task, method, seed, steps, target, language, proposer)
    steps/step_NN.json  one record per finished step (decision, prompts, responses, feedback, cost)
    steps/step_NN.py    the code that step produced, if any
    best.py             the best correct ModelNew so far, when it is faster than the reference
    best_slower_than_reference.py   else the best correct one (the reference stands)
    summary.json        the outcome (rewritten after every step)

Without an explicit directory every run gets a new one, ``<stem>-<YYYYmmdd-HHMMSS>`` (a suffix
``-2``, ``-3`` on a clash), so a command can be run again as it is; ``--resume`` picks the
newest directory of the stem.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from htam.agent.run_summary import RunSummary


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


SLOWER_BEST = "best_slower_than_reference.py"


class RunDirError(Exception):
    pass


def new_run_dir(stem: Path) -> Path:
    """A fresh directory name for ``stem``: stamped with the local time, never an existing one."""
    base = f"{stem.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, n = stem.parent / base, 1
    while path.exists():
        n += 1
        path = stem.parent / f"{base}-{n}"
    return path


def latest_run_dir(stem: Path) -> Path | None:
    """The most recently started run of ``stem`` (by run.json's time), if any."""
    runs = [p.parent for p in stem.parent.glob(f"{stem.name}-*/run.json")]
    return max(runs, key=lambda p: (p / "run.json").stat().st_mtime, default=None)


def new_run_id(method: str, task_id: str, seed: int) -> str:
    """The memory's id of a new run: unique to it, so that the bank learns from every run of a
    command (it records each (run id, task, step) once; seen: a second run of the same
    command, another path, taught it nothing under the old ``method:task:s<seed>``)."""
    return f"{method}:{task_id}:s{seed}:{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.steps_dir = self.path / "steps"

    def recorded(self) -> dict[str, Any] | None:
        """What an existing run was started with (its run.json), None for a new directory."""
        run_file = self.path / "run.json"
        if not run_file.exists():
            return None
        try:
            record = json.loads(run_file.read_text())
        except (OSError, ValueError) as exc:
            raise RunDirError(
                f"cannot resume {self.path}: its run.json cannot be read: {exc}"
            ) from exc
        if not isinstance(record, dict):
            raise RunDirError(f"cannot resume {self.path}: its run.json is not a run record")
        return record

    def start(self, spec: dict[str, Any], resume: bool) -> None:
        """Create the run, or check that ``resume`` continues the same run."""
        old = self.recorded()
        if old is not None:
            if not resume:
                raise RunDirError(
                    f"{self.path} already holds a run; pass --resume to continue it or choose "
                    "another --out"
                )
            changed = [k for k in spec if k in old and old[k] != spec[k]]
            if changed:
                raise RunDirError(f"cannot resume {self.path}: {', '.join(changed)} changed")
            return
        write_atomic(self.path / "run.json", json.dumps(spec, indent=2))

    def finished_steps(self) -> list[dict[str, Any]]:
        if not self.steps_dir.exists():
            return []
        records = [json.loads(p.read_text()) for p in sorted(self.steps_dir.glob("step_*.json"))]
        return sorted(records, key=lambda r: r["step"])

    def save_step(self, record: dict[str, Any], code: str | None) -> None:
        stem = f"step_{record['step']:02d}"
        if code is not None:
            write_atomic(self.steps_dir / f"{stem}.py", code)
        write_atomic(self.steps_dir / f"{stem}.json", json.dumps(record, indent=2, default=str))

    def step_code(self, step: int) -> str | None:
        path = self.steps_dir / f"step_{step:02d}.py"
        return path.read_text() if path.exists() else None

    def save_best(self, code: str, faster: bool) -> None:
        """best.py only for code faster than the reference: a user who takes best.py never
        ends up slower than PyTorch. A slower best is kept under a name that says so."""
        if faster:
            write_atomic(self.path / "best.py", code)
            (self.path / SLOWER_BEST).unlink(missing_ok=True)
        else:
            write_atomic(self.path / SLOWER_BEST, code)

    def save_summary(self, summary: RunSummary) -> None:
        write_atomic(self.path / "summary.json", json.dumps(summary.to_dict(), indent=2))

    def summary(self) -> RunSummary | None:
        """The run's summary as written last (by this version or an older one), if any."""
        path = self.path / "summary.json"
        return RunSummary.from_dict(json.loads(path.read_text())) if path.exists() else None
