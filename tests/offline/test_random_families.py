"""The families beyond rows, elementwise chains and GEMMs (scan, pool, loss, einsum, a float
argument, BatchNorm / GroupNorm) on seeded random shapes from htam.tasks.random_families, on the CPU: each task falls
in the family it was drawn for and its Triton solution (interpreter) matches the reference,
alternating the baseline and every strategy together."""

from __future__ import annotations

import pytest

from htam.offline.pipeline import analyze
from htam.tasks.random_families import FAMILIES
from htam.tasks.random_shapes import random_tasks
from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution

N = 90
CHUNK = 18
TASKS = random_tasks(N, seed=0, size="small", families=FAMILIES)


def test_every_family_is_drawn_with_its_variants():
    sources = "\n".join(g.task.source for g in TASKS)
    for needle in (
        "cumprod",
        ".flip(",
        "* mask",
        "narrow",
        "MaxPool",
        "AvgPool",
        "ceil_mode=True",
        "reduction='none'",
        "einsum",
        "x, s",
        "GroupNorm",
        "BatchNorm",
        ".eval()",
    ):
        assert needle in sources, needle
    big = random_tasks(10, seed=0, size="large", families=FAMILIES)
    assert max(max(g.shape) for g in big) > 1000


@pytest.mark.parametrize("start", range(0, N, CHUNK), ids=lambda s: f"tasks{s}-{s + CHUNK - 1}")
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
