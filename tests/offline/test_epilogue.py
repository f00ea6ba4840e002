"""Library call + fused epilogue: torch keeps the convolution / GEMM, one kernel the chain after."""

from __future__ import annotations

import ast

import pytest
import torch

from htam.evaluate.static import check_source
from htam.offline import explain_no_match, match
from htam.offline.pipeline import analyze
from tests.offline.harness import load_solution, solution, task_of

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _task(name: str, init: str, forward: str, inputs: str, init_args: str = "[]"):
    source = (
        HEAD
        + f"""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x):
{forward}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return {init_args}
"""
    )
    return task_of(name, source)


CONV = (
    "        self.conv = nn.Conv2d(3, 6, 3)\n        self.bias = nn.Parameter(torch.randn(6, 1, 1))"
)
TASKS = {
    # conv -> elementwise chain with a per-channel parameter and a constant
    "conv_chain": _task(
        "conv_chain",
        CONV,
        "        y = self.conv(x)\n        return torch.sigmoid(F.gelu(y) + self.bias) * 2.0",
        "torch.randn(2, 3, 9, 11)",
    ),
    # conv -> softmax over channels -> tanh: a row kernel over a middle dim
    "conv_softmax": _task(
        "conv_softmax",
        CONV,
        "        return torch.tanh(torch.softmax(self.conv(x), dim=1))",
        "torch.randn(2, 3, 7, 8)",
    ),
    # linear -> logsumexp over features: GEMM + reduction (the GEMM template refuses it)
    "linear_lse": _task(
        "linear_lse",
        "        self.fc = nn.Linear(20, 33)",
        "        return torch.relu(torch.logsumexp(self.fc(x), dim=1, keepdim=True))",
        "torch.randn(5, 20)",
    ),
    # conv -> pooling -> channel mean: the pooling joins the torch prefix, the mean is the kernel
    "conv_pool_mean": _task(
        "conv_pool_mean",
        CONV + "\n        self.pool = nn.MaxPool2d(2)",
        "        y = self.pool(torch.relu(self.conv(x)))\n        return y.mean(dim=1, keepdim=True) * 0.5",
        "torch.randn(2, 3, 10, 10)",
    ),
    # the kernel reads the forward input too (residual from before the library call)
    "linear_residual_input": _task(
        "linear_residual_input",
        "        self.fc = nn.Linear(16, 16)",
        "        return torch.softmax(self.fc(x), dim=-1) + x",
        "torch.randn(4, 16)",
    ),
}
EXPECTED = {
    "conv_chain": ("elementwise", "conv", "gelu_erf -> add -> sigmoid -> mul"),
    "conv_softmax": ("row", "conv", "tanh"),
    "linear_lse": ("row", "linear", "relu"),
    "conv_pool_mean": ("row", "conv -> relu -> pool", "rsum"),
    "linear_residual_input": ("row", "linear", "add"),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_library_prefix_and_kernel_tail(name):
    m = analyze(TASKS[name])
    family, library, tail = EXPECTED[name]
    assert m.family == family
    assert m.library == library
    assert tail in m.summary
    assert m.prelude and all(line.startswith("lib_") for line in m.prelude)
    assert explain_no_match(TASKS[name]) == ""


def test_nothing_after_the_library_call_is_no_match():
    task = _task("conv_only", CONV, "        return self.conv(x)", "torch.randn(1, 3, 8, 8)")
    assert match(task) is None
    reason = explain_no_match(task)
    assert "Conv2d" in reason and "no kernel would remain" in reason


def test_a_prefix_that_would_bake_in_a_constructor_value_is_no_match():
    """fx inlines self.heads as a literal: a prefix reshaping by it would be wrong for other init
    inputs (builtin 3_Transformer_Layer with HEADS=3 gave max abs error 0.09), so it is refused."""
    init = CONV + "\n        self.groups = 4"
    forward = (
        "        y = self.conv(x)\n"
        "        y = y.view(y.shape[0], self.groups, -1).sum(1)\n"
        "        return torch.relu(y)"
    )
    task = _task("baked", init, forward, "torch.randn(1, 3, 8, 8)")
    assert match(task) is None
    assert "bake in constructor values (groups=4)" in explain_no_match(task)


def test_forward_inputs_survive_the_prefix():
    """fx frees dead values (`x = None`); the kernel still reads x after the prefix."""
    code = solution(TASKS["linear_residual_input"], "triton")
    forward = code[code.index("def forward") :]
    assert "x = None" not in forward
    assert "lib_fc = self.fc(x)" in forward  # the reference's own module call


@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_solutions_pass_the_static_rules_with_a_real_kernel(language):
    for name, task in TASKS.items():
        code = solution(task, language)
        assert check_source(code, language) == [], name
        tree = ast.parse(code)
        assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def _run(task, code):
    from htam.tasks.module import load_task_module

    ref_mod = load_task_module(task.source, "small", name="ref_epilogue")
    torch.manual_seed(0)
    model = ref_mod.Model()
    torch.manual_seed(0)
    new = load_solution(code).ModelNew()
    torch.manual_seed(3)
    inputs = ref_mod.get_inputs()
    with torch.no_grad():
        return model(*inputs), new(*inputs)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_triton_baseline_and_all_strategies_are_correct(name, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from htam.offline.pipeline import applicable

    task = TASKS[name]
    m = analyze(task)
    for strategies in [(), tuple(applicable(m, "triton"))]:
        ref, out = _run(task, solution(task, "triton", strategies))
        assert out.shape == ref.shape
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_cpp_baselines_are_correct():
    """Every case's C++ baseline, compiled into one shared extension, against the reference."""
    from tests.offline.harness import build_combined, compare

    codes = {name: solution(task, "cpp") for name, task in TASKS.items()}
    ext, _ = build_combined(list(codes.values()))
    for name, code in codes.items():
        assert compare(TASKS[name], load_solution(code, ext), {}) is None, name
