"""The evaluation cache serves what the code earned, never a hit limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from htam.evaluate.cache import CachedEvaluator, hit_limit
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.result import EvalResult
from htam.status import Status
from htam.tasks.task import Task

KILLED = "killed: host memory 9.0 GiB of the 8.0 GiB allowed (raise it with --memory-limit-mb)"


@dataclass
class Scripted:
    """Returns the scripted results in order and counts the evaluations."""

    results: list[EvalResult]
    cache_dir: Path
    config: EvalConfig = field(default_factory=EvalConfig)
    target: str = "cpu"
    device_name: str = "cpu"
    torch_version: str = "test"
    calls: int = 0

    def evaluate(self, task, code, language):
        self.calls += 1
        return self.results[self.calls - 1]


def _task() -> Task:
    return Task(id="t/1", name="1", source="class Model: pass\n")


def test_a_timeout_or_a_memory_kill_is_evaluated_again(tmp_path):
    ok = EvalResult(Status.OK, runtime_ms=1.0, ref_runtime_ms=2.0)
    killed = EvalResult(Status.RUNTIME_ERROR, messages=[KILLED])
    inner = Scripted(
        [EvalResult(Status.TIMEOUT, ["killed: wall time 120 s"]), killed, ok, ok], tmp_path
    )
    cached = CachedEvaluator(inner, tmp_path / "evals")
    statuses = [cached.evaluate(_task(), "code", "cpp").status for _ in range(4)]
    # timeout, memory kill, then ok: three evaluations; the fourth call is served from disk
    assert statuses == ["timeout", "runtime_error", "ok", "ok"]
    assert (inner.calls, cached.hits) == (3, 1)
    assert len(list((tmp_path / "evals").glob("*.json"))) == 1


def test_a_failure_of_the_code_is_cached():
    assert not hit_limit(EvalResult(Status.COMPILE_ERROR, ["error: expected ';'"]))
    assert not hit_limit(EvalResult(Status.INCORRECT, ["max abs error 0.5"]))
    assert hit_limit(EvalResult(Status.TIMEOUT))
    assert hit_limit(EvalResult(Status.RUNTIME_ERROR, [KILLED]))
