"""The ``model`` family (htam.offline.graph): a whole model's source rewritten so that its
covered segments run in our kernels, library calls kept; checked against the reference."""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

import pytest
import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.host.static import check_source
from htam.evaluate.judge.compare import compare_tensor
from htam.offline.graph.rewrite import rewrite
from htam.offline.pipeline import NoMatch, analyze, explain_no_match
from htam.tasks.module import load_task_module
from tests.offline.harness import load_solution, solution, task_of
from tests.offline.kbsource import kb
from tests.offline.sources import UNSUPPORTED
from tests.offline.whole_models import CONV_ONLY, MODELS

KB = Path(__file__).resolve().parents[3] / "shared" / "kernelbench" / "KernelBench"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "device" / "offline_coverage.py"
KB = KB if KB.is_dir() else Path("/work/shared/kernelbench/KernelBench")


def _run(source: str, code: str) -> str | None:
    """Why ModelNew of ``code`` differs from the reference (same seeds), or None."""
    ref_mod = load_task_module(source, "small", name="htam_whole_ref")
    init = ref_mod.get_init_inputs()
    sol = load_solution(code)
    torch.manual_seed(0)
    ref = ref_mod.Model(*init)
    torch.manual_seed(0)
    new = sol.ModelNew(*init)
    torch.manual_seed(1)
    inputs = ref_mod.get_inputs()
    with torch.no_grad():
        want = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        got = new(*inputs)
        # training-mode batch norm: a second call reads nothing the first left, and the
        # running statistics follow the reference's
        want2, got2 = ref(*inputs), new(*inputs)
    for a, b in ((got, want), (got2, want2)):
        why = compare_tensor(a, b, TOLERANCES)
        if why is not None:
            return why
    for (name, a), (_, b) in zip(new.state_dict().items(), ref.state_dict().items(), strict=True):
        if not torch.allclose(a.float(), b.float(), rtol=1e-4, atol=1e-5):
            return f"state {name} differs"
    return None


def test_rewrite_points_segments_at_kernels():
    rw = rewrite(MODELS["conv_bn_net"])
    assert "class ModelNew(nn.Module)" in rw.source and "class Model(" not in rw.source
    assert "_KSeq(" in rw.source and "_KBatchNorm2d(" in rw.source and "_KReLU6(" in rw.source
    assert "_relu_after(self.fc, x)" in rw.source  # bias + activation after the library product
    assert "self.scale" in rw.source  # a constructor value stays an attribute, never baked in
    assert rw.forward_args == ["x"]
    assert rw.sites["batch norm"] == 2


def test_convolutions_alone_get_their_bias_kernel():
    rw = rewrite(CONV_ONLY)
    assert "_KConv2d(3, 4, 3)" in rw.source and rw.sites == {"convolution + bias": 1}


def test_no_segment_names_what_the_model_holds():
    src = CONV_ONLY.replace("nn.Conv2d(3, 4, 3)", "nn.Conv2d(3, 4, 3, bias=False)")
    with pytest.raises(NoMatch, match="it calls: .*nn.Conv2d"):
        rewrite(src)


def test_two_products_around_an_activation_are_a_whole_model():
    m = analyze(task_of("two_gemms", UNSUPPORTED["two_gemms"]))
    assert m.family == "model" and "_relu_after(self.a, x)" in m.ir.rewritten.source


def test_training_dropout_is_refused():
    task = task_of("training_dropout", UNSUPPORTED["training_dropout"])
    assert "drop is a dropout in training mode" in explain_no_match(task)


def test_a_module_that_never_runs_is_no_segment():
    src = CONV_ONLY.replace(
        "self.pool = nn.MaxPool2d(2)", "self.pool = nn.MaxPool2d(2)\n        self.act = nn.ReLU()"
    ).replace("nn.Conv2d(3, 4, 3)", "nn.Conv2d(3, 4, 3, bias=False)")
    with pytest.raises(NoMatch, match=r"covered modules \(activation\) never run"):
        analyze(task_of("unused_relu", src))


