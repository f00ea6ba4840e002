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


def gpu_config() -> EvalConfig:
    """The GPU arena's: building a CUDA extension (nvcc and g++ on torch's headers, beside the
    candidate's process) peaked at 2.5 GiB of anonymous memory on the H200 (run 49), and its
    /tmp counts too, so 3 GiB killed honest CUDA candidates while they compiled."""
    return fast_config(size="large", timing_budget_ms=300.0, min_timed=10, memory_limit_mb=8192)


@pytest.fixture(scope="module")
def gpu_evaluator():
    with Evaluator("cuda", gpu_config()) as ev:
        yield ev
