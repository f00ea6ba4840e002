"""Shared test data: a reference task, a good Triton implementation, candidate strategies."""

from __future__ import annotations

from htam.evaluate.result import EvalResult
from htam.proposer import Strategy
from htam.status import Status

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


N = 1024


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""

GOOD_CODE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu2_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
"""

CANDIDATES = [
    Strategy("fusion.elementwise_chain", "fusion", "Fuse the elementwise chain", "One pass."),
    Strategy("memory_access.vector_loads", "memory_access", "Vectorized loads", "128-bit."),
    Strategy("parallel.grid_stride", "parallel", "Grid-stride loop", "Fewer blocks."),
]


class Sleeps(list):
    """Stands in for time.sleep: records the backoff delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def failure(status: Status = Status.COMPILE_ERROR, log: str = "") -> EvalResult:
    return EvalResult(status=status, messages=[f"{status} in stage"], log=log)
