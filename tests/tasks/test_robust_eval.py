"""The hidden-configuration check through the real evaluator: a Robust-KBench task times its
single configuration and checks every multi one, so code right only at the timed one fails."""

import pytest

from htam.evaluate import EvalConfig, Evaluator
from htam.tasks import load_task

from .robust_fixture import write_tree

MODEL = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features, shift=0.5, init_method="ones"):
        super().__init__()
        self.shift = shift
        weight = torch.ones(num_features) if init_method == "ones" else torch.randn(num_features)
        self.weight = nn.Parameter(weight)

    def forward(self, x):
        return BODY
"""
CANDIDATES = {
    "correct": "torch.addcmul(torch.full_like(x, self.shift), x, self.weight)",
    # the shift of the timed configuration, baked in: wrong where a multi one sets 2.0
    "baked_shift": "x * self.weight + 0.5",
    # the first 3 rows only (the timed batch): wrong at batch 7
    "baked_rows": "torch.cat([x[:3] * self.weight + self.shift, torch.zeros_like(x[3:])])",
}


def _config() -> EvalConfig:
    # Ten timed rounds at least: the escape check takes each runner's least overhead, and the
    # least of three was a first-rounds overhead once in a full CI run (rejected, 2.8 ms).
    return EvalConfig(run_timeout_s=60.0, timing_budget_ms=20.0, min_timed=10, max_timed=20)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    task = load_task(write_tree(tmp_path_factory.mktemp("rkb")) / "scale")
    config = _config()
    with Evaluator("cpu", config) as evaluator:
        return {
            name: evaluator.evaluate(task, MODEL.replace("BODY", body), "cpp", allow_torch=True)
            for name, body in CANDIDATES.items()
        }


@pytest.mark.parametrize(("name", "status"),
                         [("correct", "ok"), ("baked_shift", "incorrect"),
                          ("baked_rows", "incorrect")])  # fmt: skip
def test_code_right_only_at_the_timed_configuration_is_incorrect(evaluated, name, status):
    result = evaluated[name]
    assert str(result.status) == status, result.messages
    if status == "ok":
        assert result.speedup is not None and result.speedup > 0


# --------------------------------------------------------------------------- backward tasks

BACKWARD_MODEL = """import torch
import torch.nn as nn


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, shift):
        ctx.save_for_backward(x, weight)
        return torch.addcmul(torch.full_like(x, shift), x, weight)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return GRAD_X, GRAD_W, None


class ModelNew(nn.Module):
    def __init__(self, num_features, shift=0.5, init_method="ones"):
        super().__init__()
        self.shift = shift
        weight = torch.ones(num_features) if init_method == "ones" else torch.randn(num_features)
        self.weight = nn.Parameter(weight)

    def forward(self, x):
        return FORWARD
"""
BACKWARD_CANDIDATES = {
    "correct": ("grad * weight", "(grad * x).sum(0)", "Scale.apply(x, self.weight, self.shift)"),
    # the weight's gradient off by a factor: the forward alone would pass
    "wrong_weight_grad": ("grad * weight", "2 * (grad * x).sum(0)",
                          "Scale.apply(x, self.weight, self.shift)"),
    # right only while grad_output is all ones (a backward that ignores it)
    "ignores_grad_output": ("weight.expand_as(x).clone()", "x.sum(0)",
                            "Scale.apply(x, self.weight, self.shift)"),
    # a forward cut from the graph: no backward at all
    "detached": ("grad * weight", "(grad * x).sum(0)",
                 "Scale.apply(x, self.weight, self.shift).detach()"),
}  # fmt: skip


@pytest.fixture(scope="module")
def evaluated_backward(tmp_path_factory):
    task = load_task(write_tree(tmp_path_factory.mktemp("rkb")) / "scale" / "func_backward.py")
    assert task.kind == "backward"
    config = _config()
    with Evaluator("cpu", config) as evaluator:
        results = {}
        for name, (gx, gw, fwd) in BACKWARD_CANDIDATES.items():
            code = BACKWARD_MODEL.replace("GRAD_X", gx).replace("GRAD_W", gw)
            code = code.replace("FORWARD", fwd)
            results[name] = evaluator.evaluate(task, code, "cpp", allow_torch=True)
        return results, evaluator.reference(task)


@pytest.mark.parametrize(("name", "status", "says"),
                         [("correct", "ok", ""),
                          ("wrong_weight_grad", "incorrect", "output 2"),
                          ("ignores_grad_output", "incorrect", "output 1"),
                          ("detached", "runtime_error", "not connected")])  # fmt: skip
@pytest.mark.slow  # builds and times four backward candidates; the forward configs stay fast
def test_backward_candidates_are_judged_by_their_gradients(evaluated_backward, name, status, says):
    """Outputs are (forward output, d/dx, d/dweight): each gradient is compared like an output."""
    result = evaluated_backward[0][name]
    assert str(result.status) == status, result.messages
    assert says in " ".join(result.messages)
    if status == "ok":
        assert result.speedup is not None and result.speedup > 0


@pytest.mark.slow  # builds and times four backward candidates; the forward configs stay fast
def test_backward_reference_is_timed_and_costed_as_a_training_step(evaluated_backward):
    reference = evaluated_backward[1]
    assert reference.timing and reference.timing["median_ms"] > 0
    # the step's bytes: input, grad_output, output and d/dx (3 x 5 floats each), the weight and
    # d/dweight (5 each); a forward alone would count 35 floats
    assert reference.nbytes == 4 * (15 * 4 + 5 * 2)
