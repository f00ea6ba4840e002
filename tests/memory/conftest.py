from __future__ import annotations

import pytest

from htam.memory import MemoryBank, StepRecord
from htam.status import Status


def step(
    step: int = 0,
    *,
    run: str = "run",
    task: str = "task",
    prefix: list[str] | None = None,
    direction: str = "fusion",
    local: str | None = "fusion.elementwise_chain_fusion",
    status: Status = Status.OK,
    reward: float = 0.5,
    lesson: str = "",
    error: str = "",
) -> StepRecord:
    return StepRecord(
        run_id=run,
        task_id=task,
        task_signature=f"sig-{task}",
        step=step,
        prefix=list(prefix or []),
        direction=direction,
        local_id=local,
        status=status,
        speedup_before=1.0,
        speedup_after=1.4 if status is Status.OK else None,
        reward=reward,
        error_excerpt=error,
        lesson=lesson,
    )


@pytest.fixture
def bank():
    with MemoryBank.in_memory() as bank:
        yield bank


@pytest.fixture
def make_step():
    return step
