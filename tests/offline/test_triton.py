"""Generated Triton solutions match their references (interpreter on CPU, real GPU with -m gpu)."""

import pytest

from tests.offline.cases import all_cases, variants
from tests.offline.harness import compare, load_solution, solution

# a second or more each under the interpreter: they run in the full suite (the rest stay fast)
SLOW = {
    "row_hinge_mean", "2_Causal_Attention", "row_stats", "row_layer_norm", "row_log_softmax",
    "triu_matmul", "3_Transformer_Layer", "ew_channel", "row_softmax_module",
    "attention_causal_wide", "ew_two_inputs", "gemm_bmm", "row_l2_normalize",
    "norm_batch_2d", "gemm_transposed", "10_Gemm_LogSumExp", "norm_group", "gemm_linear_3d",
    "row_argmin_middle", "conv_t_3d_groups", "gemm_residual", "8_LayerNorm", "4_Small_CNN",
}  # fmt: skip
CASES = [pytest.param(c, marks=pytest.mark.slow) if c[0].name in SLOW else c for c in all_cases()]
IDS = [task.name for task, _ in all_cases()]


def _check(task, shapes, strategies, tf32_ok=False):
    code = solution(task, "triton", strategies)
    module = load_solution(code)
    for overrides in shapes:
        problem = compare(task, module, overrides, rel_l2=3e-3 if tf32_ok else None)
        assert problem is None, f"{task.name} {strategies}: {problem}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_strategy_alone_and_together(case):
    task, shapes = case
    custom = task.id.startswith("test/")
    for strategies in variants(task, "triton", singles=custom):
        # Each strategy alone on every shape of the custom tasks; builtins on their own shapes.
        _check(task, shapes, strategies, tf32_ok="precision.tensor_core_dot" in strategies)
