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


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    task = load_task(write_tree(tmp_path_factory.mktemp("rkb")) / "scale")
    config = EvalConfig(run_timeout_s=60.0, timing_budget_ms=20.0, min_timed=3, max_timed=10)
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
