"""Forms the offline proposer once refused (docs/offline.md, "Still refused"), now each with a
candidate of its own that is correct on the CPU: tuple outputs, InstanceNorm with its affine,
``torch.prod``, reductions over non-adjacent dims and the others below. The fixtures are in
tests/offline/fixtures (their Triton baselines also run in test_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from htam.offline import explain_no_match
from htam.offline.check import check_solution, compare_output, max_error
from htam.offline.pipeline import analyze
from htam.tasks.loader import load_task
from tests.offline.cases import variants
from tests.offline.fixture_tasks import fixture_task
from tests.offline.harness import solution, task_of


def _correct(kind: str, stem: str, language: str) -> str:
    """The fixture's baseline in ``language``, after checking it is correct and our own."""
    task = fixture_task(kind, stem)
    code = solution(task, language)
    assert ("@triton.jit" in code) if language == "triton" else ("_ext." in code), stem
    assert check_solution(task.source, code) == "correct"
    return code


def test_a_tuple_output_is_compared_slot_by_slot():
    a, b = torch.zeros(3), torch.ones(2)
    assert compare_output((a, b), (a.clone(), b.clone())) is None
    assert "output 1" in (compare_output((a, b + 1.0), (a, b)) or "")
    assert compare_output((a,), (a, b)) == "1 outputs for the reference's 2"
    assert compare_output(a, (a,)) is not None  # a tensor is not a one-tuple
    assert max_error((a, b + 0.5), (a, b)) == pytest.approx(0.5)


def test_a_whole_model_returning_a_tuple_is_correct():
    m = analyze(fixture_task("models", "tuple_outputs"))
    assert m.family == "model" and sum(m.ir.calls.values()) >= 2, m.ir.calls
    _correct("models", "tuple_outputs", "triton")


@pytest.mark.parametrize("stem", ["conv_instancenorm_affine", "instancenorm3d_affine"])
def test_affine_instance_norm_is_a_row_kernel_with_a_channel_epilogue(stem):
    m = analyze(fixture_task("variants", stem))
    assert m.family == "row" and m.summary.count("mul") >= 2 and "add" in m.summary, m.summary
    channel = [op for op in m.ir.operands if "_norm_" in op.name and op.pattern == "mid"]
    assert len(channel) == 2 and all(op.head == 1 for op in channel), m.ir.operands


def test_affine_instance_norm_is_correct_in_cpp():
    _correct("variants", "instancenorm3d_affine", "cpp")


PROD_ROWS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.prod(x, dim=-1)


def get_inputs():
    return [1.0 + 0.01 * torch.randn(3, 5003)]  # 3 long rows: the split path on a GPU


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("stem", ["prod_middle_signed", "prod_last_keepdim"])
@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_prod_is_a_row_kernel(stem, language):
    m = analyze(fixture_task("variants", stem))
    assert m.family == "row" and m.summary.count("rsum") == 2, m.summary
    _correct("variants", stem, language)


def test_prod_is_correct_under_every_strategy():
    task = fixture_task("variants", "prod_middle_signed")
    for strategies in variants(task, "triton", singles=False):
        code = solution(task, "triton", strategies)
        assert check_solution(task.source, code) == "correct", strategies


def test_a_long_product_keeps_its_precision():
    task = task_of("prod_rows", PROD_ROWS)
    assert check_solution(task.source, solution(task, "triton")) == "correct"


ROBUST_LAYERNORM = Path("/work/shared/robust-kbench/tasks/layernorm")


@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_a_reference_reading_sizes_in_python_is_traced_with_concrete_ones(language):
    m = analyze(fixture_task("variants", "layernorm_len_of_shape"))
    assert m.family == "row" and "over dims [1, 2, 3]" in m.summary, m.summary
    _correct("variants", "layernorm_len_of_shape", language)


