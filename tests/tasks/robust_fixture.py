"""A small Robust-KBench tree written for the tests, in the layout that repository ships:
``<root>/<task>/func_forward.py`` + ``config_forward.json`` (and the backward pair), and the
``kernelbench/level_N/task_M/`` tree with the original KernelBench file beside."""

import json
from pathlib import Path

FORWARD = '''import torch
import torch.nn as nn


def forward_fn(x: torch.Tensor, weight: torch.Tensor, shift: float) -> torch.Tensor:
    """Scales x by a per-feature weight, then shifts it."""
    return x * weight + shift


class Model(nn.Module):
    def __init__(self, num_features: int, shift: float = 0.5, init_method: str = "ones"):
        super().__init__()
        self.shift = shift
        weight = torch.ones(num_features) if init_method == "ones" else torch.randn(num_features)
        self.weight = nn.Parameter(weight)

    def forward(self, x, fn=forward_fn):
        return fn(x, self.weight, self.shift)


def get_inputs(batch_size: int = 2, num_features: int = 8):
    return [torch.randn(batch_size, num_features)]


input_names = ["x"]
'''

BACKWARD = FORWARD.replace(
    "import torch.nn as nn\n",
    """import torch.nn as nn


class AutogradFunction(torch.autograd.Function):
    backward_fn = None

    @staticmethod
    def forward(ctx, x, weight, shift):
        ctx.save_for_backward(x, weight)
        return x * weight + shift

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return (*AutogradFunction.backward_fn(grad_output, x, weight), None)
""",
)

CONFIG = {
    "single_input_configs": [{"batch_size": 3}],
    "single_init_configs": [{"init_method": "random"}],
    "single_shared_configs": [{"num_features": 5}],
    "multi_input_configs": [{"batch_size": 3}, {"batch_size": 7}],
    "multi_init_configs": [{"init_method": "random"}, {"init_method": "ones", "shift": 2.0}],
    "multi_shared_configs": [{"num_features": 5}, {"num_features": 11}],
}

HINGE = """import torch
import torch.nn as nn


def forward_fn(predictions, targets):
    return torch.mean(torch.clamp(1 - predictions * targets, min=0))


class Model(nn.Module):
    def forward(self, predictions, targets, fn=forward_fn):
        return fn(predictions, targets)


def get_inputs(batch_size: int = 4, input_shape: int = 1):
    return [torch.randn(batch_size, input_shape), torch.randint(0, 2, (batch_size,)).float()]
"""


def write_tree(root: Path) -> Path:
    """Writes ``root/tasks`` with task ``scale`` (forward and backward), ``hinge`` (forward),
    and ``tasks/kernelbench/level_1/task_100``; returns ``root/tasks``."""
    tasks = root / "tasks"
    for name, files in {
        "scale": {"func_forward.py": FORWARD, "func_backward.py": BACKWARD},
        "hinge": {"func_forward.py": HINGE},
        "kernelbench/level_1/task_100": {"func_forward.py": HINGE, "100_HingeLoss.py": "# KB"},
    }.items():
        folder = tasks / name
        folder.mkdir(parents=True)
        for file, text in files.items():
            (folder / file).write_text(text)
            if file.startswith("func_"):
                config = CONFIG if name == "scale" else _hinge_config()
                config_name = file.replace("func_", "config_").replace(".py", ".json")
                (folder / config_name).write_text(json.dumps(config))
    return tasks


def _hinge_config() -> dict:
    return {
        "single_input_configs": [{"batch_size": 16, "input_shape": 1}],
        "single_init_configs": [{}],
        "single_shared_configs": [{}],
        "multi_input_configs": [{}],
        "multi_init_configs": [{}],
        "multi_shared_configs": [{}],
    }
