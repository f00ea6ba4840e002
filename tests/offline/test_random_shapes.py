"""The offline templates on 200 seeded random shapes (htam.tasks.random_shapes), on the CPU.

Most tasks are checked in process: the generated Triton runs under the interpreter and its
output is compared with the reference's by ``torch.allclose`` (tests/offline/harness.compare),
alternating the baseline and every strategy together. Two (a row and an elementwise task) go through the real htam
Evaluator (isolated process, its own correctness protocol). The GPU run at KernelBench sizes is
``scripts/experiments/random_shapes.py``.
"""

from __future__ import annotations

import pytest

from htam.offline.pipeline import analyze
from htam.tasks.random_shapes import random_tasks
from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution

N = 200
CHUNK = 20
TASKS = random_tasks(N, seed=0, size="small")


def test_the_generator_is_seeded_and_covers_the_edges():
    again = random_tasks(N, seed=0, size="small")
    assert [g.task.source for g in again] == [g.task.source for g in TASKS]
    other = random_tasks(N, seed=1, size="small")
    assert sum(a.task.source != b.task.source for a, b in zip(TASKS, other, strict=True)) > 150
    shapes = [g.shape for g in TASKS]
    assert {g.family for g in TASKS} == {"row", "elementwise", "gemm"}
    assert any(s[0] == 1 for s in shapes) and any(s[-1] == 1 for s in shapes)  # one row / col
    assert sum(any(n % 2 and n > 9 for n in s) for s in shapes) > 25  # odd sizes (31 at seed 0)
    assert {g.layout for g in TASKS} == {"contiguous", "transposed", "strided"}
    long = [s for g, s in zip(TASKS, shapes, strict=True) if g.family == "row" and s[-1] > 4096]
    assert len(long) >= 5  # rows split across programs
    big = random_tasks(20, seed=0, size="large")
    assert max(max(g.shape) for g in big) > 4096


# Each chunk is seconds under Triton's interpreter: the fast tier checks the first FAST_CHUNKS
# chunks, the slow tests all N tasks.
FAST_CHUNKS = 1


@pytest.mark.parametrize(
    "start",
    [
        s if s < FAST_CHUNKS * CHUNK else pytest.param(s, marks=pytest.mark.slow)
        for s in range(0, N, CHUNK)
    ],
    ids=lambda s: f"tasks{s}-{s + CHUNK - 1}",
)
def test_generated_tasks_are_correct_in_triton(start):
    problems = []
    for i, g in enumerate(TASKS[start : start + CHUNK], start):
        found = analyze(g.task).family
        if found != g.family:
            problems.append(f"{g.task.name} {g.shape}: matched {found}, expected {g.family}")
            continue
        strategies = () if i % 2 else everything(g.task, "triton")
        problem = compare(g.task, load_solution(solution(g.task, "triton", strategies)), {})
        if problem:
            problems.append(f"{g.task.name} {g.shape} {g.layout} {strategies}: {problem}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow  # the evaluator on generated tasks; the loop tests run it on the offline code
def test_a_handful_pass_the_htam_evaluator():
    from htam.evaluate.eval_config import EvalConfig
    from htam.evaluate.host.evaluator import Evaluator

    picks = [next(g for g in TASKS if g.family == f) for f in ("elementwise", "row")]
    config = EvalConfig(
        run_timeout_s=180.0,
        compile_timeout_s=240.0,
        timing_budget_ms=5.0,
        min_timed=2,
        max_timed=3,
    )
    with Evaluator("cpu", config) as evaluator:
        for g in picks:
            result = evaluator.evaluate(g.task, solution(g.task, "triton"), "triton")
            assert result.correct, f"{g.task.name} {g.shape}: {result.status} {result.messages}"


CONV_TASKS = random_tasks(40, seed=0, size="small", families=("conv",))


@pytest.mark.slow
@pytest.mark.parametrize("start", range(0, 40, CHUNK), ids=lambda s: f"conv{s}-{s + CHUNK - 1}")
def test_random_convolutions_read_channels_last_and_match(start):
    """Every kind of convolution, 1-40 output channels, kernels 1-3, strides 1-2, size-1 dims,
    an activation and at times a per-channel parameter: the channels-last epilogue baseline (and
    every strategy on top of it) against the reference."""
    problems = []
    for i, g in enumerate(CONV_TASKS[start : start + CHUNK], start):
        m = analyze(g.task)
        assert m.family == "elementwise" and m.features.get("channels_last"), g.task.source
        strategies = () if i % 2 else everything(g.task, "triton")
        code = solution(g.task, "triton", strategies)
        assert "offs_cl" in code
        problem = compare(g.task, load_solution(code), {}, atol=2e-4, rtol=2e-4)
        if problem:
            problems.append(f"{g.task.name} {g.shape} {strategies}: {problem}")
    assert not problems, "\n".join(problems)
