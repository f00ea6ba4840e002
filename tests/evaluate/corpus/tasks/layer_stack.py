"""A stack of Linear + ReLU layers, built from the init arguments (a corpus task: LLM solutions
loop over the layers and call their kernel once per layer)."""

import torch
import torch.nn as nn

BATCH = 1024
DIM = 1024
LAYERS = 4
HTAM_SMALL = {"BATCH": 19, "DIM": 40, "LAYERS": 3}
HTAM_EXTRA = [{"BATCH": 3, "DIM": 17, "LAYERS": 3}]


class Model(nn.Module):
    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, LAYERS]
