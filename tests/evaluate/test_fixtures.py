"""Every cheat is caught by its rule, every fault gets its status, and the evaluator keeps
working honestly after each of them."""

import re
import statistics

import pytest

from htam.evaluate import Evaluator
from tests.evaluate.cases import (
    ALSO_REFUSED,
    CHEATS_CPU,
    CHEATS_GPU,
    FAULTS_CPU,
    FAULTS_GPU,
    FIXTURES,
    HONEST_CPU,
    HONEST_GPU,
    RELU,
)
from tests.evaluate.conftest import fast_config, task_for


def _evaluate(evaluator, solution, task, language):
    return evaluator.evaluate(task_for(task), (FIXTURES / solution).read_text(), language)


def _assert_case(evaluator, solution, task, language, status, rule):
    result = _evaluate(evaluator, solution, task, language)
    text = " | ".join(result.messages)
    also = ALSO_REFUSED.get(solution)
    if also and result.status == also[0]:
        status, rule = also
    assert result.status == status, f"{solution}: {result.status} ({text})\n{result.log[-1500:]}"
    assert rule in text, f"{solution}: expected {rule!r} in {text!r}"
    return result


def _assert_honest(evaluator, solution, task, language):
    result = _evaluate(evaluator, solution, task, language)
    assert result.status == "ok", f"{solution}: {result.messages}\n{result.log[-2000:]}"
    assert result.runtime_ms > 0 and result.ref_runtime_ms > 0
    assert 0 < result.sol_fraction
    return result


@pytest.mark.parametrize("case", CHEATS_CPU, ids=[c[0] for c in CHEATS_CPU])
def test_cheat_is_caught(cpu_evaluator, case):
    _assert_case(cpu_evaluator, *case)


@pytest.mark.slow
@pytest.mark.parametrize("case", FAULTS_CPU, ids=[c[0] for c in FAULTS_CPU])
def test_fault_then_honest(cpu_evaluator, case):
    _assert_case(cpu_evaluator, *case)
    _assert_honest(cpu_evaluator, "honest_relu_triton.py", RELU, "triton")


@pytest.mark.slow
@pytest.mark.parametrize("case", HONEST_CPU, ids=[c[0] for c in HONEST_CPU])
def test_honest_cpu(cpu_evaluator, case):
    result = _assert_honest(cpu_evaluator, *case)
    if case[2] == "triton":
        assert not result.timing.meaningful
    else:
        assert result.timing.meaningful


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case", CHEATS_GPU + FAULTS_GPU, ids=[c[0] for c in CHEATS_GPU + FAULTS_GPU]
)
def test_gpu_cheat_or_fault(gpu_evaluator, case):
    _assert_case(gpu_evaluator, *case)
    _assert_honest(gpu_evaluator, "honest_relu_cuda.py", RELU, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("case", HONEST_GPU, ids=[c[0] for c in HONEST_GPU])
def test_honest_gpu(gpu_evaluator, case):
    result = _assert_honest(gpu_evaluator, *case)
    assert result.timing.method == "cuda_events"


@pytest.fixture(scope="module")
def steady_evaluator():
    with Evaluator("cpu", fast_config(timing_budget_ms=200.0, min_timed=20)) as evaluator:
        yield evaluator


# Each task is timed against itself for tens of seconds on 2 cores: ReLU keeps it in the fast
# tier, the chain and the matmul run with the slow tests.
@pytest.mark.parametrize(
    "task",
    [
        RELU,
        pytest.param("level2/5_Elementwise_Chain.py", marks=pytest.mark.slow),
        pytest.param("level1/14_Matmul.py", marks=pytest.mark.slow),
    ],
)
@pytest.mark.slow
def test_reference_against_itself_is_even(steady_evaluator, task):
    """The reference timed beside a copy of itself: two isolated processes through the same
    harness, calls interleaved, each stopped while the other runs."""
    the_task = task_for(task)
    code = re.sub(r"\bModel\b", "ModelNew", the_task.source)
    results = [steady_evaluator.evaluate(the_task, code, "cpp", allow_torch=True) for _ in range(7)]
    assert all(r.status == "ok" for r in results), [r.messages for r in results]
    speedups = [r.speedup for r in results]
    # Unbiased: the median is even. Two processes on a shared 2-core virtual machine are noisier
    # than one: single runs strayed to 1.29 and 0.76 here and to 1.72 on CI. A measurement that
    # favours either side fails (the old separate-process timing: 0.33-1.73; CI once saw a
    # median of five at 1.41 while only the candidate was left to settle when stopped).
    assert 0.85 < statistics.median(speedups) < 1.18, speedups
    assert all(0.5 < s < 2.0 for s in speedups), speedups