SIZE_ARITHMETIC = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5))

    def forward(self, x):
        if len(self.w.shape) == 1:  # untraceable symbolically: the concrete trace runs
            return x * self.w / x.shape[-1]
        return x


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return []
"""


def test_a_concrete_size_in_arithmetic_is_still_refused():
    """The concrete trace marks the sizes it reads: one used as a number would freeze the
    traced size into the kernel, so it is refused as in a symbolic trace."""
    reason = explain_no_match(task_of("size_arithmetic", SIZE_ARITHMETIC))
    assert "shape" in reason and "concrete input sizes" in reason, reason


@pytest.mark.skipif(not ROBUST_LAYERNORM.is_dir(), reason="no Robust-KBench checkout")
def test_robust_kbench_layernorm_matches_and_is_correct_in_cpp():
    task = load_task(ROBUST_LAYERNORM)
    assert analyze(task).family == "row"
    code = solution(task, "cpp")
    assert "_ext." in code and check_solution(task.source, code) == "correct"


def test_a_reduction_over_non_adjacent_dims_reads_its_input_permuted():
    task = fixture_task("variants", "amax_amin_nonadjacent")
    m = analyze(task)
    assert m.family == "row" and m.ir.perm == (0, 2, 1, 3) and m.ir.keepdim, m.summary
    assert (m.ir.d0, m.ir.d1) == (2, 3)
    for strategies in variants(task, "triton", singles=False):
        code = solution(task, "triton", strategies)
        assert check_solution(task.source, code) == "correct", strategies
    _correct("variants", "amax_amin_nonadjacent", "cpp")


NON_ADJACENT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
NON_ADJACENT_CASES = [
    ("torch.amax(x, dim=(0, 2))", "3, 7, 5"),
    ("torch.amin(x, dim=(0, 2), keepdim=True)", "3, 7, 5"),
    ("x.abs().sum(dim=(0, 2)) * 0.5", "3, 7, 5"),  # a prologue and an epilogue
    ("torch.mean(x, dim=[0, 3])", "2, 3, 5, 7"),
    ("x.pow(2).sum(dim=(-1, 0))", "3, 7, 5"),  # negative dims
]


@pytest.mark.parametrize("language", ["triton", "cpp"])
@pytest.mark.parametrize(("expr", "shape"), NON_ADJACENT_CASES)
def test_non_adjacent_reductions_are_correct(expr, shape, language):
    task = task_of("non_adjacent", NON_ADJACENT.format(expr=expr, shape=shape))
    assert "permuted by" in analyze(task).summary
    assert check_solution(task.source, solution(task, language)) == "correct"


def test_a_non_adjacent_softmax_is_refused_in_one_line():
    source = NON_ADJACENT.format(
        expr="torch.amax(x, dim=(0, 2), keepdim=True) + x", shape="3, 7, 5"
    )
    reason = explain_no_match(task_of("non_adjacent_elem", source))
    assert "non-adjacent dims [0, 2]" in reason and "\n" not in reason, reason


def test_a_tuple_of_bare_reductions_is_refused_naming_the_family():
    """No whole-model segment (activation, norm, softmax...) and no single kernel writes two
    outputs: the refusal names the missing family."""
    source = NON_ADJACENT.format(expr="x.sum(dim=1), x.amax(dim=1)", shape="3, 7, 5")
    reason = explain_no_match(task_of("tuple_rows", source))
    assert "returns 2 outputs" in reason and "[missing family: multiple outputs]" in reason


SIZE_BRANCH = SIZE_ARITHMETIC.replace(
    "return x * self.w / x.shape[-1]", "return x * self.w * (2.0 if x.shape[-1] > 4 else 3.0)"
)


def test_control_flow_on_a_size_is_not_frozen_by_the_concrete_trace():
    """A branch on an input's size would keep the traced size's branch at every size."""
    assert "x.shape[-1] > 4" in SIZE_BRANCH
    reason = explain_no_match(task_of("size_branch", SIZE_BRANCH))
    assert "torch.fx cannot trace the reference" in reason, reason


UNBATCHED_INSTANCE_NORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.InstanceNorm2d(3, affine=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(3, 7, 5)]  # (C, H, W): no batch dim


def get_init_inputs():
    return []
"""


def test_an_unbatched_affine_instance_norm_is_correct():
    task = task_of("instance_norm_unbatched", UNBATCHED_INSTANCE_NORM)
    assert analyze(task).family == "row"
    assert check_solution(task.source, solution(task, "triton")) == "correct"


CONV_AMAX = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.amax(torch.relu(self.conv(x)), dim=(1, 3))


def get_inputs():
    return [torch.randn(2, 3, 9, 7)]


def get_init_inputs():
    return []
"""


def test_a_library_result_reduced_over_non_adjacent_dims_is_read_permuted():
    task = task_of("conv_amax", CONV_AMAX)
    m = analyze(task)
    assert m.library and m.ir.perm == (0, 2, 1, 3), m.summary
    code = solution(task, "triton")
    assert "lib_conv.permute(0, 2, 1, 3)" in code
    assert check_solution(task.source, code) == "correct"
