"""A reference whose outputs cannot judge a candidate is a fault of the task, said before any
candidate runs: a float passed `tasks check` and then failed every candidate, blamed on it; all
outputs empty would make any candidate correct (newcomer round 5)."""

import pytest

from htam.evaluate import EvalConfig, Evaluator
from htam.tasks import load_task
from htam.tasks.task import TaskError

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "shape", "said"),
    [
        ("float(x.sum())", "64, 64", "the reference returns float, not only tensors"),
        ("(x.relu(), x.sum().item())", "64, 64", "the reference returns float, not only tensors"),
        ("x.relu()", "0, 64", "the reference's outputs are all empty"),
    ],
)
def test_the_task_is_refused_before_any_candidate(tmp_path, body, shape, said):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body=body, shape=shape))
    with Evaluator("cpu", EvalConfig(size="large", cache_dir=tmp_path / "cache")) as evaluator:
        with pytest.raises(TaskError) as caught:
            evaluator.reference(load_task(path), timed=False)
    assert said in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_an_empty_output_beside_a_full_one_is_judged(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body="(x.relu(), x[:0])", shape="64, 64"))
    with Evaluator("cpu", EvalConfig(size="large", cache_dir=tmp_path / "cache")) as evaluator:
        assert evaluator.reference(load_task(path), timed=False).flops >= 0


@pytest.mark.slow
def test_a_reference_working_in_place_is_no_fault_of_the_candidate(tmp_path):
    """Newcomer round 8: a forward that did `x.mul_(2.0)` on its input was caught by the check
    meant for candidates, and every candidate beside it was blamed."""
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body="torch.sigmoid(x.mul_(2.0))", shape="64, 64"))
    code = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.sigmoid(x * 2.0)\n"
    )
    config = EvalConfig(cache_dir=tmp_path / "cache", timing_budget_ms=30.0, min_timed=3)
    with Evaluator("cpu", config) as evaluator:
        result = evaluator.evaluate(load_task(path), code, "cpp", allow_torch=True)
    assert result.status == "ok", result.messages
