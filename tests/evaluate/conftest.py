from pathlib import Path

import pytest

from htam.evaluate import EvalConfig, Evaluator
from htam.tasks import load_task

BUILTIN = Path(__file__).resolve().parents[2] / "htam" / "tasks" / "builtin"


def task_for(spec):
    path = spec if isinstance(spec, Path) else BUILTIN / spec
    return load_task(path)


def fast_config(**overrides) -> EvalConfig:
    """Short limits so faults end quickly; a small timing budget since CPU timings are not bars."""
    base = dict(
        run_timeout_s=20.0,
        compile_timeout_s=240.0,
        memory_limit_mb=3072,
        output_limit_bytes=1 << 20,
        timing_budget_ms=30.0,
        min_timed=3,
        max_timed=20,
    )
    base.update(overrides)
    return EvalConfig(**base)


@pytest.fixture(scope="module")
def cpu_evaluator():
    with Evaluator("cpu", fast_config()) as evaluator:
        yield evaluator


@pytest.fixture(scope="module")
def gpu_evaluator():
    with Evaluator("cuda", fast_config(size="large", timing_budget_ms=300.0, min_timed=10)) as ev:
        yield ev