F64_GELU = """import math

import numpy as np
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        scale = torch.tensor(np.linspace(0.5, 1.5, 129), dtype=torch.float64)
        self.register_buffer("scale", scale)

    def forward(self, x):
        return torch.nn.functional.gelu(x * self.scale) * math.sqrt(2.0)


def get_inputs():
    return [torch.randn(37, 129, dtype=torch.float64)]


def get_init_inputs():
    return []
"""


def test_a_float64_model_is_not_handed_to_float32_kernels():
    # it ran as the baseline and failed (expected scalar type Float but found Double)
    task = task_of("f64_gelu", F64_GELU)
    assert "its kernels would get float64 tensors" in explain_no_match(task)
    assert analyze(task_of("f32_gelu", F64_GELU.replace("float64", "float32")))  # it fits one


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_solution_passes_the_static_checks(name, language):
    m = analyze(task_of(name, MODELS[name]))
    assert m.family == "model", explain_no_match(task_of(name, MODELS[name]))
    code = solution(task_of(name, MODELS[name]), language)
    ast.parse(code)
    assert check_source(code, language) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("language", ["triton", "cpp"])
def test_whole_model_matches_the_reference(name, language):
    code = solution(task_of(name, MODELS[name]), language)
    assert _run(MODELS[name], code) is None


@pytest.mark.slow
def test_block_size_step_stays_correct():
    task = task_of("conv_bn_net", MODELS["conv_bn_net"])
    code = solution(task, "triton", ("parallel_mapping.block_size_tuning",))
    assert "_BLOCK = 2048" in code
    assert _run(MODELS["conv_bn_net"], code) is None


LEVEL3 = ["4_LeNet5", "13_DenseNet121TransitionLayer", "21_EfficientNetMBConv",
          "39_GRU", "44_MiniGPTBlock"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not KB.is_dir(), reason="KernelBench is not here")
@pytest.mark.parametrize("stem", LEVEL3)
def test_kernelbench_level3_at_a_small_size(stem):
    spec = importlib.util.spec_from_file_location("offline_coverage", SCRIPT)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    source = coverage.shrink((KB / "level3" / f"{stem}.py").read_text())
    task = task_of(stem, source)
    assert analyze(task).family == "model"
    os.environ.setdefault("TRITON_INTERPRET", "1")
    assert _run(source, solution(task, "triton")) is None


METHODS = kb(
    """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6, bias=False)
        self.softmax = nn.Identity()

    def forward(self, x):
        s = self.fc(x).softmax(-1) + x.relu()
        return self.softmax(F.softmax(s, dim=-1, dtype=torch.float32)).log_softmax(dim=0)
""",
    "[torch.randn(4, 6)]",
)


def test_tensor_methods_are_segments():
    rw = rewrite(METHODS)
    assert "_f_softmax(self.fc(x), -1)" in rw.source and "_f_relu(x)" in rw.source
    assert "_f_log_softmax(self.softmax(" in rw.source and "dim=0)" in rw.source
    # a submodule's call and a functional call with arguments the runtime refuses stay as written
    assert "F.softmax(s, dim=-1, dtype=torch.float32)" in rw.source
    assert rw.sites == {"softmax": 2, "activation": 1}
    assert _run(METHODS, solution(task_of("methods", METHODS), "triton")) is None


EMBED_LINEAR = kb(
    """
class Model(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, 3)

    def forward(self, tokens):
        return self.fc(self.emb(tokens).amax(dim=1))
""",
    "[torch.randint(0, 11, (2, 5))]",
    "[11, 4]",
)


def test_linear_layers_alone_get_their_bias_kernel():
    rw = rewrite(EMBED_LINEAR)
    assert "_KLinear(dim, 3)" in rw.source and rw.sites == {"linear + bias": 1}
    assert _run(EMBED_LINEAR, solution(task_of("embed_linear", EMBED_LINEAR), "triton")) is None
    with pytest.raises(NoMatch, match="it calls: .*nn.Linear"):
        rewrite(EMBED_LINEAR.replace("nn.Linear(dim, 3)", "nn.Linear(dim, 3, False)"))
