"""What the memory learns from one step: its record (the state's signature, the prefix, the
direction and strategy applied, the outcome and its reward) under the candidate's identity."""

from __future__ import annotations

import hashlib

from htam.agent.config import OptimizeConfig
from htam.agent.guides import Context
from htam.agent.state import normalized
from htam.agent.summary import lesson
from htam.evaluate.result import EvalResult
from htam.memory import StepRecord
from htam.tasks import Task


def learned_record(
    task: Task,
    sig,
    ctx: Context,
    run_id: str,
    config: OptimizeConfig,
    size: str,
    *,
    direction: str,
    strategy_id: str | None,
    result: EvalResult,
    speedup_before: float | None,
    reward: float,
    code: str | None,
) -> StepRecord:
    """The step as the memory records it (``sig``: the task's signature at the size timed)."""
    return StepRecord(
        run_id=run_id,
        task_id=task.id,
        task_signature=sig.text,
        step=ctx.step,
        prefix=ctx.prefix,
        direction=direction,
        local_id=strategy_id,
        status=result.status,
        speedup_before=speedup_before,
        speedup_after=result.speedup,
        reward=reward,
        error_excerpt="" if result.correct else " ".join(result.messages)[:300],
        lesson=lesson(result, strategy_id),
        code_digest=code_digest(task, code, config, size),
        context={
            "target": config.target,
            "language": config.language,
            "device": result.device or config.target,
            "size": size,
        },
    )


def code_digest(task: Task, code: str | None, config: OptimizeConfig, size: str) -> str:
    """The candidate's identity for the memory: the same code on the same task, target,
    language and size is learned from once (a rerun served from the cache is not news)."""
    if code is None:
        return ""
    parts = [task.digest, normalized(code), config.target, config.language, str(size)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]
