"""The vectorized C++ GEMM at a KernelBench size (newcomer round 6: level2/76_Gemm_Add_ReLU,
1024x8192 outputs, killed by SIGSEGV). Its K loop reduced into an array section under ``omp
simd``, and GCC gave each of its runs a stack copy that lived until the function returned: one
per output, 32 MB of stack on one thread at 1024x2048."""

import pytest
import torch

from tests.offline.harness import load_solution, solution, task_of

SOURCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(1024, 64)]


def get_init_inputs():
    return [64, 2048]
"""


@pytest.mark.slow
def test_the_vectorized_gemm_runs_at_a_large_output():
    code = solution(task_of("gemm_relu", SOURCE), "cpp", ("memory_access.vectorized_access",))
    assert '"vec": 4' in code.splitlines()[0]
    module = load_solution(code)
    torch.manual_seed(0)
    new = module.ModelNew(64, 2048)
    ref = torch.nn.Linear(64, 2048)
    ref.load_state_dict(new.linear.state_dict())
    x = torch.randn(1024, 64)
    torch.testing.assert_close(new(x), torch.relu(ref(x)), rtol=1e-4, atol=1e-4)
