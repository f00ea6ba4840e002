"""The evaluation cache serves what the code earned, never a hit limit or a failure of the
evaluator itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host.cache import CachedEvaluator, not_evidence
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
    assert not not_evidence(EvalResult(Status.COMPILE_ERROR, ["error: expected ';'"]))
    assert not not_evidence(EvalResult(Status.INCORRECT, ["max abs error 0.5"]))
    assert not_evidence(EvalResult(Status.TIMEOUT))
    assert not_evidence(EvalResult(Status.RUNTIME_ERROR, [KILLED]))


def test_a_failure_of_the_evaluator_is_never_served_again(tmp_path):
    """The reference could not run here (newcomer: a Python environment the sandbox did not
    show): once the environment is fixed, the same code is evaluated again, also when the
    failure was cached by a version that did not mark it."""
    failed = EvalResult(Status.RUNTIME_ERROR, infrastructure=True,
                        messages=["the evaluator could not judge this task: the reference failed"])  # fmt: skip
    ok = EvalResult(Status.OK, runtime_ms=1.0, ref_runtime_ms=2.0)
    inner = Scripted([failed, ok], tmp_path)
    cached = CachedEvaluator(inner, tmp_path / "evals")
    assert [cached.evaluate(_task(), "code", "cpp").status for _ in range(2)] == [
        "runtime_error",
        "ok",
    ]
    unmarked = EvalResult(Status.RUNTIME_ERROR, messages=failed.messages)  # an old cache entry
    assert not_evidence(EvalResult.from_dict(unmarked.to_dict() | {"infrastructure": False}))


def test_a_verdict_of_older_rules_is_not_served(tmp_path, monkeypatch):
    import htam.evaluate.host.cache as cache

    inner = Scripted([EvalResult(Status.INCORRECT, ["relative L2 error 1.9"])] * 2, tmp_path)
    cached = CachedEvaluator(inner, tmp_path / "evals")
    cached.evaluate(_task(), "code", "triton")
    monkeypatch.setattr(cache, "RULES", cache.RULES + "x")  # the evaluator's code changed
    cached.evaluate(_task(), "code", "triton")
    assert (inner.calls, cached.hits) == (2, 0)
