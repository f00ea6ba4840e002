"""Outputs float32 cannot pin down are judged against float64: a correct kernel that sums in
another order passes, a wrong one still fails, and a well-conditioned task is judged as before."""

import pytest
import torch

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.exact import within_reference_error
from htam.tasks import load_task

# The mean of a centred row: exactly 0, so float32's answer is rounding noise (as in KernelBench
# level 2's 23_Conv3d_GroupNorm_Mean, where torch is 7.8% from float64 at the real size).
TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


def get_inputs():
    return [torch.randn(64, 4096) + 3.0]


def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = x - x.mean(dim=1, keepdim=True)
        return {out}
"""
BLOCKED = "y.reshape(64, 64, 64).sum(2).sum(1) / 4096"  # torch's error again, in other places
WRONG = "torch.full((64,), 1e-5)"  # 60-70x the reference's own error


@pytest.fixture(scope="module")
def centred(tmp_path_factory):
    path = tmp_path_factory.mktemp("exact") / "centred_mean.py"
    path.write_text(TASK)
    return load_task(path)


def _evaluate(evaluator, task, out: str):
    code = CANDIDATE.format(out=out)
    return evaluator.evaluate(task, code, "cpp", allow_torch=True)


def test_a_correct_order_of_summation_passes_against_float64(cpu_evaluator, centred):
    result = _evaluate(cpu_evaluator, centred, BLOCKED)
    assert result.status == "ok", result.messages
    assert any("output 0 is ill-conditioned at this size" in f for f in result.flags)


def test_a_wrong_answer_still_fails_with_the_figures(cpu_evaluator, centred):
    result = _evaluate(cpu_evaluator, centred, WRONG)
    assert result.status == "incorrect"
    assert "ill-conditioned at this size" in result.messages[0]


LAZY_AFTER_TRIALS = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 3:  # the correctness trials: the reference's own masks
            return torch.nn.functional.dropout(x, 0.5, True).mean(dim=1)
        return x.mean(dim=1)  # the timed calls: no dropout at all
"""


def test_a_random_output_is_not_taken_for_rounding_noise(cpu_evaluator, tmp_path):
    """Dropout in training mode: after the trials the reference's random stream has moved on, so
    a float64 run draws other masks and its distance from the float32 reference is chance, not
    rounding. Taken for rounding noise, it let a candidate drop the dropout once the trials were
    over (ok, 10x of chance); the verdict stands instead."""
    path = tmp_path / "dropout_mean.py"
    path.write_text(TASK.replace("(x - x.mean(dim=1, keepdim=True)).mean(dim=1)",
                                 "torch.nn.functional.dropout(x, 0.5, True).mean(dim=1)"))  # fmt: skip
    result = cpu_evaluator.evaluate(load_task(path), LAZY_AFTER_TRIALS, "cpp", allow_torch=True)
    assert result.status == "incorrect", (result.status, result.flags)
    assert "timed call" in result.messages[0] and "ill-conditioned" not in result.messages[0]


def test_a_well_conditioned_output_keeps_the_float32_verdict():
    ref = torch.randn(1000, dtype=torch.float32)
    exact = ref.double()
    out = ref + 0.01 * torch.randn(1000)
    assert within_reference_error(out, ref, exact, TOLERANCES["float32"]) == (False, "")
    # not an output the judge can widen for: a float64 run without a tensor of that shape
    assert within_reference_error(out, ref, exact[:10], TOLERANCES["float32"]) == (False, "")
