"""Forms the offline proposer once refused (docs/offline.md, "Still refused"), continued from
test_coverage_gaps.py: adaptive pooling, a matmul whose batch dims broadcast, pure
permutations (the permute family). Each is a candidate of its own, correct on the CPU in the
Triton interpreter and in C++."""

from __future__ import annotations

import pytest

from htam.offline import explain_no_match
from htam.offline.check import check_solution
from htam.offline.pipeline import analyze
from tests.offline.cases import variants
from tests.offline.fixture_tasks import fixture_task
from tests.offline.harness import solution, task_of
from tests.offline.test_coverage_gaps import _correct

ADAPTIVE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.{module}

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
# unequal, overlapping windows; an output size of None; one output; more outputs than inputs
ADAPTIVE_CASES = [
    ("AdaptiveMaxPool1d(4)", "3, 5, 11"),
    ("AdaptiveAvgPool2d((None, 3))", "2, 3, 7, 5"),
    ("AdaptiveMaxPool3d((2, 3, 1))", "2, 3, 5, 7, 3"),
    ("AdaptiveAvgPool3d(2)", "1, 2, 3, 5, 9"),
    ("AdaptiveMaxPool2d(1)", "2, 4, 6, 5"),
    ("AdaptiveAvgPool1d(9)", "2, 3, 5"),
]


@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_adaptive_max_pool_is_a_pool_kernel(language):
    m = analyze(fixture_task("variants", "adaptive_maxpool_odd"))
    assert m.family == "pool" and m.ir.adaptive and m.ir.kind == "max", m.summary
    _correct("variants", "adaptive_maxpool_odd", language)


@pytest.mark.parametrize("language", ["triton", "cpp"])
@pytest.mark.parametrize(("module", "shape"), ADAPTIVE_CASES)
def test_adaptive_pooling_is_correct(module, shape, language):
    task = task_of("adaptive", ADAPTIVE.format(module=module, shape=shape))
    assert analyze(task).family == "pool"
    code = solution(task, language)
    assert check_solution(task.source, code) == "correct"


BROADCAST_MATMUL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return {expr}


def get_inputs():
    return [torch.randn({a}), torch.randn({b})]


def get_init_inputs():
    return []
"""
BROADCAST_CASES = [
    ("a @ b", "5, 7", "3, 7, 6"),  # a matrix left operand against a batch
    ("torch.matmul(a, b)", "3, 1, 5, 7", "2, 7, 6"),  # both sides broadcast
    ("a @ b.transpose(-2, -1)", "2, 3, 5, 7", "3, 6, 7"),  # read transposed
    ("torch.matmul(a, b)", "2, 3, 1, 7", "1, 7, 6"),  # one row: the GEMV path
]


def test_a_broadcast_batch_matmul_is_correct_under_every_strategy():
    task = fixture_task("variants", "matmul_broadcast_batch")
    assert analyze(task).family == "gemm"
    for strategies in variants(task, "triton", singles=False):
        code = solution(task, "triton", strategies)
        assert check_solution(task.source, code) == "correct", strategies
    _correct("variants", "matmul_broadcast_batch", "cpp")


@pytest.mark.parametrize(("expr", "a", "b"), BROADCAST_CASES)
def test_broadcast_batch_matmul_is_correct(expr, a, b):
    task = task_of("bmm", BROADCAST_MATMUL.format(expr=expr, a=a, b=b))
    assert analyze(task).family == "gemm"
    assert check_solution(task.source, solution(task, "triton")) == "correct"


@pytest.mark.parametrize("language", ["triton", "cpp"])
@pytest.mark.parametrize("stem", ["pixel_shuffle_odd", "transpose_contiguous"])
def test_a_pure_permutation_is_a_strided_copy(stem, language):
    assert analyze(fixture_task("variants", stem)).family == "permute"
    _correct("variants", stem, language)


PERMUTE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.unshuffle = nn.PixelUnshuffle(2)

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
PERMUTE_CASES = [
    ("x.permute(2, 0, 1).contiguous()", "3, 7, 5"),
    ("x.transpose(1, 3).transpose(0, 2).contiguous()", "2, 3, 5, 7"),  # two moves composed
    ("x.T.contiguous()", "7, 5"),
    ("self.unshuffle(x)", "2, 3, 6, 10"),
    ("F.pixel_shuffle(x, 2)", "2, 3, 8, 3, 5"),  # a batch dim before (C, H, W)
    ("x.permute(0, 2, 1)", "3, 7, 5"),  # the view itself returned
]


@pytest.mark.parametrize("language", ["triton", "cpp"])
@pytest.mark.parametrize(("expr", "shape"), PERMUTE_CASES)
def test_permutations_are_correct(expr, shape, language):
    task = task_of("permute", PERMUTE.format(expr=expr, shape=shape))
    assert analyze(task).family == "permute"
    assert check_solution(task.source, solution(task, language)) == "correct"


def test_a_permutation_with_arithmetic_is_still_refused():
    source = PERMUTE.format(expr="x.transpose(0, 1) + 1.0", shape="3, 7, 5")
    assert "broadcasts against" in explain_no_match(task_of("permute_add", source))
