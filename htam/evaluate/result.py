"""Typed results of the evaluator's stages. Failures are values, never exceptions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from htam.status import Fault, Status
from htam.vocab import BoundKind

LOG_LIMIT = 4000  # characters of a log kept in a result


def truncate(text: str, limit: int = LOG_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


@dataclass
class Timing:
    """Runtime statistics of one implementation, in milliseconds."""

    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    trials: int
    method: str  # "cuda_events" or "perf_counter" (+ " bounded by the judge's clock")
    meaningful: bool = True  # False for the Triton interpreter on the CPU

    @property
    def spread(self) -> float:
        return self.max_ms / self.min_ms if self.min_ms > 0 else float("inf")


@dataclass
class EvalResult:
    """Everything the evaluator learned about one candidate.

    ``speedup`` is reference-eager time over candidate time (both medians, same run, same device).
    ``sol_fraction`` is the roofline lower-bound time over the candidate time ("% of speed of
    light" as a fraction).
    """

    status: Status
    messages: list[str] = field(default_factory=list)
    runtime_ms: float | None = None
    ref_runtime_ms: float | None = None
    ref_compile_runtime_ms: float | None = None
    timing: Timing | None = None
    sol_fraction: float | None = None
    bound: BoundKind | None = None
    flags: list[str] = field(default_factory=list)  # suspicious but not rejected (e.g. > 10x)
    log: str = ""  # captured, truncated stdout/stderr of the candidate process
    breakdown_s: dict[str, float] = field(default_factory=dict)  # where the wall time went
    device: str = ""
    target: str = ""
    language: str = ""
    isolation: str = ""  # which protections the candidate ran under, and which were missing
    # The evaluator itself failed (the reference cannot run here): no evidence about the
    # candidate, never cached, never learned from.
    infrastructure: bool = False
    # Whose doing the outcome is when it is not the kernel's (htam.status.Fault): an evaluator
    # or machine fault (the fork server died, a timeout under load) is never a verdict.
    fault: Fault | None = None

    @property
    def correct(self) -> bool:
        return self.status is Status.OK

    @property
    def cause(self) -> Fault:
        """Whose doing this outcome is: only ``Fault.KERNEL`` is learned or cached."""
        if self.fault is not None:
            return Fault(self.fault)
        if self.infrastructure:
            return Fault.EVALUATOR
        return Fault.KERNEL if self.status.judged else Fault.PROPOSER

    @property
    def speedup(self) -> float | None:
        if self.runtime_ms and self.ref_runtime_ms:
            return self.ref_runtime_ms / self.runtime_ms
        return None

    @property
    def speedup_vs_compile(self) -> float | None:
        if self.runtime_ms and self.ref_compile_runtime_ms:
            return self.ref_compile_runtime_ms / self.runtime_ms
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data["fault"] = None if self.fault is None else str(self.fault)
        data["correct"] = self.correct
        data["speedup"] = self.speedup
        data["speedup_vs_compile"] = self.speedup_vs_compile
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        data = dict(data)
        for key in ("correct", "speedup", "speedup_vs_compile"):
            data.pop(key, None)
        timing = data.pop("timing", None)
        fault = data.pop("fault", None)
        return cls(
            status=Status(data.pop("status")),
            fault=None if fault is None else Fault(fault),
            timing=Timing(**timing) if timing else None,
            **data,
        )
