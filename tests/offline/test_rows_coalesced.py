"""Reductions and norms over a dim that is not the last one (KernelBench level 1 tasks 36, 47-53):
a program owns adjacent inner indices (coalesced loads along the innermost axis) and walks the
reduced dim, with enough programs to fill the GPU. The launches are checked at the real
KernelBench sizes on meta tensors (nothing allocated), the results under the interpreter at
small sizes of the same structure."""

from __future__ import annotations

import pytest
import torch

from tests.offline.cases import everything
from tests.offline.harness import compare, load_solution, solution, task_of
from tests.offline.sources import kb

# (forward expression, inputs, size overrides: one outer index, inner 1, odd inner, many tiles)
MIDDLE = {
    "sum_keepdim": ("torch.sum(x, dim=1, keepdim=True)", "[torch.randn(B, R, I)]"),
    "mean": ("torch.mean(x, dim=1)", "[torch.randn(B, R, I)]"),
    "max_values": ("torch.max(x, dim=1)[0]", "[torch.randn(B, R, I)]"),
    "min_values": ("torch.min(x, dim=1)[0]", "[torch.randn(B, R, I)]"),
    # Values from {0, 1, 2}: every row has ties, the first index must win.
    "argmax_ties": ("torch.argmax(x, dim=1)", "[torch.randint(0, 3, (B, R, I)).float()]"),
    "argmin_ties": ("torch.argmin(x, dim=1)", "[torch.randint(0, 3, (B, R, I)).float()]"),
    "rms_norm": (
        "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
        "[torch.randn(B, R, I, 3)]",
    ),
    "l2_norm": ("x / torch.norm(x, p=2, dim=1, keepdim=True)", "[torch.randn(B, R, I)]"),
    "softmax": ("torch.softmax(x * 2.0, dim=1)", "[torch.randn(B, R, I)]"),
    "log_softmax": ("torch.log_softmax(x, dim=1)", "[torch.randn(B, R, I)]"),
    "std": ("torch.std(x, dim=1)", "[torch.randn(B, R, I) * 3 + 5]"),
}
SHAPES = [{}, {"B": 1}, {"I": 1}, {"I": 3, "R": 1500}, {"B": 1, "R": 2, "I": 17}]


def _source(expr: str, inputs: str) -> str:
    body = f"""
B = 2
R = 37
I = 401

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}
"""
    return kb(body, inputs)


# a second or more each under the interpreter: in the full suite (the others stay fast)
SLOW_MIDDLE = {"softmax", "log_softmax", "std", "rms_norm", "mean", "l2_norm", "min_values",
               "max_values", "argmax_ties", "argmin_ties"}  # fmt: skip


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MIDDLE else n for n in MIDDLE]
)
def test_middle_dim_reductions_match_under_the_interpreter(name):
    task = task_of(f"middle_{name}", _source(*MIDDLE[name]))
    variants = [(), everything(task, "triton"), ("data_reuse.register_row_cache",)]
    for strategies in variants:
        code = solution(task, "triton", strategies)
        assert "def htam_row_coal(" in code
        module = load_solution(code)
        for shape in SHAPES:
            problem = compare(task, module, shape, atol=2e-4, rtol=2e-4)
            assert problem is None, f"{name} {strategies} {shape}: {problem}"


# KernelBench level 1 at its real sizes (the files' own shapes, dims and spellings).
KB_REDUCE = """
batch_size = 128
dim1 = 4096
dim2 = 4095

class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return {expr}
"""
KB_INPUTS = "[torch.rand(batch_size, dim1, dim2)]"
KB_RMS = """
batch_size = 112
features = 64
dim1 = 512
dim2 = 512

class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms
"""


class _Recorder:
    """Stands in for a kernel: records ``kernel[grid](*args, **meta)`` instead of running it."""

    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def __getitem__(self, grid):
        return lambda *args, **meta: self.calls.append((self.name, tuple(grid), meta))


def _launches(source: str, shape: tuple[int, ...], init: list, strategies=()) -> list:
    task = task_of("kb", source)
    module = load_solution(solution(task, "triton", strategies))
    calls: list = []
    for name in list(vars(module)):
        if name.startswith("htam_"):
            setattr(module, name, _Recorder(name, calls))
    model = module.ModelNew(*init).to("meta")  # its buffers where its inputs are, as a user's
    out = model(torch.empty(shape, device="meta"))
    assert out.device.type == "meta"
    return calls


@pytest.mark.parametrize(
    "expr", ["torch.sum(x, dim=self.dim, keepdim=True)", "torch.argmax(x, dim=self.dim)"]
)
def test_kernelbench_middle_dim_reduction_launches_coalesced_blocks(expr):
    source = kb(KB_REDUCE.format(expr=expr), KB_INPUTS, "[1]")
    [(name, grid, meta)] = _launches(source, (128, 4096, 4095), [1])
    # 64 adjacent floats (256 contiguous bytes) of the 4095 inner ones per program, 32 steps
    # of the reduced dim per tile: 64 blocks x 128 outer = 8192 programs, 62 per SM.
    assert name == "htam_row_coal"
    assert (meta["ROWS"], meta["BLOCK"], meta["num_warps"]) == (64, 32, 4)
    assert grid == (64 * 128,)


def test_kernelbench_rms_norm_over_features_is_coalesced():
    source = kb(KB_RMS, "[torch.rand(batch_size, features, dim1, dim2)]", "[features]")
    [(name, grid, meta)] = _launches(source, (112, 64, 512, 512), [64])
    assert name == "htam_row_coal" and (meta["ROWS"], meta["BLOCK"]) == (64, 32)
    assert grid == (512 * 512 // 64 * 112,)
    # with the register cache the 64 features of 64 inner indices are read once
    [(name, _, meta)] = _launches(
        source, (112, 64, 512, 512), [64], ("data_reuse.register_row_cache",)
    )
    assert name == "htam_row_ctile" and (meta["ROWS"], meta["BLOCK"]) == (64, 64)


def test_a_small_outer_size_narrows_the_blocks_to_fill_the_gpu():
    source = kb(KB_REDUCE.format(expr="torch.sum(x, dim=self.dim)"), KB_INPUTS, "[1]")
    [(name, grid, meta)] = _launches(source, (2, 4096, 4095), [1])
    assert name == "htam_row_coal" and meta["ROWS"] == 16 and grid == (256 * 2,)
    assert meta["ROWS"] * meta["BLOCK"] == 2048  # the tile keeps its size along the reduced dim


def test_the_last_dim_keeps_one_program_per_row():
    source = kb(KB_REDUCE.format(expr="torch.sum(x, dim=self.dim)"), KB_INPUTS, "[2]")
    [(name, grid, meta)] = _launches(source, (128, 64, 4095), [2])
    assert name == "htam_row_loop" and meta["ROWS"] == 1 and grid == (128 * 64,)
