"""A disk cache of evaluation results keyed by (task, code, target, language, device, torch,
evaluator settings): a rerun of the same candidates, a resumed run included, gets the same
feedback at no cost, which is what makes a resumed run end exactly like an uninterrupted one.

A hit limit is not cached: a timeout or a kill by the watchdog (memory, output, disk) says as
much about the limits and the machine's load at the time as about the code, and a retry after
raising a limit (or on a quieter machine) must evaluate again. Nor is a failure of the evaluator
itself (the reference cannot run here, its fork server died) or of the machine: only a verdict
on the kernel (``EvalResult.cause`` is ``Fault.KERNEL``) is cached."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from htam.evaluate.host.evaluator import Evaluator
from htam.evaluate.host.verdict import EVALUATOR_FAILED
from htam.evaluate.result import EvalResult
from htam.status import Fault, Status
from htam.tasks.task import Task


def not_evidence(result: EvalResult) -> bool:
    """A timeout, a candidate killed by a limit of the watchdog (its message says which), or a
    fault that is not the kernel's (also as written before faults were marked)."""
    return (
        result.status is Status.TIMEOUT
        or result.cause is not Fault.KERNEL
        or any(m.startswith(("killed:", EVALUATOR_FAILED)) for m in result.messages)
    )


def _rules() -> str:
    """The evaluator's own code, hashed: a result judged under other rules is not served. (A
    number bumped by hand was not, for several rule changes, and served a cheat the new rules
    reject its old ``ok``: cheats run again after their holes were closed.)"""
    digest = hashlib.sha256()
    root = Path(__file__).parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


RULES = _rules()


class CachedEvaluator:
    def __init__(self, evaluator: Evaluator, directory: Path | None = None):
        self.evaluator = evaluator
        self.directory = Path(directory or evaluator.cache_dir / "evals")
        self.hits = 0

    def _key(self, task: Task, code: str, language: str) -> str:
        ev = self.evaluator
        config = {k: v for k, v in asdict(ev.config).items() if k != "cache_dir"}
        parts = [
            str(RULES),
            task.digest,
            code,
            ev.target,
            language,
            ev.device_name,
            ev.torch_version,
            json.dumps(config, sort_keys=True, default=str),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]

    def evaluate(self, task: Task, code: str, language: str) -> EvalResult:
        path = self.directory / f"{self._key(task, code, language)}.json"
        if path.exists():
            cached = EvalResult.from_dict(json.loads(path.read_text()))
            if not not_evidence(cached):  # written before these were left out of the cache
                self.hits += 1
                return cached
        result = self.evaluator.evaluate(task, code, language)
        if not_evidence(result):
            path.unlink(missing_ok=True)
            return result
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result.to_dict()))
        tmp.replace(path)
        return result

    @property
    def config(self):
        """The wrapped evaluator's settings (part of the key of every cached result)."""
        return self.evaluator.config

    def reference(self, task: Task, timed: bool = True):
        return self.evaluator.reference(task, timed)

    def peaks(self) -> dict:
        return self.evaluator.peaks()
