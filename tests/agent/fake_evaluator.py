"""An evaluator that compiles nothing, for tests of the loop's bookkeeping (what a step records,
what the memory learns): each candidate is judged correct and timed at ``speedup`` times the
reference's speed; the evaluator protocol (htam.agent.ports.EvaluatorPort) is all the loop sees."""

from __future__ import annotations

from dataclasses import dataclass, field

from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.host.evaluator import Reference
from htam.evaluate.result import EvalResult, Timing
from htam.status import Status

REF_MS = 1.0


@dataclass
class FakeEvaluator:
    speedup: float = 2.0
    config: EvalConfig = field(default_factory=EvalConfig)
    evaluated: list[str] = field(default_factory=list)  # the code of each evaluate call

    def reference(self, task, timed: bool = True) -> Reference:
        timing = {"median_ms": REF_MS} if timed else None
        return Reference(flops=0, nbytes=1 << 16, dtypes=["float32"], timing=timing)

    def peaks(self) -> dict:
        return {"bandwidth_gbs": 10.0, "tf32_tflops": 1.0, "fp32_tflops": 1.0, "bf16_tflops": 2.0}

    def evaluate(self, task, code: str, language: str) -> EvalResult:
        self.evaluated.append(code)
        ms = REF_MS / self.speedup
        timing = Timing(ms, ms * 0.98, ms * 1.02, ms * 0.01, 10, "perf_counter")
        return EvalResult(Status.OK, runtime_ms=ms, ref_runtime_ms=REF_MS, timing=timing)
