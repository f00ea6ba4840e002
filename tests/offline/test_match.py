"""Pattern matching: families, spellings, broadcasting, and plain reasons for non-matches."""

import traceback

import pytest

from htam.offline import NoMatch, explain_no_match, match, pipeline, supported_strategies
from htam.offline.pipeline import analyze
from tests.offline.cases import builtin_tasks
from tests.offline.harness import task_of
from tests.offline.kbsource import kb
from tests.offline.sources import CASES, HEAD, UNSUPPORTED

BUILTIN_FAMILIES = {
    "1_ReLU": "elementwise",
    "2_GELU": "elementwise",
    "3_Sigmoid": "elementwise",
    "4_Tanh": "elementwise",
    "5_SiLU": "elementwise",
    "5_Elementwise_Chain": "elementwise",
    "9_Bias_GELU": "elementwise",
    "6_Softmax": "row",
    "7_LogSoftmax": "row",
    "8_LayerNorm": "row",
    "9_RMSNorm": "row",
    "10_Sum_reduction": "row",
    "11_Mean_reduction": "row",
    "12_Max_reduction": "row",
    "13_Argmax": "row",
    "4_Scale_Softmax": "row",
    "6_Add_LayerNorm": "row",
    "14_Matmul": "gemm",
    "1_Gemm_Bias_ReLU": "gemm",
    "2_Gemm_Scale_Residual": "gemm",
    "15_Conv2d": "elementwise",  # library prefix: the conv without its bias, which the kernel adds
    "3_Conv2d_BatchNorm_ReLU": "elementwise",  # library prefix: conv -> bn
    "7_Gemm_Sigmoid_Sum": "row",  # library prefix: linear
    "8_Gemm_SiLU_Mul": "elementwise",  # library prefix: two linears
    "10_Gemm_LogSumExp": "row",  # library prefix: matmul
    "1_MLP": "model",  # whole model: the activations are kernels of ours
}


