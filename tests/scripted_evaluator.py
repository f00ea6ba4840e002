"""An in-process evaluator for tests of the loop's decisions: what the loop reads of the
reference, and each candidate's outcome from a script (no kernel runs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from htam.evaluate.result import EvalResult, Timing
from htam.status import Status

Outcome = float | Status | EvalResult  # a speedup over the 1 ms reference, a failure, a result


@dataclass
class ScriptedReference:
    """What the loop reads of the reference: 1 ms eager, 0.9 ms under torch.compile."""

    flops: int = 10_000
    nbytes: int = 400_000
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    timing: dict = field(default_factory=lambda: {"median_ms": 1.0})
    compile_timing: dict = field(default_factory=lambda: {"median_ms": 0.9})
    messages: list[str] = field(default_factory=list)


def timed_ok(speedup: float, spread: float = 0.01, samples: int = 10, **extra) -> EvalResult:
    """A correct candidate ``speedup`` times faster than the 1 ms reference."""
    ms = 1.0 / speedup
    timing = Timing(ms, ms * (1 - spread), ms * (1 + spread), ms * spread, samples, "perf_counter")
    return EvalResult(Status.OK, runtime_ms=ms, ref_runtime_ms=1.0, timing=timing, **extra)


@dataclass
class ScriptedEvaluator:
    """Each candidate's outcome is ``script(n, code)``, ``n`` the candidates evaluated before it."""

    script: Callable[[int, str], Outcome]
    evaluated: list[str] = field(default_factory=list)
    config: object = field(default_factory=lambda: type("C", (), {"size": "small"})())

    def reference(self, task, timed=True):
        return ScriptedReference()

    def peaks(self):
        return {"bandwidth_gbs": 100.0, "tf32_tflops": 1.0, "fp32_tflops": 1.0, "bf16_tflops": 2.0}

    def evaluate(self, task, code, language):
        outcome = self.script(len(self.evaluated), code)
        self.evaluated.append(code)
        if isinstance(outcome, EvalResult):
            return outcome
        if isinstance(outcome, Status):
            return EvalResult(outcome, messages=[f"{outcome}: scripted"])
        return timed_ok(outcome)
