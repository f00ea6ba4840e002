"""A disk cache of evaluation results keyed by (task, code, target, language, device, torch,
evaluator settings): a rerun of the same candidates, a resumed run included, gets the same
feedback at no cost, which is what makes a resumed run end exactly like an uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from htam.evaluate.evaluator import Evaluator
from htam.evaluate.result import EvalResult
from htam.tasks.task import Task


class CachedEvaluator:
    def __init__(self, evaluator: Evaluator, directory: Path | None = None):
        self.evaluator = evaluator
        self.directory = Path(directory or evaluator.cache_dir / "evals")
        self.hits = 0

    def _key(self, task: Task, code: str, language: str) -> str:
        ev = self.evaluator
        config = {k: v for k, v in asdict(ev.config).items() if k != "cache_dir"}
        parts = [
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
            self.hits += 1
            return EvalResult.from_dict(json.loads(path.read_text()))
        result = self.evaluator.evaluate(task, code, language)
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result.to_dict()))
        tmp.replace(path)
        return result

    def reference(self, task: Task, timed: bool = True):
        return self.evaluator.reference(task, timed)