def _model(body: str, inputs: str = "torch.randn(6, 10)") -> str:
    return (
        HEAD
        + f"""
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        return {body}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return []
"""
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_sources_match_their_family(name):
    source, family, _ = CASES[name]
    m = match(task_of(name, source))
    assert m is not None and m.family == family
    assert explain_no_match(task_of(name, source)) == ""


def test_builtin_tasks_fall_in_the_expected_family():
    seen = 0
    for task in builtin_tasks():
        if task.name not in BUILTIN_FAMILIES:
            continue
        seen += 1
        m = match(task)
        assert (m.family if m else None) == BUILTIN_FAMILIES[task.name], task.name
    assert seen >= 20


@pytest.mark.parametrize(
    "name,words",
    [
        ("sort", "sort"),
        ("training_dropout", "dropout"),
        ("transpose_add", "transpose"),
    ],
)
def test_unsupported_graphs_say_why(name, words):
    task = task_of(name, UNSUPPORTED[name])
    assert match(task) is None
    reason = explain_no_match(task)
    assert reason.startswith("no applicable strategy: ") and words in reason
    assert supported_strategies(task) == []


def test_spellings_of_one_op_give_one_program():
    bodies = [
        "torch.relu(x)",
        "F.relu(x)",
        "x.relu()",
        "self.act(x)",
        "x.clone().relu_()",
        "torch.clamp(x, min=0.0)",
        "torch.maximum(x, torch.zeros_like(x))",
    ]
    programs = []
    for body in bodies[:5]:
        m = analyze(task_of("relu", _model(body)))
        programs.append([(op.name, op.args) for op in m.ir.prog.ops])
    assert all(p == [("relu", ("x",))] for p in programs)
    clamp = analyze(task_of("clamp", _model(bodies[5]))).ir.prog.ops
    assert [op.name for op in clamp] == ["clamp"] and clamp[0].attr("lo") == 0.0
    assert match(task_of("zeros", _model(bodies[6]))) is None  # zeros_like is not a template op


def test_broadcast_operands_are_classified():
    channel = analyze(task_of("ch", CASES["ew_channel"][0])).ir
    patterns = {op.name: (op.pattern, op.tail) for op in channel.operands}
    assert patterns["x"] == ("full", 0)
    assert patterns["p_bias_mid2"] == ("mid", 2)  # (C, 1, 1) against (N, C, H, W)
    assert patterns["p_scale_scalar0"] == ("scalar", 0)
    two = analyze(task_of("two", CASES["ew_two_inputs"][0])).ir
    assert {op.name: op.pattern for op in two.operands}["p_shift_trail0"] == "trail"


def test_per_row_values_must_broadcast_along_the_reduced_dims():
    ok = _model("x - x.mean(dim=1, keepdim=True)")
    squeezed = _model("x - x.mean(dim=1)", inputs="torch.randn(6, 6)")  # broadcasts along dim 0
    assert analyze(task_of("ok", ok)).family == "row"
    reason = explain_no_match(task_of("bad", squeezed))
    assert "does not broadcast along the reduced dims" in reason


def test_sizes_read_from_shapes_are_not_frozen_into_arithmetic():
    reason = explain_no_match(task_of("shape", _model("x / x.shape[-1]")))
    assert "frozen" in reason
    structural = _model("F.layer_norm(x, (x.shape[-1],))")
    assert analyze(task_of("ln", structural)).family == "row"


def test_row_features_drive_the_rewrites():
    softmax = analyze(task_of("s", CASES["row_softmax_module"][0]))
    norm = analyze(task_of("n", CASES["row_layer_norm"][0]))
    argmin = analyze(task_of("a", CASES["row_argmin_middle"][0]))
    assert softmax.features["online_softmax"] and not softmax.features["welford"]
    assert norm.features["welford"] and not norm.features["online_softmax"]
    assert argmin.features["strided_rows"] and not softmax.features["strided_rows"]
    softmax_ids = supported_strategies(task_of("s", CASES["row_softmax_module"][0]))
    assert "algorithmic_rewrite.online_softmax" in softmax_ids
    assert "algorithmic_rewrite.welford_statistics" not in softmax_ids
    argmin_ids = supported_strategies(task_of("a", CASES["row_argmin_middle"][0]))
    assert "memory_access.coalesced_row_access" in argmin_ids


def test_tensor_cores_only_for_triton():
    gemm = task_of("g", CASES["gemm_residual"][0])
    assert "precision.tensor_core_dot" in supported_strategies(gemm, "triton")
    assert "precision.tensor_core_dot" not in supported_strategies(gemm, "cpp")
    assert "fusion.epilogue_fusion" in supported_strategies(gemm)
    assert supported_strategies(gemm, "cuda") == []  # no backend writes CUDA C++


def test_matching_never_materializes_kernelbench_sizes():
    # An unmodified KernelBench file is its large size; 40 GB of input must not be allocated.
    huge = _model("F.gelu(x) * 2.0", inputs="torch.rand(100000, 100000)")
    m = analyze(task_of("huge", huge))
    assert m.family == "elementwise" and m.ir.rank == 2


def test_clone_detach_and_casts_pass_through():
    m = analyze(task_of("cast", _model("x.clone().detach().float().to(x.device) + 1.0")))
    assert [op.name for op in m.ir.prog.ops] == ["add"]


def test_a_no_match_is_a_fresh_exception_with_its_reason_each_time():
    task = task_of("sort_again", UNSUPPORTED["sort"])
    raised = []
    for _ in range(3):
        with pytest.raises(NoMatch, match="sort") as info:
            analyze(task)
        raised.append(info.value)
    assert len({id(e) for e in raised}) == 3  # not one cached instance re-raised
    assert all(str(e) == str(raised[0]) for e in raised)
    # a re-raised instance would carry the tracebacks of every earlier raise
    depths = [len(traceback.extract_tb(e.__traceback__)) for e in raised]
    assert depths[0] == depths[1] == depths[2]
    assert explain_no_match(task) == f"no applicable strategy: {raised[0]}"


def test_a_bug_inside_the_matcher_propagates(monkeypatch):
    def broken(out, traced, source):
        raise TypeError("unsupported operand type(s) for +: 'CNode' and 'NoneType'")

    monkeypatch.setattr(pipeline, "match_families", broken)  # stage 3 as the pipeline calls it
    task = task_of("bug", _model("torch.relu(x) + 7.0"))
    with pytest.raises(TypeError, match="CNode"):
        analyze(task)
    with pytest.raises(TypeError):
        match(task)  # match() returns None only for a genuine no-match
    monkeypatch.undo()
    assert analyze(task).family == "elementwise"  # the bug was not cached as "no match"


def test_a_comparison_is_a_mask_inside_a_chain_never_the_output():
    body = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {}
"""
    where = kb(body.format("torch.where(x.gt(0.5), x, x * (x <= -1.0))"), "[torch.randn(4, 9)]")
    assert analyze(task_of("where", where)).family == "elementwise"
    mask = kb(body.format("x > 0.5"), "[torch.randn(4, 9)]")
    assert "bool mask" in explain_no_match(task_of("mask", mask))
