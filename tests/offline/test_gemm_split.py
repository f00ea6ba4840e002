"""Split-K in the Triton GEMM: chosen from the run-time shape, correct with every epilogue mode."""

from __future__ import annotations

import pytest
import torch

from htam.offline.pipeline import analyze, applicable
from htam.tasks.module import load_task_module
from tests.offline.harness import load_solution, solution, task_of

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

GEMV = (
    HEAD
    + """
M, K = 9, 300

class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]

def get_init_inputs():
    return []
"""
)

LARGE_K = (
    HEAD
    + """
B, K, N = 5, 256, 20

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(K, N)

    def forward(self, x, y):
        return F.gelu(self.fc(x)) * 2.0 + y

def get_inputs():
    return [torch.randn(B, K), torch.randn(B, N)]

def get_init_inputs():
    return []
"""
)

TRANSPOSED = (
    HEAD
    + """
M, K, N = 7, 300, 6

class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A.T, B.T)

def get_inputs():
    return [torch.randn(K, M), torch.randn(N, K)]

def get_init_inputs():
    return []
"""
)


class _Counting:
    """Stands for a jitted kernel; counts ``kernel[grid](...)`` launches."""

    def __init__(self, fn):
        self.fn, self.launches = fn, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.fn[grid]


def _check(task, strategies):
    code = solution(task, "triton", strategies)
    sol = load_solution(code)
    counter = _Counting(sol.htam_gemm_sum)
    sol.htam_gemm_sum = counter
    ref_mod = load_task_module(task.source, "small", name="ref_split")
    torch.manual_seed(0)
    ref_model = ref_mod.Model()
    torch.manual_seed(0)
    new = sol.ModelNew()
    torch.manual_seed(5)
    inputs = ref_mod.get_inputs()
    with torch.no_grad():
        ref, out = ref_model(*inputs), new(*inputs)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    return counter.launches


@pytest.mark.parametrize("name", ["gemv", "large_k", "transposed"])
def test_split_k_runs_and_is_correct(name, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    source = {"gemv": GEMV, "large_k": LARGE_K, "transposed": TRANSPOSED}[name]
    task = task_of(f"split_{name}", source)
    m = analyze(task)
    assert m.family == "gemm"
    variants = [()]
    if m.ir.has_epilogue:  # separate kernels per op, one epilogue kernel, fused into the GEMM
        variants += [("fusion.elementwise_chain_fusion",), ("fusion.epilogue_fusion",)]
    variants.append(tuple(s for s in applicable(m, "triton") if s != "precision.tensor_core_dot"))
    for strategies in variants:
        # one output tile and K >= 4 * BK: the rule splits K (one sum launch per forward)
        assert _check(task, strategies) == 1, strategies


def test_no_split_when_tiles_fill_the_gpu(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    small_k = GEMV.replace("M, K = 9, 300", "M, K = 9, 100")  # K < 4 * BK: never split
    assert _check(task_of("split_small_k", small_k), ()) == 0
