"""The families beyond rows, elementwise chains and GEMMs (scan, pool, loss, einsum, a float
argument, BatchNorm / GroupNorm, convolution, cross-entropy / KL / triplet losses, attention,
triangular products) on seeded random shapes from htam.tasks.random_families, on the CPU: each
task falls in the family it was drawn for and its Triton solution (interpreter) matches the
reference, alternating the baseline and every strategy together."""

from __future__ import annotations

import re

import pytest

from htam.offline.pipeline import analyze
from htam.tasks.random_families import FAMILIES, SIZED
from htam.tasks.random_shapes import random_tasks
from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution

N = 90
CHUNK = 18
OLD = FAMILIES[:6]
TASKS = random_tasks(N, seed=0, size="small", families=OLD)
# convolution, the losses of class indices and distributions, attention, triangular products
NEW = FAMILIES[6:]
N_NEW = 80
TASKS_NEW = random_tasks(N_NEW, seed=0, size="small", families=NEW)


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
    big = random_tasks(10, seed=0, size="large", families=OLD)
    assert max(max(g.shape) for g in big) > 1000


def test_the_new_families_are_drawn_with_their_variants():
    assert set(SIZED) <= set(FAMILIES)
    sources = "\n".join(g.task.source for g in TASKS_NEW)
    for needle in (
        "nn.Conv1d(",
        "nn.Conv2d(",
        "nn.Conv3d(",
        "nn.ConvTranspose",
        "output_padding=",
        "dilation=2",
        "nn.Sequential(",
        "self.pointwise(self.depthwise(x))",
        "F.cross_entropy(",
        "ignore_index=",
        "reduction='none'",
        "F.kl_div(torch.log(p)",
        "log_target=True",
        "reduction='batchmean'",
        "F.triplet_margin_loss(",
        "nn.TripletMarginLoss(",
        "F.scaled_dot_product_attention(",
        "is_causal=True",
        "is_causal=False",
        "scale=",
        "torch.triu(",
        "torch.tril(",
        "a @ b",
        "diagonal=",
    ):
        assert needle in sources, needle
    groups = re.findall(r"groups=(\d+)", sources)
    assert any(int(g) > 1 for g in groups)
    # tiny shapes keep the interpreter fast; the large draws reach GPU sizes
    for g in TASKS_NEW:
        assert max(g.shape) <= 64, (g.task.name, g.shape)
    big = random_tasks(8, seed=0, size="large", families=NEW)
    assert max(max(g.shape) for g in big) > 1000


# Each chunk is seconds under Triton's interpreter: the fast tier checks the first, the slow
# tests all N tasks.
@pytest.mark.parametrize(
    "start",
    [s if s == 0 else pytest.param(s, marks=pytest.mark.slow) for s in range(0, N, CHUNK)],
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


def _check(tasks, every) -> list[str]:
    """Problems of ``tasks``: a family other than drawn, or a Triton solution (the baseline, or
    every strategy when ``every(i)``) other than the reference."""
    problems = []
    for i, g in enumerate(tasks):
        found = analyze(g.task).family
        if found != g.family:
            problems.append(f"{g.task.name} {g.shape}: matched {found}, expected {g.family}")
            continue
        strategies = everything(g.task, "triton") if every(i) else ()
        problem = compare(g.task, load_solution(solution(g.task, "triton", strategies)), {})
        if problem:
            problems.append(f"{g.task.name} {g.shape} {strategies}: {problem}")
    return problems


# seconds each under the interpreter: the other families stay in the fast tier
SLOW_NEW = {"convolution", "triangular", "special_loss"}


@pytest.mark.parametrize(
    "family", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW_NEW else f for f in NEW]
)
def test_new_family_tasks_are_correct_in_triton(family):
    # each family's draws alternate the baseline and every strategy together
    tasks = [g for g in TASKS_NEW if g.task.name.startswith(f"random_{family}_")]
    assert len(tasks) == N_NEW // len(NEW)
    problems = _check(tasks, lambda i: i % 2 == 0)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_more_new_family_draws_are_correct_in_triton(seed):
    tasks = random_tasks(160, seed=seed, size="small", families=NEW)
    problems = _check(tasks, lambda i: (i // len(NEW)) % 2 == 0)
    assert not problems, "\n".join(problems)
