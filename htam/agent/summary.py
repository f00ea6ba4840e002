"""What a run ends with: its ``RunSummary`` (``summary.json``, see htam.agent.run_summary) built
from the loop's progress, and the outcome a user keeps."""

from __future__ import annotations

from typing import Any

from htam.agent.run_summary import (
    BEST_FILES,
    FASTER,
    NONE_CORRECT,
    REFERENCE_STANDS,
    RunSummary,
)
from htam.agent.state import Progress
from htam.evaluate.result import EvalResult
from htam.proposer import Usage
from htam.tasks import Signature

__all__ = ["FASTER", "NONE_CORRECT", "REFERENCE_STANDS", "is_faster", "outcome", "summary"]


def outcome(progress: Progress) -> str:
    best = progress.best_result
    if best is None:
        return NONE_CORRECT
    return FASTER if is_faster(best) else REFERENCE_STANDS


def is_faster(result: EvalResult | None) -> bool:
    return bool(result and result.correct and result.speedup and result.speedup > 1.0)


def timed_shapes(sig: Signature) -> list[str]:
    return [f"{'x'.join(map(str, shape)) or 'scalar'} {dtype}" for shape, dtype in sig.inputs]


def summary(
    run: dict[str, Any],
    progress: Progress,
    usage: Usage,
    ref,
    timed: Signature,
    wall_s: float,
) -> RunSummary:
    """``run`` holds the run's identity (task_id, method, seed, proposer, target, language,
    steps_planned, size, run_dir, resumed_s); ``timed`` is the signature at the size timed."""
    best = progress.best_result
    last = progress.last_result
    result = outcome(progress)
    steps, planned = len(progress.path), run["steps_planned"]
    stopped = steps < planned
    return RunSummary(
        **run,
        steps=steps,
        outcome=result,
        stopped_early=stopped,
        reason=progress.last_failure if stopped or result == NONE_CORRECT else None,
        best_status=str(best.status if best else (last.status if last else "none")),
        best_speedup=best.speedup if best else None,
        user_speedup=None if best is None else max(best.speedup or 1.0, 1.0),
        best_file=BEST_FILES.get(result),
        best_speedup_vs_compile=best.speedup_vs_compile if best else None,
        best_runtime_ms=best.runtime_ms if best else None,
        best_ref_runtime_ms=best.ref_runtime_ms if best else None,
        best_sol_fraction=best.sol_fraction if best else None,
        best_flags=list(best.flags) if best else [],
        ref_runtime_ms=ref.timing["median_ms"] if ref.timing else None,
        ref_compile_runtime_ms=ref.compile_timing["median_ms"] if ref.compile_timing else None,
        timed_inputs=timed_shapes(timed),
        timed_bytes=timed.bytes,
        timing_meaningful=best.timing.meaningful if best and best.timing else None,
        curve=list(progress.curve),
        statuses=[p.status for p in progress.path],
        path=[[p.direction, p.strategy] for p in progress.path],
        prefix_shares=list(progress.prefix_shares),
        duplicates=progress.duplicates,
        cost_usd=usage.cost_usd,
        tokens={"prompt": usage.prompt_tokens, "completion": usage.completion_tokens},
        calls=usage.calls,
        cached_calls=usage.cached_calls,
        wall_s=wall_s,
    )


def lesson(result: EvalResult, strategy_id: str | None) -> str:
    what = strategy_id or "the change"
    if result.correct and result.speedup:
        return f"{what}: correct, {result.speedup:.2f}x vs eager"
    first = result.messages[0][:160] if result.messages else ""
    return f"{what}: {result.status} {first}".strip()
