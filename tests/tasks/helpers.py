"""Task sources written into tmp_path by the loader, suite and CLI tests."""

from pathlib import Path

GOOD = """
import torch
import torch.nn as nn

ROWS = 8
COLS = 5
HTAM_SMALL = {"ROWS": 3}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
"""

# A Robust-KBench style task: a functional forward_fn the Model calls, several configurations.
FUNCTIONAL = """
import torch
import torch.nn as nn

BATCH = 64
DIM = 128
SCALE = 1.0


def forward_fn(x: torch.Tensor, weight: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x @ weight.t()) * scale


class Model(nn.Module):
    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim) / dim**0.5)
        self.scale = scale

    def forward(self, x, fn=forward_fn):
        return fn(x, self.weight, self.scale)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, SCALE]
"""

CONFIGS = [{"BATCH": 4, "DIM": 33}, {"BATCH": 2, "DIM": 65, "SCALE": 2.0}, {"DIM": 10}]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
