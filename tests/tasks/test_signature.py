"""Signatures: ops, families, FLOPs, bytes, shapes of the reference."""

import json
import os

import pytest

from htam.tasks import FAMILIES, Signature, signature
from htam.tasks.families import families, op_family
from htam.tasks.signatures import compute_signature


def test_matmul_flops_are_2mnk_at_small_size(by_name):
    sig = signature(by_name["14_Matmul"], "small")
    m, k, n = 33, 65, 47
    assert sig.flops == 2 * m * n * k == 201630
    assert sig.inputs == [((m, k), "float32"), ((k, n), "float32")]
    assert sig.outputs == [((m, n), "float32")]
    assert sig.bytes == 4 * (m * k + k * n + m * n)
    assert sig.intensity == sig.flops / sig.bytes
    assert sig.families == ["gemm"] and sig.param_count == 0


def test_large_size_signature(by_name):
    sig = signature(by_name["14_Matmul"], "large")
    assert sig.flops == 2 * 2048 * 4096 * 2048
    assert sig.outputs == [((2048, 2048), "float32")]


def test_gemm_bias_relu_ops_bytes_and_params(by_name):
    sig = signature(by_name["1_Gemm_Bias_ReLU"])
    assert sig.ops == ["linear", "relu"] and sig.op_source == "fx"
    assert sig.families == ["gemm", "elementwise"]
    batch, fin, fout = 33, 65, 47
    assert sig.param_count == fin * fout + fout
    assert sig.bytes == 4 * (batch * fin + batch * fout + fin * fout + fout)
    assert sig.flops == 2 * batch * fin * fout


def test_softmax_and_normalization_families(by_name):
    assert signature(by_name["6_Softmax"]).families == ["softmax"]
    assert signature(by_name["7_LogSoftmax"]).families == ["softmax"]
    assert signature(by_name["4_Scale_Softmax"]).families == ["elementwise", "softmax"]
    assert signature(by_name["8_LayerNorm"]).families == ["normalization"]
    # the hand-written RMS norm is recognized by its mean -> rsqrt pattern
    assert "normalization" in signature(by_name["9_RMSNorm"]).families
    assert signature(by_name["13_Argmax"]).outputs == [((3, 65), "int64")]


def test_attention_blocks(by_name):
    causal = signature(by_name["2_Causal_Attention"])
    # math.sqrt on a traced shape defeats fx: the ops come from aten dispatch instead
    assert causal.op_source == "dispatch"
    assert {"addmm", "bmm", "softmax"} <= set(causal.ops)
    assert "attention" in causal.families
    layer = signature(by_name["3_Transformer_Layer"])
    assert layer.op_source == "fx"
    assert "scaled_dot_product_attention" in layer.ops and "floordiv" not in layer.ops
    assert layer.families == ["normalization", "gemm", "attention", "elementwise"]


def test_conv_cnn_and_families_vocabulary(suite, by_name):
    assert signature(by_name["15_Conv2d"]).families == ["conv"]
    cnn = signature(by_name["4_Small_CNN"])
    assert cnn.families[:3] == ["conv", "normalization", "elementwise"]
    for task in suite:
        assert set(signature(task).families) <= set(FAMILIES), task.id


def test_signature_serializes_and_is_cached(by_name):
    task = by_name["8_Gemm_SiLU_Mul"]
    sig = signature(task)
    assert signature(task) is sig
    data = json.loads(json.dumps(sig.to_dict()))
    assert Signature.from_dict(data) == sig
    assert "\n" not in sig.text
    assert sig.text.startswith("linear -> silu -> linear -> mul [gemm, elementwise]; in f32[23x65]")


def test_meta_and_cpu_signatures_agree(by_name):
    task = by_name["3_Conv2d_BatchNorm_ReLU"]
    assert compute_signature(task, "small", "meta") == compute_signature(task, "small", "cpu")


def test_op_family_mapping():
    cases = {
        "addmm": "gemm",
        "Linear": "gemm",
        "conv_transpose2d": "conv",
        "convolution": "conv",
        "_softmax": "softmax",
        "native_layer_norm": "normalization",
        "batchnorm2d": "normalization",
        "norm": "reduction",
        "amax": "reduction",
        "leakyrelu": "elementwise",
        "_scaled_dot_product_flash_attention_for_cpu": "attention",
        "max_pool2d": "other",
        "TransformerEncoderLayer": "attention",
        "MultiheadAttention": "attention",
        "_to_copy": "elementwise",
        "fill_": None,
        "transpose": None,
        "view": None,
    }
    assert {op: op_family(op) for op in cases} == cases


def test_family_patterns():
    assert families(["exp", "sum", "div"]) == ["elementwise", "softmax", "reduction"]
    assert families(["matmul", "div", "softmax", "matmul"]) == [
        "gemm",
        "attention",
        "elementwise",
        "softmax",
    ]
    assert families(["linear", "softmax", "linear"]) == ["gemm", "softmax"]  # not batched
    assert families(["view", "permute"]) == []
    # normalizations by a norm (KernelBench L1 37-39): the data-reuse prior reads this family
    assert "normalization" in families(["norm", "truediv"])
    assert "normalization" in families(["abs", "mean", "truediv"])
    assert "normalization" not in families(["sum", "truediv"])  # a mean by hand, not a norm


def test_package_exports_the_function_not_the_module():
    import htam.tasks
    import htam.tasks.loader  # noqa: F401 - imports the signatures module

    assert callable(htam.tasks.signature) and htam.tasks.signature is signature


def test_importing_task_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys\nfrom htam.tasks import Task, TaskError\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


NO_META = """import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.device.type == "meta":
            raise NotImplementedError("no meta kernel")  # forces the run on real data
        os.environ["HTAM_SIGNATURE_RAN_HERE"] = str(os.getpid())
        try:
            open(MARKER, "w").write("written")
        except OSError:
            pass
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(3, 5)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow  # the isolated fallback; a failing reference on real data stays fast
def test_a_reference_without_meta_kernels_runs_isolated(tmp_path):
    """The fallback on real data is user code: it runs in a child process under the evaluator's
    isolation, never in the caller's (no environment change here, no file written outside)."""
    from htam.tasks.signatures import meta_signature
    from htam.tasks.task import Task

    marker = tmp_path / "marker"
    source = NO_META.replace("MARKER", repr(str(marker)))
    task = Task("own/no_meta", "no_meta", source)
    assert meta_signature(task, "small") is None  # the meta device alone cannot tell
    sig = signature(task, "small")
    assert meta_signature(task, "small") is sig  # the isolated run's, cached
    assert sig.outputs == [((3, 5), "float32")] and sig.ops[:1] == ["relu"]
    assert "HTAM_SIGNATURE_RAN_HERE" not in os.environ
    assert not marker.exists()


@pytest.mark.slow
def test_a_failing_reference_on_real_data_is_one_line(tmp_path):
    from htam.tasks.task import Task, TaskError

    source = NO_META.replace("return torch.relu(x) * 2", "raise ValueError('broken reference')")
    source = source.replace("MARKER", repr(str(tmp_path / "m")))
    with pytest.raises(TaskError, match="ValueError: broken reference$"):
        signature(Task("own/broken", "broken", source), "small")
